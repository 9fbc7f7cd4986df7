//! Scenario: `psql` (Debian's PostgreSQL client) talks to Tessera through the
//! router's PostgreSQL wire listener, over TLS with the router's certificate.
//!
//! The admin signs in with their Tessera password; tables are created, filled
//! and read with PostgreSQL's command tags and aligned output; an error comes
//! with its SQLSTATE and a caret under its position; a `BEGIN` … `COMMIT`
//! block in one message applies entirely or not at all; a transaction held
//! open across messages sees its own writes and is rolled back by ROLLBACK or
//! a dropped connection; a viewer reads but is
//! refused a write (42501); a session token from the HTTP login is accepted
//! as the password; a wrong password and a client that will not use TLS are
//! refused; a named database is its own Tessera database.

use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

const VIEWER_PASSWORD: &str = "Viewer-Passw0rd-12";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_speaks_to_tessera() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).expect("a certificate");
    let cert_path = dir.path().join("router.pem");
    let key_path = dir.path().join("router.key");
    std::fs::write(&cert_path, cert.cert.pem()).expect("cert written");
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).expect("key written");
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![
            ("SERVICE_PGWIRE_ENABLED".into(), "true".into()),
            ("SERVICE_PGWIRE_PORT".into(), port.to_string()),
            ("SERVICE_TLS_CERT".into(), cert_path.display().to_string()),
            ("SERVICE_TLS_KEY".into(), key_path.display().to_string()),
        ],
        https_ca: Some(cert.cert.pem().into_bytes()),
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    let psql = Psql { port, root_cert: cert_path.display().to_string() };
    if let Err(e) = scenario(&mut cluster, &psql).await {
        panic!("pgwire scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn scenario(c: &mut Cluster, psql: &Psql) -> Result<()> {
    // Tables made, filled and read as in PostgreSQL.
    let made = psql.admin(&[
        "CREATE TABLE pets (id INT PRIMARY KEY, name TEXT, weight FLOAT, indoor BOOLEAN)",
        "INSERT INTO pets VALUES (1, 'Rex', 12.5, false), (2, 'Tom', NULL, true)",
        "UPDATE pets SET name = 'Max' WHERE id = 2",
        "SELECT id, name, weight, indoor FROM pets ORDER BY id",
    ])?;
    made.ok()?;
    for expected in [
        "CREATE TABLE",
        "INSERT 0 2",
        "UPDATE 1",
        " id | name | weight | indoor",
        "  1 | Rex  |   12.5 | f",
        "  2 | Max  |        | t",
        "(2 rows)",
    ] {
        ensure!(made.stdout.contains(expected), "no {expected:?} in:\n{}", made.stdout);
    }
    let n = psql.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &["-At", "-c", "SELECT count(*) FROM pets"])?;
    ensure!(n.ok()?.stdout.trim() == "2", "{n:?}");

    // An error: SQLSTATE, message, and the caret under the position.
    let wrong = psql.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &["-v", "VERBOSITY=verbose", "-c", "SELECT nmae FROM pets"])?;
    ensure!(!wrong.success && wrong.stderr.contains("42703") && wrong.stderr.contains("nmae"), "{wrong:?}");
    let syntax =
        psql.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &["-v", "VERBOSITY=verbose", "-c", "SELECT id FROM pets WHERE id = = 1"])?;
    ensure!(!syntax.success && syntax.stderr.contains("42601"), "{syntax:?}");
    let caret =
        syntax.stderr.lines().skip_while(|l| !l.starts_with("LINE 1: SELECT id FROM pets WHERE id = = 1")).nth(1).unwrap_or_default();
    ensure!(caret.trim() == "^" && caret.len() > "LINE 1: ".len(), "no caret under the statement: {syntax:?}");

    // A block in one message is atomic: the duplicate key undoes the first insert.
    let block = psql.admin(&["BEGIN; INSERT INTO pets VALUES (3, 'Kit', 3, true); INSERT INTO pets VALUES (3, 'Dup', 1, true); COMMIT"])?;
    ensure!(!block.success && block.stderr.contains("duplicate key"), "{block:?}");
    let block = psql.admin(&["BEGIN; INSERT INTO pets VALUES (3, 'Kit', 3, true); UPDATE pets SET weight = 4 WHERE id = 3; COMMIT"])?;
    ensure!(block.ok()?.stdout.contains("COMMIT"), "{block:?}");
    let kit = psql.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &["-At", "-c", "SELECT name, weight FROM pets WHERE id = 3"])?;
    ensure!(kit.ok()?.stdout.trim() == "Kit|4", "{kit:?}");
    // A transaction held open across messages: it sees its own write, ROLLBACK
    // undoes it, a connection that ends inside one rolls it back, COMMIT keeps it.
    let open = psql.admin(&["BEGIN", "INSERT INTO pets VALUES (9, 'Nope', 1, true)", "SELECT count(*) FROM pets", "ROLLBACK"])?;
    ensure!(open.ok()?.stdout.contains(" 4\n") && open.stdout.contains("ROLLBACK"), "{open:?}");
    let dropped = psql.admin(&["BEGIN", "INSERT INTO pets VALUES (9, 'Nope', 1, true)"])?;
    dropped.ok()?;
    let kept = psql.admin(&["BEGIN", "INSERT INTO pets VALUES (8, 'Pip', 1, true)", "COMMIT"])?;
    ensure!(kept.ok()?.stdout.contains("COMMIT"), "{kept:?}");
    let ids = psql.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &["-At", "-c", "SELECT id FROM pets WHERE id > 3 ORDER BY id"])?;
    ensure!(ids.ok()?.stdout.trim() == "8", "only the committed row stays: {ids:?}");
    ensure!(psql.admin(&["DELETE FROM pets WHERE id = 8"])?.success, "cleanup");

    // A viewer reads; their write is refused with insufficient_privilege.
    c.http
        .post("/api/v1/admin/users", &json!({"username": "vic", "email": "vic@example.com", "password": VIEWER_PASSWORD, "role": "viewer"}))
        .await?
        .ensure_status(201)?;
    let read = psql.run("vic", VIEWER_PASSWORD, "require", None, &["-At", "-c", "SELECT name FROM pets WHERE id = 1"])?;
    ensure!(read.ok()?.stdout.trim() == "Rex", "{read:?}");
    let write = psql.run("vic", VIEWER_PASSWORD, "require", None, &["-v", "VERBOSITY=verbose", "-c", "DELETE FROM pets"])?;
    ensure!(!write.success && write.stderr.contains("42501"), "{write:?}");

    // A session token (say, after an MFA sign-in over HTTP) works as the password,
    // asked for in cleartext with `options=-c tessera.auth=token` (the admin
    // otherwise proves their password by SCRAM).
    let token = c.http.anonymous().login_as(ADMIN_USER, ADMIN_PASSWORD).await?.token().context("a token")?.to_string();
    let by_token = psql.run(
        ADMIN_USER,
        &token,
        "verify-full",
        Some("postgres options='-c tessera.auth=token'"),
        &["-At", "-c", "SELECT name FROM pets WHERE id = 2"],
    )?;
    ensure!(by_token.ok()?.stdout.trim() == "Max", "{by_token:?}");

    // Refused: a wrong password; a client that will not use TLS.
    let bad = psql.run(ADMIN_USER, "not-the-password", "require", None, &["-c", "SELECT 1"])?;
    ensure!(!bad.success && bad.stderr.contains("password authentication failed"), "{bad:?}");
    let clear = psql.run(ADMIN_USER, ADMIN_PASSWORD, "disable", None, &["-c", "SELECT 1"])?;
    ensure!(!clear.success && clear.stderr.contains("TLS only"), "{clear:?}");

    // `dbname` names a Tessera database of its own.
    let sales = psql.run(
        ADMIN_USER,
        ADMIN_PASSWORD,
        "require",
        Some("sales"),
        &["-c", "CREATE TABLE orders (id INT PRIMARY KEY)", "-c", "SELECT count(*) FROM pets"],
    )?;
    ensure!(!sales.success && sales.stderr.contains("pets"), "pets is not in database sales: {sales:?}");
    let tables = c.http.get("/api/v1/tables?database=sales").await?.ensure_status(200)?;
    ensure!(tables.json["tables"].to_string().contains("orders"), "{tables}");
    Ok(())
}

