//! The streaming engine (spec 01 streaming): channels of totally ordered
//! events, retention, consumer-group offsets, and the change records SQL writes
//! append to `cdc.<database>.<table>` channels in the same batch.
//!
//! Keys of the space:
//! * `c/<channel>` → JSON [`ChannelInfo`] (settings, `first_id`, `last_id`);
//! * `e/<channel>\0<id, 8 bytes BE>` → MessagePack [`StoredEvent`];
//! * `o/<channel>\0<group>` → the group's committed offset (8 bytes BE);
//! * `x/<database>\0<table>` → empty: CDC is on for the table.
//!
//! Ids are assigned here in log order: `last_id + 1`. Events are only ever
//! removed from the oldest end (retention, `max_events`), so the retained
//! events are exactly the ids `first_id..=last_id`.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tessera_api::command::Response;
use tessera_api::error::ErrorCode;
use tessera_api::stream::{
    CdcSource, ChannelEvents, ChannelInfo, StreamEvent, StreamOp, StreamQuery, StreamQueryResult, StreamResponse, cdc_channel,
};
use tessera_sql::{ChangeOp, RowChange};

use super::{Answer, Engine, QueryCtx, ReadView, Tx};
use crate::error::{Result, StorageError};

/// Most events one retention command drops per channel (the rest go next time).
const MAX_DROP_PER_CHANNEL: u64 = 100_000;
/// Most events one read returns.
pub const MAX_READ: usize = 10_000;

/// An event as stored (its channel and id are in the key).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredEvent {
    event_type: String,
    data: Value,
    timestamp_ms: i64,
}

fn channel_key(name: &str) -> Vec<u8> {
    [b"c/".as_slice(), name.as_bytes()].concat()
}

fn events_prefix(name: &str) -> Vec<u8> {
    [b"e/".as_slice(), name.as_bytes(), b"\0"].concat()
}

fn event_key(name: &str, id: u64) -> Vec<u8> {
    [events_prefix(name).as_slice(), &id.to_be_bytes()].concat()
}

fn offsets_prefix(name: &str) -> Vec<u8> {
    [b"o/".as_slice(), name.as_bytes(), b"\0"].concat()
}

fn offset_key(name: &str, group: &str) -> Vec<u8> {
    [offsets_prefix(name).as_slice(), group.as_bytes()].concat()
}

fn cdc_prefix(database: &str) -> Vec<u8> {
    [b"x/".as_slice(), database.as_bytes(), b"\0"].concat()
}

fn cdc_key(database: &str, table: &str) -> Vec<u8> {
    [cdc_prefix(database).as_slice(), table.as_bytes()].concat()
}

fn corrupt(e: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("stream record: {e}"))
}

fn load_channel(view: &ReadView<'_>, name: &str) -> Result<Option<ChannelInfo>> {
    Ok(view.get(&channel_key(name))?.map(|b| serde_json::from_slice(&b)).transpose()?)
}

fn save_channel(tx: &mut Tx<'_>, c: &ChannelInfo) -> Result<()> {
    tx.put(&channel_key(&c.name), &serde_json::to_vec(c)?);
    Ok(())
}

fn decode_event(channel: &str, id: u64, bytes: &[u8]) -> Result<StreamEvent> {
    let e: StoredEvent = tessera_api::codec::decode(bytes).map_err(corrupt)?;
    Ok(StreamEvent { id, channel: channel.to_string(), event_type: e.event_type, data: e.data, timestamp_ms: e.timestamp_ms })
}

fn rejected(kind: ErrorCode, message: impl Into<String>) -> Response {
    Response::rejected(kind, message)
}

/// Parses a retention duration (`"30m"`, `"24h"`, `"7d"`, `"1h30m"`; > 0).
fn parse_retention(retention: &Option<String>) -> std::result::Result<Option<i64>, String> {
    match retention {
        None => Ok(None),
        Some(s) => match tessera_timeseries::parse_duration(s) {
            Ok(ms) if ms > 0 => Ok(Some(ms)),
            Ok(_) => Err(format!("retention {s:?} must be longer than zero")),
            Err(e) => Err(format!("invalid retention {s:?}: {e}")),
        },
    }
}

