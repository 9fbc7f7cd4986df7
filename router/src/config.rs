//! Router configuration: defaults, an optional TOML file, then `SERVICE_*`
//! variables (flat names below, or nested ones with `__`, e.g.
//! `SERVICE_AUTH__SESSION_TIMEOUT`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use tessera_api::runtime::NodeList;

/// Everything the router reads at start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterConfig {
    pub server: ServerSection,
    pub cluster: ClusterSection,
    pub auth: AuthSection,
    pub replication: ReplicationSection,
    pub kv: KvSection,
    pub objects: ObjectsSection,
    pub query_limits: QueryLimitsSection,
    pub rate_limit: RateLimitSection,
    pub tls: TlsSection,
    pub security: SecuritySection,
    pub secrets_manager: SecretsManagerSection,
    pub vault: VaultSection,
    pub alerts: AlertsSection,
    pub compliance: ComplianceSection,
    pub rbac: RbacSection,
    pub backup: BackupSection,
    /// The web console (spec 01's dashboard on port 8000).
    pub console: ConsoleSection,
    /// The PostgreSQL wire protocol listener.
    pub pgwire: PgwireSection,
    /// Spec 02's `[breach_detection]`, folded into `security` at load.
    pub breach_detection: BreachDetectionSection,
    /// Spec 02's `[retention]`, folded into `compliance` at load.
    pub retention: RetentionSection,
    /// Spec 02's `[data_classification]` (see `classification.rs`).
    pub data_classification: DataClassificationSection,
    pub log_level: String,
    /// OpenTelemetry traces over OTLP (off unless an endpoint is set).
    pub telemetry: tessera_api::telemetry::TelemetrySection,
    /// `text` (default) or `json` (`SERVICE_LOG_FORMAT`).
    pub log_format: tessera_api::runtime::LogFormat,
}

/// Role-based access control (spec 01 `rbac`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RbacSection {
    /// `false`: every authenticated user acts as an admin (logging in is
    /// still required); the router warns at start.
    pub enabled: bool,
    /// The role of a user created without one (`SERVICE_RBAC_DEFAULT_ROLE`):
    /// `admin`, `operator` or `viewer`.
    pub default_role: String,
}

impl Default for RbacSection {
    fn default() -> Self {
        RbacSection { enabled: true, default_role: "viewer".into() }
    }
}

impl RouterConfig {
    /// The bytes a request may carry (an HTTP body; a PostgreSQL message, a
    /// statement with its parameters, an interactive transaction).
    pub fn request_body_limit(&self) -> usize {
        self.kv.max_value_bytes + self.kv.max_key_bytes + 64 * 1024
    }

    /// Refuses the settings this router cannot honour, with the reason.
    pub fn check_access(&self) -> Result<(), String> {
        if tessera_api::compliance::classification_level(&self.data_classification.default_level).is_none() {
            return Err(format!(
                "data_classification.default_level {:?} is not a classification level (public, internal, confidential, phi, pii, restricted)",
                self.data_classification.default_level
            ));
        }
        if self.retention.auto_delete_expired && !self.compliance.enabled {
            return Err("retention.auto_delete_expired = true needs the compliance interface: set compliance.enabled (SERVICE_COMPLIANCE_ENABLED=true)".into());
        }
        match self.auth.method.trim().to_ascii_lowercase().as_str() {
            "local" | "password" | "" => {}
            "ldap" => match &self.auth.ldap {
                Some(ldap) => ldap.check()?,
                None => {
                    return Err("auth.method = ldap needs an [auth.ldap] section (url, and a service account or a user_dn_template)".into());
                }
            },
            "oauth2" | "oidc" => match &self.auth.oauth2 {
                Some(oidc) => oidc.check()?,
                None => {
                    return Err(
                        "auth.method = oauth2 needs an [auth.oauth2] section (issuer, client_id, client_secret, redirect_uri)".into()
                    );
                }
            },
            _ => {
                return Err(format!(
                    "auth.method = {:?} is not supported: use local (Tessera's own users, POST /api/v1/admin/users), ldap ([auth.ldap]) or oauth2 ([auth.oauth2])",
                    self.auth.method
                ));
            }
        }
        if tessera_api::meta::Role::parse(&self.rbac.default_role).is_none() {
            return Err(format!("rbac.default_role must be admin, operator or viewer, not {:?}", self.rbac.default_role));
        }
        Ok(())
    }
}

/// Spec 02's `[breach_detection]`: `enabled = false` turns the failed-login,
/// injection and bulk-data detectors off; the thresholds set `security.*`
/// (whose own settings and `SERVICE_*` win); `anomaly_detection = false`
/// turns the bulk-data detectors off.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BreachDetectionSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_login_threshold: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_login_window_minutes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomaly_detection: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_exfiltration_threshold_mb: Option<u64>,
}

/// Spec 02's `[retention]`: `audit_log_retention_days` sets
/// `compliance.audit_retention_days`; with `auto_delete_expired = true`,
/// `pii_retention_days` (90) and `default_retention_days` (365) are enforced
/// (docs/compliance.md "Retention"); `enabled = false` turns that off.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RetentionSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_retention_days: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pii_retention_days: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_log_retention_days: Option<u64>,
    /// With `compliance.enabled`: personal data past `pii_retention_days` and
    /// time-series points past `default_retention_days` are deleted by every
    /// router's expiry task (see `services::compliance::expiry::expire_once`).
    pub auto_delete_expired: bool,
    /// Seconds between two runs of the expiry task (3600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_interval_secs: Option<u64>,
}

