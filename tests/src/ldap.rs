//! A real OpenLDAP server for the LDAP sign-in scenario (`tests/tests/ldap_login.rs`).
//!
//! [`Slapd::start`] writes an old-style `slapd.conf` (core, cosine and
//! inetOrgPerson schemas, one `mdb` database for `dc=tessera,dc=test`) into a
//! temp dir, runs Debian's `slapd` in the foreground (`-d 0`) on a free
//! loopback port, waits until it answers a search, and seeds it with the
//! directory the scenario expects:
//!
//! - `ou=people`: `alice`, `bob`, `carol` and `dave` (inetOrgPerson, plain-text
//!   passwords [`ALICE_PASSWORD`]…; dave carries `employeeType: disabled`);
//! - `ou=groups` (groupOfNames, `member` = user DNs): `tessera-admins` {alice},
//!   `engineers` {bob, dave}, `unmapped` {carol}.
//!
//! [`Slapd::start_with_tls`] does the same and also gives slapd a server
//! certificate (SAN IP 127.0.0.1 and DNS localhost) issued by a test CA made
//! with `tessera_api::certs` (as the harness makes the cluster's, see
//! [`crate::certs`]): slapd then answers StartTLS on its `ldap://` port and
//! TLS on a second, `ldaps://`, port ([`Slapd::ldaps_url`]); [`Slapd::ca_file`]
//! is the CA that signed the certificate, [`other_ca`] one that did not.
//!
//! The server is killed (and reaped) when the [`Slapd`] is dropped; if the test
//! panicked its log tail is printed and its temp dir kept.
//!
//! `slapd` and the client tools come from the Debian packages `slapd` and
//! `ldap-utils`; without them [`Slapd::start`] fails with a message saying so
//! (the scenario never skips). The clients run with `LDAPNOINIT=1`, so no
//! `ldap.conf`/`.ldaprc` of the machine changes what they do.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// The directory's suffix.
pub const BASE_DN: &str = "dc=tessera,dc=test";
/// The directory's root DN (the router's search account in the scenario).
pub const ADMIN_DN: &str = "cn=admin,dc=tessera,dc=test";
/// The root DN's password (plain text in `slapd.conf`: a test server).
pub const ADMIN_PASSWORD: &str = "Ldap-Adm1n-Secret!";
/// Where the users are.
pub const PEOPLE_DN: &str = "ou=people,dc=tessera,dc=test";
/// Where the groups are.
pub const GROUPS_DN: &str = "ou=groups,dc=tessera,dc=test";

pub const ALICE_PASSWORD: &str = "Alice-Passw0rd!";
pub const BOB_PASSWORD: &str = "Bob-Passw0rd!";
pub const CAROL_PASSWORD: &str = "Carol-Passw0rd!";
pub const DAVE_PASSWORD: &str = "Dave-Passw0rd!";

/// How long slapd may take to answer its first search.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long slapd may take to exit after SIGTERM before it is SIGKILLed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for slapd.
const POLL: Duration = Duration::from_millis(50);
/// What the error says when the OpenLDAP programs are missing.
const INSTALL_HINT: &str = "install the Debian packages `slapd` and `ldap-utils` \
     (DEBIAN_FRONTEND=noninteractive apt-get install -y slapd ldap-utils; deploy/test.sh installs them)";

/// The DN of user `uid`.
pub fn user_dn(uid: &str) -> String {
    format!("uid={uid},{PEOPLE_DN}")
}

/// The DN of group `cn`.
pub fn group_dn(cn: &str) -> String {
    format!("cn={cn},{GROUPS_DN}")
}

/// A running `slapd` seeded with the scenario's users and groups.
pub struct Slapd {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
    tools: Tools,
    tls: Option<Tls>,
    tempdir: Option<tempfile::TempDir>,
}

/// The TLS side of a [`Slapd::start_with_tls`] server.
#[derive(Clone, Debug)]
struct Tls {
    /// The `ldaps://` port.
    ldaps_port: u16,
    /// The CA (PEM) that signed slapd's certificate.
    ca_file: PathBuf,
    /// An empty `ldap.conf` the TLS client checks name (`LDAPCONF`).
    empty_conf: PathBuf,
}

