//! The cluster's certificate authority and the certificates it issues.
//!
//! Every process of a secure cluster holds a certificate issued by the cluster
//! CA, and the certificate says which part the process plays: a URI subject
//! alternative name [`ROLE_NODE`] or [`ROLE_ROUTER`], set by whoever issues it
//! (`tessera-node certs`, the Helm chart, cert-manager). Nodes let callers do
//! what their role allows (see `node/src/access.rs` and `docs/security.md`).
//!
//! [`init_dir`] is what `deploy/cluster.sh up` runs: it creates the CA and one
//! certificate per process in a directory, keeping what is already there.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

/// The URI SAN of a node certificate.
pub const ROLE_NODE: &str = "urn:tessera:role:node";
/// The URI SAN of a router certificate.
pub const ROLE_ROUTER: &str = "urn:tessera:role:router";

/// The part a certificate holder plays in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A node: Raft peer and placement.
    Node,
    /// A router: data and administration on behalf of users.
    Router,
}

impl Role {
    /// The URI SAN naming the role.
    pub fn uri(self) -> &'static str {
        match self {
            Role::Node => ROLE_NODE,
            Role::Router => ROLE_ROUTER,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Router => "router",
        }
    }
}

/// The role a DER certificate names (`None`: none, or not parseable): a URI
/// subject alternative name [`ROLE_NODE`] / [`ROLE_ROUTER`], else a subject
/// common name `node`/`router` or starting `node.`/`router.` (what issuers that
/// cannot set URI names use, such as Helm's `genSignedCert`). A certificate
/// naming both roles is taken as a router's (the lesser).
pub fn role_of(der: &[u8]) -> Option<Role> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let uris: Vec<&str> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san.value.general_names.iter().filter_map(|n| if let GeneralName::URI(u) = n { Some(*u) } else { None }).collect(),
        _ => Vec::new(),
    };
    if uris.contains(&ROLE_ROUTER) {
        return Some(Role::Router);
    }
    if uris.contains(&ROLE_NODE) {
        return Some(Role::Node);
    }
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    let named = |role: &str| cn == role || cn.strip_prefix(role).is_some_and(|rest| rest.starts_with('.'));
    if named("router") {
        Some(Role::Router)
    } else if named("node") {
        Some(Role::Node)
    } else {
        None
    }
}

/// Errors making or storing certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// A CA able to issue node and router certificates.
pub struct ClusterCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl ClusterCa {
    /// A new self-signed CA named `name`, valid until January 1st ten years on.
    pub fn create(name: &str) -> Result<ClusterCa, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationName, "Tessera");
        params.distinguished_name = dn;
        params.not_after = rcgen::date_time_ymd(year_from_now(10), 1, 1);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(ClusterCa { cert_pem: cert.pem(), key_pem: key.serialize_pem(), issuer: Issuer::new(params, key) })
    }

    /// The CA stored as PEM (its certificate and key).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<ClusterCa, CertError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(ClusterCa { issuer, cert_pem: cert_pem.to_string(), key_pem: key_pem.to_string() })
    }

    /// The CA certificate (PEM), which every process trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A certificate for `role` named `name`, valid for `hosts` (DNS names or IP
    /// addresses) and until January 1st two years on, usable as TLS server and client: (cert PEM, key PEM).
    pub fn issue(&self, role: Role, name: &str, hosts: &[String]) -> Result<(String, String), CertError> {
        let mut params = CertificateParams::new(hosts.to_vec())?;
        params.subject_alt_names.push(SanType::URI(role.uri().try_into()?));
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationalUnitName, role.as_str());
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.not_after = rcgen::date_time_ymd(year_from_now(2), 1, 1);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The current year plus `years`.
fn year_from_now(years: i32) -> i32 {
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400;
    1970 + (days as f64 / 365.2425) as i32 + years
}

/// The files of one process's certificate in a certificate directory.
pub fn cert_files(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), CertError> {
    let io = |source| CertError::Io { path: path.to_path_buf(), source };
    std::fs::write(path, text).map_err(io)?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

/// Makes `dir` hold a cluster CA (`ca.pem`, `ca.key`) and a certificate per
/// process of `processes` (role and name: `node-1.pem`/`.key`, ...), valid for
/// `hosts`. What exists is kept (a CA is made only when `ca.pem` is missing);
/// answers the files it wrote.
pub fn init_dir(dir: &Path, processes: &[(Role, String)], hosts: &[String]) -> Result<Vec<PathBuf>, CertError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CertError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let (ca_cert, ca_key) = cert_files(dir, "ca");
    let mut written = Vec::new();
    let ca = if ca_cert.exists() {
        let cert = std::fs::read_to_string(&ca_cert).map_err(io(&ca_cert))?;
        let key = std::fs::read_to_string(&ca_key).map_err(io(&ca_key))?;
        ClusterCa::from_pem(&cert, &key)?
    } else {
        let ca = ClusterCa::create("Tessera cluster CA")?;
        write(&ca_key, &ca.key_pem, true)?;
        write(&ca_cert, ca.cert_pem(), false)?;
        written.extend([ca_cert, ca_key]);
        ca
    };
    for (role, name) in processes {
        let (cert, key) = cert_files(dir, name);
        if cert.exists() && key.exists() {
            continue;
        }
        let (cert_pem, key_pem) = ca.issue(*role, name, hosts)?;
        write(&key, &key_pem, true)?;
        write(&cert, &cert_pem, false)?;
        written.extend([cert, key]);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_name_their_role_and_a_directory_is_made_once() {
        let ca = ClusterCa::create("test CA").unwrap();
        let hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        for role in [Role::Node, Role::Router] {
            let (pem, _) = ca.issue(role, "p", &hosts).unwrap();
            let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            assert_eq!(role_of(der.as_ref()), Some(role));
        }
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
        assert_eq!(role_of(der.as_ref()), None, "the CA plays no role");

        // Issuers that cannot set URI names put the role in the common name.
        for (cn, role) in [("node.tessera", Some(Role::Node)), ("router", Some(Role::Router)), ("nodes", None), ("x.node", None)] {
            let mut params = CertificateParams::new(hosts.clone()).unwrap();
            params.distinguished_name.push(DnType::CommonName, cn);
            let key = KeyPair::generate().unwrap();
            let der = params.signed_by(&key, &ca.issuer).unwrap().der().to_vec();
            assert_eq!(role_of(&der), role, "{cn}");
        }

        let dir = tempfile::tempdir().unwrap();
        let processes = vec![(Role::Node, "node-1".to_string()), (Role::Router, "router".to_string())];
        let first = init_dir(dir.path(), &processes, &hosts).unwrap();
        assert_eq!(first.len(), 6);
        let again = init_dir(dir.path(), &processes, &hosts).unwrap();
        assert!(again.is_empty(), "nothing is remade: {again:?}");
        // A process added later gets a certificate from the same CA.
        let more = init_dir(dir.path(), &[(Role::Node, "node-4".to_string())], &hosts).unwrap();
        assert_eq!(more.len(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("ca.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