fn new_channel(
    name: &str,
    retention: &Option<String>,
    max_events: Option<u64>,
    now: i64,
    cdc: Option<CdcSource>,
) -> std::result::Result<ChannelInfo, String> {
    let retention_ms = parse_retention(retention)?;
    if max_events == Some(0) {
        return Err("max_events must be at least 1".into());
    }
    Ok(ChannelInfo {
        name: name.to_string(),
        retention: retention.clone(),
        retention_ms,
        max_events,
        created_at_ms: now,
        last_id: 0,
        first_id: 1,
        cdc,
    })
}

/// Appends one event to `c` (in memory and into `tx`), dropping the oldest
/// beyond `max_events`.
fn append(tx: &mut Tx<'_>, c: &mut ChannelInfo, event_type: &str, data: Value, now: i64) -> Result<StreamEvent> {
    c.last_id += 1;
    let id = c.last_id;
    let stored = StoredEvent { event_type: event_type.to_string(), data, timestamp_ms: now };
    tx.put(&event_key(&c.name, id), &tessera_api::codec::encode(&stored).map_err(corrupt)?);
    if let Some(max) = c.max_events {
        while c.retained() > max {
            tx.delete(&event_key(&c.name, c.first_id));
            c.first_id += 1;
        }
    }
    Ok(StreamEvent { id, channel: c.name.clone(), event_type: stored.event_type, data: stored.data, timestamp_ms: now })
}

/// The streaming engine.
pub struct StreamEngine;

impl Engine for StreamEngine {
    const SPACE: u8 = super::space::STREAM;
    type Op = StreamOp;
    type Query = StreamQuery;
    type Answer = StreamQueryResult;

    fn query(&self, ctx: &QueryCtx<'_>, query: &StreamQuery) -> Result<Answer<StreamQueryResult>> {
        Ok(Ok(self::query(&ctx.view::<Self>(), query)?))
    }