/// The hosts slapd's certificate is valid for.
fn cert_hosts() -> Vec<String> {
    vec!["127.0.0.1".into(), "localhost".into()]
}

/// A CA made in `dir` (`ca.pem`, `ca.key`) that signed no certificate slapd
/// holds: a client trusting only it must refuse slapd's TLS. Answers `ca.pem`.
pub fn other_ca(dir: &Path) -> Result<PathBuf> {
    tessera_api::certs::init_dir(dir, &[], &cert_hosts()).with_context(|| format!("making a CA in {}", dir.display()))?;
    Ok(dir.join("ca.pem"))
}

/// Paths of the OpenLDAP programs.
#[derive(Clone, Debug)]
struct Tools {
    slapd: PathBuf,
    ldapsearch: PathBuf,
    ldapadd: PathBuf,
    ldapmodify: PathBuf,
    ldapwhoami: PathBuf,
}

impl Tools {
    fn find() -> Result<Tools> {
        Ok(Tools {
            slapd: find_program("slapd")?,
            ldapsearch: find_program("ldapsearch")?,
            ldapadd: find_program("ldapadd")?,
            ldapmodify: find_program("ldapmodify")?,
            ldapwhoami: find_program("ldapwhoami")?,
        })
    }
}

/// `name` on `$PATH`, or in the sbin/bin directories Debian installs to (test
/// runners often have no `/usr/sbin` on their `PATH`).
fn find_program(name: &str) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin", "/bin"].map(PathBuf::from));
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()).with_context(|| {
        format!("`{name}` not found on PATH nor in /usr/sbin, /usr/bin: the LDAP scenario needs a real OpenLDAP server; {INSTALL_HINT}")
    })
}

/// The schema files `slapd.conf` includes, each required to exist.
fn schema_files() -> Result<Vec<PathBuf>> {
    let dir = Path::new("/etc/ldap/schema");
    ["core.schema", "cosine.schema", "inetorgperson.schema"]
        .iter()
        .map(|f| {
            let p = dir.join(f);
            ensure!(p.is_file(), "{} not found; {INSTALL_HINT}", p.display());
            Ok(p)
        })
        .collect()
}

/// The directory `moduleload back_mdb` loads from, when the backend is a module.
fn module_dir() -> Option<PathBuf> {
    ["/usr/lib/ldap", "/usr/lib64/openldap", "/usr/lib/openldap", "/usr/libexec/openldap"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("back_mdb.so").exists() || d.join("back_mdb.la").exists())
}

/// The LDIF the directory is seeded with.
pub fn seed_ldif() -> String {
    let mut ldif = format!(
        "dn: {BASE_DN}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\ndc: tessera\no: Tessera test directory\n\n\
         dn: {PEOPLE_DN}\nobjectClass: top\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: {GROUPS_DN}\nobjectClass: top\nobjectClass: organizationalUnit\nou: groups\n\n"
    );
    let users: [(&str, &str, &str, Option<&str>); 4] = [
        ("alice", "Alice Admin", ALICE_PASSWORD, None),
        ("bob", "Bob Engineer", BOB_PASSWORD, None),
        ("carol", "Carol Unmapped", CAROL_PASSWORD, None),
        ("dave", "Dave Departed", DAVE_PASSWORD, Some("disabled")),
    ];
    for (uid, cn, password, employee_type) in users {
        let sn = cn.rsplit(' ').next().unwrap_or(cn);
        ldif.push_str(&format!(
            "dn: {}\nobjectClass: top\nobjectClass: person\nobjectClass: organizationalPerson\nobjectClass: inetOrgPerson\n\
             uid: {uid}\ncn: {cn}\nsn: {sn}\nmail: {uid}@tessera.test\nuserPassword: {password}\n",
            user_dn(uid)
        ));
        if let Some(t) = employee_type {
            ldif.push_str(&format!("employeeType: {t}\n"));
        }
        ldif.push('\n');
    }
    let groups: [(&str, &[&str]); 3] = [("tessera-admins", &["alice"]), ("engineers", &["bob", "dave"]), ("unmapped", &["carol"])];
    for (cn, members) in groups {
        ldif.push_str(&format!("dn: {}\nobjectClass: top\nobjectClass: groupOfNames\ncn: {cn}\n", group_dn(cn)));
        for m in members {
            ldif.push_str(&format!("member: {}\n", user_dn(m)));
        }
        ldif.push('\n');
    }
    ldif
}

