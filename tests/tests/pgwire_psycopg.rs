//! Scenario: Python's psycopg 3 (Debian's `python3-psycopg`, over libpq) talks
//! to Tessera through the PostgreSQL listener: `tests/clients/psycopg_scenario.py`
//! signs in (SCRAM), creates a table, binds parameters (dates sent in binary)
//! and reads rows back with their Python types (a DATE as `datetime.date`),
//! rolls back, gets `UniqueViolation` and `UndefinedColumn` by SQLSTATE, copies
//! rows with `cursor.copy()` inside a transaction and outside one, and commits
//! a `conn.transaction()` block. Each check prints a line; the first failed one
//! fails the scenario.

use std::process::Command;

use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psycopg_reads_writes_copies_and_rolls_back() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_PGWIRE_ENABLED".into(), "true".into()), ("SERVICE_PGWIRE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).await.expect("cluster start");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/psycopg_scenario.py");
    // Debian's interpreter: python3-psycopg is installed for it (deploy/test.sh).
    let out = tokio::task::spawn_blocking(move || {
        Command::new("/usr/bin/python3").arg(script).arg(port.to_string()).arg(ADMIN_USER).arg(ADMIN_PASSWORD).output()
    })
    .await
    .expect("the scenario ran")
    .expect("python3 starts (Debian package python3-psycopg)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("psycopg scenario passed"),
        "psycopg scenario failed:\n{said}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.log_tails(30)
    );
}
