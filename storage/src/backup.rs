//! Backups of a group: a logical export at one applied index, read by the
//! router page by page, and the restore of a backup through the group's log.
//!
//! An export file (`<db>/exports/<id>.exp`, removed once read to its end, and
//! at every start) holds the group's records — every model's, never the state
//! machine's Raft records — taken from one RocksDB snapshot:
//!
//! ```text
//! frame… | 0 (u32 BE, the end)
//! frame = length (u32 BE) | body sealed under the `Snapshot` purpose
//! body  = pairs (`tessera_api::backup` format) of at most FRAME_BYTES
//! ```
//!
//! Frames are sealed when encryption at rest is on (associated data: the group
//! and the frame number), so the plaintext never reaches the node's disk; the
//! router receives opened pages over the cluster channel.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use rocksdb::{IteratorMode, WriteBatch};
use tessera_api::command::{Response, RestoreOp};

use crate::crypt::Purpose;
use crate::engine::{GroupData, space};
use crate::error::{Result, StorageError};
use crate::keys::{self, CF_DATA};
use crate::store::Db;

/// Plaintext bytes of pairs per frame (a frame holds one pair at least).
const FRAME_BYTES: usize = 512 * 1024;
/// The meta group's cluster map: a restore keeps the cluster's own.
const META_MAP_KEY: &[u8] = b"map";

/// What an export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    /// The log index the group had applied in the exported state.
    pub applied_index: u64,
    pub pairs: u64,
    /// Plaintext bytes of keys and values.
    pub bytes: u64,
}

/// Where a group's exports are written.
pub fn exports_dir(db: &Db) -> PathBuf {
    db.path().join("exports")
}