impl Slapd {
    /// Starts a seeded slapd on a free loopback port (see the module docs).
    /// Blocks until it answers (at most 30 s).
    pub fn start() -> Result<Slapd> {
        Slapd::launch(false)
    }

    /// Like [`Slapd::start`], with a server certificate from a test CA
    /// ([`Slapd::ca_file`]): StartTLS on [`Slapd::url`] and TLS on
    /// [`Slapd::ldaps_url`]. Blocks until both answer, the certificate
    /// verified against the CA (at most 30 s).
    pub fn start_with_tls() -> Result<Slapd> {
        Slapd::launch(true)
    }

    fn launch(with_tls: bool) -> Result<Slapd> {
        let tools = Tools::find()?;
        let schemas = schema_files()?;
        let tempdir = tempfile::Builder::new().prefix("tessera-slapd-").tempdir()?;
        let root = tempdir.path().to_path_buf();
        let data = root.join("data");
        std::fs::create_dir_all(&data)?;
        let mut conf = String::new();
        for s in &schemas {
            conf.push_str(&format!("include {}\n", s.display()));
        }
        conf.push_str(&format!("pidfile {}\nargsfile {}\n", root.join("slapd.pid").display(), root.join("slapd.args").display()));
        if let Some(dir) = module_dir() {
            conf.push_str(&format!("modulepath {}\nmoduleload back_mdb\n", dir.display()));
        }
        let tls = if with_tls {
            // The key is written 0600 by the current user; slapd runs as that
            // user (no `-u`), so it reads it.
            let certs = root.join("certs");
            tessera_api::certs::init_dir(&certs, &[(tessera_api::certs::Role::Node, "slapd".into())], &cert_hosts())
                .context("making slapd's test CA and certificate")?;
            let (cert, key) = tessera_api::certs::cert_files(&certs, "slapd");
            let ca_file = certs.join("ca.pem");
            conf.push_str(&format!(
                "TLSCACertificateFile {}\nTLSCertificateFile {}\nTLSCertificateKeyFile {}\nTLSVerifyClient never\n",
                ca_file.display(),
                cert.display(),
                key.display()
            ));
            let empty_conf = root.join("ldap-client.conf");
            std::fs::write(&empty_conf, "")?;
            Some(Tls { ldaps_port: crate::pick_port()?, ca_file, empty_conf })
        } else {
            None
        };
        conf.push_str(&format!(
            "\ndatabase mdb\nmaxsize 67108864\nsuffix \"{BASE_DN}\"\nrootdn \"{ADMIN_DN}\"\nrootpw {ADMIN_PASSWORD}\n\
             directory {}\nindex objectClass eq\nindex uid eq\nindex member eq\n\
             access to attrs=userPassword by self write by anonymous auth by * none\n\
             access to * by * read\n",
            data.display()
        ));
        std::fs::write(root.join("slapd.conf"), conf)?;

        let port = crate::pick_port()?;
        let log = root.join("slapd.log");
        let mut urls = format!("ldap://127.0.0.1:{port}/");
        if let Some(tls) = &tls {
            urls.push_str(&format!(" ldaps://127.0.0.1:{}/", tls.ldaps_port));
        }
        let conf_path = root.join("slapd.conf").display().to_string();
        let args: Vec<String> = ["-d", "0", "-h", urls.as_str(), "-f", conf_path.as_str()].map(String::from).into();
        let child = crate::spawn_with_args(&tools.slapd, &args, &[], &log, &root, "slapd")?;
        let mut slapd = Slapd { child: Some(child), port, log, tools, tls, tempdir: Some(tempdir) };
        slapd.wait_answering()?;
        if let Some(tls) = &slapd.tls {
            slapd.tls_search(&tls.ca_file).context("slapd's TLS, checked with ldapsearch and the test CA")?;
        }
        slapd.add(&seed_ldif()).context("seeding the directory")?;
        let base = slapd.search(BASE_DN, "base", "(objectClass=*)", &["dn"])?;
        ensure!(base.contains(&format!("dn: {BASE_DN}")), "the seeded base entry is not found: {base}");
        match slapd.ldaps_url() {
            Some(ldaps) => eprintln!("[ldap] slapd answering on {} and {ldaps} (dir {})", slapd.url(), root.display()),
            None => eprintln!("[ldap] slapd answering on {} (dir {})", slapd.url(), root.display()),
        }
        Ok(slapd)
    }

