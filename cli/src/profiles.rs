//! Saved sign-ins, one per profile (a cluster and a user), in
//! `$TESSERA_CONFIG_DIR`, else `$XDG_CONFIG_HOME/tessera`, else
//! `~/.config/tessera`: `profiles.json`, readable by its owner only (0600, in a
//! 0700 directory), since it holds session tokens.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};

/// One saved sign-in.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When the token stops being accepted (ISO 8601, as the router said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// A CA file to verify the router's HTTPS certificate with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<PathBuf>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Profiles {
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// The directory of the client's files (profiles, SQL history).
pub fn config_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TESSERA_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("tessera"));
    }
    let home = std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .ok_or_else(|| CliError::Local("no home directory (HOME) to keep the profiles in: set TESSERA_CONFIG_DIR".into()))?;
    Ok(PathBuf::from(home).join(".config").join("tessera"))
}

fn profiles_path() -> Result<PathBuf> {
    Ok(config_dir()?.join("profiles.json"))
}

impl Profiles {
    /// The saved profiles (none when the file does not exist yet).
    pub fn load() -> Result<Profiles> {
        let path = profiles_path()?;
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| CliError::Local(format!("{} is not a profiles file: {e}", path.display())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profiles::default()),
            Err(e) => Err(CliError::Local(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Writes the profiles, owner-only, replacing the file at once.
    pub fn save(&self) -> Result<()> {
        let path = profiles_path()?;
        let dir = path.parent().expect("a file path has a parent");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let tmp = dir.join(".profiles.json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(self).map_err(|e| CliError::Local(e.to_string()))?)?;
        file.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_kept_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: this is the only test of the crate that touches the environment.
        unsafe { std::env::set_var("TESSERA_CONFIG_DIR", dir.path().join("cfg")) };
        let mut p = Profiles::load().unwrap();
        assert!(p.profiles.is_empty());
        p.profiles.insert("default".into(), Profile { url: "http://x:1".into(), token: Some("t".into()), ..Profile::default() });
        p.save().unwrap();
        let meta = std::fs::metadata(dir.path().join("cfg/profiles.json")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let dir_meta = std::fs::metadata(dir.path().join("cfg")).unwrap();
        assert_eq!(dir_meta.permissions().mode() & 0o777, 0o700);
        assert_eq!(Profiles::load().unwrap().profiles["default"].token.as_deref(), Some("t"));
    }
}
