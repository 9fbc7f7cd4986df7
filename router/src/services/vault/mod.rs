//! The built-in secrets vault.
//!
//! Everything durable lives in the meta group, so every router shares it and it
//! survives restarts: the data key wrapped under a passphrase-derived key
//! (Argon2id + AES-256-GCM) with a check value, the secrets' ciphertexts, the
//! access policies, the audit trail and a seal epoch. The unwrapped data key
//! lives only in this router's memory ([`Vault`]); each router is unsealed by its
//! own `SERVICE_VAULT_PASSPHRASE` at start or an unseal call, while a seal is
//! cluster-wide (it raises the seal epoch, and every router drops a key
//! unsealed before it on its next vault operation). See `docs/secrets-vault.md`.

pub mod crypto;
pub mod policy;
pub mod unseal;

use std::sync::RwLock;

use serde_json::Value;
use tessera_api::command::{MetaOp, MetaQuery, MetaQueryResult, Response};
use tessera_api::meta::{VaultAuditRecord, VaultCapability, VaultKeyRecord, VaultPolicyRecord, VaultSecretRecord};
use zeroize::Zeroizing;

use crate::cluster::{ClusterClient, ClusterError};
use policy::Subject;

/// Largest secret value (its JSON encoding).
pub const MAX_SECRET_BYTES: usize = 64 * 1024;
/// Longest secret path.
pub const MAX_PATH_BYTES: usize = 512;
/// Shortest passphrase accepted when the vault is created.
pub const MIN_NEW_PASSPHRASE: usize = 12;

/// Why a vault operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the vault is sealed: unseal it with POST /api/v1/admin/vault/unseal {{passphrase}} or SERVICE_VAULT_PASSPHRASE")]
    Sealed,
    #[error("wrong passphrase: the vault stays sealed (the failure is recorded in the vault audit)")]
    WrongPassphrase,
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("vault internal error: {0}")]
    Internal(String),
}

type Result<T, E = VaultError> = std::result::Result<T, E>;

/// The unsealed state of this router.
struct Unsealed {
    key: crypto::Key,
    key_id: String,
    /// The cluster's seal epoch when this router unsealed.
    epoch: u64,
}

/// What `status` reports.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    pub initialized: bool,
    pub sealed: bool,
}

/// The outcome of a successful unseal.
#[derive(Debug, Clone, Copy)]
pub struct UnsealOutcome {
    /// The vault was created by this unseal (first use).
    pub created: bool,
}

/// Who performs a vault operation.
#[derive(Debug, Clone)]
pub struct Actor {
    /// A username, or `environment` for the unseal at router start.
    pub name: String,
    /// Set for users: what policies are checked against.
    pub subject: Option<Subject>,
}

impl Actor {
    /// The router itself, unsealing with `SERVICE_VAULT_PASSPHRASE`.
    pub fn environment() -> Actor {
        Actor { name: "environment".into(), subject: None }
    }
}

/// A decrypted secret.
#[derive(Debug)]
pub struct Secret {
    pub record: VaultSecretRecord,
    pub value: Value,
}

/// This router's view of the vault.
pub struct Vault {
    unsealed: RwLock<Option<Unsealed>>,
    default_deny: bool,
    /// `host:port` of this router, recorded in audit events.
    router: String,
}

/// Checks a secret path: 1 to 512 bytes of `/`-separated segments of
/// `A-Z a-z 0-9 . _ -`, none empty, `.` or `..`.
pub fn check_path(path: &str) -> Result<()> {
    let ok = !path.is_empty()
        && path.len() <= MAX_PATH_BYTES
        && path.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(VaultError::Invalid(format!(
            "a secret path is 1 to {MAX_PATH_BYTES} bytes of '/'-separated segments of letters, digits, '.', '_' and '-' \
             (no empty, '.' or '..' segment)"
        )))
    }
}

