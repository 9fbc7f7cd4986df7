//! `tessera-meetings`: the meetings API (port 8080) and its web frontend (port 3000).

use tessera_meetings::config::Config;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tessera-meetings: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = tessera_meetings::run(config).await {
        eprintln!("tessera-meetings: {e:#}");
        std::process::exit(1);
    }
}
