//! Scenarios: tools that read the system catalogs, through the PostgreSQL
//! listener. Debian's `psql` lists tables (`\dt`), indexes (`\di`), views
//! (`\dv`) and the database (`\l`) and describes a table (`\d`) with its
//! columns, types, defaults, indexes and checks, and answers the verbose and
//! other listings (`\d+`, `\dt+`, `\l+`, `\du`, `\dn+`, `\df`, `\z`); SQLAlchemy 1.4 (Debian's
//! `python3-sqlalchemy` over `python3-psycopg2`) creates tables with its own
//! DDL and reflects them back — columns, types, primary and foreign keys,
//! indexes, unique constraints — then reads and writes through the reflected
//! tables (`tests/clients/sqlalchemy_reflection.py`).

use std::process::Command;

use anyhow::{Context, Result, ensure};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

async fn cluster_with_pgwire() -> (Cluster, u16) {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_PGWIRE_ENABLED".into(), "true".into()), ("SERVICE_PGWIRE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    (Cluster::start(options).await.expect("cluster start"), port)
}

/// Runs `psql` as the admin on database `shop`, each statement or
/// meta-command its own `-c`; its output, or why it failed.
fn psql(port: u16, commands: &[&str]) -> Result<String> {
    let args: Vec<&str> = commands.iter().flat_map(|c| ["-c", *c]).collect();
    let out = Command::new("psql")
        .arg("--no-psqlrc")
        .arg("-v")
        .arg("ON_ERROR_STOP=1")
        .arg(format!("host=127.0.0.1 port={port} user={ADMIN_USER} dbname=shop sslmode=disable"))
        .args(&args)
        .env("PGPASSWORD", ADMIN_PASSWORD)
        .env("PGCONNECT_TIMEOUT", "20")
        .output()
        .context("running psql (Debian package postgresql-client)")?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(out.status.success(), "psql {commands:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    Ok(stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_lists_and_describes_relations() {
    let (cluster, port) = cluster_with_pgwire().await;
    if let Err(e) = psql_scenario(port) {
        panic!("psql catalog scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

fn psql_scenario(port: u16) -> Result<()> {
    psql(
        port,
        &[
            "CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(40) NOT NULL DEFAULT 'nobody', balance NUMERIC(12,2), \
         email TEXT UNIQUE, CHECK (balance >= 0))",
            "CREATE INDEX accounts_by_owner ON accounts (owner)",
            "CREATE TABLE transfers (id BIGINT PRIMARY KEY, account_id INT REFERENCES accounts (id), at TIMESTAMP)",
            "CREATE VIEW big_accounts AS SELECT id, owner FROM accounts WHERE balance > 1000",
        ],
    )?;

    let tables = psql(port, &["\\dt"])?;
    for expected in ["List of relations", "public | accounts  | table | tessera", "public | transfers | table | tessera", "(2 rows)"] {
        ensure!(tables.contains(expected), "\\dt lacks {expected:?}:\n{tables}");
    }
    ensure!(!tables.contains("big_accounts"), "\\dt lists only tables:\n{tables}");

    let described = psql(port, &["\\d accounts"])?;
    for expected in [
        "Table \"public.accounts\"",
        "id      | integer               |           | not null |",
        "owner   | character varying(40) |           | not null | 'nobody'",
        "balance | numeric(12,2)         |           |          |",
        "\"accounts_pkey\" PRIMARY KEY, btree (id)",
        "\"accounts_by_owner\" btree (owner)",
        "UNIQUE CONSTRAINT, btree (email)",
        "Check constraints:",
        "CHECK (balance >= 0)",
    ] {
        ensure!(described.contains(expected), "\\d accounts lacks {expected:?}:\n{described}");
    }

    let indexes = psql(port, &["\\di"])?;
    ensure!(indexes.contains("accounts_by_owner") && indexes.contains("transfers_pkey"), "\\di:\n{indexes}");
    let views = psql(port, &["\\dv"])?;
    ensure!(views.contains("big_accounts | view"), "\\dv:\n{views}");
    let databases = psql(port, &["\\l"])?;
    ensure!(databases.contains(" shop ") && databases.contains("UTF8"), "\\l:\n{databases}");

    // The verbose forms and the other listings answer too.
    let verbose = psql(port, &["\\d+ accounts"])?;
    ensure!(verbose.contains("Storage") && verbose.contains("Access method: heap"), "\\d+:\n{verbose}");
    for command in ["\\dt+", "\\di+", "\\l+", "\\du", "\\dn+", "\\df", "\\z", "\\d+ big_accounts"] {
        psql(port, &[command])?;
    }
    let roles = psql(port, &["\\du"])?;
    ensure!(roles.contains("tessera"), "\\du:\n{roles}");

    // A name that is no relation: psql's own message, not an error of the server.
    let missing = psql(port, &["\\d nothing_here"]);
    ensure!(missing.is_err_and(|e| e.to_string().contains("Did not find any relation named")), "\\d of a missing name");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlalchemy_reflects_what_it_created() {
    let (cluster, port) = cluster_with_pgwire().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/sqlalchemy_reflection.py");
    // Debian's interpreter: python3-sqlalchemy and python3-psycopg2 are
    // installed for it (deploy/test.sh).
    let out = tokio::task::spawn_blocking(move || {
        Command::new("/usr/bin/python3").arg(script).arg(port.to_string()).arg(ADMIN_USER).arg(ADMIN_PASSWORD).output()
    })
    .await
    .expect("the scenario ran")
    .expect("python3 starts (Debian packages python3-sqlalchemy, python3-psycopg2)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("sqlalchemy scenario passed"),
        "SQLAlchemy scenario failed:\n{said}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.log_tails(30)
    );
}
