//! TLS shared by the node and the router (feature `tls`), on rustls with the
//! `ring` provider:
//!
//! - [`server_config`]: TLS 1.2 and 1.3 only, no session resumption (no TLS 1.3
//!   tickets, no ticketer, no session-id cache), and, given a CA, client
//!   certificates required and verified against it (mutual TLS).
//! - [`TlsIncoming`]: accepts TCP connections and runs each handshake in its own
//!   task (bounded by [`HANDSHAKE_TIMEOUT`]), so a slow or plaintext client never
//!   blocks the others; it yields established streams to axum or tonic.
//! - [`ClusterTls`]: the client side of the cluster's mutual TLS (a CA to trust,
//!   a client certificate to present), turned into tonic endpoints.
//! - [`LiveServerConfig`] and [`watch_files`]: certificates that rotate without
//!   a restart. Every handshake takes the configuration current at that moment;
//!   the files are re-read when their contents change (checked every 2 s, as
//!   Kubernetes swaps mounted Secrets in place) or on SIGHUP, like etcd.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

pub use rustls;
pub use tokio_rustls::server::TlsStream;

/// Longest a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// ALPN protocol of gRPC (HTTP/2).
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol of HTTP/1.1.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Errors loading certificates and keys or building a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what} {path}: {message}")]
    Pem { what: &'static str, path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
    #[error("TLS client configuration: {0}")]
    Client(String),
}

fn pem_error(what: &'static str, path: &Path, message: impl ToString) -> TlsError {
    TlsError::Pem { what, path: path.to_path_buf(), message: message.to_string() }
}

/// Every certificate of a PEM file (a chain, leaf first, or a CA bundle).
pub fn load_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what, path, e))?;
    if certs.is_empty() {
        return Err(pem_error(what, path, "no PEM certificate found"));
    }
    Ok(certs)
}