    /// Polls an anonymous search of the root DSE until slapd answers; fails
    /// at once if slapd exited (a bad config, a taken port).
    fn wait_answering(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().context("slapd is not running")?.try_wait()? {
                self.child = None;
                bail!("slapd exited at start ({status}); log {}:\n{}", self.log.display(), crate::tail(&self.log, 40));
            }
            let out = self.run(
                &self.tools.ldapsearch,
                &["-x", "-LLL", "-H", &self.url(), "-o", "nettimeout=2", "-b", "", "-s", "base", "(objectClass=*)", "namingContexts"],
                None,
            )?;
            if out.status.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "slapd did not answer a search within {START_TIMEOUT:?}; last ldapsearch: {}; log {}:\n{}",
                    describe(&out),
                    self.log.display(),
                    crate::tail(&self.log, 40)
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// `ldap://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// The port slapd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `ldaps://127.0.0.1:PORT` (a [`Slapd::start_with_tls`] server only).
    pub fn ldaps_url(&self) -> Option<String> {
        self.tls.as_ref().map(|t| format!("ldaps://127.0.0.1:{}", t.ldaps_port))
    }

    /// The `ldaps://` port (a [`Slapd::start_with_tls`] server only).
    pub fn ldaps_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|t| t.ldaps_port)
    }

    /// The test CA (PEM) that signed slapd's certificate (a
    /// [`Slapd::start_with_tls`] server only).
    pub fn ca_file(&self) -> Option<&Path> {
        self.tls.as_ref().map(|t| t.ca_file.as_path())
    }

    /// Searches the root DSE over StartTLS and over LDAPS with `ldapsearch`
    /// trusting only `ca_file` (`TLS_REQCERT demand`); with the test CA, this
    /// tells a failure of the router's TLS from one of slapd's.
    pub fn tls_search(&self, ca_file: &Path) -> Result<()> {
        let tls = self.tls.as_ref().context("slapd was started without TLS")?;
        let ldaps = self.ldaps_url().context("no ldaps:// URL")?;
        let plain = self.url();
        for (what, args) in [("StartTLS", vec!["-ZZ", "-H", plain.as_str()]), ("LDAPS", vec!["-H", ldaps.as_str()])] {
            let mut cmd = Command::new(&self.tools.ldapsearch);
            cmd.args(["-x", "-LLL", "-o", "nettimeout=5"])
                .args(&args)
                .args(["-b", "", "-s", "base", "(objectClass=*)", "namingContexts"])
                // Only this CA: no ldap.conf/.ldaprc of the machine (LDAPNOINIT
                // would also drop the LDAPTLS_* variables).
                .env_remove("LDAPNOINIT")
                .env("LDAPCONF", &tls.empty_conf)
                .env("LDAPRC", "tessera-no-such-ldaprc")
                .env("LDAPTLS_CACERT", ca_file)
                .env("LDAPTLS_REQCERT", "demand")
                .stdin(Stdio::null());
            let out = cmd.output().with_context(|| format!("running {}", self.tools.ldapsearch.display()))?;
            ensure!(
                out.status.success(),
                "ldapsearch over {what}: {}; slapd log {}:\n{}",
                describe(&out),
                self.log.display(),
                crate::tail(&self.log, 40)
            );
        }
        Ok(())
    }

    /// `dc=tessera,dc=test`.
    pub fn base_dn(&self) -> &'static str {
        BASE_DN
    }

    /// The root DN.
    pub fn admin_dn(&self) -> &'static str {
        ADMIN_DN
    }

    /// The root DN's password.
    pub fn admin_password(&self) -> &'static str {
        ADMIN_PASSWORD
    }

    /// slapd's log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Runs `ldapmodify` as the root DN with `ldif` on stdin (changetype
    /// records, e.g. `dn: …\nchangetype: modify\nreplace: employeeType\n…`).
    pub fn modify(&self, ldif: &str) -> Result<()> {
        self.admin_tool(&self.tools.ldapmodify, ldif).context("ldapmodify")
    }

    /// Runs `ldapadd` as the root DN with the entries of `ldif`.
    pub fn add(&self, ldif: &str) -> Result<()> {
        self.admin_tool(&self.tools.ldapadd, ldif).context("ldapadd")
    }

    /// `ldapsearch` as the root DN below `base` (`scope`: base, one, sub);
    /// answers the LDIF printed.
    pub fn search(&self, base: &str, scope: &str, filter: &str, attrs: &[&str]) -> Result<String> {
        let url = self.url();
        let mut args =
            vec!["-x", "-LLL", "-H", &url, "-o", "nettimeout=5", "-D", ADMIN_DN, "-w", ADMIN_PASSWORD, "-b", base, "-s", scope, filter];
        args.extend_from_slice(attrs);
        let out = self.run(&self.tools.ldapsearch, &args, None)?;
        ensure!(out.status.success(), "ldapsearch -b {base:?} -s {scope} {filter:?}: {}", describe(&out));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Binds as `dn` with `password` (`ldapwhoami`); answers the authzid
    /// slapd reports (`dn:uid=…`), or the tool's failure.
    pub fn whoami(&self, dn: &str, password: &str) -> Result<String> {
        let url = self.url();
        let out = self.run(&self.tools.ldapwhoami, &["-x", "-H", &url, "-o", "nettimeout=5", "-D", dn, "-w", password], None)?;
        ensure!(out.status.success(), "ldapwhoami -D {dn:?}: {}", describe(&out));
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn admin_tool(&self, tool: &Path, ldif: &str) -> Result<()> {
        let url = self.url();
        let out = self.run(tool, &["-x", "-H", &url, "-o", "nettimeout=5", "-D", ADMIN_DN, "-w", ADMIN_PASSWORD], Some(ldif))?;
        ensure!(out.status.success(), "{}: {}\nLDIF:\n{ldif}", tool.display(), describe(&out));
        Ok(())
    }

    /// Runs an OpenLDAP client without the machine's `ldap.conf`/`.ldaprc`.
    fn run(&self, tool: &Path, args: &[&str], stdin: Option<&str>) -> Result<Output> {
        use std::io::Write;
        let mut cmd = Command::new(tool);
        cmd.args(args)
            .env("LDAPNOINIT", "1")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("running {}", tool.display()))?;
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().context("stdin pipe")?;
            pipe.write_all(input.as_bytes())?;
        }
        child.wait_with_output().with_context(|| format!("waiting for {}", tool.display()))
    }
}

