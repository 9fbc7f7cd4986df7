//! The application's configuration, from the environment (spec 03 part C).
//!
//! Besides the variables of spec 03, `MEETINGS_WEBHOOK_ALLOW_PRIVATE`
//! (`true`/`false`, default `false`) lets webhooks point at private and
//! internal addresses (loopback, RFC 1918, link-local and cloud metadata,
//! unique-local IPv6, …), at registration and at delivery. It is off by
//! default so that a user cannot make the server POST into its own network
//! (SSRF); turn it on only for tests and for operators whose receivers live
//! on a private network (see `crate::webhooks`).

use std::net::SocketAddr;
use std::path::PathBuf;

use url::Url;

/// The shortest `JWT_SECRET` accepted.
pub const MIN_JWT_SECRET_LEN: usize = 48;

/// Where the database is and who the application is there.
#[derive(Clone)]
pub struct DatabaseUrl {
    /// The router's base URL (`http://host:port` or `https://…`).
    pub router: String,
    pub user: String,
    pub password: String,
    /// The Tessera SQL database the application's tables live in.
    pub database: String,
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} as {}", self.router, self.database, self.user)
    }
}

impl DatabaseUrl {
    /// Parses `tessera://USER:PASSWORD@HOST:PORT/DATABASE` (plain HTTP to the
    /// router) or `tesseras://…` / `https://…` (TLS); `http://` works as `tessera://`.
    /// User and password are percent-decoded.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = Url::parse(text).map_err(|e| format!("DATABASE_URL is not a URL: {e}"))?;
        let scheme = match url.scheme() {
            "tessera" | "http" => "http",
            "tesseras" | "https" => "https",
            other => return Err(format!("DATABASE_URL: scheme {other:?} is not tessera://, tesseras://, http:// or https://")),
        };
        let host = url.host_str().ok_or("DATABASE_URL names no host")?;
        // No port: the router's default over plain HTTP, 443 over TLS.
        let port = url.port().unwrap_or(if scheme == "https" { 443 } else { 9090 });
        let decode =
            |s: &str| url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes()).next().map(|(_, v)| v.into_owned());
        let user = decode(url.username())
            .filter(|u| !u.is_empty())
            .ok_or("DATABASE_URL names no user (tessera://USER:PASSWORD@HOST:PORT/DATABASE)")?;
        let password = decode(url.password().unwrap_or("")).unwrap_or_default();
        let database = url.path().trim_matches('/').to_string();
        let database = if database.is_empty() { "meetings".to_string() } else { database };
        Ok(DatabaseUrl { router: format!("{scheme}://{host}:{port}"), user, password, database })
    }
}

/// Everything the application reads from its environment.
#[derive(Debug, Clone)]
pub struct Config {
    pub database: DatabaseUrl,
    /// HS256 key of access tokens (`JWT_SECRET`, at least 48 characters).
    pub jwt_secret: String,
    /// A text-generation service for meeting summaries (`AI_SERVICE_URL`); optional.
    pub ai_service_url: Option<String>,
    /// The model named in summary requests (`AI_MODEL`, default `default`).
    pub ai_model: String,
    /// The mail service's key (`EMAIL_SERVICE_API_KEY`); without it invitations are logged, not sent.
    pub email_api_key: Option<String>,
    /// Where mail is posted (`EMAIL_SERVICE_URL`, default Resend's API); see [`crate::mail`].
    pub email_service_url: String,
    /// The sender of the application's mail (`EMAIL_FROM`).
    pub email_from: String,
    /// The frontend's address as users reach it (`MEETINGS_PUBLIC_URL`), named in mail.
    pub public_url: String,
    /// The API's address (`MEETINGS_API_ADDR`, default 0.0.0.0:8080).
    pub api_addr: SocketAddr,
    /// The web frontend's address (`MEETINGS_WEB_ADDR`, default 0.0.0.0:3000).
    pub web_addr: SocketAddr,
    /// A PEM file of CA certificates the router's HTTPS certificate is checked
    /// against, besides the public roots (`MEETINGS_DATABASE_CA_FILE`).
    pub database_ca_file: Option<PathBuf>,
    /// The PocketSphinx acoustic model, language model and dictionary
    /// (`MEETINGS_SPEECH_MODEL`, default Debian's `pocketsphinx-en-us`).
    pub speech_model_dir: PathBuf,
    /// Access-token lifetime (`MEETINGS_ACCESS_TTL_SECS`, default 900).
    pub access_ttl_secs: u64,
    /// Refresh-token lifetime (`MEETINGS_REFRESH_TTL_SECS`, default 30 days).
    pub refresh_ttl_secs: u64,
    /// Requests per minute per client address on the API (`MEETINGS_RATE_LIMIT_PER_MIN`, default 600; 0 turns it off).
    pub rate_limit_per_min: u64,
    /// Whether webhook URLs may point at private or internal addresses
    /// (`MEETINGS_WEBHOOK_ALLOW_PRIVATE`, default `false`; see the module documentation).
    pub webhook_allow_private: bool,
}

