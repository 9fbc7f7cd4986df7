//! `tessera`: the command-line client of a Tessera cluster. Everything goes
//! through the router's public `/api/v1` (no private back door); see the
//! README, "Command-line client", for a session and the exit statuses.

mod admin;
mod client;
mod commands;
mod error;
mod models;
mod output;
mod profiles;
mod progress;
mod sql;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::error::CliError;
use crate::output::Format;

#[derive(Parser)]
#[command(name = "tessera", version, about = "The command-line client of a Tessera cluster", propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Where to connect and how to print, for every command.
#[derive(Args, Clone)]
pub struct Global {
    /// The router's URL (default: the profile's, else http://127.0.0.1:9090).
    #[arg(long, global = true, env = "TESSERA_URL")]
    url: Option<String>,
    /// The saved sign-in to use.
    #[arg(long, global = true, env = "TESSERA_CLI_PROFILE", default_value = "default")]
    profile: String,
    /// A session token to use instead of the profile's.
    #[arg(long, global = true, env = "TESSERA_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A CA certificate (PEM) to verify the router's HTTPS certificate with.
    #[arg(long, global = true, env = "TESSERA_CACERT")]
    cacert: Option<PathBuf>,
    /// How answers print.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// The consistency level of every request (X-Consistency).
    #[arg(long, global = true, value_parser = ["one", "quorum", "all"])]
    consistency: Option<String>,
    /// Seconds a request may take.
    #[arg(long, global = true, default_value_t = 300)]
    timeout: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Sign in and keep the session in the profile (asks for the password, and an MFA code when the user has one).
    Login(commands::LoginArgs),
    /// End the session and forget its token.
    Logout,
    /// The signed-in user, their role and the session's expiry.
    Whoami,
    /// Run SQL: -c, -f, standard input, or an interactive shell.
    Sql(SqlArgs),
    /// Key-value entries.
    #[command(subcommand)]
    Kv(commands::KvCommand),
    /// The cluster's nodes, groups and leaders.
    #[command(subcommand)]
    Cluster(commands::ClusterCommand),
    /// Add, drain and remove nodes.
    #[command(subcommand)]
    Node(commands::NodeCommand),
    /// Documents.
    #[command(subcommand)]
    Doc(models::DocCommand),
    /// Time-series.
    #[command(subcommand)]
    Ts(models::TsCommand),
    /// Streams: publish, history, live tail.
    #[command(subcommand)]
    Stream(models::StreamCommand),
    /// Graph queries.
    #[command(subcommand)]
    Graph(models::GraphCommand),
    /// Objects: buckets and files.
    #[command(subcommand)]
    Object(models::ObjectCommand),
    /// Vector search.
    #[command(subcommand)]
    Vector(VectorCommand),
    /// Backups: create (with progress), list, restore.
    #[command(subcommand)]
    Backup(admin::BackupCommand),
    /// Bulk import of a CSV or JSON file, in batches, with a summary.
    #[command(subcommand)]
    Import(admin::ImportCommand),
    /// Users.
    #[command(subcommand)]
    User(admin::UserCommand),
    /// Roles and their permissions.
    #[command(subcommand)]
    Role(RoleCommand),
    /// A data subject's audit trail (`audit verify`: check the hash chain).
    Audit { subject: String },
    /// Compliance: erase a data subject everywhere (prints the certificate).
    #[command(subcommand)]
    Compliance(ComplianceCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
}

#[derive(Subcommand)]
enum VectorCommand {
    /// The K nearest vectors of COLLECTION to VECTOR (a JSON array).
    Search {
        collection: String,
        vector: String,
        #[arg(short, default_value_t = 10)]
        k: u64,
        /// A metadata filter (a JSON object).
        #[arg(long)]
        filter: Option<String>,
    },
}

#[derive(Subcommand)]
enum RoleCommand {
    /// The roles.
    List,
    /// Create a role with these permissions (e.g. read:kv write:kv).
    Create {
        name: String,
        #[arg(required = true)]
        permissions: Vec<String>,
    },
    /// Replace a role's permissions.
    Set {
        name: String,
        #[arg(required = true)]
        permissions: Vec<String>,
    },
    /// Delete a custom role.
    Rm { name: String },
}

#[derive(Subcommand)]
enum ComplianceCommand {
    /// Erase SUBJECT's data in every store (secure erasure) and print the signed certificate.
    Erase {
        subject: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Args)]
struct SqlArgs {
    /// Statements to run (several separated by ;), then exit.
    #[arg(short = 'c', long = "command")]
    command: Option<String>,
    /// A file of statements to run (`-` for standard input), then exit.
    #[arg(short = 'f', long = "file", conflicts_with = "command")]
    file: Option<PathBuf>,
    /// The database (default: `default`).
    #[arg(short = 'd', long)]
    database: Option<String>,
    /// How results print (default: --output).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Print each statement's time.
    #[arg(long)]
    timing: bool,
}

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => exit_with(CliError::Local(format!("cannot start: {e}"))),
    };
    if let Err(e) = runtime.block_on(run(cli)) {
        exit_with(e);
    }
}

fn exit_with(e: CliError) -> ! {
    eprintln!("tessera: {e}");
    std::process::exit(e.exit_code());
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let g = cli.global;
    match cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "tessera", &mut std::io::stdout());
            Ok(())
        }
        Command::Login(args) => commands::login(&g, args).await,
        Command::Logout => commands::logout(&g).await,
        Command::Whoami => commands::whoami(&g).await,
        Command::Sql(args) => {
            let api = commands::connect(&g)?;
            let session = sql::Session { api: &api, database: args.database, format: args.format.unwrap_or(g.output), timing: args.timing };
            if args.command.is_some() || args.file.is_some() || !sql::interactive() {
                sql::run_batch(&session, args.command.as_deref(), args.file.as_deref()).await
            } else {
                sql::repl(session).await
            }
        }
        Command::Kv(c) => commands::kv(&g, c).await,
        Command::Cluster(c) => commands::cluster(&g, c).await,
        Command::Node(c) => commands::node(&g, c).await,
        Command::Doc(c) => models::doc(&g, c).await,
        Command::Ts(c) => models::ts(&g, c).await,
        Command::Stream(c) => models::stream(&g, c).await,
        Command::Graph(c) => models::graph(&g, c).await,
        Command::Object(c) => models::object(&g, c).await,
        Command::Vector(VectorCommand::Search { collection, vector, k, filter }) => {
            models::vector_search(&g, collection, vector, k, filter).await
        }
        Command::Backup(c) => admin::backup(&g, c).await,
        Command::Import(c) => admin::import(&g, c).await,
        Command::User(c) => admin::user(&g, c).await,
        Command::Role(RoleCommand::List) => admin::roles(&g).await,
        Command::Role(RoleCommand::Create { name, permissions }) => {
            admin::role_change(&g, admin::RoleChange::Create, name, permissions).await
        }
        Command::Role(RoleCommand::Set { name, permissions }) => admin::role_change(&g, admin::RoleChange::Set, name, permissions).await,
        Command::Role(RoleCommand::Rm { name }) => admin::role_change(&g, admin::RoleChange::Remove, name, Vec::new()).await,
        Command::Audit { subject } => admin::audit(&g, subject).await,
        Command::Compliance(ComplianceCommand::Erase { subject, reason }) => admin::erase(&g, subject, reason).await,
    }
}

pub fn request_timeout(g: &Global) -> Duration {
    Duration::from_secs(g.timeout.max(1))
}