/// Removes every export left by an earlier run (at start).
pub fn remove_leftover_exports(db: &Db) -> Result<()> {
    let dir = exports_dir(db);
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// How long an export may wait to be read before the next export removes it
/// (a backup abandoned midway, e.g. its router crashed).
pub const EXPORT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the exports of `groups` (after a secure erasure: an unread export
/// taken before it holds the erased records; the backup reading it fails and
/// is taken again). Answers how many were removed.
pub fn remove_exports_of(db: &Db, groups: &[u64]) -> Result<usize> {
    remove_exports_where(db, |name, _| name.split_once('-').and_then(|(g, _)| g.parse::<u64>().ok()).is_some_and(|g| groups.contains(&g)))
}

/// Removes exports older than [`EXPORT_MAX_AGE`].
fn remove_stale_exports(db: &Db) -> Result<usize> {
    remove_exports_where(db, |_, age| age > EXPORT_MAX_AGE)
}

fn remove_exports_where(db: &Db, doomed: impl Fn(&str, std::time::Duration) -> bool) -> Result<usize> {
    let Ok(entries) = fs::read_dir(exports_dir(db)) else { return Ok(0) };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let age = entry.metadata()?.modified()?.elapsed().unwrap_or_default();
        if name.ends_with(".exp") && doomed(&name, age) {
            match fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(removed)
}

fn aad(group: u64, frame: u64) -> [u8; 24] {
    let mut a = [0u8; 24];
    a[..8].copy_from_slice(b"tessexp1");
    a[8..16].copy_from_slice(&group.to_be_bytes());
    a[16..].copy_from_slice(&frame.to_be_bytes());
    a
}

/// Writes the group's records, as of one RocksDB snapshot, to export `id`.
pub fn export(data: &GroupData, id: &str) -> Result<ExportInfo> {
    let db = &*data.db;
    let group = data.group;
    let dir = exports_dir(db);
    fs::create_dir_all(&dir)?;
    let stale = remove_stale_exports(db)?;
    if stale > 0 {
        tracing::info!(stale, "removed exports nobody read within {:?}", EXPORT_MAX_AGE);
    }
    let path = dir.join(format!("{id}.exp"));
    let cf = db.cf_handle(CF_DATA).expect("data column family");
    let snap = db.snapshot();
    let applied_key = keys::data_key(group, keys::SPACE_SM, &[keys::SM_APPLIED]);
    let applied_index = match snap.get_cf(cf, &applied_key)? {
        Some(raw) => {
            serde_json::from_slice::<Option<openraft::LogId<u64>>>(&db.open(Purpose::Data, &applied_key, &raw)?)?.map_or(0, |l| l.index)
        }
        None => 0,
    };
    let mut out = BufWriter::with_capacity(256 * 1024, File::create(&path)?);
    let (mut frame, mut body) = (0u64, Vec::with_capacity(FRAME_BYTES + 4096));
    let mut info = ExportInfo { applied_index, pairs: 0, bytes: 0 };
    let flush = |out: &mut BufWriter<File>, body: &mut Vec<u8>, frame: &mut u64| -> Result<()> {
        if body.is_empty() {
            return Ok(());
        }
        let sealed = db.seal(Purpose::Snapshot, &aad(group, *frame), body);
        out.write_all(&(sealed.len() as u32).to_be_bytes())?;
        out.write_all(&sealed)?;
        *frame += 1;
        body.clear();
        Ok(())
    };
    // Every space but the state machine's own records (space 0) and a restore's
    // staged records.
    let start = keys::data_key(group, keys::SPACE_SM + 1, &[]);
    let prefix = keys::group_prefix(group);
    for item in snap.iterator_cf_opt(cf, keys::bounded(&start, &keys::group_end(group)), IteratorMode::Start) {
        let (k, v) = item?;
        if k.get(prefix.len()) == Some(&keys::SPACE_RESTORE) {
            continue;
        }
        let v = db.open(Purpose::Data, &k, &v)?;
        tessera_api::backup::push_pair(&mut body, &k[prefix.len()..], &v);
        info.pairs += 1;
        info.bytes += (k.len() - prefix.len() + v.len()) as u64;
        if body.len() >= FRAME_BYTES {
            flush(&mut out, &mut body, &mut frame)?;
        }
    }
    flush(&mut out, &mut body, &mut frame)?;
    out.write_all(&0u32.to_be_bytes())?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(info)
}

/// One page of an export: opened pairs, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPage {
    pub pairs: Vec<u8>,
    pub next_offset: u64,
    pub next_frame: u64,
    /// The export was read to its end (and its file removed).
    pub end: bool,
}

/// Reads frames of export `id` of `group` from byte `offset` (frame number
/// `frame`) until about `max_bytes` of pairs; the file is removed once read
/// to its end.
pub fn read_export(db: &Db, group: u64, id: &str, offset: u64, frame: u64, max_bytes: usize) -> Result<ExportPage> {
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(StorageError::Corrupt(format!("bad export id {id:?}")));
    }
    let path = exports_dir(db).join(format!("{id}.exp"));
    let mut file = File::open(&path).map_err(|e| StorageError::Corrupt(format!("export {id}: {e}")))?;
    file.seek(SeekFrom::Start(offset))?;
    let mut page = ExportPage { pairs: Vec::new(), next_offset: offset, next_frame: frame, end: false };
    while page.pairs.len() < max_bytes {
        let mut len = [0u8; 4];
        file.read_exact(&mut len).map_err(|e| StorageError::Corrupt(format!("truncated export: {e}")))?;
        let len = u32::from_be_bytes(len) as usize;
        page.next_offset += 4;
        if len == 0 {
            page.end = true;
            let _ = fs::remove_file(&path);
            break;
        }
        let mut sealed = vec![0u8; len];
        file.read_exact(&mut sealed).map_err(|e| StorageError::Corrupt(format!("truncated export: {e}")))?;
        page.pairs.extend_from_slice(&db.open(Purpose::Snapshot, &aad(group, page.next_frame), &sealed)?);
        page.next_offset += len as u64;
        page.next_frame += 1;
    }
    Ok(page)
}

/// The backup a restore in progress on this group restores (its `Begin` applied,
/// its `End` not yet): every other write is refused meanwhile.
pub(crate) fn restore_in_progress(data: &GroupData) -> Result<Option<String>> {
    crate::state_machine::read_sm_record::<String>(data, keys::SM_RESTORE)
}

/// The backup whose restore holds this group (its `End { hold: true }`
/// applied, its `Release` not yet): see [`check_hold`].
pub(crate) fn restore_hold(data: &GroupData) -> Result<Option<String>> {
    crate::state_machine::read_sm_record::<String>(data, keys::SM_RESTORE_HOLD)
}

/// Whether a read or write passes this group's restore hold: `Ok(None)` when
/// the group is not held or `pass` names the restore that holds it; otherwise
/// the refusal. (`pass`: the backup id an [`Operation::DuringRestore`] or
/// [`tessera_api::command::Query::DuringRestore`] names.)
pub(crate) fn check_hold(data: &GroupData, pass: Option<&str>) -> Result<Option<tessera_api::error::Rejection>> {
    Ok(match restore_hold(data)? {
        Some(held) if pass != Some(held.as_str()) => Some(tessera_api::error::Rejection::new(
            tessera_api::error::ErrorCode::Unavailable,
            format!(
                "group {} was just restored from backup {held} and is held while the erasures issued after that backup \
                 are re-applied; ask again shortly",
                data.group
            ),
        )),
        _ => None,
    })
}

/// Applies a step of a restore into `batch` (see [`RestoreOp`]). The restore
/// is atomic for the group: `Begin` only marks it in progress (other writes
/// are refused until `End`), `Pairs` are staged in their own space, and `End`
/// replaces the group's records with the staged ones in one batch. Reads see
/// the old records until then; a restore cut off midway (a router crash)
/// leaves them unchanged, and the next `Begin` starts the staging anew.
pub(crate) fn apply_restore(data: &GroupData, batch: &mut WriteBatch, op: &RestoreOp) -> Result<Response> {
    let (db, group) = (&*data.db, data.group);
    let cf = db.cf_handle(CF_DATA).expect("data column family");
    let map_key = keys::data_key(group, space::META, META_MAP_KEY);
    let is_meta = group == tessera_api::META_GROUP;
    let restore_key = keys::data_key(group, keys::SPACE_SM, &[keys::SM_RESTORE]);
    let hold_key = keys::data_key(group, keys::SPACE_SM, &[keys::SM_RESTORE_HOLD]);
    let staged_start = keys::data_key(group, keys::SPACE_RESTORE, &[]);
    let staged_end = keys::data_key(group, keys::SPACE_RESTORE + 1, &[]);
    let conflict = |why: String| Ok(Response::rejected(tessera_api::error::ErrorCode::Conflict, why));
    match op {
        RestoreOp::Begin { backup_id } => {
            batch.delete_range_cf(cf, &staged_start, &staged_end);
            let id = serde_json::to_vec(backup_id)?;
            batch.put_cf(cf, &restore_key, db.seal(Purpose::Data, &restore_key, &id));
            tracing::info!(group, backup_id, "restore: staging the backup's records; other writes wait for its end");
            Ok(Response::Applied(true))
        }
        RestoreOp::Pairs { pairs } => {
            let invalid = |why: String| Ok(Response::rejected(tessera_api::error::ErrorCode::Invalid, why));
            if restore_in_progress(data)?.is_none() {
                return conflict("no restore is in progress on this group (its Begin was not applied)".into());
            }
            let pairs = match tessera_api::backup::decode_pairs(pairs) {
                Ok(pairs) => pairs,
                Err(why) => return invalid(format!("restored records: {why}")),
            };
            if pairs.iter().any(|(rel, _)| rel.is_empty() || rel[0] == keys::SPACE_SM || rel[0] == keys::SPACE_RESTORE) {
                return invalid("a restored record in the state machine's space".into());
            }
            for (rel, value) in pairs {
                if is_meta && keys::data_key(group, rel[0], &rel[1..]) == map_key {
                    continue;
                }
                let key = keys::data_key(group, keys::SPACE_RESTORE, rel);
                batch.put_cf(cf, &key, db.seal(Purpose::Data, &key, value));
            }
            Ok(Response::Applied(true))
        }
        RestoreOp::End { backup_id, hold } => {
            match restore_in_progress(data)? {
                Some(id) if id == *backup_id => {}
                Some(id) => return conflict(format!("the restore in progress on this group is of backup {id}, not {backup_id}")),
                None => return conflict("no restore is in progress on this group".into()),
            }
            // The live records go (the meta group keeps its cluster map), then the
            // staged ones take their place, in this one batch.
            let live_start = keys::data_key(group, keys::SPACE_SM + 1, &[]);
            if is_meta {
                let mut after_map = map_key.clone();
                after_map.push(0);
                batch.delete_range_cf(cf, &live_start, &map_key);
                batch.delete_range_cf(cf, &after_map, &staged_start);
            } else {
                batch.delete_range_cf(cf, &live_start, &staged_start);
            }
            batch.delete_range_cf(cf, &staged_end, &keys::group_end(group));
            let prefix = keys::group_prefix(group);
            let mut records = 0u64;
            for item in db.iterator_cf_opt(cf, keys::bounded(&staged_start, &staged_end), rocksdb::IteratorMode::Start) {
                let (k, v) = item?;
                let value = db.open(Purpose::Data, &k, &v)?;
                let mut key = Vec::with_capacity(k.len() - 1);
                key.extend_from_slice(&prefix);
                key.extend_from_slice(&k[prefix.len() + 1..]);
                batch.put_cf(cf, &key, db.seal(Purpose::Data, &key, &value));
                records += 1;
            }
            batch.delete_range_cf(cf, &staged_start, &staged_end);
            batch.delete_cf(cf, &restore_key);
            if *hold {
                let id = serde_json::to_vec(backup_id)?;
                batch.put_cf(cf, &hold_key, db.seal(Purpose::Data, &hold_key, &id));
                tracing::info!(
                    group,
                    backup_id,
                    records,
                    "restore: done; the group's records are the backup's, held until later erasures are re-applied"
                );
            } else {
                batch.delete_cf(cf, &hold_key);
                tracing::info!(group, backup_id, records, "restore: done; the group's records are the backup's");
            }
            Ok(Response::Applied(true))
        }
        RestoreOp::Release { backup_id } => {
            match restore_hold(data)? {
                Some(id) if id == *backup_id => {
                    batch.delete_cf(cf, &hold_key);
                    tracing::info!(group, backup_id, "restore: the erasures are re-applied; the group answers again");
                }
                Some(id) => return conflict(format!("the group is held by the restore of backup {id}, not {backup_id}")),
                None => {}
            }
            Ok(Response::Applied(true))
        }
    }
}

/// Whether a command is a restore step (the applier rebuilds in-memory state after it).
pub fn is_restore(op: &tessera_api::command::Operation) -> bool {
    matches!(op, tessera_api::command::Operation::Restore(_))
}

#[cfg(test)]
mod tests {
    use crate::Store;

    /// Issue 35, defect 6: after a secure erasure the unread exports of the
    /// erased groups are removed (they hold the erased records); others stay.
    #[test]
    fn the_unread_exports_of_erased_groups_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.reader(7).export("7-00000000000000aa").unwrap();
        store.reader(8).export("8-00000000000000bb").unwrap();
        let exports = dir.path().join("exports");
        assert_eq!(std::fs::read_dir(&exports).unwrap().count(), 2);
        assert_eq!(store.remove_exports_of(&[7]).unwrap(), 1);
        let left: Vec<String> =
            std::fs::read_dir(&exports).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, vec!["8-00000000000000bb.exp".to_string()]);
    }

    /// Issue 35, defect 8: a restore is atomic for its group. Until its `End`,
    /// reads see the old records and other writes are refused (not remembered
    /// for retries); a restore cut off midway changes nothing, and the next
    /// `Begin` starts over; `End` swaps every staged record in at once.
    #[test]
    fn a_restore_replaces_a_group_at_once_and_nothing_interleaves() {
        use tessera_api::command::Response;
        use tessera_api::command::{Command, KvOp, KvQuery, KvQueryResult, Operation, Query, QueryResult, RestoreOp};
        let put = |key: &str, value: i64| Operation::Kv(KvOp::Put { key: key.into(), value: serde_json::json!(value), ttl_secs: None });
        let cmd = |op: Operation| Command { issued_at_ms: 1_000, op, request_id: Some("req-0000000001".into()) };
        let value = |store: &Store, key: &str| match store.reader(1).query(&Query::Kv(KvQuery::Get { key: key.into() }), 2_000).unwrap() {
            QueryResult::Kv(KvQueryResult::Entry(e)) => e.map(|e| e.value),
            other => panic!("{other:?}"),
        };
        // The backup: group 1 of another store holding b = 2.
        let source_dir = tempfile::tempdir().unwrap();
        let source = Store::open(source_dir.path()).unwrap();
        source.state_machine(1).apply_at(1, Command { request_id: None, ..cmd(put("b", 2)) }).unwrap();
        source.reader(1).export("1-0000000000000001").unwrap();
        let pairs = source.reader(1).read_export("1-0000000000000001", 0, 0, usize::MAX).unwrap().pairs;

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let sm = store.state_machine(1);
        sm.apply_at(1, Command { request_id: None, ..cmd(put("a", 1)) }).unwrap();
        let step = |i, op: RestoreOp| sm.apply_at(i, Command { request_id: None, ..cmd(Operation::Restore(op)) }).unwrap();
        let begin = || RestoreOp::Begin { backup_id: "bk".into() };
        // Cut off midway: the old records stand, writes wait.
        assert_eq!(step(2, begin()), Response::Applied(true));
        assert_eq!(step(3, RestoreOp::Pairs { pairs: pairs.clone() }), Response::Applied(true));
        assert_eq!(value(&store, "a"), Some(serde_json::json!(1)));
        assert_eq!(value(&store, "b"), None);
        let refused = sm.apply_at(4, cmd(put("c", 3))).unwrap();
        assert!(matches!(&refused, Response::Rejected(r) if r.message.contains("restore of backup bk is in progress")), "{refused:?}");
        // Started over, then ended: the backup's records, and only them.
        assert_eq!(step(5, begin()), Response::Applied(true));
        assert_eq!(step(6, RestoreOp::Pairs { pairs }), Response::Applied(true));
        assert!(matches!(step(7, RestoreOp::End { backup_id: "other".into(), hold: false }), Response::Rejected(_)));
        assert_eq!(step(8, RestoreOp::End { backup_id: "bk".into(), hold: false }), Response::Applied(true));
        assert_eq!(value(&store, "a"), None);
        assert_eq!(value(&store, "b"), Some(serde_json::json!(2)));
        // The refused request passes now (its refusal was not remembered).
        assert!(matches!(sm.apply_at(9, cmd(put("c", 3))).unwrap(), Response::KvEntry(_)));
        assert_eq!(value(&store, "c"), Some(serde_json::json!(3)));
    }

    /// Issue 37: a restore that ends with `hold` keeps the group from everyone
    /// but itself: reads and writes are refused (503 class, not remembered),
    /// the restore's own (`DuringRestore`) pass and apply as themselves, and
    /// `Release` opens the group again.
    #[test]
    fn a_held_group_answers_only_its_restore_until_released() {
        use tessera_api::command::{Command, KvOp, KvQuery, KvQueryResult, Operation, Query, QueryResult, Response, RestoreOp};
        use tessera_api::error::{ErrorClass, ErrorCode};
        let put = |key: &str, value: i64| Operation::Kv(KvOp::Put { key: key.into(), value: serde_json::json!(value), ttl_secs: None });
        let cmd = |op: Operation| Command { issued_at_ms: 1_000, op, request_id: Some("req-0000000002".into()) };
        let get = |key: &str| Query::Kv(KvQuery::Get { key: key.into() });
        let during = |op: Operation| Operation::DuringRestore { backup_id: "bk".into(), op: Box::new(op) };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let sm = store.state_machine(1);
        let reader = store.reader(1);
        let step = |i, op: RestoreOp| sm.apply_at(i, Command { request_id: None, ..cmd(Operation::Restore(op)) }).unwrap();
        assert_eq!(step(1, RestoreOp::Begin { backup_id: "bk".into() }), Response::Applied(true));
        assert_eq!(step(2, RestoreOp::End { backup_id: "bk".into(), hold: true }), Response::Applied(true));

        let held =
            |r: &QueryResult| matches!(r, QueryResult::Rejected(r) if r.code == ErrorCode::Unavailable && r.message.contains("held"));
        assert!(held(&reader.query(&get("a"), 2_000).unwrap()));
        let refused = sm.apply_at(3, cmd(put("a", 1))).unwrap();
        assert!(matches!(&refused, Response::Rejected(r) if r.code.class() == ErrorClass::Unavailable), "{refused:?}");
        // Another restore's pass does not open it either.
        let other = Query::DuringRestore { backup_id: "other".into(), query: Box::new(get("a")) };
        assert!(held(&reader.query(&other, 2_000).unwrap()));
        // The restore's own write and read pass, as the plain operation.
        assert!(matches!(sm.apply_at(4, Command { request_id: None, ..cmd(during(put("a", 2))) }).unwrap(), Response::KvEntry(_)));
        let own = Query::DuringRestore { backup_id: "bk".into(), query: Box::new(get("a")) };
        assert!(
            matches!(reader.query(&own, 2_000).unwrap(), QueryResult::Kv(KvQueryResult::Entry(Some(e))) if e.value == serde_json::json!(2))
        );

        assert!(matches!(step(5, RestoreOp::Release { backup_id: "other".into() }), Response::Rejected(_)));
        assert_eq!(step(6, RestoreOp::Release { backup_id: "bk".into() }), Response::Applied(true));
        assert!(matches!(reader.query(&get("a"), 2_000).unwrap(), QueryResult::Kv(KvQueryResult::Entry(Some(_)))));
        // The write refused while held passes now (its refusal was not remembered).
        assert!(matches!(sm.apply_at(7, cmd(put("a", 1))).unwrap(), Response::KvEntry(_)));
        // Released twice: nothing to release.
        assert_eq!(step(8, RestoreOp::Release { backup_id: "bk".into() }), Response::Applied(true));
    }
}
