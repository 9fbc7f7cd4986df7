//! What every request handler shares.

use std::sync::Arc;

use crate::config::Config;
use crate::db::Db;
use crate::live::Hub;
use crate::mail::Mailer;
use crate::speech::SpeechModel;
use crate::summary::Summarizer;
use crate::webhooks::Dispatcher;

/// The application's state: configuration, the database client, the live
/// meeting hub, the speech model, the webhook dispatcher, the mailer and the summary loop's
/// per-instance part.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub config: Config,
    pub db: Db,
    pub hub: Hub,
    pub speech: Option<SpeechModel>,
    pub webhooks: Dispatcher,
    pub mail: Mailer,
    pub summaries: Summarizer,
}

impl AppState {
    pub fn new(inner: Inner) -> Self {
        AppState(Arc::new(inner))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
