//! Backups of the whole cluster and their restore (docs/operations.md
//! "Backup and restore").
//!
//! A backup is a directory `<backup.dir>/<backup_id>/` this router writes:
//!
//! - `group-<id>.tbk` per group (the meta group and every data group): the
//!   group's records as its leader exported them at one applied index (after a
//!   read-index barrier): `"TBAK1\n" | chunk… | 0 (u32 BE)`, a chunk being
//!   `length (u32 BE) | body`, the body a page of records
//!   (`tessera_api::backup` format) LZ4-compressed, and with `encrypted`
//!   sealed with AES-256-GCM under `backup.key` (the `Backup` purpose of
//!   `tessera_crypt`; associated data: backup id, group and chunk number, so
//!   chunks cannot be reordered, dropped or moved between backups or groups);
//! - `manifest.json`: what the backup holds, each file's size and SHA-256;
//! - `manifest.sha256`: the hex SHA-256 of `manifest.json`.
//!
//! A restore checks the manifest's digest, then every file's size and digest,
//! then opens and decodes every chunk — before anything is written. Then each
//! group's records are replaced through its log (`Operation::Restore`: begin,
//! batches of records, end), data groups first and the meta group last.
//!
//! Erasures outlive restores: every deletion certificate is also appended to
//! `<backup.dir>/erasure-ledger.jsonl` (kept beside the backups, so a new
//! cluster restoring them finds it), and a manifest lists the certificates the
//! cluster held when the backup began (`erasures`). A restore re-applies every
//! certificate of the ledger and of the live cluster that the backup does not
//! hold (see `handlers::backup::restore`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tessera_api::command::{Operation, Response, RestoreOp};
use tessera_api::rpc::{Consistency, FetchExportRequest};
use tessera_api::{GroupId, META_GROUP};
use tessera_crypt::{Crypt, Purpose};

use crate::cluster::{ClusterClient, ClusterError};

const MAGIC: &[u8] = b"TBAK1\n";
/// Bytes of records one export page (and so one chunk) carries at most.
const PAGE_BYTES: u64 = 1024 * 1024;
/// Bytes of records one restore command carries at most.
const RESTORE_BATCH_BYTES: usize = 256 * 1024;
/// The largest chunk a reader accepts.
const MAX_CHUNK: usize = 64 * 1024 * 1024;

/// Errors of backups and restores.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("backup {0} does not exist")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The backup is corrupt, truncated, or not readable with this key.
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("backup directory: {0}")]
    Io(#[from] std::io::Error),
}

/// One group's part of a backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct GroupPart {
    pub group: GroupId,
    /// The log index the group had applied in the backed-up state.
    pub applied_index: u64,
    /// The node whose replica was exported (the group's leader then).
    pub node: u64,
    pub records: u64,
    /// Plaintext bytes of the records' keys and values.
    pub record_bytes: u64,
    pub file: String,
    pub size_bytes: u64,
    pub sha256: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub backup_id: String,
    /// `running` while groups are exported, then `complete` (or `failed`).
    pub state: String,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub encrypted: bool,
    /// `AES-256-GCM` when encrypted, else `none`.
    pub encryption_algorithm: String,
    pub compression: String,
    pub compliance_mode: String,
    /// The cluster's sharding strategy and data groups: a restore needs the same.
    pub strategy: String,
    pub data_groups: Vec<GroupId>,
    /// Range sharding: the key ranges of the data groups (a restore needs the same).
    #[serde(default)]
    pub ranges: serde_json::Value,
    /// Groups exported so far, in order (the meta group first).
    pub groups: Vec<GroupPart>,
    pub groups_total: usize,
    /// Bytes of the group files.
    pub size_bytes: u64,
    pub error: Option<String>,
    /// Ids of the deletion certificates the cluster held when the backup began
    /// (`None`: a backup made before they were recorded; a restore then
    /// re-applies every erasure it knows of).
    #[serde(default)]
    pub erasures: Option<Vec<String>>,
}

/// The file beside the backups that records every deletion certificate issued.
const ERASURE_LEDGER: &str = "erasure-ledger.jsonl";