/// Backups (`POST /api/v1/admin/backup`, docs/operations.md "Backup and restore").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct BackupSection {
    /// Where this router writes backups and reads them to restore (`SERVICE_BACKUP_DIR`).
    pub dir: std::path::PathBuf,
    /// The AES-256 key of encrypted backups (`SERVICE_BACKUP_KEY`, as
    /// `SERVICE_ENCRYPTION_KEY`: base64 of 32 bytes, or a key file); without
    /// it, `SERVICE_ENCRYPTION_KEY` when set.
    pub key: Option<tessera_api::secret::SecretString>,
    /// `SERVICE_ENCRYPTION_KEY`, the fallback for `key`.
    pub encryption_key: Option<tessera_api::secret::SecretString>,
}

impl Default for BackupSection {
    fn default() -> Self {
        BackupSection { dir: "./data/backups".into(), key: None, encryption_key: None }
    }
}

/// The web console: static pages built into the router, served with the
/// whole `/api/v1` on a port of their own (docs/console.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsoleSection {
    /// Serve it (`SERVICE_CONSOLE_ENABLED`; `deploy/cluster.sh up` turns it on).
    pub enabled: bool,
    /// Its port, on `server.host` (`SERVICE_CONSOLE_PORT`).
    pub port: u16,
}

impl Default for ConsoleSection {
    fn default() -> Self {
        ConsoleSection { enabled: false, port: 8000 }
    }
}

/// The PostgreSQL wire protocol: `psql` and PostgreSQL drivers reach
/// Tessera's SQL on a port of their own (docs/pgwire.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct PgwireSection {
    /// Listen (`SERVICE_PGWIRE_ENABLED`; `deploy/cluster.sh up` turns it on).
    pub enabled: bool,
    /// Its port, on `server.host` (`SERVICE_PGWIRE_PORT`); TLS through the
    /// router's certificate when it serves HTTPS.
    pub port: u16,
}

impl Default for PgwireSection {
    fn default() -> Self {
        PgwireSection { enabled: false, port: 5432 }
    }
}

/// The compliance interface of spec 02 (`SERVICE_COMPLIANCE_ENABLED`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ComplianceSection {
    /// Off: every `/api/v1/compliance/…`, `/api/v1/gdpr/…` and `/api/v1/ccpa/…` route answers 404.
    pub enabled: bool,
    /// Where breach incidents are posted when detected (`SERVICE_BREACH_WEBHOOK_URL`);
    /// extra headers come from `SERVICE_BREACH_WEBHOOK_HEADER_<Header-Name>`.
    pub breach_webhook_url: Option<String>,
    /// Key of the `X-Tessera-Signature: sha256=<hex HMAC-SHA256 of the body>`
    /// header (`SERVICE_BREACH_WEBHOOK_SECRET`).
    pub breach_webhook_secret: Option<tessera_api::secret::SecretString>,
    /// Comma-separated fields, document fields, node properties and SQL
    /// columns that name a data subject (erasure, export); empty: `subject_id`,
    /// `user_id`, `customer_id`, `patient_id`, `student_id`, `email`, `owner_id`.
    pub subject_fields: String,
    /// Audit trail entries older than this many days are removed (the chain
    /// keeps verifying from an anchor; `SERVICE_AUDIT_RETENTION_DAYS`); 0 keeps them.
    pub audit_retention_days: u64,
}

impl Default for ComplianceSection {
    fn default() -> Self {
        ComplianceSection {
            enabled: false,
            breach_webhook_url: None,
            breach_webhook_secret: None,
            subject_fields: String::new(),
            // Seven years, as spec 02's `retention.audit_log_retention_days`.
            audit_retention_days: 2555,
        }
    }
}

/// When `GET /api/v1/admin/alerts` raises an alert (`alerts.*`; flat
/// `SERVICE_ALERT_*` aliases).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AlertsSection {
    /// A replica this many entries behind its leader raises `replication_lag`.
    pub replication_lag_entries: u64,
    /// Share of a node's data filesystem left free under which `disk_space` is
    /// raised (critical under half of it); 0 to 1.
    pub disk_free_ratio: f64,
    /// Share of its machine's memory a node process may hold before `memory`
    /// is raised; 0 to 1.
    pub memory_used_ratio: f64,
    /// Share of this router's requests of the last minute failing with a
    /// server error over which `error_rate` is raised; 0 to 1.
    pub error_rate: f64,
    /// Requests in the last minute below which `error_rate` is not judged.
    pub error_rate_min_requests: u64,
    /// A certificate expiring within this many days raises `certificate_expiry`.
    pub certificate_warning_days: u32,
    /// ... and within this many days (or expired), critically.
    pub certificate_critical_days: u32,
}

impl Default for AlertsSection {
    fn default() -> Self {
        AlertsSection {
            replication_lag_entries: 1_000,
            disk_free_ratio: 0.10,
            memory_used_ratio: 0.90,
            error_rate: 0.05,
            error_rate_min_requests: 20,
            certificate_warning_days: 30,
            certificate_critical_days: 7,
        }
    }
}

impl AlertsSection {
    /// Refuses thresholds that cannot mean anything.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("alerts.disk_free_ratio", self.disk_free_ratio),
            ("alerts.memory_used_ratio", self.memory_used_ratio),
            ("alerts.error_rate", self.error_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} is a share between 0 and 1, not {v}"));
            }
        }
        if self.certificate_critical_days > self.certificate_warning_days {
            return Err(format!(
                "alerts.certificate_critical_days ({}) is more than alerts.certificate_warning_days ({})",
                self.certificate_critical_days, self.certificate_warning_days
            ));
        }
        Ok(())
    }
}