impl Config {
    /// Reads the environment; refuses a missing `DATABASE_URL` or a short `JWT_SECRET`.
    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let database =
            DatabaseUrl::parse(&get("DATABASE_URL").ok_or("DATABASE_URL is not set (tessera://USER:PASSWORD@HOST:PORT/DATABASE)")?)?;
        let jwt_secret = get("JWT_SECRET").ok_or("JWT_SECRET is not set")?;
        if jwt_secret.chars().count() < MIN_JWT_SECRET_LEN {
            return Err(format!("JWT_SECRET must be at least {MIN_JWT_SECRET_LEN} characters (it has {})", jwt_secret.chars().count()));
        }
        let addr = |key: &str, default: &str| -> Result<SocketAddr, String> {
            get(key).unwrap_or_else(|| default.to_string()).parse().map_err(|e| format!("{key}: {e}"))
        };
        let number = |key: &str, default: u64| -> Result<u64, String> {
            get(key).map_or(Ok(default), |v| v.parse().map_err(|e| format!("{key}: {e}")))
        };
        let flag = |key: &str| -> Result<bool, String> {
            match get(key).unwrap_or_default().trim().to_ascii_lowercase().as_str() {
                "" | "false" | "0" | "no" | "off" => Ok(false),
                "true" | "1" | "yes" | "on" => Ok(true),
                other => Err(format!("{key}: {other:?} is not true or false")),
            }
        };
        Ok(Config {
            database,
            jwt_secret,
            ai_service_url: get("AI_SERVICE_URL").filter(|s| !s.is_empty()),
            ai_model: get("AI_MODEL").filter(|s| !s.is_empty()).unwrap_or_else(|| "default".to_string()),
            email_api_key: get("EMAIL_SERVICE_API_KEY").filter(|s| !s.is_empty()),
            email_service_url: get("EMAIL_SERVICE_URL")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "https://api.resend.com/emails".to_string()),
            email_from: get("EMAIL_FROM")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "Tessera Meetings <no-reply@meetings.invalid>".to_string()),
            public_url: get("MEETINGS_PUBLIC_URL").filter(|s| !s.is_empty()).unwrap_or_else(|| "http://localhost:3000".to_string()),
            api_addr: addr("MEETINGS_API_ADDR", "0.0.0.0:8080")?,
            web_addr: addr("MEETINGS_WEB_ADDR", "0.0.0.0:3000")?,
            database_ca_file: get("MEETINGS_DATABASE_CA_FILE").filter(|s| !s.is_empty()).map(PathBuf::from),
            speech_model_dir: get("MEETINGS_SPEECH_MODEL")
                .map_or_else(|| PathBuf::from("/usr/share/pocketsphinx/model/en-us"), PathBuf::from),
            access_ttl_secs: number("MEETINGS_ACCESS_TTL_SECS", 900)?,
            refresh_ttl_secs: number("MEETINGS_REFRESH_TTL_SECS", 30 * 24 * 3600)?,
            rate_limit_per_min: number("MEETINGS_RATE_LIMIT_PER_MIN", 600)?,
            webhook_allow_private: flag("MEETINGS_WEBHOOK_ALLOW_PRIVATE")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_database_url_names_the_router_the_user_and_the_database() {
        let db = DatabaseUrl::parse("tessera://meet%40app:p%2Fss+w@127.0.0.1:9090/meetings").unwrap();
        assert_eq!(
            (db.router.as_str(), db.user.as_str(), db.password.as_str(), db.database.as_str()),
            ("http://127.0.0.1:9090", "meet@app", "p/ss+w", "meetings")
        );
        assert_eq!(DatabaseUrl::parse("tesseras://u:p@db.example:443/m").unwrap().router, "https://db.example:443");
        assert_eq!(DatabaseUrl::parse("https://u:p@db.example:443/m").unwrap().router, "https://db.example:443");
        assert_eq!(DatabaseUrl::parse("https://u:p@db.example/m").unwrap().router, "https://db.example:443");
        assert_eq!(DatabaseUrl::parse("tessera://u:p@db.example/m").unwrap().router, "http://db.example:9090");
        assert!(DatabaseUrl::parse("postgres://u:p@h/db").is_err());
        assert!(DatabaseUrl::parse("tessera://h:9090/db").is_err());
    }

    #[test]
    fn a_short_jwt_secret_is_refused() {
        let err = Config::from_lookup(env(&[("DATABASE_URL", "tessera://u:p@h:1/d"), ("JWT_SECRET", "short")])).unwrap_err();
        assert!(err.contains("at least 48"), "{err}");
        let cfg = Config::from_lookup(env(&[("DATABASE_URL", "tessera://u:p@h:1/d"), ("JWT_SECRET", SECRET)])).unwrap();
        assert_eq!(cfg.api_addr.port(), 8080);
        assert_eq!(cfg.web_addr.port(), 3000);
        assert!(cfg.email_api_key.is_none());
        assert!(!cfg.webhook_allow_private, "private webhook destinations are refused by default");
    }

    #[test]
    fn private_webhook_destinations_are_an_explicit_opt_in() {
        let base = [("DATABASE_URL", "tessera://u:p@h:1/d"), ("JWT_SECRET", SECRET)];
        let with = |v: &'static str| {
            let mut pairs = base.to_vec();
            pairs.push(("MEETINGS_WEBHOOK_ALLOW_PRIVATE", v));
            Config::from_lookup(env(&pairs)).map(|c| c.webhook_allow_private)
        };
        for yes in ["true", "TRUE", "1", "yes", "on"] {
            assert_eq!(with(yes), Ok(true), "{yes}");
        }
        for no in ["false", "0", "no", "off", ""] {
            assert_eq!(with(no), Ok(false), "{no}");
        }
        assert!(with("maybe").unwrap_err().contains("MEETINGS_WEBHOOK_ALLOW_PRIVATE"));
    }
}