/// What the API answers for a backup (`POST /api/v1/admin/backup`, `GET
/// /api/v1/admin/backups[/{id}]`); while it runs, `state` is `running` and
/// `groups_done` counts the groups exported so far.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BackupView {
    pub backup_id: String,
    /// `running`, `complete` or `failed`.
    pub state: String,
    pub encrypted: bool,
    /// `AES-256-GCM` when encrypted, else `none`.
    pub encryption_algorithm: String,
    pub compression: String,
    pub compliance_mode: String,
    pub created_at: String,
    pub completed_at: Option<String>,
    /// Bytes of the group files.
    pub size_bytes: u64,
    pub groups_done: usize,
    pub groups_total: usize,
    /// Each group's part: the log index it was exported at, its file and digest.
    pub groups: Vec<GroupPart>,
    pub strategy: String,
    pub error: Option<String>,
    /// What point in time the backup represents.
    pub point_in_time: &'static str,
}

impl Manifest {
    /// What the API answers for a backup.
    pub fn view(&self) -> BackupView {
        BackupView {
            backup_id: self.backup_id.clone(),
            state: self.state.clone(),
            encrypted: self.encrypted,
            encryption_algorithm: self.encryption_algorithm.clone(),
            compression: self.compression.clone(),
            compliance_mode: self.compliance_mode.clone(),
            created_at: self.created_at.clone(),
            completed_at: self.completed_at.clone(),
            size_bytes: self.size_bytes,
            groups_done: self.groups.len(),
            groups_total: self.groups_total,
            groups: self.groups.clone(),
            strategy: self.strategy.clone(),
            error: self.error.clone(),
            point_in_time: "per group: each group's records as of its applied_index (see docs/operations.md)",
        }
    }
}

/// Where backups live and the key of encrypted ones.
pub struct Backups {
    dir: PathBuf,
    crypt: Option<Crypt>,
}

