//! The PostgreSQL wire protocol (`[pgwire]`, off unless enabled): `psql` and
//! PostgreSQL drivers reach Tessera's SQL through the `pgwire` crate's codec.
//!
//! - Startup: `SSLRequest` is honoured with the router's HTTPS certificate
//!   (live, as the HTTPS listener's). A local user with a SCRAM-SHA-256
//!   verifier proves the password by SCRAM ([`scram`]); the others send it
//!   as a cleartext password message (use TLS), checked by the same sign-in as
//!   `POST /api/v1/auth/login` (lockout, detectors, blocked addresses, audit).
//!   A session token (from `tessera login` or the HTTP login, e.g. after an
//!   MFA code) is accepted as that password too, and a client that sets
//!   `options=-c tessera.auth=token` is always asked for it in cleartext; a
//!   user with MFA must come that way.
//! - `database` names the Tessera database; PostgreSQL's defaults (none, the
//!   user's own name, `postgres`) mean `default`.
//! - Simple query protocol: each statement of a message runs as its own
//!   request, through `services::sql` as over HTTP (permissions, masking,
//!   detectors). See [`session`] for transaction blocks.
//!
//! - Extended query protocol: see [`extended`].
//!
//! - Cancel requests: every signed-in connection gets a process id and secret
//!   key (`BackendKeyData`); a `CancelRequest` naming them drops the statement
//!   the connection is running (it answers `57014`), which drops the router's
//!   call to the node, whose query pool then stops the scan.
//!
//! - `COPY table [(columns)] FROM STDIN` in text or CSV format: see
//!   [`copy`] and `Session::start_copy`.
//!
//! - `SHOW` of the settings drivers read when they connect: `session::show_setting`.
//!   The system catalogs (`pg_catalog`, `information_schema`) are the SQL
//!   engine's (`tessera_sql`'s `system` module).

mod copy;
mod extended;
mod scram;
mod session;
mod statement;
mod types;

use std::fmt::Debug;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::cleartext::CleartextPasswordAuth;
use pgwire::api::auth::mechanism::AuthMechanismFactory;
use pgwire::api::auth::{AuthDriver, AuthOutcome, AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::Response;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::simplequery::Query;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::services::sign_in::{LoginAnswer, sign_in_with_password};
use crate::state::AppState;
use session::Session;

/// Accepts PostgreSQL clients on `listener` until `stop` turns true; with
/// `tls`, clients may (and with `sslmode=require` do) upgrade to TLS.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    tls: Option<Arc<tessera_api::tls::LiveServerConfig>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    // The signed-in connections by process id and secret key, for cancel requests.
    let running = Arc::new(ConnectionManager::new());
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    warn!("pgwire: accepting a connection: {e}");
                    continue;
                }
            },
            _ = stop.wait_for(|s| *s) => return Ok(()),
        };
        let _ = socket.set_nodelay(true);
        let acceptor = tls.as_ref().map(|live| {
            // The HTTPS configuration offers h2/http1.1 by ALPN; libpq offers "postgresql".
            let mut config = (*live.current()).clone();
            config.alpn_protocols = vec![b"postgresql".to_vec()];
            pgwire::tokio::TlsAcceptor::from(Arc::new(config))
        });
        let connection = Arc::new(Connection::new(state.clone(), peer, acceptor.is_some(), running.clone()));
        tokio::spawn(async move {
            if let Err(e) = pgwire::tokio::process_socket(socket, acceptor, connection.clone()).await {
                info!(%peer, "pgwire: connection ended: {e}");
            }
            connection.session.close().await;
        });
    }
}

/// One client connection: its address, and its session once signed in.
struct Connection {
    state: AppState,
    ip: IpAddr,
    /// The router has a certificate: a client that did not upgrade is refused
    /// (its password would cross the network in clear).
    tls_required: bool,
    session: Session,
    startup: Arc<Startup>,
    described: Arc<extended::Described>,
    /// Every connection of the listener, for cancel requests (which come on a
    /// connection of their own).
    running: Arc<ConnectionManager>,
}

impl Connection {
    fn new(state: AppState, peer: SocketAddr, tls_required: bool, running: Arc<ConnectionManager>) -> Self {
        let session = Session::new(state.clone(), peer.ip());
        let passwords = Arc::new(Passwords { state: state.clone(), ip: peer.ip() });
        let driver = AuthDriver::new(server_parameters()).with_connection_manager(running.clone());
        let startup = Arc::new(Startup { driver, passwords: CleartextPasswordAuth::new(passwords) });
        Connection { state, ip: peer.ip(), tls_required, session, startup, described: Arc::default(), running }
    }
}

fn server_parameters() -> DefaultServerParameterProvider {
    let mut parameters = DefaultServerParameterProvider::default();
    parameters.server_version = session::server_version();
    parameters
}

impl PgWireServerHandlers for Connection {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::new(Queries { session: self.session.clone() })
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::new(extended::Extended { session: self.session.clone(), described: self.described.clone() })
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        Arc::new(CopyIn { session: self.session.clone() })
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.running.clone()))
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(StartupFor {
            startup: self.startup.clone(),
            session: self.session.clone(),
            state: self.state.clone(),
            ip: self.ip,
            tls_required: self.tls_required,
        })
    }
}

/// The password check: Tessera's sign-in, or a session token as the password.
struct Passwords {
    state: AppState,
    ip: IpAddr,
}

impl Debug for Passwords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passwords").field("ip", &self.ip).finish()
    }
}

/// What a successful sign-in leaves: the session token, and whether this
/// listener opened the session (and closes it at disconnect).
#[derive(Debug, Clone)]
struct SignedIn {
    token: String,
    opened_here: bool,
}