/// Exit status, stdout and stderr of a client run.
fn describe(out: &Output) -> String {
    format!(
        "{} stdout: {:?} stderr: {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

impl Drop for Slapd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::signal(&child, libc::SIGTERM);
            let deadline = Instant::now() + STOP_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            if matches!(child.try_wait(), Ok(None)) {
                crate::signal(&child, libc::SIGKILL);
            }
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("[ldap] test failed; slapd log {} (last 40 lines):\n{}", self.log.display(), crate::tail(&self.log, 40));
            if let Some(dir) = self.tempdir.take() {
                eprintln!("[ldap] kept slapd dir {}", dir.keep().display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing OpenLDAP program is an error naming the packages to install.
    #[test]
    fn a_missing_program_names_the_packages() {
        let e = find_program("tessera-no-such-ldap-program").unwrap_err().to_string();
        assert!(e.contains("`slapd` and `ldap-utils`"), "{e}");
    }

    /// The TLS fixture: ldapsearch verifies slapd's certificate against the
    /// test CA over StartTLS and LDAPS, and refuses it with another CA.
    #[test]
    fn slapd_tls_verifies_against_its_ca_only() -> Result<()> {
        let slapd = Slapd::start_with_tls()?;
        let ca = slapd.ca_file().context("no CA")?.to_path_buf();
        slapd.tls_search(&ca)?;
        let dir = tempfile::tempdir()?;
        let other = other_ca(dir.path())?;
        ensure!(std::fs::read(&other)? != std::fs::read(&ca)?, "the other CA is the test CA");
        ensure!(slapd.tls_search(&other).is_err(), "ldapsearch accepted slapd's certificate with a CA that did not sign it");
        // Plain LDAP still works on the StartTLS port.
        ensure!(slapd.whoami(&user_dn("alice"), ALICE_PASSWORD)? == format!("dn:{}", user_dn("alice")), "alice's bind");
        Ok(())
    }

    /// The fixture alone: users bind with their passwords, dave is found only
    /// without the disabled filter, groups list their members, and `modify`
    /// changes what the directory answers.
    #[test]
    fn slapd_fixture_binds_searches_and_modifies() -> Result<()> {
        let slapd = Slapd::start()?;
        ensure!(slapd.whoami(&user_dn("alice"), ALICE_PASSWORD)? == format!("dn:{}", user_dn("alice")), "alice's bind");
        for (uid, pw) in [("bob", BOB_PASSWORD), ("carol", CAROL_PASSWORD), ("dave", DAVE_PASSWORD)] {
            slapd.whoami(&user_dn(uid), pw)?;
        }
        ensure!(slapd.whoami(&user_dn("alice"), "wrong").is_err(), "a wrong password bound");
        ensure!(slapd.whoami(&user_dn("zed"), "whatever").is_err(), "an unknown user bound");

        let enabled = |uid: &str| format!("(&(objectClass=inetOrgPerson)(uid={uid})(!(employeeType=disabled)))");
        ensure!(slapd.search(PEOPLE_DN, "sub", &enabled("alice"), &["dn"])?.contains(&user_dn("alice")), "alice by the user filter");
        ensure!(slapd.search(PEOPLE_DN, "sub", &enabled("dave"), &["dn"])?.trim().is_empty(), "dave passes the user filter");
        let groups = slapd.search(GROUPS_DN, "sub", &format!("(member={})", user_dn("bob")), &["cn"])?;
        ensure!(groups.contains("cn: engineers") && !groups.contains("tessera-admins"), "bob's groups: {groups}");

        slapd.modify(&format!("dn: {}\nchangetype: modify\nreplace: employeeType\nemployeeType: disabled\n", user_dn("bob")))?;
        ensure!(slapd.search(PEOPLE_DN, "sub", &enabled("bob"), &["dn"])?.trim().is_empty(), "bob still passes after being disabled");
        // A user cannot read another's password; anonymous cannot read it either.
        let out = slapd.run(
            &slapd.tools.ldapsearch,
            &[
                "-x",
                "-LLL",
                "-H",
                &slapd.url(),
                "-D",
                &user_dn("carol"),
                "-w",
                CAROL_PASSWORD,
                "-b",
                &user_dn("alice"),
                "-s",
                "base",
                "userPassword",
            ],
            None,
        )?;
        ensure!(
            out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("userPassword"),
            "carol reads alice's password: {}",
            describe(&out)
        );
        Ok(())
    }
}