/// Checks a policy name: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn check_policy_name(name: &str) -> Result<()> {
    if !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        Ok(())
    } else {
        Err(VaultError::Invalid("a policy name is 1 to 64 letters, digits, '.', '_' or '-'".into()))
    }
}

fn new_id() -> String {
    hex::encode(crypto::random_bytes::<16>())
}

fn unexpected(what: &str, other: impl std::fmt::Debug) -> VaultError {
    // Only the variant name: replies may hold ciphertexts and key material.
    let shape = format!("{other:?}");
    let variant = shape.split(['(', ' ', '{']).next().unwrap_or_default().to_string();
    VaultError::Internal(format!("unexpected reply to {what}: {variant}"))
}

impl Vault {
    /// A sealed vault for this router.
    pub fn new(default_deny: bool, router: String) -> Vault {
        Vault { unsealed: RwLock::new(None), default_deny, router }
    }

    /// Whether every secret operation needs a policy grant.
    pub fn default_deny(&self) -> bool {
        self.default_deny
    }

    fn drop_key(&self) {
        *self.unsealed.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    async fn state(&self, cluster: &dyn ClusterClient) -> Result<(Option<VaultKeyRecord>, u64)> {
        match cluster.meta_read(MetaQuery::VaultState).await? {
            MetaQueryResult::VaultState { key, seal_epoch } => Ok((key, seal_epoch)),
            other => Err(unexpected("VaultState", other)),
        }
    }

    async fn write(&self, cluster: &dyn ClusterClient, op: MetaOp) -> Result<Response> {
        match cluster.meta_write(op).await? {
            Response::Rejected(r) => match r.code {
                tessera_api::error::ErrorCode::NotFound => Err(VaultError::NotFound(r.message)),
                _ => Err(VaultError::Invalid(r.message)),
            },
            r => Ok(r),
        }
    }

    /// Appends an audit record.
    async fn audit(
        &self,
        cluster: &dyn ClusterClient,
        actor: &Actor,
        event: &str,
        path: Option<&str>,
        success: bool,
        detail: &str,
    ) -> Result<()> {
        let record = VaultAuditRecord {
            id: new_id(),
            at_ms: 0, // set by the meta group
            event: event.into(),
            actor: actor.name.clone(),
            router: self.router.clone(),
            path: path.map(Into::into),
            success,
            detail: detail.into(),
        };
        self.write(cluster, MetaOp::VaultAudit(record)).await.map(|_| ())
    }

    /// The data key, if this router is unsealed and no seal happened since.
    async fn key(&self, cluster: &dyn ClusterClient) -> Result<(crypto::Key, String)> {
        let (record, epoch) = self.state(cluster).await?;
        self.current_key(record.as_ref(), epoch)
    }

    /// The data key given the cluster's vault state; drops a stale one.
    fn current_key(&self, record: Option<&VaultKeyRecord>, epoch: u64) -> Result<(crypto::Key, String)> {
        let guard = self.unsealed.read().unwrap_or_else(|e| e.into_inner());
        let Some(u) = guard.as_ref() else { return Err(VaultError::Sealed) };
        let current = record.is_some_and(|r| r.key_id == u.key_id) && epoch <= u.epoch;
        if !current {
            drop(guard);
            self.drop_key();
            return Err(VaultError::Sealed);
        }
        Ok((Zeroizing::new(*u.key), u.key_id.clone()))
    }

    /// Whether the vault exists and whether this router holds its key.
    pub async fn status(&self, cluster: &dyn ClusterClient) -> Result<Status> {
        let (record, epoch) = self.state(cluster).await?;
        let sealed = match self.current_key(record.as_ref(), epoch) {
            Ok(_) => false,
            Err(VaultError::Sealed) => true,
            Err(e) => return Err(e),
        };
        Ok(Status { initialized: record.is_some(), sealed })
    }

    /// Unseals this router with `passphrase`. The first unseal of the cluster
    /// creates the data key; later ones only unwrap the stored key, so a wrong
    /// passphrase changes nothing but the audit trail.
    pub async fn unseal(&self, cluster: &dyn ClusterClient, passphrase: &str, actor: &Actor) -> Result<UnsealOutcome> {
        let (record, epoch) = self.state(cluster).await?;
        let (record, created) = match record {
            Some(r) => (r, false),
            None => {
                if passphrase.chars().count() < MIN_NEW_PASSPHRASE {
                    return Err(VaultError::Invalid(format!(
                        "the vault is not initialized yet: its passphrase must have at least {MIN_NEW_PASSPHRASE} characters"
                    )));
                }
                let fresh = create_key_record(passphrase.to_string()).await?;
                match self.write(cluster, MetaOp::VaultInit(fresh.clone())).await? {
                    Response::Applied(true) => {
                        self.audit(cluster, actor, "initialized", None, true, &format!("data key {}", fresh.key_id)).await?;
                        (fresh, true)
                    }
                    // Another router created it first: unseal against that one.
                    _ => match self.state(cluster).await?.0 {
                        Some(r) => (r, false),
                        None => return Err(VaultError::Internal("the vault key vanished".into())),
                    },
                }
            }
        };
        let pass = Zeroizing::new(passphrase.to_string());
        let rec = record.clone();
        let key = tokio::task::spawn_blocking(move || -> Option<crypto::Key> {
            let kek = crypto::derive_kek(&pass, &rec.salt, rec.kdf_m_kib, rec.kdf_t, rec.kdf_p).ok()?;
            let key = crypto::unwrap(&kek, &rec.wrap_nonce, &rec.wrapped_key).ok()?;
            crypto::verify_check(&key, &rec.check_nonce, &rec.check).then_some(key)
        })
        .await
        .map_err(|e| VaultError::Internal(e.to_string()))?;
        let Some(key) = key else {
            self.audit(cluster, actor, "unseal_failed", None, false, "wrong passphrase; the vault stays sealed and its key is unchanged")
                .await?;
            return Err(VaultError::WrongPassphrase);
        };
        *self.unsealed.write().unwrap_or_else(|e| e.into_inner()) = Some(Unsealed { key, key_id: record.key_id.clone(), epoch });
        self.audit(cluster, actor, "unsealed", None, true, &format!("router {} holds data key {}", self.router, record.key_id)).await?;
        Ok(UnsealOutcome { created })
    }

    /// Changes the vault's passphrase without downtime: the data key stays
    /// (every secret reads as before; unsealed routers stay unsealed), only its
    /// wrapping is replaced by one under `new` (fresh salt). Needs the current
    /// passphrase; a router (re)started later unseals with the new one only.
    pub async fn rekey(&self, cluster: &dyn ClusterClient, current: &str, new: &str, actor: &Actor) -> Result<String> {
        if new.chars().count() < MIN_NEW_PASSPHRASE {
            return Err(VaultError::Invalid(format!("the new passphrase must have at least {MIN_NEW_PASSPHRASE} characters")));
        }
        if new == current {
            return Err(VaultError::Invalid("the new passphrase is the current one".into()));
        }
        let Some(record) = self.state(cluster).await?.0 else {
            return Err(VaultError::Invalid("the vault is not initialized: unseal it first to create it".into()));
        };
        let (current, new) = (Zeroizing::new(current.to_string()), Zeroizing::new(new.to_string()));
        let old = record.clone();
        let rewrapped = tokio::task::spawn_blocking(move || -> Option<VaultKeyRecord> {
            let kek = crypto::derive_kek(&current, &old.salt, old.kdf_m_kib, old.kdf_t, old.kdf_p).ok()?;
            let key = crypto::unwrap(&kek, &old.wrap_nonce, &old.wrapped_key).ok()?;
            if !crypto::verify_check(&key, &old.check_nonce, &old.check) {
                return None;
            }
            let wrapping = wrap_under(&new, &key).ok()?;
            Some(wrapping.into_record(old))
        })
        .await
        .map_err(|e| VaultError::Internal(e.to_string()))?;
        let Some(rewrapped) = rewrapped else {
            self.audit(cluster, actor, "rekey_failed", None, false, "wrong current passphrase; the passphrase is unchanged").await?;
            return Err(VaultError::WrongPassphrase);
        };
        let op = MetaOp::VaultRekey { expected_wrapped_key: record.wrapped_key.clone(), key: rewrapped };
        match self.write(cluster, op).await? {
            Response::Applied(true) => {
                self.audit(cluster, actor, "rekeyed", None, true, &format!("data key {} wrapped under a new passphrase", record.key_id))
                    .await?;
                Ok(record.key_id)
            }
            _ => Err(VaultError::Conflict("the passphrase was changed meanwhile by another request; nothing was changed".into())),
        }
    }

    /// Seals the vault on every router: raises the seal epoch and drops this
    /// router's key at once (the others drop theirs on their next vault call).
    pub async fn seal(&self, cluster: &dyn ClusterClient, actor: &Actor) -> Result<()> {
        self.drop_key();
        self.write(cluster, MetaOp::VaultSeal).await?;
        self.drop_key();
        self.audit(cluster, actor, "sealed", None, true, "every router dropped its data key").await
    }

    async fn policies(&self, cluster: &dyn ClusterClient) -> Result<Vec<VaultPolicyRecord>> {
        match cluster.meta_read(MetaQuery::VaultPolicies).await? {
            MetaQueryResult::VaultPolicies(p) => Ok(p),
            other => Err(unexpected("VaultPolicies", other)),
        }
    }

    /// Under default-deny, requires a policy granting `cap` on `path`.
    async fn authorize(&self, cluster: &dyn ClusterClient, actor: &Actor, path: &str, cap: VaultCapability) -> Result<()> {
        if !self.default_deny {
            return Ok(());
        }
        let allowed = match &actor.subject {
            Some(s) => policy::allows(&self.policies(cluster).await?, s, path, cap),
            None => false,
        };
        if allowed {
            return Ok(());
        }
        let what = format!("{cap:?}").to_lowercase();
        self.audit(cluster, actor, "access_denied", Some(path), false, &format!("no policy grants {what}")).await?;
        Err(VaultError::Denied(format!("vault default-deny: no access policy grants {} the {what} capability on {path}", actor.name)))
    }

    /// Stores a secret (encrypted); true when it was created.
    pub async fn put(&self, cluster: &dyn ClusterClient, actor: &Actor, path: &str, value: &Value) -> Result<bool> {
        check_path(path)?;
        let plain = Zeroizing::new(serde_json::to_vec(value).map_err(|e| VaultError::Invalid(e.to_string()))?);
        if plain.len() > MAX_SECRET_BYTES {
            return Err(VaultError::Invalid(format!("a secret value is at most {MAX_SECRET_BYTES} bytes of JSON")));
        }
        let (key, key_id) = self.key(cluster).await?;
        self.authorize(cluster, actor, path, VaultCapability::Write).await?;
        let (nonce, ciphertext) = crypto::seal(&key, &plain, &crypto::secret_aad(path)).map_err(|e| VaultError::Internal(e.to_string()))?;
        let record = VaultSecretRecord {
            path: path.into(),
            key_id,
            nonce,
            ciphertext,
            version: 0,
            created_at_ms: 0,
            updated_at_ms: 0,
            updated_by: actor.name.clone(),
        };
        let created = matches!(self.write(cluster, MetaOp::VaultPutSecret(record)).await?, Response::Applied(true));
        self.audit(cluster, actor, "secret_written", Some(path), true, if created { "created" } else { "replaced" }).await?;
        Ok(created)
    }

    /// Reads and decrypts a secret.
    pub async fn get(&self, cluster: &dyn ClusterClient, actor: &Actor, path: &str) -> Result<Secret> {
        check_path(path)?;
        let (key, key_id) = self.key(cluster).await?;
        self.authorize(cluster, actor, path, VaultCapability::Read).await?;
        let record = match cluster.meta_read(MetaQuery::VaultSecret { path: path.into() }).await? {
            MetaQueryResult::VaultSecret(Some(r)) => r,
            MetaQueryResult::VaultSecret(None) => return Err(VaultError::NotFound(format!("no secret at {path}"))),
            other => return Err(unexpected("VaultSecret", other)),
        };
        if record.key_id != key_id {
            return Err(VaultError::Internal(format!("the secret at {path} is encrypted under another data key")));
        }
        let plain = crypto::open(&key, &record.nonce, &record.ciphertext, &crypto::secret_aad(path))
            .map_err(|_| VaultError::Internal(format!("the secret at {path} failed authentication")))?;
        let value = serde_json::from_slice(&plain).map_err(|_| VaultError::Internal(format!("the secret at {path} is not JSON")))?;
        self.audit(cluster, actor, "secret_read", Some(path), true, "").await?;
        Ok(Secret { record, value })
    }

    /// The paths of the secrets under `prefix` (those the caller may list
    /// under default-deny).
    pub async fn list(&self, cluster: &dyn ClusterClient, actor: &Actor, prefix: &str) -> Result<Vec<String>> {
        if prefix.len() > MAX_PATH_BYTES {
            return Err(VaultError::Invalid(format!("prefix is at most {MAX_PATH_BYTES} bytes")));
        }
        self.key(cluster).await?;
        let records = match cluster.meta_read(MetaQuery::VaultSecrets { prefix: prefix.into() }).await? {
            MetaQueryResult::VaultSecrets(r) => r,
            other => return Err(unexpected("VaultSecrets", other)),
        };
        let mut paths: Vec<String> = records.into_iter().map(|r| r.path).collect();
        if self.default_deny {
            let policies = self.policies(cluster).await?;
            let granted = actor.subject.as_ref().is_some_and(|s| policy::grants_any(&policies, s, VaultCapability::List));
            if !granted {
                self.authorize(cluster, actor, if prefix.is_empty() { "*" } else { prefix }, VaultCapability::List).await?;
            }
            paths.retain(|p| actor.subject.as_ref().is_some_and(|s| policy::allows(&policies, s, p, VaultCapability::List)));
        }
        self.audit(cluster, actor, "secrets_listed", Some(prefix), true, &format!("{} paths", paths.len())).await?;
        Ok(paths)
    }

    /// Deletes a secret.
    pub async fn delete(&self, cluster: &dyn ClusterClient, actor: &Actor, path: &str) -> Result<()> {
        check_path(path)?;
        self.key(cluster).await?;
        self.authorize(cluster, actor, path, VaultCapability::Delete).await?;
        match self.write(cluster, MetaOp::VaultDeleteSecret { path: path.into() }).await? {
            Response::Deleted(1) => self.audit(cluster, actor, "secret_deleted", Some(path), true, "").await,
            Response::Deleted(_) => Err(VaultError::NotFound(format!("no secret at {path}"))),
            other => Err(unexpected("VaultDeleteSecret", other)),
        }
    }

    /// Every access policy.
    pub async fn list_policies(&self, cluster: &dyn ClusterClient) -> Result<Vec<VaultPolicyRecord>> {
        self.policies(cluster).await
    }

    /// Creates or replaces a policy; true when created.
    pub async fn put_policy(&self, cluster: &dyn ClusterClient, actor: &Actor, policy: VaultPolicyRecord) -> Result<bool> {
        check_policy_name(&policy.name)?;
        if policy.username.is_some() == policy.role.is_some() {
            return Err(VaultError::Invalid("a policy names exactly one of username or role".into()));
        }
        if policy.username.as_deref().is_some_and(str::is_empty) || policy.role.as_deref().is_some_and(str::is_empty) {
            return Err(VaultError::Invalid("username or role must not be empty".into()));
        }
        if policy.paths.is_empty() || policy.paths.len() > 100 {
            return Err(VaultError::Invalid("paths must list 1 to 100 path patterns".into()));
        }
        for p in &policy.paths {
            policy::check_pattern(p).map_err(VaultError::Invalid)?;
        }
        if policy.capabilities.is_empty() {
            return Err(VaultError::Invalid("capabilities must list at least one of read, write, list, delete".into()));
        }
        let name = policy.name.clone();
        let created = matches!(self.write(cluster, MetaOp::VaultPutPolicy(policy)).await?, Response::Applied(true));
        self.audit(cluster, actor, "policy_written", None, true, &format!("policy {name}")).await?;
        Ok(created)
    }

    /// Deletes a policy.
    pub async fn delete_policy(&self, cluster: &dyn ClusterClient, actor: &Actor, name: &str) -> Result<()> {
        check_policy_name(name)?;
        self.write(cluster, MetaOp::VaultDeletePolicy { name: name.into() }).await?;
        self.audit(cluster, actor, "policy_deleted", None, true, &format!("policy {name}")).await
    }

    /// The newest `limit` audit records, newest first.
    pub async fn audit_trail(&self, cluster: &dyn ClusterClient, limit: usize) -> Result<Vec<VaultAuditRecord>> {
        match cluster.meta_read(MetaQuery::VaultAudit { limit }).await? {
            MetaQueryResult::VaultAudit(r) => Ok(r),
            other => Err(unexpected("VaultAudit", other)),
        }
    }
}

/// A data key's wrapping under a passphrase: a fresh salt, the Argon2id
/// parameters, and the key sealed under the key they derive.
struct Wrapping {
    salt: Vec<u8>,
    wrap_nonce: Vec<u8>,
    wrapped_key: Vec<u8>,
}

impl Wrapping {
    /// `record` with this wrapping (and the current KDF parameters).
    fn into_record(self, record: VaultKeyRecord) -> VaultKeyRecord {
        VaultKeyRecord {
            kdf_m_kib: crypto::KDF_M_KIB,
            kdf_t: crypto::KDF_T,
            kdf_p: crypto::KDF_P,
            salt: self.salt,
            wrap_nonce: self.wrap_nonce,
            wrapped_key: self.wrapped_key,
            ..record
        }
    }
}

/// Wraps `key` under `passphrase` with a fresh salt (slow: Argon2id; call on a blocking thread).
fn wrap_under(passphrase: &str, key: &[u8; 32]) -> Result<Wrapping, crypto::CryptoError> {
    let salt = crypto::random_bytes::<16>().to_vec();
    let kek = crypto::derive_kek(passphrase, &salt, crypto::KDF_M_KIB, crypto::KDF_T, crypto::KDF_P)?;
    let (wrap_nonce, wrapped_key) = crypto::wrap(&kek, key)?;
    Ok(Wrapping { salt, wrap_nonce, wrapped_key })
}

/// A new data key wrapped under `passphrase` (derivation on a blocking thread).
async fn create_key_record(passphrase: String) -> Result<VaultKeyRecord> {
    let passphrase = Zeroizing::new(passphrase);
    tokio::task::spawn_blocking(move || -> Result<VaultKeyRecord, crypto::CryptoError> {
        let key = crypto::new_key();
        let (check_nonce, check) = crypto::check_value(&key)?;
        let fresh = VaultKeyRecord {
            key_id: new_id(),
            kdf_m_kib: 0,
            kdf_t: 0,
            kdf_p: 0,
            salt: Vec::new(),
            wrap_nonce: Vec::new(),
            wrapped_key: Vec::new(),
            check_nonce,
            check,
            created_at_ms: tessera_api::command::now_ms(),
        };
        Ok(wrap_under(&passphrase, &key)?.into_record(fresh))
    })
    .await
    .map_err(|e| VaultError::Internal(e.to_string()))?
    .map_err(|e| VaultError::Internal(e.to_string()))
}