#[async_trait]
impl AuthSource<SignedIn> for Passwords {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Err(PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "28000".into(), "passwords are checked, never read".into()))))
    }

    async fn verify_password(&self, login: &LoginInfo, presented: &[u8]) -> PgWireResult<Option<SignedIn>> {
        let user = login.user().unwrap_or_default().to_string();
        let refused = |code: &str, message: String| PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), code.into(), message)));
        if let Some(until) = self.state.security.blocks.blocked_until(self.ip) {
            let message = format!("your address {} is blocked until {}", self.ip, tessera_api::http::iso8601_ms(until));
            return Err(refused("28000", message));
        }
        let presented = String::from_utf8_lossy(presented).into_owned();
        if session::looks_like_token(&presented) && session::token_names(&self.state, &presented, self.ip, &user).await {
            return Ok(Some(SignedIn { token: presented, opened_here: false }));
        }
        match sign_in_with_password(&self.state, Some(self.ip), Some("pgwire".into()), &user, presented).await {
            Ok(LoginAnswer::Session(s)) => Ok(Some(SignedIn { token: s.token, opened_here: true })),
            Ok(LoginAnswer::MfaChallenge(_)) => Err(refused(
                "28000",
                format!(
                    "{user} signs in with a second factor: sign in over HTTP (or `tessera login`) and give the session token as the password"
                ),
            )),
            Err(e) => Err(refused(types::sqlstate_of(&e), format!("password authentication failed for user \"{user}\": {e}"))),
        }
    }
}

/// The startup flow shared by a connection's handlers.
struct Startup {
    driver: AuthDriver<DefaultServerParameterProvider, SignedIn>,
    passwords: CleartextPasswordAuth<Passwords>,
}

/// A connection's startup handler: pgwire's driver with Tessera's password
/// check; on success the session is bound to the connection.
struct StartupFor {
    startup: Arc<Startup>,
    session: Session,
    state: AppState,
    ip: IpAddr,
    tls_required: bool,
}

#[async_trait]
impl StartupHandler for StartupFor {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                pgwire::api::auth::protocol_negotiation(client, startup).await?;
                pgwire::api::auth::save_startup_parameters_to_metadata(client, startup);
                if self.tls_required && !client.is_secure() {
                    let message = "this server takes passwords over TLS only: connect with sslmode=require (or verify-full)";
                    return Err(PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "28000".into(), message.into()))));
                }
                let user = client.metadata().get("user").cloned().unwrap_or_default();
                let named = client.metadata().get("database").cloned();
                let database = session::database_for(&user, named.as_deref());
                if let Err(e) = crate::services::sql::database_group(&self.state, &database) {
                    return Err(PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "3D000".into(), e.to_string()))));
                }
                self.session.set_database(database);
                // A session token as the password (CockroachDB's JWT sign-in works alike):
                // `options=-c tessera.auth=token` asks for the cleartext exchange.
                let token = client.metadata().get("options").is_some_and(|o| o.contains("tessera.auth=token"));
                let method = if token { scram::Method::Cleartext } else { scram::method_for(&self.state, &user).await };
                let mechanism = match method {
                    scram::Method::Scram => scram::mechanism(self.state.clone(), self.ip, user.clone()),
                    scram::Method::Cleartext => AuthMechanismFactory::<SignedIn>::create(&self.startup.passwords),
                };
                let outcome = self.startup.driver.begin_authentication(client, mechanism).await?;
                self.settle(client, outcome).await
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let outcome = self.startup.driver.advance_authentication(client, message).await?;
                self.settle(client, outcome).await
            }
            _ => Ok(()),
        }
    }
}

impl StartupFor {
    /// Binds the session of a verified client and completes the startup.
    async fn settle<C>(&self, client: &mut C, outcome: AuthOutcome<SignedIn>) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match outcome {
            AuthOutcome::Authenticated { identity: Some(signed_in), final_message } => {
                info!(ip = %self.ip, user = client.metadata().get("user").map(String::as_str).unwrap_or(""), "pgwire: signed in");
                self.session.bind(signed_in.token, signed_in.opened_here);
                self.startup.driver.complete_authentication(client, final_message).await
            }
            AuthOutcome::Authenticated { identity: None, .. } => {
                Err(PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "28000".into(), "not signed in".into()))))
            }
            AuthOutcome::InProgress => Ok(()),
        }
    }
}

/// The simple query protocol over a connection's session.
struct Queries {
    session: Session,
}

#[async_trait]
impl SimpleQueryHandler for Queries {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Ok(self.session.run_message(query).await)
    }

    /// pgwire moves the client's transaction status by the answers; a COMMIT
    /// that fails must still leave it idle (the transaction is over, as in
    /// PostgreSQL), so a message that only ends a transaction starts from idle.
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let split = tessera_api::sql::split_statements(&query.query);
        let only = match (split.complete.as_slice(), split.rest.trim()) {
            ([one], "") => Some(one.as_str()),
            ([], rest) => Some(rest),
            _ => None,
        };
        if only.and_then(session::Control::of).is_some_and(|c| matches!(c, session::Control::Commit | session::Control::Rollback)) {
            client.set_transaction_status(TransactionStatus::Idle);
        }
        self._on_query(client, query).await
    }
}

/// The data of a connection's `COPY … FROM STDIN`.
struct CopyIn {
    session: Session,
}

#[async_trait]
impl CopyHandler for CopyIn {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.session.copy_data(&copy_data.data).await;
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self.session.copy_done().await {
            Ok(rows) => {
                let tag = pgwire::api::results::Tag::new("COPY").with_rows(rows as usize);
                futures::SinkExt::send(client, PgWireBackendMessage::CommandComplete(tag.into())).await?;
                Ok(())
            }
            Err(info) => Err(PgWireError::UserError(Box::new(info))),
        }
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.session.copy_failed().await;
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "57014".into(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}
