//! Streaming operations and results (spec 01, streaming): channels, events,
//! consumer-group offsets and change data capture of SQL tables.
//!
//! A channel lives in one data group. Event ids are a per-channel sequence
//! (1, 2, 3, …) assigned by the state machine in log order; an event's
//! timestamp is the `issued_at_ms` of the command that published it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Prefix of the channels change data capture writes to: `cdc.<database>.<table>`.
pub const CDC_PREFIX: &str = "cdc.";

/// The CDC channel of a table.
pub fn cdc_channel(database: &str, table: &str) -> String {
    format!("{CDC_PREFIX}{database}.{table}")
}

/// `(database, table)` of a CDC channel name, `None` for other channels.
pub fn parse_cdc_channel(channel: &str) -> Option<(&str, &str)> {
    let rest = channel.strip_prefix(CDC_PREFIX)?;
    let (db, table) = rest.split_once('.')?;
    (!db.is_empty() && !table.is_empty()).then_some((db, table))
}

/// A channel's settings and position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub name: String,
    /// The retention as the client wrote it (`"24h"`), `None` to keep events
    /// until `max_events` removes them.
    pub retention: Option<String>,
    pub retention_ms: Option<i64>,
    /// At most this many events are kept (the oldest go first).
    pub max_events: Option<u64>,
    pub created_at_ms: i64,
    /// Id of the newest event ever published (0: none yet).
    pub last_id: u64,
    /// Id of the oldest retained event (`last_id + 1` when none is retained).
    pub first_id: u64,
    /// For CDC channels: the table whose changes it carries.
    pub cdc: Option<CdcSource>,
}

impl ChannelInfo {
    /// Retained events (they are always the contiguous ids `first_id..=last_id`).
    pub fn retained(&self) -> u64 {
        (self.last_id + 1).saturating_sub(self.first_id)
    }
}

/// The table a CDC channel follows, and whether capture is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CdcSource {
    pub database: String,
    pub table: String,
    pub enabled: bool,
}

/// One event of a channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    pub id: u64,
    pub channel: String,
    pub event_type: String,
    pub data: Value,
    /// `issued_at_ms` of the command that published it.
    pub timestamp_ms: i64,
}

/// Streaming writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamOp {
    /// Create a channel; Conflict if it exists, Invalid for a bad retention.
    CreateChannel { name: String, retention: Option<String>, max_events: Option<u64> },
    /// Append one event; NotFound if the channel does not exist.
    Publish { channel: String, event_type: String, data: Value },
    /// Drop, in every channel of the group, the oldest events older than the
    /// channel's retention, with `issued_at_ms` as now.
    EnforceRetention,
    /// Set a consumer group's committed offset (it only moves forward).
    CommitOffset { channel: String, group: String, offset: u64 },
    /// Start capturing a table's changes into `cdc.<database>.<table>` (created if absent).
    EnableCdc { database: String, table: String, retention: Option<String>, max_events: Option<u64> },
    /// Stop capturing (the channel and its events stay).
    DisableCdc { database: String, table: String },
}

/// Streaming reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamQuery {
    ListChannels,
    Channel {
        name: String,
    },
    /// Events with id > `after`, oldest first, at most `limit`; with `after`
    /// `None`, the newest `limit` events (oldest first).
    Events {
        channel: String,
        after: Option<u64>,
        limit: usize,
    },
    /// Events after a consumer group's committed offset, at most `max`.
    Poll {
        channel: String,
        group: String,
        max: usize,
    },
    /// Committed offsets of every consumer group of a channel.
    Offsets {
        channel: String,
    },
}

/// Results of streaming writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamResponse {
    Channel(ChannelInfo),
    Published(StreamEvent),
    Retention {
        channels: u64,
        dropped_events: u64,
    },
    /// The group's offset after the commit.
    Committed {
        offset: u64,
        advanced: bool,
    },
}

/// Results of streaming reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamQueryResult {
    Channels(Vec<ChannelInfo>),
    Channel(Option<ChannelInfo>),
    /// `None`: the channel does not exist.
    Events(Option<ChannelEvents>),
    Offsets(Option<Vec<(String, u64)>>),
}

/// Events of one channel with the channel's state at read time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelEvents {
    pub channel: ChannelInfo,
    pub events: Vec<StreamEvent>,
    /// For polls: the group's committed offset.
    pub committed: Option<u64>,
}