/// When the first (leaf) certificate of a PEM file expires: its `notAfter`, in
/// Unix milliseconds.
pub fn not_after_ms(what: &'static str, path: &Path) -> Result<i64, TlsError> {
    let certs = load_certs(what, path)?;
    let (_, cert) = x509_parser::parse_x509_certificate(certs[0].as_ref()).map_err(|e| pem_error(what, path, e))?;
    Ok(cert.validity().not_after.timestamp().saturating_mul(1000))
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(what: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| pem_error(what, path, e))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A trust store holding the certificates of `ca`.
pub fn root_store(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs("CA certificate", ca)? {
        roots.add(cert).map_err(|e| pem_error("CA certificate", ca, e))?;
    }
    Ok(roots)
}

/// A server configuration presenting `cert`/`key`: TLS 1.2 and 1.3 only,
/// session resumption off, `alpn` offered in order, and when `client_ca` is
/// given a client certificate issued by it required on every connection.
pub fn server_config(cert: &Path, key: &Path, client_ca: Option<&Path>, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(ca)?), provider)
                .build()
                .map_err(|e| TlsError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(load_certs("certificate", cert)?, load_key("private key", key)?)?;
    // No resumption of any kind: no TLS 1.3 tickets (stateful or stateless) and
    // no TLS 1.2 session-id cache. `ticketer` keeps rustls' never-producing default.
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.max_early_data_size = 0;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// A server configuration that can be replaced while the server runs: each
/// new handshake uses the one current then; established connections keep theirs.
pub struct LiveServerConfig(std::sync::RwLock<Arc<ServerConfig>>);

impl LiveServerConfig {
    pub fn new(config: Arc<ServerConfig>) -> Arc<Self> {
        Arc::new(LiveServerConfig(std::sync::RwLock::new(config)))
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn replace(&self, config: Arc<ServerConfig>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = config;
    }
}

/// How often [`watch_files`] compares the files with what it last loaded.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Calls `reload` whenever the contents of `files` change (compared every
/// [`WATCH_INTERVAL`], and at once on SIGHUP), until the process ends. A
/// reload that fails (a certificate and key that do not match yet, mid-swap)
/// keeps the previous configuration and is tried again at the next check.
/// `what` names the files in the log.
pub fn watch_files(what: &'static str, files: Vec<PathBuf>, reload: impl Fn() -> Result<(), String> + Send + Sync + 'static) {
    fn fingerprint(files: &[PathBuf]) -> Option<Vec<u8>> {
        let mut all = Vec::new();
        for f in files {
            all.extend_from_slice(&std::fs::read(f).ok()?);
            all.push(0);
        }
        Some(all)
    }
    let mut loaded = fingerprint(&files);
    tokio::spawn(async move {
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            let signalled = match hangup.as_mut() {
                Some(h) => tokio::select! {
                    _ = tokio::time::sleep(WATCH_INTERVAL) => false,
                    _ = h.recv() => true,
                },
                None => {
                    tokio::time::sleep(WATCH_INTERVAL).await;
                    false
                }
            };
            let now = fingerprint(&files);
            if now.is_none() || (now == loaded && !signalled) {
                continue;
            }
            match reload() {
                Ok(()) => {
                    tracing::info!(signalled, "reloaded the {what}: new connections use them");
                    loaded = now;
                }
                Err(e) => tracing::warn!("the {what} changed but do not load (kept the previous ones; trying again): {e}"),
            }
        }
    });
}

/// TLS connections accepted on a listener, handshakes done concurrently.
pub struct TlsIncoming {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsIncoming {
    /// Starts accepting on `listener` with `config`. Connections whose
    /// handshake fails (plaintext clients, untrusted or missing client
    /// certificates) are closed and logged at debug level.
    pub fn new(listener: TcpListener, config: Arc<LiveServerConfig>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let _ = tcp.set_nodelay(true);
                // The configuration current now: rotated certificates apply to
                // every handshake after their reload.
                let (acceptor, tx) = (TlsAcceptor::from(config.current()), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsIncoming { rx, local })
    }

    /// The next established connection and its peer address.
    pub async fn next(&mut self) -> Option<(TlsStream<TcpStream>, SocketAddr)> {
        self.rx.recv().await
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The established connections as a stream (for tonic's `serve_with_incoming`).
    pub fn into_stream(self) -> impl futures::Stream<Item = io::Result<TlsStream<TcpStream>>> + Send + 'static {
        futures::stream::unfold(self.rx, |mut rx| async move { rx.recv().await.map(|(s, _)| (Ok(s), rx)) })
    }
}

/// The client side of the cluster's mutual TLS.
#[derive(Clone, Debug)]
pub struct ClusterTls {
    config: ClientTlsConfig,
}

impl ClusterTls {
    /// Trusts `ca` and presents `cert`/`key`; `server_name`, when given, is the
    /// name every node's certificate is checked against instead of the host of
    /// its address.
    pub fn new(ca: &Path, cert: &Path, key: &Path, server_name: Option<&str>) -> Result<Self, TlsError> {
        // Parse everything now so a bad file fails at start, not at first use.
        root_store(ca)?;
        load_certs("client certificate", cert)?;
        load_key("client key", key)?;
        let read = |what: &'static str, p: &Path| std::fs::read(p).map_err(|e| pem_error(what, p, e));
        let mut config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("CA certificate", ca)?))
            .identity(Identity::from_pem(read("client certificate", cert)?, read("client key", key)?))
            .timeout(HANDSHAKE_TIMEOUT);
        if let Some(name) = server_name.filter(|n| !n.is_empty()) {
            rustls::pki_types::ServerName::try_from(name.to_string())
                .map_err(|e| TlsError::Client(format!("server name {name:?}: {e}")))?;
            config = config.domain_name(name);
        }
        Ok(ClusterTls { config })
    }
}

/// A tonic endpoint for the node at `addr` (`host:port`): `https` with mutual
/// TLS when `tls` is given, plaintext `http` otherwise.
pub fn node_endpoint(addr: &str, tls: Option<&ClusterTls>) -> Result<Endpoint, tonic::transport::Error> {
    match tls {
        Some(t) => Endpoint::from_shared(format!("https://{addr}"))?.tls_config(t.config.clone()),
        None => Endpoint::from_shared(format!("http://{addr}")),
    }
}
