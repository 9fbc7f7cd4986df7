//! The client's one error type, and the exit status each kind gives (the
//! table in the README, "Command-line client").

use thiserror::Error;

/// Where an error points in the request's text (1-based), when the router says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

#[derive(Debug, Error)]
pub enum CliError {
    /// The request was refused as it stands (4xx other than 401/403): bad
    /// input, an unknown key or table, a conflict. `code` is the API's code.
    #[error("{message}")]
    Refused { status: u16, code: String, message: String, position: Option<Position> },
    /// Not signed in, the session expired, or the user lacks the permission.
    #[error("{0}")]
    Auth(String),
    /// The cluster could not be reached or could not serve (connection
    /// refused, timeout, 5xx).
    #[error("{0}")]
    Unavailable(String),
    /// A statement of a SQL script failed (the shell goes on; `-c`/`-f` stop).
    #[error("{0}")]
    Sql(String),
    /// Wrong use of the command (a missing argument, a file that cannot be read).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Local(String),
}

impl CliError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Refused { .. } | CliError::Sql(_) => 1,
            CliError::Usage(_) => 2,
            CliError::Unavailable(_) => 3,
            CliError::Auth(_) => 4,
            CliError::Local(_) => 5,
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Local(e.to_string())
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
