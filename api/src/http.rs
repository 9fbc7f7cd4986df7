//! JSON bodies of the `/api/v1` interface.

use serde::{Deserialize, Serialize};

use crate::command::KvEntry;
use crate::meta::UserRecord;

/// Every non-query error body: a message and a stable machine code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub code: String,
}

/// `GET /health`.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub version: String,
    /// Seconds since the router started.
    pub uptime: u64,
}

/// `POST /api/v1/auth/login` request.
#[derive(schemars::JsonSchema, Debug, Clone, Deserialize)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

/// The user object of a login response.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize, Deserialize)]
pub struct UserView {
    pub id: String,
    pub username: String,
    pub email: String,
    pub role: crate::meta::Role,
    pub mfa_enabled: bool,
}

impl From<&UserRecord> for UserView {
    fn from(u: &UserRecord) -> Self {
        UserView { id: u.id.clone(), username: u.username.clone(), email: u.email.clone(), role: u.role, mfa_enabled: u.mfa_enabled }
    }
}

/// `POST /api/v1/auth/login` response.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize, Deserialize)]
pub struct LoginResponse {
    pub token: String,
    pub user: UserView,
    /// ISO 8601 UTC time when the token stops being accepted.
    pub expires_at: String,
    /// With `auth.mfa_required`, for a user without a second factor: the
    /// session can only turn it on (`POST /api/v1/auth/mfa/enable`) or log out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mfa_enrollment_required: bool,
}

/// `POST /api/v1/kv/keys` request.
#[derive(schemars::JsonSchema, Debug, Clone, Deserialize)]
pub struct KvPutRequest {
    /// 1 to `kv.max_key_bytes` bytes.
    #[schemars(length(min = 1))]
    pub key: String,
    pub value: serde_json::Value,
    /// Seconds until the entry expires.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub ttl: Option<u64>,
}

/// A key-value entry as clients see it.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize, Deserialize)]
pub struct KvEntryView {
    pub key: String,
    pub value: serde_json::Value,
    /// Seconds left before expiry (rounded up), or null for no expiry.
    pub ttl: Option<u64>,
    pub created_at: String,
    pub updated_at: String,
    /// ISO 8601 UTC expiry time, or null.
    pub expires_at: Option<String>,
}

impl KvEntryView {
    /// Renders a stored entry as seen at `now_ms`.
    pub fn from_entry(e: KvEntry, now_ms: i64) -> Self {
        KvEntryView {
            ttl: e.expires_at_ms.map(|at| ((at - now_ms).max(0) as u64).div_ceil(1000)),
            expires_at: e.expires_at_ms.map(iso8601_ms),
            created_at: iso8601_ms(e.created_at_ms),
            updated_at: iso8601_ms(e.updated_at_ms),
            key: e.key,
            value: e.value,
        }
    }
}

/// `GET /api/v1/kv/keys` response.
#[derive(schemars::JsonSchema, Debug, Clone, Serialize, Deserialize)]
pub struct KvListResponse {
    pub keys: Vec<KvEntryView>,
    /// How many live keys match the prefix (before `limit`).
    pub total: u64,
    /// More keys matched than the answer holds because of the default page
    /// size or `max_result_rows` (an explicit smaller `limit` is not truncation).
    #[serde(default)]
    pub truncated: bool,
}

/// Formats Unix milliseconds as ISO 8601 UTC (`2026-11-21T17:03:54.123Z`).
pub fn iso8601_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", sod / 3600, (sod % 3600) / 60, sod % 60)
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day); H. Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_iso8601() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(1_795_798_434_123), "2026-11-27T16:53:54.123Z");
        assert_eq!(iso8601_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