fn now_iso() -> String {
    tessera_api::http::iso8601_ms(tessera_api::command::now_ms())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Associated data of a chunk: backup id, group, chunk number.
fn aad(backup_id: &str, group: GroupId, chunk: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(backup_id.len() + 17);
    a.extend_from_slice(backup_id.as_bytes());
    a.push(0);
    a.extend_from_slice(&group.to_be_bytes());
    a.extend_from_slice(&chunk.to_be_bytes());
    a
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl Backups {
    /// `dir` holds the backups; `key` (a key spec) seals encrypted ones.
    pub fn new(dir: PathBuf, key: Option<&str>) -> Result<Self, String> {
        let crypt = match key.map(str::trim).filter(|k| !k.is_empty()) {
            Some(spec) => Some(Crypt::from_key_spec(spec).map_err(|e| format!("backup.key: {e}"))?),
            None => None,
        };
        Ok(Backups { dir, crypt })
    }

    fn path(&self, id: &str) -> Result<PathBuf, BackupError> {
        if !valid_id(id) {
            return Err(BackupError::NotFound(id.to_string()));
        }
        Ok(self.dir.join(id))
    }

    fn write_manifest(&self, m: &Manifest) -> Result<(), BackupError> {
        let dir = self.path(&m.backup_id)?;
        let bytes = serde_json::to_vec_pretty(m).map_err(|e| BackupError::Corrupt(e.to_string()))?;
        let tmp = dir.join("manifest.json.part");
        std::fs::write(&tmp, &bytes)?;
        std::fs::write(dir.join("manifest.sha256"), sha256_hex(&bytes))?;
        std::fs::rename(tmp, dir.join("manifest.json"))?;
        Ok(())
    }

    /// Appends a deletion certificate to the erasure ledger beside the backups
    /// (synced before answering).
    pub fn record_erasure(&self, certificate: &serde_json::Value) -> Result<(), BackupError> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(ERASURE_LEDGER))?;
        let mut line = serde_json::to_vec(certificate).map_err(|e| BackupError::Corrupt(e.to_string()))?;
        line.push(b'\n');
        file.write_all(&line)?;
        file.sync_all()?;
        Ok(())
    }

    /// Every certificate of the erasure ledger (a line that does not parse, as a
    /// torn last write, is skipped with a warning).
    pub fn erasure_ledger(&self) -> Vec<serde_json::Value> {
        let Ok(text) = std::fs::read_to_string(self.dir.join(ERASURE_LEDGER)) else { return Vec::new() };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| match serde_json::from_str(l) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!("erasure ledger: a line does not parse: {e}");
                    None
                }
            })
            .collect()
    }

    /// The manifest of backup `id`, its digest checked.
    pub fn manifest(&self, id: &str) -> Result<Manifest, BackupError> {
        let dir = self.path(id)?;
        let bytes = match std::fs::read(dir.join("manifest.json")) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BackupError::NotFound(id.to_string())),
            Err(e) => return Err(e.into()),
        };
        let digest = std::fs::read_to_string(dir.join("manifest.sha256")).unwrap_or_default();
        if digest.trim() != sha256_hex(&bytes) {
            return Err(BackupError::Corrupt(format!("backup {id}: manifest.json does not match its digest (manifest.sha256)")));
        }
        serde_json::from_slice(&bytes).map_err(|e| BackupError::Corrupt(format!("backup {id}: manifest.json: {e}")))
    }

    /// Every backup in the directory, newest first (unreadable ones are skipped).
    pub fn list(&self) -> Vec<Manifest> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut all: Vec<Manifest> =
            entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|id| self.manifest(id).ok())).collect();
        all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.backup_id.cmp(&a.backup_id)));
        all
    }

    /// Deletes backup `id`.
    pub fn delete(&self, id: &str) -> Result<(), BackupError> {
        self.manifest(id)?;
        std::fs::remove_dir_all(self.path(id)?)?;
        Ok(())
    }

    /// Backs up every group of the cluster (see the module documentation).
    pub async fn create(
        &self,
        cluster: &dyn ClusterClient,
        encrypted: bool,
        compliance_mode: &str,
        erasures: Vec<String>,
    ) -> Result<Manifest, BackupError> {
        if encrypted && self.crypt.is_none() {
            return Err(BackupError::BadRequest(
                "an encrypted backup needs the router's backup key: set SERVICE_BACKUP_KEY (or SERVICE_ENCRYPTION_KEY)".into(),
            ));
        }
        let map = cluster.map().ok_or_else(|| ClusterError::Unavailable("the cluster map is not known yet".into()))?;
        let rand: u32 = rand::random();
        let stamp = chrono::DateTime::from_timestamp_millis(tessera_api::command::now_ms()).map(|t| t.format("%Y%m%d%H%M%S").to_string());
        let backup_id = format!("bkp-{}-{rand:08x}", stamp.unwrap_or_default());
        let dir = self.dir.join(&backup_id);
        std::fs::create_dir_all(&dir)?;
        let mut groups: Vec<GroupId> = map.groups.iter().map(|g| g.id).collect();
        groups.sort_unstable();
        let mut manifest = Manifest {
            backup_id: backup_id.clone(),
            state: "running".into(),
            created_at: now_iso(),
            completed_at: None,
            encrypted,
            encryption_algorithm: if encrypted { "AES-256-GCM" } else { "none" }.into(),
            compression: "lz4".into(),
            compliance_mode: compliance_mode.to_string(),
            strategy: format!("{:?}", map.strategy).to_lowercase(),
            data_groups: map.data_groups(),
            ranges: serde_json::to_value(&map.ranges).unwrap_or_default(),
            groups: Vec::new(),
            groups_total: groups.len(),
            size_bytes: 0,
            error: None,
            erasures: Some(erasures),
        };
        self.write_manifest(&manifest)?;
        let started = Instant::now();
        for group in groups {
            match self.back_up_group(cluster, &dir, &backup_id, group, encrypted).await {
                Ok(part) => {
                    manifest.size_bytes += part.size_bytes;
                    manifest.groups.push(part);
                    self.write_manifest(&manifest)?;
                }
                Err(e) => {
                    manifest.state = "failed".into();
                    manifest.error = Some(e.to_string());
                    self.write_manifest(&manifest)?;
                    return Err(e);
                }
            }
        }
        manifest.state = "complete".into();
        manifest.completed_at = Some(now_iso());
        self.write_manifest(&manifest)?;
        tracing::info!(
            backup = backup_id,
            groups = manifest.groups.len(),
            bytes = manifest.size_bytes,
            took_ms = started.elapsed().as_millis() as u64,
            "backup complete"
        );
        Ok(manifest)
    }

    async fn back_up_group(
        &self,
        cluster: &dyn ClusterClient,
        dir: &Path,
        backup_id: &str,
        group: GroupId,
        encrypted: bool,
    ) -> Result<GroupPart, BackupError> {
        let (node, export) = cluster.export_group(group).await?;
        let file = format!("group-{group}.tbk");
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(&file))?);
        let mut digest = Sha256::new();
        let mut size = 0u64;
        let mut put = |out: &mut std::io::BufWriter<std::fs::File>, bytes: &[u8]| -> std::io::Result<()> {
            digest.update(bytes);
            size += bytes.len() as u64;
            out.write_all(bytes)
        };
        put(&mut out, MAGIC)?;
        let (mut offset, mut frame, mut chunk) = (0u64, 0u64, 0u64);
        loop {
            let req = FetchExportRequest { group_id: group, export_id: export.export_id.clone(), offset, frame, max_bytes: PAGE_BYTES };
            let page = cluster.fetch_export(&node, req).await?;
            if !page.pairs.is_empty() {
                let body = if encrypted {
                    let crypt = self.crypt.as_ref().expect("checked before the backup started");
                    crypt.seal(Purpose::Backup, &aad(backup_id, group, chunk), &page.pairs)
                } else {
                    lz4_flex::block::compress_prepend_size(&page.pairs)
                };
                put(&mut out, &(body.len() as u32).to_be_bytes())?;
                put(&mut out, &body)?;
                chunk += 1;
            }
            (offset, frame) = (page.next_offset, page.next_frame);
            if page.end {
                break;
            }
        }
        put(&mut out, &0u32.to_be_bytes())?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(GroupPart {
            group,
            applied_index: export.applied_index,
            node: node.id,
            records: export.pairs,
            record_bytes: export.bytes,
            file,
            size_bytes: size,
            sha256: hex::encode(digest.finalize()),
        })
    }

    /// Reads a group file's chunks (its size and digest checked against the
    /// manifest first), opened: each a run of records.
    fn read_group(&self, m: &Manifest, part: &GroupPart) -> Result<Vec<Vec<u8>>, BackupError> {
        let corrupt = |why: String| BackupError::Corrupt(format!("backup {}: {}: {why}", m.backup_id, part.file));
        if !part.file.starts_with("group-") || part.file.contains('/') {
            return Err(corrupt("not a group file".into()));
        }
        let bytes = std::fs::read(self.path(&m.backup_id)?.join(&part.file)).map_err(|e| corrupt(e.to_string()))?;
        if bytes.len() as u64 != part.size_bytes {
            return Err(corrupt(format!("{} bytes, the manifest says {} (truncated?)", bytes.len(), part.size_bytes)));
        }
        if sha256_hex(&bytes) != part.sha256 {
            return Err(corrupt("its SHA-256 does not match the manifest (altered or damaged)".into()));
        }
        let mut rest = bytes.strip_prefix(MAGIC).ok_or_else(|| corrupt("not a Tessera backup file".into()))?;
        let mut chunks = Vec::new();
        let mut records = 0u64;
        loop {
            let mut len = [0u8; 4];
            rest.read_exact(&mut len).map_err(|_| corrupt("truncated".into()))?;
            let len = u32::from_be_bytes(len) as usize;
            if len == 0 {
                break;
            }
            if len > MAX_CHUNK || rest.len() < len {
                return Err(corrupt("truncated chunk".into()));
            }
            let (body, tail) = rest.split_at(len);
            rest = tail;
            let pairs = if m.encrypted {
                let crypt = self.crypt.as_ref().ok_or_else(|| {
                    BackupError::BadRequest(format!(
                        "backup {} is encrypted: restoring it needs the router's backup key (SERVICE_BACKUP_KEY)",
                        m.backup_id
                    ))
                })?;
                crypt
                    .open(Purpose::Backup, &aad(&m.backup_id, part.group, chunks.len() as u64), body)
                    .map_err(|e| corrupt(format!("chunk {}: {e}", chunks.len())))?
            } else {
                lz4_flex::block::decompress_size_prepended(body).map_err(|e| corrupt(format!("chunk {}: {e}", chunks.len())))?
            };
            let decoded = tessera_api::backup::decode_pairs(&pairs).map_err(|e| corrupt(format!("chunk {}: {e}", chunks.len())))?;
            if decoded.iter().any(|(k, _)| k[0] == 0) {
                return Err(corrupt("a record of the state machine's own space".into()));
            }
            records += decoded.len() as u64;
            chunks.push(pairs);
        }
        if !rest.is_empty() {
            return Err(corrupt("bytes after the end marker".into()));
        }
        if records != part.records {
            return Err(corrupt(format!("{records} records, the manifest says {}", part.records)));
        }
        Ok(chunks)
    }

    /// Restores backup `id` into this cluster (see the module documentation);
    /// answers what was restored. Nothing is written unless every file checks out.
    ///
    /// With `hold`, each data group stays held after its swap (it answers only
    /// this restore's own reads and writes, see [`crate::cluster::as_restore`])
    /// until [`Backups::release`]: the caller re-applies later erasures first.
    pub async fn restore(&self, cluster: &dyn ClusterClient, id: &str, hold: bool) -> Result<Restored, BackupError> {
        let started = Instant::now();
        let m = self.manifest(id)?;
        if m.state != "complete" {
            return Err(BackupError::Conflict(format!("backup {id} is {}: only a complete backup can be restored", m.state)));
        }
        let map = cluster.map().ok_or_else(|| ClusterError::Unavailable("the cluster map is not known yet".into()))?;
        let strategy = format!("{:?}", map.strategy).to_lowercase();
        if strategy != m.strategy || map.data_groups() != m.data_groups {
            return Err(BackupError::Conflict(format!(
                "backup {id} holds {} data groups {:?} ({} sharding); this cluster has {:?} ({strategy}): restore into a \
                 cluster started with the same shard_count and sharding strategy",
                m.data_groups.len(),
                m.data_groups,
                m.strategy,
                map.data_groups()
            )));
        }
        let ranges = serde_json::to_value(&map.ranges).unwrap_or_default();
        if m.ranges != ranges && !(m.ranges.is_null() && map.ranges.is_empty()) {
            return Err(BackupError::Conflict(format!(
                "backup {id} was taken with key ranges {} ; this cluster's are {ranges}: restore into a cluster whose ranges split at the same keys",
                m.ranges
            )));
        }
        // Every file is read, checked and decoded before anything is written.
        let mut parts = Vec::with_capacity(m.groups.len());
        for part in &m.groups {
            parts.push((part, self.read_group(&m, part)?));
        }
        if parts.len() != m.groups_total {
            return Err(BackupError::Corrupt(format!("backup {id}: {} of {} groups", parts.len(), m.groups_total)));
        }
        // Data groups first, the meta group (users, roles, vault) last.
        parts.sort_by_key(|(p, _)| (p.group == META_GROUP, p.group));
        let mut restored = Vec::new();
        for (part, chunks) in parts {
            let write = |op: RestoreOp| async move {
                match cluster.write(part.group, &Operation::Restore(op), Consistency::Quorum).await?.value {
                    Response::Rejected(r) => Err(BackupError::Corrupt(format!("group {} refused the restore: {}", part.group, r.message))),
                    _ => Ok(()),
                }
            };
            write(RestoreOp::Begin { backup_id: id.to_string() }).await?;
            for chunk in &chunks {
                let pairs = tessera_api::backup::decode_pairs(chunk).map_err(BackupError::Corrupt)?;
                let mut batch = Vec::new();
                for (k, v) in pairs {
                    tessera_api::backup::push_pair(&mut batch, k, v);
                    if batch.len() >= RESTORE_BATCH_BYTES {
                        write(RestoreOp::Pairs { pairs: std::mem::take(&mut batch) }).await?;
                    }
                }
                if !batch.is_empty() {
                    write(RestoreOp::Pairs { pairs: batch }).await?;
                }
            }
            write(RestoreOp::End { backup_id: id.to_string(), hold: hold && part.group != META_GROUP }).await?;
            restored.push(RestoredGroup { group: part.group, records: part.records, applied_index_in_backup: part.applied_index });
        }
        tracing::info!(backup = id, groups = restored.len(), took_ms = started.elapsed().as_millis() as u64, "backup restored");
        Ok(Restored {
            backup_id: id.to_string(),
            restored: true,
            groups: restored,
            held: hold,
            took_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Lifts the hold a `restore(…, hold: true)` of backup `id` left on every
    /// data group (a group not held is left as it is).
    pub async fn release(&self, cluster: &dyn ClusterClient, id: &str) -> Result<(), BackupError> {
        let groups = cluster.data_groups()?;
        let releases = groups.iter().map(|&group| async move {
            let op = Operation::Restore(RestoreOp::Release { backup_id: id.to_string() });
            match cluster.write(group, &op, Consistency::Quorum).await?.value {
                Response::Rejected(r) => Err(BackupError::Conflict(format!("group {group} was not released: {}", r.message))),
                _ => Ok(()),
            }
        });
        futures::future::try_join_all(releases).await.map(|_| ())
    }
}

/// A group brought back by a restore.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RestoredGroup {
    pub group: GroupId,
    pub records: u64,
    /// The group's applied index when the backup was taken.
    pub applied_index_in_backup: u64,
}

/// What a restore brought back.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Restored {
    pub backup_id: String,
    pub restored: bool,
    pub groups: Vec<RestoredGroup>,
    /// Whether the data groups were held (answering 503) until the erasures
    /// issued after the backup were re-applied.
    pub held: bool,
    pub took_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_associated_data_differs_by_backup_group_and_number() {
        assert_ne!(aad("a", 1, 0), aad("a", 1, 1));
        assert_ne!(aad("a", 1, 0), aad("a", 2, 0));
        assert_ne!(aad("a", 1, 0), aad("b", 1, 0));
        assert!(valid_id("bkp-20261127-00ab") && !valid_id("../etc") && !valid_id(""));
    }
}
