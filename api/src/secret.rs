//! A secret-bearing setting: [`SecretString`].
//!
//! Every setting that holds a secret (a password, a key, a token, at-rest key
//! specs) has this type from the configuration loader on. It prints as
//! `<redacted>` (`Debug`, `Display`) and *serializes* as `<redacted>` (or `""`
//! when empty), so no serialized configuration — `GET /api/v1/admin/config`,
//! a node's `Config` reply, a log line — can carry one, whatever its key is
//! named. The value is reached only through [`SecretString::expose`], and it
//! is zeroed when dropped.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A secret string (see the module docs). Deserializes from any scalar,
/// because the configuration's environment layer turns values such as `12345`
/// or `true` into numbers and booleans.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretString(String);

/// What a set secret serializes as.
pub const REDACTED: &str = "<redacted>";

impl Serialize for SecretString {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.0.is_empty() { "" } else { REDACTED })
    }
}

impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SecretString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SecretString, E> {
                Ok(SecretString::new(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SecretString, E> {
                Ok(SecretString::new(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SecretString, E> {
                Ok(SecretString::new(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<SecretString, E> {
                Ok(SecretString::new(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<SecretString, E> {
                Ok(SecretString::new(v.to_string()))
            }
            fn visit_char<E: serde::de::Error>(self, v: char) -> Result<SecretString, E> {
                Ok(SecretString::new(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl SecretString {
    pub fn new(s: impl Into<String>) -> Self {
        SecretString(s.into())
    }

    /// The exact text of an environment variable, if set and not empty.
    pub fn from_env(var: &str) -> Option<SecretString> {
        std::env::var(var).ok().filter(|v| !v.is_empty()).map(SecretString)
    }

    /// The exact variable `var` if set, else the configured value.
    pub fn env_or(var: &str, configured: Option<&SecretString>) -> Option<SecretString> {
        SecretString::from_env(var).or_else(|| configured.cloned())
    }

    /// The secret itself (do not log it).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this secret, compared in constant time (a bearer
    /// token checked against it leaks nothing through timing).
    pub fn matches(&self, offered: &str) -> bool {
        use subtle::ConstantTimeEq;
        !self.0.is_empty() && bool::from(self.0.as_bytes().ct_eq(offered.as_bytes()))
    }

    /// Whether it holds nothing (or only white space).
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl From<&str> for SecretString {
    fn from(s: &str) -> Self {
        SecretString(s.to_string())
    }
}

impl From<String> for SecretString {
    fn from(s: String) -> Self {
        SecretString(s)
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Drop for SecretString {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_serializes_or_prints_its_value() {
        #[derive(Serialize, Deserialize)]
        struct Settings {
            anything: SecretString,
            empty: SecretString,
            maybe: Option<SecretString>,
        }
        let s: Settings = serde_json::from_str(r#"{"anything": "hunter2", "empty": "", "maybe": 12345}"#).unwrap();
        assert_eq!(s.anything.expose(), "hunter2");
        assert_eq!(s.maybe.as_ref().map(SecretString::expose), Some("12345"));
        let shown = serde_json::to_string(&s).unwrap();
        assert_eq!(shown, r#"{"anything":"<redacted>","empty":"","maybe":"<redacted>"}"#);
        assert_eq!(format!("{:?} {}", s.anything, s.anything), "<redacted> <redacted>");
    }
}
