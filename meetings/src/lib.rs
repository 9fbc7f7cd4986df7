//! Tessera meetings (spec 03 part C): meetings transcribed in real time,
//! built on Tessera. Every byte of state (users, refresh-token families,
//! meetings, transcript segments, pending summaries, webhooks and their
//! deliveries, organizations, rate-limit buckets, the search index) lives in Tessera,
//! reached through the router's public HTTP API: two instances behind one
//! address behave as one.
//!
//! - [`config`]: the environment; [`error`]: the one error type, mapped to
//!   HTTP in one place.
//! - [`db`]: the Tessera client (SQL over `/api/v1/query`); [`schema`]: the
//!   application's tables.
//! - Services, each owning its tables: [`auth`] (users, passwords, tokens),
//!   [`meetings`], [`webhooks`], [`orgs`], [`privacy`], [`search`],
//!   [`rate_limit`]; [`speech`] recognizes audio with PocketSphinx,
//!   [`live`] runs a meeting's WebSocket and [`summary`] makes meetings'
//!   summaries.
//! - [`http`]: the routes (thin adapters over the services); [`web`]: the
//!   browser frontend.

pub mod auth;
pub mod clock;
pub mod config;
pub mod db;
pub mod error;
pub mod http;
pub mod live;
pub mod mail;
pub mod meetings;
pub mod orgs;
pub mod privacy;
pub mod rate_limit;
pub mod schema;
pub mod search;
pub mod speech;
pub mod state;
pub mod stream_client;
pub mod summary;
pub mod web;
pub mod webhooks;

use std::net::SocketAddr;

use crate::config::Config;
use crate::state::{AppState, Inner};

/// Connects to Tessera, creates the tables, starts the webhook deliveries and
/// the meeting summaries (with `AI_SERVICE_URL`), and serves the API and the
/// frontend until the process is stopped.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let db = db::Db::new(config.database.clone(), config.database_ca_file.as_deref())?;
    // The cluster may still be starting: wait for it rather than fail.
    let mut waited = 0;
    loop {
        match schema::ensure(&db).await {
            Ok(()) => break,
            Err(e) if waited < 120 => {
                tracing::warn!("the database is not ready ({e}); trying again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                waited += 1;
            }
            Err(e) => anyhow::bail!("creating the application's tables in {:?}: {e}", config.database),
        }
    }
    let speech = match speech::SpeechModel::from_dir(&config.speech_model_dir) {
        Ok(model) => Some(model),
        Err(e) => {
            tracing::warn!("speech recognition is off: {e}");
            None
        }
    };
    if config.email_api_key.is_none() {
        tracing::info!("EMAIL_SERVICE_API_KEY is not set: invitations are recorded and logged, not sent");
    }
    let state = AppState::new(Inner {
        config: config.clone(),
        db,
        hub: live::Hub::default(),
        speech,
        webhooks: webhooks::Dispatcher::new(),
        mail: mail::Mailer::new(),
        summaries: summary::Summarizer::new(),
    });
    webhooks::spawn_delivery_loop(state.clone());
    mail::spawn_mail_loop(state.clone());
    summary::spawn_summary_loop(state.clone());
    live::spawn_relay(state.clone());
    let api = tokio::net::TcpListener::bind(config.api_addr).await?;
    let web = tokio::net::TcpListener::bind(config.web_addr).await?;
    tracing::info!(api = %api.local_addr()?, web = %web.local_addr()?, database = ?config.database, "tessera-meetings serving");
    let api_app = http::routes(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let web_app = web::routes(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::try_join!(
        axum::serve(api, api_app).with_graceful_shutdown(shutdown()),
        axum::serve(web, web_app).with_graceful_shutdown(shutdown())
    )?;
    Ok(())
}

async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
