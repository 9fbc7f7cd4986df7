//! SQL requests and results as they cross the wire (spec 01, query interface).

use serde::{Deserialize, Serialize};

/// A SQL request that writes: proposed to the database's group and executed by
/// every replica's state machine against the same state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlOp {
    pub database: String,
    pub sql: String,
    pub params: Vec<serde_json::Value>,
    pub max_result_rows: usize,
    /// The request's time limit. The leader executes a request that may run
    /// long once against its current state before proposing it, and refuses it
    /// with `QUERY_TIMEOUT` when that exceeds the limit; once proposed, a write
    /// is applied to completion on every replica (0: no limit).
    #[serde(default)]
    pub timeout_ms: u64,
    /// MiB the request's intermediate results may hold (0: the engine's default).
    #[serde(default)]
    pub max_memory_mb: u64,
    /// An interactive transaction's commit: its steps run instead of `sql`,
    /// and it applies only if every step answers what its client saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<SqlTransaction>,
}

/// One statement of an interactive transaction (a PostgreSQL session's
/// `BEGIN` … `COMMIT`), with its own parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlStep {
    pub sql: String,
    pub params: Vec<serde_json::Value>,
}

/// An interactive transaction: the statements its client ran, in order, and
/// the digest ([`result_digest`]) of every answer the client was given. Run
/// again as one unit — by a read for the next statement's answer, by one
/// proposed command for its commit — it counts only if every step answers
/// the same: the client then saw exactly the state the commit applies to
/// (serializable; anything else is a `CONFLICT`, SQLSTATE 40001).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlTransaction {
    pub steps: Vec<SqlStep>,
    /// Digests of the answers seen so far: one per step for a commit, one per
    /// step but the last for the read that answers the last.
    pub seen: Vec<String>,
    /// The time every step sees (`now()`), fixed when the transaction began.
    pub now_ms: i64,
}

/// A digest of a statement's answer as its client was given it (before
/// masking): SHA-256 over its JSON.
pub fn result_digest(rows: &SqlRows) -> String {
    use sha2::Digest as _;
    let json = serde_json::to_vec(rows).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(&json))
}

/// SQL reads, answered from one replica without the Raft log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SqlQuery {
    /// A read-only request (SELECT, SHOW TABLES, …).
    Execute {
        database: String,
        sql: String,
        params: Vec<serde_json::Value>,
        max_result_rows: usize,
        timeout_ms: u64,
        /// MiB the query's intermediate results may hold (0: the engine's default).
        #[serde(default)]
        max_memory_mb: u64,
    },
    /// An interactive transaction's next statement, answered by running
    /// every step again against the group's current state and discarding the
    /// writes: the last step's answer, or `CONFLICT` when an earlier step no
    /// longer answers what its client saw.
    Transaction {
        database: String,
        transaction: SqlTransaction,
        max_result_rows: usize,
        timeout_ms: u64,
        #[serde(default)]
        max_memory_mb: u64,
    },
    ListTables {
        database: String,
    },
    DescribeTable {
        database: String,
        name: String,
    },
    ListDatabases,
}

/// Rows (or an affected-rows summary) of the last statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: usize,
    pub rows_affected: u64,
    pub truncated: bool,
}

/// The outcome of a SQL request or catalog read (a SQL error is a
/// `Rejected` reply with its code, message and position).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SqlResult {
    Rows(SqlRows),
    /// Catalog answers (table list, table schema, databases) as JSON.
    Catalog(serde_json::Value),
}

/// Table list entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableSummary {
    pub name: String,
    pub columns: usize,
    pub rows: u64,
}

/// Column description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ColumnSchema {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
    pub nullable: bool,
    pub default: Option<String>,
    pub primary_key: bool,
    pub unique: bool,
}

/// Index description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexSchema {
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
    /// "BTREE" or "HASH".
    pub method: String,
}

/// Constraint description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConstraintSchema {
    pub name: String,
    /// PRIMARY KEY, UNIQUE, FOREIGN KEY, CHECK.
    pub kind: String,
    pub definition: String,
}

/// A table's schema, as `GET /api/v1/tables/{name}` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableSchema {
    pub name: String,
    pub columns: Vec<ColumnSchema>,
    pub indexes: Vec<IndexSchema>,
    pub constraints: Vec<ConstraintSchema>,
}

/// Statements split at `;` outside quotes and comments.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Whole statements (without their `;`), blank ones left out.
    pub complete: Vec<String>,
    /// Text after the last `;`: a statement still being typed.
    pub rest: String,
}

/// Splits `text` into statements at semicolons that are not inside a
/// '…' string, a "…" identifier, a `--` line comment or a `/* */` comment.
pub fn split_statements(text: &str) -> Split {
    #[derive(PartialEq)]
    enum In {
        Code,
        Str,
        Ident,
        LineComment,
        BlockComment,
    }
    let mut split = Split::default();
    let mut current = String::new();
    let mut state = In::Code;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match state {
            In::Code => match c {
                ';' => {
                    if !current.trim().is_empty() {
                        split.complete.push(current.trim().to_string());
                    }
                    current.clear();
                    continue;
                }
                '\'' => state = In::Str,
                '"' => state = In::Ident,
                '-' if chars.peek() == Some(&'-') => state = In::LineComment,
                '/' if chars.peek() == Some(&'*') => state = In::BlockComment,
                _ => {}
            },
            In::Str if c == '\'' => state = In::Code,
            In::Ident if c == '"' => state = In::Code,
            In::LineComment if c == '\n' => state = In::Code,
            In::BlockComment if c == '*' && chars.peek() == Some(&'/') => {
                current.push(c);
                current.push(chars.next().expect("peeked"));
                state = In::Code;
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    split.rest = current;
    split
}

#[cfg(test)]
mod tests {
    use super::split_statements;

    #[test]
    fn statements_split_at_semicolons_outside_quotes_and_comments() {
        let s = split_statements("SELECT 'a;b'; -- c;d\nSELECT \"x;y\" /* ; */ FROM t;\n;SELECT 3");
        assert_eq!(s.complete, vec!["SELECT 'a;b'".to_string(), "-- c;d\nSELECT \"x;y\" /* ; */ FROM t".to_string()]);
        assert_eq!(s.rest, "SELECT 3");
    }
}