/// A Vault-compatible KV v2 secrets manager (see docs/secrets-vault.md): when
/// `url` is set, the router's secrets are looked up there first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct SecretsManagerSection {
    /// Base URL, e.g. `http://127.0.0.1:8200` (`SERVICE_SECRETS_MANAGER_URL`).
    pub url: Option<String>,
    /// Sent as `X-Vault-Token` (`SERVICE_SECRETS_MANAGER_TOKEN`).
    pub token: Option<tessera_api::secret::SecretString>,
    /// The `<service>` of `secret/data/<service>/<name>`.
    pub service: String,
    /// Seconds one lookup may take.
    pub timeout_secs: u64,
}

impl Default for SecretsManagerSection {
    fn default() -> Self {
        SecretsManagerSection { url: None, token: None, service: "tessera".into(), timeout_secs: 5 }
    }
}

/// The built-in vault.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct VaultSection {
    /// Unseal this router at start (`SERVICE_VAULT_PASSPHRASE`).
    pub passphrase: Option<tessera_api::secret::SecretString>,
    /// Every secret operation needs an access-policy grant (`SERVICE_VAULT_DEFAULT_DENY`).
    pub default_deny: bool,
}

/// MFA, attack detection, IP blocks and the caller cache (see docs/security.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct SecuritySection {
    /// Explicit development mode (`SERVICE_DEV_MODE=true`): accepts `mfa_dev_code`.
    pub dev_mode: bool,
    /// The fixed MFA code accepted in development mode only.
    pub mfa_dev_code: String,
    /// Issuer shown by authenticator apps.
    pub mfa_issuer: String,
    /// Seconds an MFA temporary token stays valid.
    pub mfa_challenge_secs: u64,
    /// Wrong codes after which an MFA temporary token is dropped.
    pub mfa_max_attempts: u32,
    /// Failed logins per IP (or user) within the window that raise an alert.
    pub failed_login_threshold: u32,
    pub failed_login_window_secs: u64,
    /// Failed logins per IP within the window that ban it; 0 disables bans.
    pub auto_ban_threshold: u32,
    pub auto_ban_duration_secs: u64,
    /// Screen user SQL for injection patterns (flag and record, never block).
    pub injection_detection: bool,
    /// Rows one request deletes (`mass_data_deletion`, critical) or reads out
    /// (`mass_data_export`, high) from which a security alert, and so a breach
    /// incident, is raised; 0 disables both detectors.
    pub mass_data_rows: u64,
    /// MiB one SQL response may carry before `mass_data_export` is raised
    /// (`SERVICE_DATA_EXFILTRATION_THRESHOLD_MB`; spec 02's
    /// `breach_detection.data_exfiltration_threshold_mb`); 0 disables it.
    pub data_exfiltration_threshold_mb: u64,
    /// How often each router reloads the block list from the meta group.
    pub block_refresh_ms: u64,
    /// How long a router reuses a resolved token (0 disables the cache).
    pub session_cache_ttl_ms: u64,
    /// A token used from another address or client than its login
    /// (`SERVICE_SESSION_BINDING`): `alert` raises `session_hijacking`, `end`
    /// also ends the session, `off` checks nothing.
    pub session_binding: String,
}

impl Default for SecuritySection {
    fn default() -> Self {
        SecuritySection {
            dev_mode: false,
            mfa_dev_code: "000000".into(),
            mfa_issuer: "Tessera".into(),
            mfa_challenge_secs: 300,
            mfa_max_attempts: 5,
            failed_login_threshold: 5,
            failed_login_window_secs: 300,
            auto_ban_threshold: 10,
            auto_ban_duration_secs: 3600,
            injection_detection: true,
            mass_data_rows: 1000,
            data_exfiltration_threshold_mb: 100,
            block_refresh_ms: 1000,
            session_cache_ttl_ms: 2000,
            session_binding: "alert".into(),
        }
    }
}

/// HTTPS for clients and mutual TLS towards nodes (see docs/tls-encryption.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsSection {
    /// PEM certificate chain served on the HTTP port (`SERVICE_TLS_CERT`); with
    /// `key` set the router serves HTTPS only (TLS 1.2/1.3), no plaintext.
    #[serde(alias = "cert_file", alias = "cert_path")]
    pub cert: Option<std::path::PathBuf>,
    /// PEM private key of `cert` (`SERVICE_TLS_KEY`).
    #[serde(alias = "key_file", alias = "key_path")]
    pub key: Option<std::path::PathBuf>,
    /// CA the nodes' certificates must chain to (`SERVICE_CLUSTER_CA`).
    pub cluster_ca: Option<std::path::PathBuf>,
    /// Certificate the router presents to nodes (`SERVICE_CLUSTER_CLIENT_CERT`).
    pub client_cert: Option<std::path::PathBuf>,
    /// Key of `client_cert` (`SERVICE_CLUSTER_CLIENT_KEY`).
    pub client_key: Option<std::path::PathBuf>,
    /// Name checked in node certificates instead of their address host
    /// (`SERVICE_CLUSTER_TLS_SERVER_NAME`).
    pub server_name: Option<String>,
}

/// Per-client-IP rate limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RateLimitSection {
    pub enabled: bool,
    pub requests_per_minute: u32,
    pub login_requests_per_minute: u32,
    /// Behind a trusted proxy: the header that names the client IP (e.g. `X-Forwarded-For`).
    pub client_ip_header: Option<String>,
}

