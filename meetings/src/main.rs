//! `tessera-meetings`: the meetings API (port 8080) and its web frontend (port
//! 3000), configured by the environment; `tessera-meetings stream` sends audio
//! to a meeting.

use clap::{Parser, Subcommand};
use tessera_meetings::config::Config;

#[derive(Parser)]
#[command(version, about = "Tessera meetings: the API and web frontend (no subcommand), or a streaming client")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Streams 16 kHz mono signed 16-bit PCM to a meeting in real time and prints its transcript.
    Stream {
        /// The API's WebSocket base, e.g. ws://127.0.0.1:8080.
        #[arg(long)]
        url: String,
        /// An access token (from POST /api/v1/auth/login).
        #[arg(long)]
        token: String,
        /// The meeting's id (it must be active for speech to be recorded).
        #[arg(long)]
        meeting: String,
        /// The PCM file, or - for standard input.
        #[arg(default_value = "-")]
        input: String,
    },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Some(Command::Stream { url, token, meeting, input }) = cli.command {
        if let Err(e) = tessera_meetings::stream_client::run(&url, &token, &meeting, &input).await {
            eprintln!("tessera-meetings stream: {e:#}");
            std::process::exit(1);
        }
        return;
    }
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