    fn apply(&self, tx: &mut Tx<'_>, now: i64, op: &StreamOp) -> Result<Response> {
        match op {
            StreamOp::CreateChannel { name, retention, max_events } => {
                if load_channel(tx.view(), name)?.is_some() {
                    return Ok(rejected(ErrorCode::Conflict, format!("channel {name} already exists")));
                }
                let c = match new_channel(name, retention, *max_events, now, None) {
                    Ok(c) => c,
                    Err(m) => return Ok(rejected(ErrorCode::Invalid, m)),
                };
                save_channel(tx, &c)?;
                Ok(Response::Stream(StreamResponse::Channel(c)))
            }
            StreamOp::Publish { channel, event_type, data } => {
                let Some(mut c) = load_channel(tx.view(), channel)? else {
                    return Ok(rejected(ErrorCode::NotFound, format!("channel {channel} does not exist")));
                };
                if c.cdc.is_some() {
                    return Ok(rejected(ErrorCode::Invalid, format!("{channel} is a CDC channel: only SQL commits write to it")));
                }
                let ev = append(tx, &mut c, event_type, data.clone(), now)?;
                save_channel(tx, &c)?;
                Ok(Response::Stream(StreamResponse::Published(ev)))
            }
            StreamOp::EnforceRetention => {
                let mut channels = Vec::new();
                tx.view().scan_prefix(b"c/", |_, v| {
                    channels.push(serde_json::from_slice::<ChannelInfo>(v)?);
                    Ok(true)
                })?;
                let (mut touched, mut dropped) = (0u64, 0u64);
                for mut c in channels {
                    let Some(ret) = c.retention_ms else { continue };
                    touched += 1;
                    let cutoff = now.saturating_sub(ret);
                    let mut expired = Vec::new();
                    tx.view().scan_prefix(&events_prefix(&c.name), |k, v| {
                        let e: StoredEvent = tessera_api::codec::decode(v).map_err(corrupt)?;
                        if e.timestamp_ms >= cutoff || expired.len() as u64 >= MAX_DROP_PER_CHANNEL {
                            return Ok(false);
                        }
                        expired.push(k.to_vec());
                        Ok(true)
                    })?;
                    if expired.is_empty() {
                        continue;
                    }
                    for k in &expired {
                        tx.delete(k);
                    }
                    dropped += expired.len() as u64;
                    c.first_id += expired.len() as u64;
                    save_channel(tx, &c)?;
                }
                Ok(Response::Stream(StreamResponse::Retention { channels: touched, dropped_events: dropped }))
            }
            StreamOp::CommitOffset { channel, group, offset } => {
                let Some(c) = load_channel(tx.view(), channel)? else {
                    return Ok(rejected(ErrorCode::NotFound, format!("channel {channel} does not exist")));
                };
                if *offset > c.last_id {
                    return Ok(rejected(
                        ErrorCode::Conflict,
                        format!("offset {offset} is beyond the newest event of {channel} ({})", c.last_id),
                    ));
                }
                let current = read_offset(tx.view(), channel, group)?;
                if *offset <= current {
                    return Ok(Response::Stream(StreamResponse::Committed { offset: current, advanced: false }));
                }
                tx.put(&offset_key(channel, group), &offset.to_be_bytes());
                Ok(Response::Stream(StreamResponse::Committed { offset: *offset, advanced: true }))
            }
            StreamOp::EnableCdc { database, table, retention, max_events } => {
                let name = cdc_channel(database, table);
                let source = CdcSource { database: database.clone(), table: table.clone(), enabled: true };
                let c = match load_channel(tx.view(), &name)? {
                    Some(mut c) => {
                        c.cdc = Some(source);
                        if retention.is_some() {
                            match parse_retention(retention) {
                                Ok(ms) => (c.retention, c.retention_ms) = (retention.clone(), ms),
                                Err(m) => return Ok(rejected(ErrorCode::Invalid, m)),
                            }
                        }
                        if max_events.is_some() {
                            if *max_events == Some(0) {
                                return Ok(rejected(ErrorCode::Invalid, "max_events must be at least 1"));
                            }
                            c.max_events = *max_events;
                        }
                        c
                    }
                    None => match new_channel(&name, retention, *max_events, now, Some(source)) {
                        Ok(c) => c,
                        Err(m) => return Ok(rejected(ErrorCode::Invalid, m)),
                    },
                };
                save_channel(tx, &c)?;
                tx.put(&cdc_key(database, table), b"");
                Ok(Response::Stream(StreamResponse::Channel(c)))
            }
            StreamOp::DisableCdc { database, table } => {
                let name = cdc_channel(database, table);
                match load_channel(tx.view(), &name)? {
                    Some(mut c) if c.cdc.as_ref().is_some_and(|s| s.enabled) => {
                        if let Some(s) = c.cdc.as_mut() {
                            s.enabled = false;
                        }
                        save_channel(tx, &c)?;
                        tx.delete(&cdc_key(database, table));
                        Ok(Response::Stream(StreamResponse::Channel(c)))
                    }
                    _ => Ok(rejected(ErrorCode::NotFound, format!("CDC is not enabled for {database}.{table}"))),
                }
            }
        }
    }
}

fn read_offset(view: &ReadView<'_>, channel: &str, group: &str) -> Result<u64> {
    Ok(match view.get(&offset_key(channel, group))? {
        Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(corrupt)?),
        None => 0,
    })
}

/// Tables of `database` whose changes are captured.
pub fn cdc_tables(view: &ReadView<'_>, database: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let prefix = cdc_prefix(database);
    view.scan_prefix(&prefix, |k, _| {
        out.insert(String::from_utf8_lossy(&k[prefix.len()..]).into_owned());
        Ok(true)
    })?;
    Ok(out)
}

/// Where a SQL write sits in its group's log: its entry's index and, when the
/// entry is a batch of commands, the command's place in it (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangePosition {
    pub log_index: u64,
    pub command: Option<u32>,
}