impl Default for RateLimitSection {
    fn default() -> Self {
        RateLimitSection { enabled: true, requests_per_minute: 1000, login_requests_per_minute: 30, client_ip_header: None }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryLimitsSection {
    /// Rows a query returns at most; extra rows are cut and the response flagged truncated.
    pub max_result_rows: usize,
    /// Seconds a read-only query may run before it is cancelled.
    pub query_timeout_secs: u64,
    /// MiB one SQL query's intermediate results (join inputs and outputs) may
    /// hold; past it the query fails with QUERY_MEMORY_EXCEEDED.
    pub max_memory_mb: u64,
}

impl Default for QueryLimitsSection {
    fn default() -> Self {
        QueryLimitsSection { max_result_rows: 100_000, query_timeout_secs: 30, max_memory_mb: 1024 }
    }
}

impl QueryLimitsSection {
    /// Refuses limits that would refuse every query.
    pub fn check(&self) -> Result<(), String> {
        if self.max_result_rows == 0 {
            return Err("query_limits.max_result_rows must be at least 1".into());
        }
        if self.query_timeout_secs == 0 {
            return Err("query_limits.query_timeout_secs must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ObjectsSection {
    /// Largest object a PUT may store; larger bodies get 413.
    pub max_object_bytes: u64,
}

impl Default for ObjectsSection {
    fn default() -> Self {
        ObjectsSection { max_object_bytes: 256 * 1024 * 1024 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSection {
    pub host: String,
    pub port: u16,
    /// Seconds a routed call may take, retries included.
    pub request_timeout: u64,
    /// Requests this router serves at once (`SERVICE_MAX_CONNECTIONS`); one
    /// more is answered 503 with `Retry-After: 1` at once. 0: no limit.
    pub max_connections: usize,
    /// Threads of the Tokio runtime serving requests (`SERVICE_WORKER_THREADS`; 0: one per core).
    pub worker_threads: usize,
    /// Bearer token that lets a scraper read `GET /metrics` without a user
    /// (`SERVICE_METRICS_TOKEN`); a user holding `read:cluster` may always.
    pub metrics_token: Option<tessera_api::secret::SecretString>,
    /// The spec's place for the query limits (`[server.query_safety]`): merged
    /// into `query_limits` at load, whose own settings (and `SERVICE_*`) win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_safety: Option<QueryLimitsSection>,
    /// The spec's place for HTTPS (`[server.tls]`): merged into `tls` at load,
    /// whose own settings (and `SERVICE_TLS_*`) win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSection>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterSection {
    /// Node gRPC addresses to learn the cluster from: `host:port` or `id=host:port`,
    /// as a list or one comma-separated string.
    pub nodes: NodeList,
    /// Dial the nodes in plaintext with no certificate (`SERVICE_CLUSTER_INSECURE`).
    /// Off by default: the router needs the cluster's mutual TLS
    /// (`tls.cluster_ca`, `tls.client_cert`, `tls.client_key`) and refuses to
    /// start without.
    pub insecure: bool,
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection { nodes: NodeList::Csv("127.0.0.1:9190".into()), insecure: false }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthSection {
    /// Seconds a login token stays valid.
    pub session_timeout: u64,
    /// Every user must use a second factor. When `true`, a user session opened
    /// without a code is refused (403) on every non-public route but MFA enable
    /// and logout, and MFA cannot be turned off (`permissions.rs`,
    /// `handlers/auth.rs`; see docs/security.md).
    pub mfa_required: bool,
    pub admin_username: Option<String>,
    pub admin_password: Option<tessera_api::secret::SecretString>,
    pub admin_email: Option<String>,
    /// Serve anonymous reads while no user exists (logged as a warning each time).
    pub open_bootstrap: bool,
    /// How users authenticate: `local` (Tessera's own users and passwords) or
    /// `ldap` (a directory, `[auth.ldap]`) or `oauth2` (an OpenID Connect
    /// provider, `[auth.oauth2]`); local users still sign in unless the
    /// section's `allow_local_users = false`.
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ldap: Option<LdapSection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OidcSection>,
}

/// `[auth.ldap]`: sign-in against an LDAP directory (`auth.method = ldap`; see
/// docs/configuration.md and docs/security.md "External identity").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LdapSection {
    /// `ldap://host:port` or `ldaps://host:port`.
    pub url: String,
    /// Upgrade an `ldap://` connection with StartTLS before binding.
    pub start_tls: bool,
    /// PEM CA certificates the directory's certificate must chain to (LDAPS and
    /// StartTLS); without it, the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// The service account that searches for users and their groups (search-then-bind).
    pub bind_dn: Option<String>,
    pub bind_password: Option<tessera_api::secret::SecretString>,
    /// Direct bind: the user's DN with `{username}` (escaped) in it, e.g.
    /// `uid={username},ou=people,dc=example,dc=org`; no service account needed.
    pub user_dn_template: Option<String>,
    /// Where users are searched (search-then-bind), or read (direct bind: the user's own entry).
    pub user_base_dn: String,
    /// The user's entry: `{username}` is replaced by the escaped name. Exclude
    /// disabled accounts here (e.g. `(&(uid={username})(!(employeeType=disabled)))`).
    pub user_filter: String,
    /// Where groups are searched; none: no groups (only `default_role`).
    pub group_base_dn: Option<String>,
    /// A group the user belongs to: `{dn}` is the user's DN, `{username}` the name.
    pub group_filter: String,
    /// The attribute naming a group in `role_mapping`.
    pub group_name_attribute: String,
    /// The attribute holding the user's e-mail address.
    pub email_attribute: String,
    /// Directory group → Tessera role (`admin`, `operator`, `viewer` or a custom
    /// role). Several built-in roles: the highest; custom roles add up.
    pub role_mapping: std::collections::BTreeMap<String, String>,
    /// The role of a directory user no group maps (none: such a user is refused, 403).
    pub default_role: Option<String>,
    /// How often a signed-in directory user is looked up again (removed,
    /// disabled or moved to other groups); 0: only at sign-in.
    pub recheck_interval_secs: u64,
    /// Seconds one directory operation may take.
    pub timeout_secs: u64,
    /// Tessera's own users still sign in with their passwords (break-glass admins).
    pub allow_local_users: bool,
}

impl Default for LdapSection {
    fn default() -> Self {
        LdapSection {
            url: String::new(),
            start_tls: false,
            ca_file: None,
            bind_dn: None,
            bind_password: None,
            user_dn_template: None,
            user_base_dn: String::new(),
            user_filter: "(uid={username})".into(),
            group_base_dn: None,
            group_filter: "(member={dn})".into(),
            group_name_attribute: "cn".into(),
            email_attribute: "mail".into(),
            role_mapping: Default::default(),
            default_role: None,
            recheck_interval_secs: 300,
            timeout_secs: 10,
            allow_local_users: true,
        }
    }
}

impl LdapSection {
    /// Whether the section can work: a URL, a way to find users, filters naming the user.
    pub fn check(&self) -> Result<(), String> {
        if !(self.url.starts_with("ldap://") || self.url.starts_with("ldaps://")) {
            return Err(format!("auth.ldap.url must be ldap://host:port or ldaps://host:port, not {:?}", self.url));
        }
        if self.start_tls && self.url.starts_with("ldaps://") {
            return Err("auth.ldap.start_tls upgrades an ldap:// connection; an ldaps:// one is TLS already".into());
        }
        let searches = self.bind_dn.is_some() && self.bind_password.as_ref().is_some_and(|p| !p.is_blank());
        match &self.user_dn_template {
            Some(t) if !t.contains("{username}") => return Err("auth.ldap.user_dn_template must contain {username}".into()),
            Some(_) => {}
            None if !searches => {
                return Err("auth.ldap needs a service account (bind_dn and bind_password) or a user_dn_template".into());
            }
            None if self.user_base_dn.trim().is_empty() => return Err("auth.ldap.user_base_dn is required to search users".into()),
            None => {}
        }
        if !self.user_filter.contains("{username}") {
            return Err("auth.ldap.user_filter must contain {username}".into());
        }
        if self.group_base_dn.is_some() && !(self.group_filter.contains("{dn}") || self.group_filter.contains("{username}")) {
            return Err("auth.ldap.group_filter must contain {dn} or {username}".into());
        }
        if self.timeout_secs == 0 {
            return Err("auth.ldap.timeout_secs must be at least 1".into());
        }
        Ok(())
    }
}

/// `[auth.oauth2]`: sign-in through an OpenID Connect provider
/// (`auth.method = oauth2`; see docs/configuration.md and docs/security.md
/// "External identity: OpenID Connect").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct OidcSection {
    /// The provider's issuer URL; its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`, and tokens must name it as `iss`.
    pub issuer: String,
    pub client_id: String,
    /// The client's secret (`client_secret_post`); it also keys the sealed login state.
    pub client_secret: Option<tessera_api::secret::SecretString>,
    /// This router's callback as registered with the provider:
    /// `https://<router>/api/v1/auth/oidc/callback`.
    pub redirect_uri: String,
    /// Scopes asked for at sign-in (space-separated; `openid` is always asked).
    pub scopes: String,
    /// Accepted `aud` values of bearer tokens; empty: the client id.
    pub audiences: Vec<String>,
    /// The claim holding the user's name (falls back to `sub`).
    pub username_claim: String,
    pub email_claim: String,
    /// The claim holding groups or roles (a string or an array; a dotted path
    /// reaches into objects, e.g. `realm_access.roles`).
    pub role_claim: String,
    /// Claim value → Tessera role (`admin`, `operator`, `viewer` or a custom role).
    pub role_mapping: std::collections::BTreeMap<String, String>,
    /// The role of a user no claim value maps (none: such a user is refused, 403).
    pub default_role: Option<String>,
    /// Signature algorithms accepted (asymmetric only: never `none`, never HS*).
    pub algorithms: Vec<String>,
    /// Seconds of clock skew allowed on `exp`, `nbf` and `iat`.
    pub clock_skew_secs: u64,
    /// Provider tokens (`Authorization: Bearer <JWT>`) are accepted on every route.
    pub accept_bearer_tokens: bool,
    /// PEM CA certificates the provider's HTTPS certificate must chain to (none: the system's roots).
    pub ca_file: Option<std::path::PathBuf>,
    /// Seconds one call to the provider may take.
    pub timeout_secs: u64,
    /// Seconds a started sign-in may take before its callback.
    pub login_ttl_secs: u64,
    /// Tessera's own users still sign in with their passwords (break-glass admins).
    pub allow_local_users: bool,
}

impl Default for OidcSection {
    fn default() -> Self {
        OidcSection {
            issuer: String::new(),
            client_id: String::new(),
            client_secret: None,
            redirect_uri: String::new(),
            scopes: "openid email profile".into(),
            audiences: Vec::new(),
            username_claim: "preferred_username".into(),
            email_claim: "email".into(),
            role_claim: "roles".into(),
            role_mapping: Default::default(),
            default_role: None,
            algorithms: ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"].map(String::from).to_vec(),
            clock_skew_secs: 60,
            accept_bearer_tokens: true,
            ca_file: None,
            timeout_secs: 10,
            login_ttl_secs: 600,
            allow_local_users: true,
        }
    }
}

impl OidcSection {
    /// Whether the section can work.
    pub fn check(&self) -> Result<(), String> {
        for (key, url) in [("issuer", &self.issuer), ("redirect_uri", &self.redirect_uri)] {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!("auth.oauth2.{key} must be an http(s) URL, not {url:?}"));
            }
        }
        if self.client_id.trim().is_empty() {
            return Err("auth.oauth2.client_id is required".into());
        }
        if self.client_secret.as_ref().is_none_or(|s| s.is_blank()) {
            return Err("auth.oauth2.client_secret is required (the router is a confidential client; it also seals the login state)".into());
        }
        if self.algorithms.is_empty() {
            return Err("auth.oauth2.algorithms must name at least one algorithm".into());
        }
        for alg in &self.algorithms {
            if !["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"].contains(&alg.as_str()) {
                return Err(format!("auth.oauth2.algorithms: {alg:?} is not an accepted signature algorithm (asymmetric ones only)"));
            }
        }
        if self.timeout_secs == 0 || self.login_ttl_secs == 0 {
            return Err("auth.oauth2.timeout_secs and login_ttl_secs must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplicationSection {
    /// Default consistency of a request without `X-Consistency`.
    pub consistency_level: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct KvSection {
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            host: "0.0.0.0".into(),
            port: 9090,
            request_timeout: 30,
            max_connections: 1000,
            worker_threads: 0,
            metrics_token: None,
            query_safety: None,
            tls: None,
        }
    }
}

impl Default for AuthSection {
    fn default() -> Self {
        AuthSection {
            session_timeout: 3600,
            mfa_required: false,
            admin_username: None,
            admin_password: None,
            admin_email: None,
            open_bootstrap: false,
            method: "local".into(),
            ldap: None,
            oauth2: None,
        }
    }
}

impl Default for ReplicationSection {
    fn default() -> Self {
        ReplicationSection { consistency_level: "quorum".into() }
    }
}

impl Default for KvSection {
    fn default() -> Self {
        KvSection { max_key_bytes: 1024, max_value_bytes: 1024 * 1024 }
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            server: ServerSection::default(),
            cluster: ClusterSection::default(),
            auth: AuthSection::default(),
            replication: ReplicationSection::default(),
            kv: KvSection::default(),
            objects: ObjectsSection::default(),
            query_limits: QueryLimitsSection::default(),
            rate_limit: RateLimitSection::default(),
            tls: TlsSection::default(),
            security: SecuritySection::default(),
            secrets_manager: SecretsManagerSection::default(),
            vault: VaultSection::default(),
            alerts: AlertsSection::default(),
            compliance: ComplianceSection::default(),
            rbac: RbacSection::default(),
            backup: BackupSection::default(),
            console: ConsoleSection::default(),
            pgwire: PgwireSection::default(),
            breach_detection: BreachDetectionSection::default(),
            retention: RetentionSection::default(),
            data_classification: Default::default(),
            log_level: "info".into(),
            telemetry: Default::default(),
            log_format: Default::default(),
        }
    }
}

const FLAT_ALIASES: &[(&str, &str)] = &[
    ("cluster_insecure", "cluster.insecure"),
    ("session_binding", "security.session_binding"),
    ("secrets_manager_url", "secrets_manager.url"),
    ("secrets_manager_token", "secrets_manager.token"),
    ("secrets_manager_service", "secrets_manager.service"),
    ("vault_passphrase", "vault.passphrase"),
    ("vault_default_deny", "vault.default_deny"),
    ("tls_cert", "tls.cert"),
    ("tls_key", "tls.key"),
    ("tls_cert_path", "tls.cert"),
    ("tls_key_path", "tls.key"),
    ("cluster_ca", "tls.cluster_ca"),
    ("cluster_client_cert", "tls.client_cert"),
    ("cluster_client_key", "tls.client_key"),
    ("cluster_tls_server_name", "tls.server_name"),
    ("host", "server.host"),
    ("port", "server.port"),
    ("request_timeout", "server.request_timeout"),
    ("worker_threads", "server.worker_threads"),
    ("max_connections", "server.max_connections"),
    ("rbac_enabled", "rbac.enabled"),
    ("rbac_default_role", "rbac.default_role"),
    ("default_role", "rbac.default_role"),
    ("mfa_required", "auth.mfa_required"),
    ("nodes", "cluster.nodes"),
    ("session_timeout", "auth.session_timeout"),
    ("auth_method", "auth.method"),
    ("admin_username", "auth.admin_username"),
    ("admin_password", "auth.admin_password"),
    ("admin_email", "auth.admin_email"),
    ("open_bootstrap", "auth.open_bootstrap"),
    ("consistency_level", "replication.consistency_level"),
    ("max_key_bytes", "kv.max_key_bytes"),
    ("max_value_bytes", "kv.max_value_bytes"),
    ("max_object_bytes", "objects.max_object_bytes"),
    ("max_result_rows", "query_limits.max_result_rows"),
    ("query_timeout_secs", "query_limits.query_timeout_secs"),
    ("query_max_memory_mb", "query_limits.max_memory_mb"),
    ("requests_per_minute", "rate_limit.requests_per_minute"),
    ("compliance_enabled", "compliance.enabled"),
    ("data_exfiltration_threshold_mb", "security.data_exfiltration_threshold_mb"),
    ("backup_dir", "backup.dir"),
    ("console_enabled", "console.enabled"),
    ("console_port", "console.port"),
    ("pgwire_enabled", "pgwire.enabled"),
    ("pgwire_port", "pgwire.port"),
    ("backup_key", "backup.key"),
    ("encryption_key", "backup.encryption_key"),
    ("breach_webhook_url", "compliance.breach_webhook_url"),
    ("breach_webhook_secret", "compliance.breach_webhook_secret"),
    ("compliance_subject_fields", "compliance.subject_fields"),
    ("audit_retention_days", "compliance.audit_retention_days"),
    ("audit_log_retention_days", "compliance.audit_retention_days"),
    ("login_requests_per_minute", "rate_limit.login_requests_per_minute"),
    ("client_ip_header", "rate_limit.client_ip_header"),
    ("dev_mode", "security.dev_mode"),
    ("mass_data_rows", "security.mass_data_rows"),
    ("auto_ban_threshold", "security.auto_ban_threshold"),
    ("auto_ban_duration_secs", "security.auto_ban_duration_secs"),
    ("session_cache_ttl_ms", "security.session_cache_ttl_ms"),
    ("log_level", "log_level"),
    ("metrics_token", "server.metrics_token"),
    ("otlp_endpoint", "telemetry.otlp_endpoint"),
    ("trace_sample_ratio", "telemetry.sample_ratio"),
    ("alert_replication_lag_entries", "alerts.replication_lag_entries"),
    ("alert_disk_free_ratio", "alerts.disk_free_ratio"),
    ("alert_memory_used_ratio", "alerts.memory_used_ratio"),
    ("alert_error_rate", "alerts.error_rate"),
    ("alert_error_rate_min_requests", "alerts.error_rate_min_requests"),
    ("alert_certificate_warning_days", "alerts.certificate_warning_days"),
    ("alert_certificate_critical_days", "alerts.certificate_critical_days"),
];

impl RouterConfig {
    /// Loads defaults, then the TOML file (if any), then the environment.
    pub fn load(file: Option<&Path>) -> Result<Self, Box<figment::Error>> {
        let mut config: RouterConfig = tessera_api::runtime::load_config(&RouterConfig::default(), file, FLAT_ALIASES)?;
        config.merge_spec_places();
        Ok(config)
    }

    /// Folds `[server.query_safety]` into `query_limits` and `[server.tls]`
    /// into `tls` (spec 01 names both places): a setting given in both places
    /// takes the value of `query_limits`/`tls` (where `SERVICE_*` land).
    fn merge_spec_places(&mut self) {
        if let Some(q) = self.server.query_safety.take() {
            let (given, default) = (&mut self.query_limits, QueryLimitsSection::default());
            if given.max_result_rows == default.max_result_rows {
                given.max_result_rows = q.max_result_rows;
            }
            if given.query_timeout_secs == default.query_timeout_secs {
                given.query_timeout_secs = q.query_timeout_secs;
            }
            if given.max_memory_mb == default.max_memory_mb {
                given.max_memory_mb = q.max_memory_mb;
            }
        }
        let (bd, defaults) = (self.breach_detection.clone(), SecuritySection::default());
        let security = &mut self.security;
        if let Some(n) = bd.failed_login_threshold.filter(|_| security.failed_login_threshold == defaults.failed_login_threshold) {
            security.failed_login_threshold = n;
        }
        if let Some(m) = bd.failed_login_window_minutes.filter(|_| security.failed_login_window_secs == defaults.failed_login_window_secs) {
            security.failed_login_window_secs = m.saturating_mul(60);
        }
        if let Some(mb) =
            bd.data_exfiltration_threshold_mb.filter(|_| security.data_exfiltration_threshold_mb == defaults.data_exfiltration_threshold_mb)
        {
            security.data_exfiltration_threshold_mb = mb;
        }
        if bd.anomaly_detection == Some(false) || bd.enabled == Some(false) {
            security.mass_data_rows = 0;
            security.data_exfiltration_threshold_mb = 0;
        }
        if bd.enabled == Some(false) {
            security.failed_login_threshold = u32::MAX;
            security.injection_detection = false;
        }
        if let Some(days) = self
            .retention
            .audit_log_retention_days
            .filter(|_| self.compliance.audit_retention_days == ComplianceSection::default().audit_retention_days)
        {
            self.compliance.audit_retention_days = days;
        }
        if let Some(t) = self.server.tls.take() {
            let tls = &mut self.tls;
            tls.cert = tls.cert.take().or(t.cert);
            tls.key = tls.key.take().or(t.key);
            tls.cluster_ca = tls.cluster_ca.take().or(t.cluster_ca);
            tls.client_cert = tls.client_cert.take().or(t.client_cert);
            tls.client_key = tls.client_key.take().or(t.client_key);
            tls.server_name = tls.server_name.take().or(t.server_name);
        }
    }

    /// The seed node addresses, with ids where given.
    pub fn seeds(&self) -> anyhow::Result<Vec<(Option<u64>, String)>> {
        self.cluster.nodes.entries().map_err(|entry| anyhow::anyhow!("cluster.nodes entry {entry:?} is not host:port or id=host:port"))
    }
}

/// The `[data_classification]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct DataClassificationSection {
    pub enabled: bool,
    /// The level a `classify` request without `classification` records (`internal`).
    pub default_level: String,
    pub enforce_access_control: bool,
    pub audit_classified_access: bool,
    /// Literals of SQL statements are replaced by `?` in this router's
    /// activity records and logs.
    pub mask_phi_in_logs: bool,
    /// Classified reads by one user in a minute above which
    /// `unusual_access_pattern` is raised (0: off).
    pub unusual_access_per_minute: u64,
}

impl Default for DataClassificationSection {
    fn default() -> Self {
        DataClassificationSection {
            enabled: false,
            default_level: "internal".into(),
            enforce_access_control: true,
            audit_classified_access: true,
            mask_phi_in_logs: false,
            unusual_access_per_minute: 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec 01 places the query limits under `server.query_safety` and HTTPS
    /// under `server.tls`; both are honoured, as is `server.worker_threads`.
    #[test]
    fn the_spec_places_of_limits_and_tls_are_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("router.toml");
        std::fs::write(
            &file,
            "[server]\nworker_threads = 2\n[server.query_safety]\nmax_result_rows = 7\nquery_timeout_secs = 9\n\
             [server.tls]\ncert_file = \"/etc/tessera/cert.pem\"\nkey = \"/etc/tessera/key.pem\"\n",
        )
        .unwrap();
        let config = RouterConfig::load(Some(&file)).unwrap();
        assert_eq!((config.query_limits.max_result_rows, config.query_limits.query_timeout_secs), (7, 9));
        assert_eq!(config.query_limits.max_memory_mb, 1024, "unset: the default");
        assert_eq!(config.tls.cert.as_deref(), Some(Path::new("/etc/tessera/cert.pem")));
        assert_eq!(config.tls.key.as_deref(), Some(Path::new("/etc/tessera/key.pem")));
        assert_eq!(config.server.worker_threads, 2);
        // LDAP needs its section, and a section that can find users; OAuth2 is refused.
        std::fs::write(&file, "[auth]\nmethod = \"ldap\"\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().unwrap_err().contains("[auth.ldap]"));
        std::fs::write(&file, "[auth]\nmethod = \"ldap\"\n[auth.ldap]\nurl = \"ldap://x\"\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().unwrap_err().contains("service account"));
        let direct = "[auth]\nmethod = \"ldap\"\n[auth.ldap]\nurl = \"ldap://x\"\nuser_dn_template = \"uid={username},dc=x\"\n";
        std::fs::write(&file, direct).unwrap();
        RouterConfig::load(Some(&file)).unwrap().check_access().unwrap();
        std::fs::write(&file, "[auth]\nmethod = \"oauth2\"\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().unwrap_err().contains("[auth.oauth2]"));
        std::fs::write(&file, "[auth]\nmethod = \"kerberos\"\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().unwrap_err().contains("auth.method"));
        std::fs::write(&file, "[auth]\nmethod = \"local\"\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().is_ok());
        // Spec 02's sections: breach detection thresholds and the audit retention.
        std::fs::write(
            &file,
            "[breach_detection]\nenabled = true\nfailed_login_threshold = 10\nfailed_login_window_minutes = 5\n\
             anomaly_detection = true\ndata_exfiltration_threshold_mb = 50\n\
             [retention]\nenabled = true\naudit_log_retention_days = 400\nauto_delete_expired = false\n",
        )
        .unwrap();
        let c = RouterConfig::load(Some(&file)).unwrap();
        assert_eq!((c.security.failed_login_threshold, c.security.failed_login_window_secs), (10, 300));
        assert_eq!((c.security.data_exfiltration_threshold_mb, c.compliance.audit_retention_days), (50, 400));
        assert!(c.check_access().is_ok());
        std::fs::write(&file, "[breach_detection]\nenabled = false\n[retention]\nauto_delete_expired = true\n").unwrap();
        let c = RouterConfig::load(Some(&file)).unwrap();
        assert!(!c.security.injection_detection && c.security.mass_data_rows == 0);
        assert!(c.check_access().unwrap_err().contains("compliance.enabled"), "expiry needs the compliance interface");
        std::fs::write(&file, "[compliance]\nenabled = true\n[retention]\nauto_delete_expired = true\npii_retention_days = 30\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap().check_access().is_ok());
        // A misspelt key stops the start, naming it.
        std::fs::write(&file, "[server]\nprot = 8080\n").unwrap();
        assert!(RouterConfig::load(Some(&file)).unwrap_err().to_string().contains("`server.prot`"));
        // `query_limits` itself wins over `server.query_safety`.
        std::fs::write(&file, "[query_limits]\nmax_result_rows = 5\n[server.query_safety]\nmax_result_rows = 7\n").unwrap();
        assert_eq!(RouterConfig::load(Some(&file)).unwrap().query_limits.max_result_rows, 5);
    }
}

/// Every `SERVICE_*` variable this binary reads is documented: in
/// `docs/configuration.md` or the topic document it points to.
#[cfg(test)]
mod documented {
    #[test]
    fn every_environment_variable_is_documented() {
        let docs_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let missing = tessera_api::runtime::undocumented_env_vars(super::FLAT_ALIASES, &docs_dir).unwrap();
        assert!(missing.is_empty(), "not documented in docs/*.md: {missing:?}");
    }

    /// The checked-in key list that lets either binary accept the other's keys
    /// and refuse the rest is this binary's configuration, key for key.
    #[test]
    fn every_key_is_listed() {
        let mut config = super::RouterConfig::default();
        // The sections only given in a file (spec 01's places) have keys too.
        config.server.query_safety = Some(Default::default());
        config.server.tls = Some(Default::default());
        config.auth.ldap = Some(super::LdapSection {
            ca_file: Some("ca.pem".into()),
            bind_dn: Some("cn=x".into()),
            bind_password: Some("x".into()),
            user_dn_template: Some("uid={username}".into()),
            group_base_dn: Some("ou=groups".into()),
            default_role: Some("viewer".into()),
            ..Default::default()
        });
        config.auth.oauth2 = Some(super::OidcSection {
            client_secret: Some("x".into()),
            default_role: Some("viewer".into()),
            ca_file: Some("ca.pem".into()),
            ..Default::default()
        });
        let bd = &mut config.breach_detection;
        (bd.enabled, bd.failed_login_threshold, bd.failed_login_window_minutes) = (Some(true), Some(5), Some(5));
        (bd.anomaly_detection, bd.data_exfiltration_threshold_mb) = (Some(true), Some(1));
        let r = &mut config.retention;
        (r.enabled, r.default_retention_days, r.pii_retention_days, r.audit_log_retention_days) = (Some(true), Some(1), Some(1), Some(1));
        r.check_interval_secs = Some(1);
        let list = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/src/config_keys/router.txt");
        // `TlsSection`'s serde aliases, in both of its places.
        const ALIASES: [&str; 8] = [
            "tls.cert_file",
            "tls.cert_path",
            "tls.key_file",
            "tls.key_path",
            "server.tls.cert_file",
            "server.tls.cert_path",
            "server.tls.key_file",
            "server.tls.key_path",
        ];
        let json = serde_json::to_value(&config).unwrap();
        if let Err(e) = tessera_api::runtime::compare_key_list(&json, &ALIASES, tessera_api::runtime::ROUTER_KEYS, &list) {
            panic!("{e}");
        }
    }
}
