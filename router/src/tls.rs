//! The router's TLS: HTTPS for clients (`tls.cert`/`tls.key`) and mutual TLS
//! towards the nodes (`tls.cluster_ca` + `tls.client_cert`/`tls.client_key`).
//! The rustls settings (TLS 1.2/1.3 only, no session resumption) live in
//! [`tessera_api::tls`], shared with the nodes.

use std::net::SocketAddr;
use std::sync::Arc;

use tessera_api::tls::rustls::ServerConfig;
use tessera_api::tls::{ALPN_HTTP11, ClusterTls, TlsIncoming, TlsStream};
use tokio::net::{TcpListener, TcpStream};

use crate::config::TlsSection;

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("{0}")]
    Incomplete(&'static str),
    #[error(transparent)]
    Tls(#[from] tessera_api::tls::TlsError),
}

/// The HTTPS server configuration, when `tls.cert` and `tls.key` are set.
pub fn https_config(t: &TlsSection) -> Result<Option<Arc<ServerConfig>>, TlsConfigError> {
    match (&t.cert, &t.key) {
        (Some(cert), Some(key)) => Ok(Some(tessera_api::tls::server_config(cert, key, None, &[ALPN_HTTP11])?)),
        (None, None) => Ok(None),
        _ => Err(TlsConfigError::Incomplete("HTTPS needs both SERVICE_TLS_CERT and SERVICE_TLS_KEY")),
    }
}

/// Mutual TLS towards the nodes, when the cluster CA and a client certificate are set.
pub fn cluster_tls(t: &TlsSection) -> Result<Option<ClusterTls>, TlsConfigError> {
    match (&t.cluster_ca, &t.client_cert, &t.client_key) {
        (Some(ca), Some(cert), Some(key)) => Ok(Some(ClusterTls::new(ca, cert, key, t.server_name.as_deref())?)),
        (None, None, None) => Ok(None),
        _ => Err(TlsConfigError::Incomplete(
            "TLS towards nodes needs all of SERVICE_CLUSTER_CA, SERVICE_CLUSTER_CLIENT_CERT and \
             SERVICE_CLUSTER_CLIENT_KEY",
        )),
    }
}

/// An axum listener yielding established TLS connections; plaintext clients
/// fail the handshake and never reach the application.
pub struct HttpsListener(TlsIncoming);

impl HttpsListener {
    /// Serves TLS with `config` on `listener`.
    pub fn new(listener: TcpListener, config: Arc<tessera_api::tls::LiveServerConfig>) -> std::io::Result<Self> {
        Ok(HttpsListener(TlsIncoming::new(listener, config)?))
    }
}

impl axum::serve::Listener for HttpsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.0.next().await {
            Some(conn) => conn,
            // The accept task only stops with the process.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.0.local_addr())
    }
}