/// Appends the change records of one committed SQL write to their tables'
/// CDC channels, in order. Each record's transaction position is
/// `{log_index, index}` (`index`: the change's place in the write), with
/// `command` between them when the write shares its log entry with others.
pub fn append_changes(tx: &mut Tx<'_>, now: i64, at: ChangePosition, database: &str, changes: Vec<RowChange>) -> Result<()> {
    let mut channels: HashMap<String, ChannelInfo> = HashMap::new();
    for (index, ch) in changes.into_iter().enumerate() {
        let name = cdc_channel(database, &ch.table);
        if !channels.contains_key(&name) {
            // Enabling CDC creates the channel; a missing one is skipped, not fatal.
            let Some(c) = load_channel(tx.view(), &name)? else { continue };
            channels.insert(name.clone(), c);
        }
        let c = channels.get_mut(&name).expect("inserted above");
        let op = match ch.op {
            ChangeOp::Insert => "Insert",
            ChangeOp::Update => "Update",
            ChangeOp::Delete => "Delete",
        };
        let record = json!({
            "op": op,
            "database": database,
            "table": ch.table,
            "key": ch.key,
            "data": ch.data,
            "position": match at.command {
                None => json!({"log_index": at.log_index, "index": index}),
                Some(command) => json!({"log_index": at.log_index, "command": command, "index": index}),
            },
        });
        append(tx, c, op, record, now)?;
    }
    for c in channels.values() {
        save_channel(tx, c)?;
    }
    Ok(())
}

fn read_events(view: &ReadView<'_>, c: &ChannelInfo, after: Option<u64>, limit: usize) -> Result<Vec<StreamEvent>> {
    let limit = limit.clamp(1, MAX_READ) as u64;
    let start = match after {
        // `after` comes from the client: u64::MAX means nothing after it.
        Some(a) => a.saturating_add(1).max(c.first_id),
        None => (c.last_id + 1).saturating_sub(limit).max(c.first_id),
    };
    let mut out = Vec::new();
    if start > c.last_id {
        return Ok(out);
    }
    let end = start.saturating_add(limit).min(c.last_id + 1);
    view.scan_range(&event_key(&c.name, start), &event_key(&c.name, end), |k, v| {
        let id = u64::from_be_bytes(k[k.len() - 8..].try_into().map_err(corrupt)?);
        out.push(decode_event(&c.name, id, v)?);
        Ok(true)
    })?;
    Ok(out)
}

/// Answers streaming reads from one replica's state.
pub fn query(view: &ReadView<'_>, q: &StreamQuery) -> Result<StreamQueryResult> {
    Ok(match q {
        StreamQuery::ListChannels => {
            let mut out = Vec::new();
            view.scan_prefix(b"c/", |_, v| {
                out.push(serde_json::from_slice::<ChannelInfo>(v)?);
                Ok(true)
            })?;
            StreamQueryResult::Channels(out)
        }
        StreamQuery::Channel { name } => StreamQueryResult::Channel(load_channel(view, name)?),
        StreamQuery::Events { channel, after, limit } => match load_channel(view, channel)? {
            None => StreamQueryResult::Events(None),
            Some(c) => {
                let events = read_events(view, &c, *after, *limit)?;
                StreamQueryResult::Events(Some(ChannelEvents { channel: c, events, committed: None }))
            }
        },
        StreamQuery::Poll { channel, group, max } => match load_channel(view, channel)? {
            None => StreamQueryResult::Events(None),
            Some(c) => {
                let committed = read_offset(view, channel, group)?;
                let events = read_events(view, &c, Some(committed), *max)?;
                StreamQueryResult::Events(Some(ChannelEvents { channel: c, events, committed: Some(committed) }))
            }
        },
        StreamQuery::Offsets { channel } => match load_channel(view, channel)? {
            None => StreamQueryResult::Offsets(None),
            Some(_) => {
                let prefix = offsets_prefix(channel);
                let mut out = Vec::new();
                view.scan_prefix(&prefix, |k, v| {
                    let off = u64::from_be_bytes(v.try_into().map_err(corrupt)?);
                    out.push((String::from_utf8_lossy(&k[prefix.len()..]).into_owned(), off));
                    Ok(true)
                })?;
                StreamQueryResult::Offsets(Some(out))
            }
        },
    })
}