/// Runs Debian's `psql` against the listener.
struct Psql {
    port: u16,
    root_cert: String,
}

#[derive(Debug)]
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self) -> Result<&Self> {
        ensure!(self.success, "psql failed: {self:?}");
        Ok(self)
    }
}

impl Psql {
    /// The admin runs each statement as its own `-c`.
    fn admin(&self, statements: &[&str]) -> Result<Run> {
        let args: Vec<&str> = statements.iter().flat_map(|s| ["-c", s]).collect();
        self.run(ADMIN_USER, ADMIN_PASSWORD, "require", None, &args)
    }

    /// `database`: the `dbname` and any further connection parameters.
    fn run(&self, user: &str, password: &str, sslmode: &str, database: Option<&str>, args: &[&str]) -> Result<Run> {
        let mut conninfo = format!("host=127.0.0.1 port={} user={user} sslmode={sslmode} sslrootcert={}", self.port, self.root_cert);
        if let Some(d) = database {
            conninfo.push_str(&format!(" dbname={d}"));
        }
        let out = Command::new("psql")
            .arg("--no-psqlrc")
            .arg("-v")
            .arg("ON_ERROR_STOP=1")
            .arg(&conninfo)
            .args(args)
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "20")
            .output()
            .context("running psql (Debian package postgresql-client)")?;
        Ok(Run {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Scenario: the `tokio-postgres` driver (the extended protocol: Parse, Bind,
/// Describe, Execute) on a router without a certificate: prepared statements
/// with typed parameters, rows decoded by their declared types, an error as
/// a `DbError` with its SQLSTATE. Then a
/// long query is cancelled with the driver's cancel token: it answers 57014
/// "canceling statement due to user request" long before the query limit, the
/// nodes stop working on it, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_prepares_binds_and_reads_typed_rows() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_PGWIRE_ENABLED".into(), "true".into()), ("SERVICE_PGWIRE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = prepared_statements(port).await {
        panic!("tokio-postgres scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
    if let Err(e) = cancel_a_long_query(&cluster, port).await {
        panic!("cancel scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn cancel_a_long_query(cluster: &Cluster, port: u16) -> Result<()> {
    let config = format!("host=127.0.0.1 port={port} user={ADMIN_USER} password={ADMIN_PASSWORD} connect_timeout=20");
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    client.batch_execute("CREATE TABLE pairs (id INT PRIMARY KEY, v INT)").await?;
    let values: Vec<String> = (0..6000).map(|i| format!("({i}, {})", i % 97)).collect();
    client.batch_execute(&format!("INSERT INTO pairs VALUES {}", values.join(", "))).await?;

    // 36 million row pairs: far longer than the 30 s query limit in a debug build.
    let client = std::sync::Arc::new(client);
    let started = std::time::Instant::now();
    let long = tokio::spawn({
        let client = client.clone();
        async move { client.query_one("SELECT COUNT(*) FROM pairs a CROSS JOIN pairs b WHERE a.v + b.v = -1", &[]).await }
    });
    // A cancel that arrives before the query started is a no-op: ask until it ends.
    let token = client.cancel_token();
    while !long.is_finished() {
        token.cancel_query(tokio_postgres::NoTls).await?;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let answered = started.elapsed();
    let err = long.await?.expect_err("the cancelled query fails");
    let db = err.as_db_error().context("a database error")?;
    ensure!(db.code().code() == "57014" && db.message().contains("user request"), "{db:?}");
    ensure!(answered < std::time::Duration::from_secs(20), "the cancel was answered after {answered:?}");

    // The nodes stop working on it: a second with almost no node CPU comes soon.
    tessera_tests::wait_for(std::time::Duration::from_secs(15), "the nodes go idle", async || {
        let before = cluster.nodes_cpu_secs()?;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let used = cluster.nodes_cpu_secs()? - before;
        Ok((used < 0.5).then_some(()))
    })
    .await?;
    let n: i64 = client.query_one("SELECT count(*) FROM pairs", &[]).await?.get(0);
    ensure!(n == 6000, "{n} rows");
    drop(client);
    let _ = driver.await;
    Ok(())
}

async fn prepared_statements(port: u16) -> Result<()> {
    use tokio_postgres::types::Type;
    let config = format!("host=127.0.0.1 port={port} user={ADMIN_USER} password={ADMIN_PASSWORD} connect_timeout=20");
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);

    client.batch_execute("CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price FLOAT, sold BOOLEAN)").await?;
    let insert =
        client.prepare_typed("INSERT INTO items VALUES ($1, $2, $3, $4)", &[Type::INT8, Type::TEXT, Type::FLOAT8, Type::BOOL]).await?;
    for i in 0..20i64 {
        let n = client.execute(&insert, &[&i, &format!("item-{i}"), &(i as f64 * 1.5), &(i % 2 == 0)]).await?;
        ensure!(n == 1, "insert {i} affected {n} rows");
    }
    // A prepared read: its columns are described before any row exists for them.
    let select = client.prepare_typed("SELECT id, name, price, sold FROM items WHERE id >= $1 ORDER BY id", &[Type::INT8]).await?;
    let types: Vec<Type> = select.columns().iter().map(|c| c.type_().clone()).collect();
    ensure!(types == [Type::INT8, Type::TEXT, Type::FLOAT8, Type::BOOL], "described {types:?}");
    let rows = client.query(&select, &[&17i64]).await?;
    ensure!(rows.len() == 3, "{} rows", rows.len());
    let (id, name, price, sold): (i64, String, f64, bool) = (rows[0].get(0), rows[0].get(1), rows[0].get(2), rows[0].get(3));
    ensure!((id, name.as_str(), price, sold) == (17, "item-17", 25.5, false), "{id} {name} {price} {sold}");
    // The same statement again, other parameters; then an update's count.
    ensure!(client.query(&select, &[&0i64]).await?.len() == 20, "all rows");
    let update = client.prepare_typed("UPDATE items SET sold = $1 WHERE id < $2", &[Type::BOOL, Type::INT8]).await?;
    ensure!(client.execute(&update, &[&true, &5i64]).await? == 5, "five rows updated");
    let sold: i64 = client.query_one("SELECT count(*) AS n FROM items WHERE sold = true", &[]).await?.get(0);
    ensure!(sold == 12, "{sold} sold");

    // Errors carry their SQLSTATE.
    let err = client.execute(&insert, &[&1i64, &"dup", &1.0f64, &true]).await.expect_err("a duplicate key");
    let db = err.as_db_error().context("a database error")?;
    ensure!(db.code().code() == "23505", "{db:?}");

    drop(client);
    let _ = driver.await;
    Ok(())
}