/// Events of a data subject: those whose data has a subject field (at its top
/// or in a nested object, as the row of a CDC change record). Erasing one
/// redacts it: its data becomes `null` and its id, type and time stay, so a
/// channel's ids stay dense and consumers' offsets keep their meaning.
impl crate::subject::SubjectRecords for StreamEngine {
    const STORE: &'static str = "stream";
    fn subject_items(
        &self,
        view: &ReadView<'_>,
        rule: &tessera_api::compliance::SubjectRule,
        _now: i64,
    ) -> Result<Vec<tessera_api::compliance::SubjectItem>> {
        let mut items = Vec::new();
        view.scan_prefix(b"e/", |k, v| {
            let e: StoredEvent = tessera_api::codec::decode(v).map_err(corrupt)?;
            // A subject field at the top of the data, or one level down: the
            // row of a CDC change record (`{op, table, key, data: {row}}`).
            let nested = e.data.as_object().is_some_and(|o| o.values().any(|v| rule.matches_object(v)));
            if (rule.matches_object(&e.data) || nested) && k.len() >= 2 + 1 + 8 {
                let channel = String::from_utf8_lossy(&k[2..k.len() - 9]).into_owned();
                let mut id = [0u8; 8];
                id.copy_from_slice(&k[k.len() - 8..]);
                items.push(tessera_api::compliance::SubjectItem {
                    store: Self::STORE.into(),
                    location: channel,
                    item_id: u64::from_be_bytes(id).to_string(),
                    data: serde_json::json!({"event_type": e.event_type, "data": e.data}),
                    bytes: (k.len() + v.len()) as u64,
                    at_ms: Some(e.timestamp_ms),
                });
            }
            Ok(true)
        })?;
        Ok(items)
    }
    fn erase_items(
        &self,
        tx: &mut Tx<'_>,
        _now: i64,
        items: &[tessera_api::compliance::SubjectItem],
    ) -> Result<Option<tessera_api::error::Rejection>> {
        for item in items {
            let Ok(id) = item.item_id.parse::<u64>() else { continue };
            let key = event_key(&item.location, id);
            let Some(raw) = tx.view().get(&key)? else { continue };
            let mut e: StoredEvent = tessera_api::codec::decode(&raw).map_err(corrupt)?;
            e.data = Value::Null;
            tx.put(&key, &tessera_api::codec::encode(&e).map_err(corrupt)?);
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {

    use rocksdb::WriteBatch;
    use tessera_api::sql::SqlOp;

    use super::*;
    use crate::engine::sql::SqlEngine;
    use crate::engine::{GroupData, space};
    use tessera_api::error::Rejection;

    fn open() -> (tempfile::TempDir, GroupData) {
        crate::engine::test_support::open_group(3)
    }

    fn apply(data: &GroupData, now: i64, op: StreamOp) -> Response {
        crate::engine::test_support::apply_op(&StreamEngine, data, space::STREAM, now, &op)
    }

    /// A SQL write as the state machine applies it: write and change records in one batch.
    fn sql(data: &GroupData, log_index: u64, text: &str) -> Response {
        let (db, group) = (&*data.db, data.group);
        let op = SqlOp {
            database: "db".into(),
            sql: text.into(),
            params: vec![],
            max_result_rows: 100,
            timeout_ms: 0,
            max_memory_mb: 0,
            transaction: None,
        };
        let mut batch = WriteBatch::default();
        let cdc = cdc_tables(&ReadView::new(db, group, space::STREAM), "db").unwrap();
        let capture = |t: &str| cdc.contains(t);
        let (r, changes) = SqlEngine.apply_capturing(&mut Tx::new(db, group, space::SQL, &mut batch), 7, &op, &capture).unwrap();
        if !changes.is_empty() {
            let at = ChangePosition { log_index, command: None };
            append_changes(&mut Tx::new(db, group, space::STREAM, &mut batch), 7, at, "db", changes).unwrap();
        }
        db.write(batch).unwrap();
        r
    }

    fn events(data: &GroupData, channel: &str, after: Option<u64>, limit: usize) -> Vec<StreamEvent> {
        let q = StreamQuery::Events { channel: channel.into(), after, limit };
        match query(&data.space(space::STREAM), &q).unwrap() {
            StreamQueryResult::Events(Some(r)) => r.events,
            other => panic!("{other:?}"),
        }
    }

    fn publish(data: &GroupData, now: i64, channel: &str, n: i64) -> Response {
        apply(data, now, StreamOp::Publish { channel: channel.into(), event_type: "t".into(), data: json!({"n": n}) })
    }

    fn create(data: &GroupData, name: &str, retention: Option<&str>, max: Option<u64>) -> Response {
        apply(data, 0, StreamOp::CreateChannel { name: name.into(), retention: retention.map(str::to_string), max_events: max })
    }

    #[test]
    fn channels_assign_ids_in_order_and_read_back() {
        let (_d, data) = open();
        assert!(matches!(create(&data, "c", Some("1h"), None), Response::Stream(StreamResponse::Channel(_))));
        assert!(matches!(create(&data, "c", None, None), Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })));
        assert!(matches!(create(&data, "d", Some("soon"), None), Response::Rejected(Rejection { code: ErrorCode::Invalid, .. })));
        assert!(matches!(create(&data, "d", Some("0s"), None), Response::Rejected(Rejection { code: ErrorCode::Invalid, .. })));
        assert!(matches!(create(&data, "d", None, Some(0)), Response::Rejected(Rejection { code: ErrorCode::Invalid, .. })));
        assert!(matches!(publish(&data, 1, "missing", 0), Response::Rejected(Rejection { code: ErrorCode::NotFound, .. })));
        for n in 1..=10 {
            match publish(&data, 100 + n, "c", n) {
                Response::Stream(StreamResponse::Published(e)) => {
                    assert_eq!((e.id, e.timestamp_ms, e.data.clone()), (n as u64, 100 + n, json!({"n": n})));
                }
                other => panic!("{other:?}"),
            }
        }
        let ids = |v: Vec<StreamEvent>| v.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(events(&data, "c", None, 3)), vec![8, 9, 10]);
        assert_eq!(ids(events(&data, "c", Some(2), 3)), vec![3, 4, 5]);
        assert_eq!(ids(events(&data, "c", Some(10), 3)), Vec::<u64>::new());
        // The largest id a client can send reads nothing (it overflowed, found by schemathesis).
        assert_eq!(ids(events(&data, "c", Some(u64::MAX), 3)), Vec::<u64>::new());
        assert_eq!(ids(events(&data, "c", None, 100)), (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn retention_drops_the_oldest_by_age_and_by_count() {
        let (_d, data) = open();
        create(&data, "aged", Some("10s"), None);
        create(&data, "capped", None, Some(3));
        create(&data, "kept", None, None);
        for n in 0..5 {
            publish(&data, 1_000 + n * 5_000, "aged", n); // at 1s, 6s, 11s, 16s, 21s
            publish(&data, 1_000, "capped", n);
            publish(&data, 1_000, "kept", n);
        }
        let ids = |c: &str| events(&data, c, Some(0), 100).iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids("capped"), vec![3, 4, 5]);
        // Now = 22s: the cut-off is 12s, so the events at 1s, 6s and 11s go.
        match apply(&data, 22_000, StreamOp::EnforceRetention) {
            Response::Stream(StreamResponse::Retention { channels, dropped_events }) => {
                assert_eq!((channels, dropped_events), (1, 3));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ids("aged"), vec![4, 5]);
        assert_eq!(ids("kept"), vec![1, 2, 3, 4, 5]);
        match query(&data.space(space::STREAM), &StreamQuery::Channel { name: "aged".into() }).unwrap() {
            StreamQueryResult::Channel(Some(c)) => assert_eq!((c.first_id, c.last_id, c.retained()), (4, 5, 2)),
            other => panic!("{other:?}"),
        }
        match publish(&data, 30_000, "aged", 9) {
            Response::Stream(StreamResponse::Published(e)) => assert_eq!(e.id, 6),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn consumer_offsets_only_move_forward() {
        let (_d, data) = open();
        create(&data, "c", None, None);
        for n in 1..=5 {
            publish(&data, 1, "c", n);
        }
        let poll =
            |max| match query(&data.space(space::STREAM), &StreamQuery::Poll { channel: "c".into(), group: "g".into(), max }).unwrap() {
                StreamQueryResult::Events(Some(r)) => (r.committed, r.events.iter().map(|e| e.id).collect::<Vec<_>>()),
                other => panic!("{other:?}"),
            };
        assert_eq!(poll(2), (Some(0), vec![1, 2]));
        assert_eq!(poll(2), (Some(0), vec![1, 2]), "nothing is committed by polling");
        let commit = |offset| apply(&data, 1, StreamOp::CommitOffset { channel: "c".into(), group: "g".into(), offset });
        assert_eq!(commit(2), Response::Stream(StreamResponse::Committed { offset: 2, advanced: true }));
        assert_eq!(poll(10), (Some(2), vec![3, 4, 5]));
        assert_eq!(commit(1), Response::Stream(StreamResponse::Committed { offset: 2, advanced: false }));
        assert!(matches!(commit(6), Response::Rejected(Rejection { code: ErrorCode::Conflict, .. })));
        match query(&data.space(space::STREAM), &StreamQuery::Offsets { channel: "c".into() }).unwrap() {
            StreamQueryResult::Offsets(Some(o)) => assert_eq!(o, vec![("g".to_string(), 2)]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cdc_records_follow_statement_order_and_skip_rollbacks() {
        let (_d, data) = open();
        sql(&data, 1, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT); CREATE TABLE nopk (a INT, b INT)");
        apply(&data, 0, StreamOp::EnableCdc { database: "db".into(), table: "t".into(), retention: None, max_events: None });
        apply(&data, 0, StreamOp::EnableCdc { database: "db".into(), table: "nopk".into(), retention: None, max_events: None });
        sql(&data, 2, "INSERT INTO t VALUES (1, 'a'), (2, 'b')");
        sql(&data, 3, "BEGIN; UPDATE t SET v = 'z' WHERE id = 1; DELETE FROM t WHERE id = 2; COMMIT");
        sql(&data, 4, "BEGIN; INSERT INTO t VALUES (3, 'c'); ROLLBACK");
        sql(&data, 5, "INSERT INTO t VALUES (4, 'd'); INSERT INTO t VALUES (1, 'dup')"); // fails: nothing
        sql(&data, 6, "INSERT INTO nopk VALUES (1, 2); DELETE FROM nopk");
        let got: Vec<Value> = events(&data, "cdc.db.t", Some(0), 100)
            .into_iter()
            .map(|e| json!([e.event_type, e.data["key"], e.data["data"], e.data["position"]]))
            .collect();
        assert_eq!(
            got,
            vec![
                json!(["Insert", {"id": 1}, {"id": 1, "v": "a"}, {"log_index": 2, "index": 0}]),
                json!(["Insert", {"id": 2}, {"id": 2, "v": "b"}, {"log_index": 2, "index": 1}]),
                json!(["Update", {"id": 1}, {"id": 1, "v": "z"}, {"log_index": 3, "index": 0}]),
                json!(["Delete", {"id": 2}, null, {"log_index": 3, "index": 1}]),
            ]
        );
        let nopk: Vec<Value> =
            events(&data, "cdc.db.nopk", Some(0), 100).into_iter().map(|e| json!([e.event_type, e.data["key"]])).collect();
        assert_eq!(nopk, vec![json!(["Insert", {"a": 1, "b": 2}]), json!(["Delete", {"a": 1, "b": 2}])]);
        // Disabled: writes go on without records.
        apply(&data, 0, StreamOp::DisableCdc { database: "db".into(), table: "t".into() });
        sql(&data, 7, "INSERT INTO t VALUES (5, 'e')");
        assert_eq!(events(&data, "cdc.db.t", Some(0), 100).len(), 4);
        assert!(matches!(
            apply(&data, 0, StreamOp::Publish { channel: "cdc.db.t".into(), event_type: "x".into(), data: json!({}) }),
            Response::Rejected(Rejection { code: ErrorCode::Invalid, .. })
        ));
    }
}
