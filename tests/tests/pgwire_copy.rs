//! Scenario: bulk loads over the PostgreSQL wire with `COPY … FROM STDIN`,
//! from the `tokio-postgres` driver (extended protocol) and from `psql`'s
//! `\copy` (simple protocol).
//!
//! 100,000 rows in PostgreSQL's text format, sent in pieces cut anywhere,
//! arrive whole (NULLs and escapes included); CSV with a header, quotes and
//! newlines inside fields; a bad row fails the COPY naming its line, after
//! the batches before it were written (outside a transaction a COPY commits
//! every 1,000 rows, as YugabyteDB's does); inside a transaction the rows are
//! one statement of it: seen by the transaction only, gone on ROLLBACK, all
//! there after COMMIT, and a COPY too big for one replicated write is refused
//! (54000) and fails the transaction. TRUNCATE empties tables.

use std::io::Write as _;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use futures::SinkExt;
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_stdin_loads_rows_in_bulk() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_PGWIRE_ENABLED".into(), "true".into()), ("SERVICE_PGWIRE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(port).await {
        panic!("COPY scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn connect(port: u16) -> Result<tokio_postgres::Client> {
    let config = format!("host=127.0.0.1 port={port} user={ADMIN_USER} password={ADMIN_PASSWORD} connect_timeout=20");
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Sends `data` to a `COPY` in pieces of `piece` bytes; the rows it copied.
async fn copy(client: &tokio_postgres::Client, statement: &str, data: &[u8], piece: usize) -> Result<u64, tokio_postgres::Error> {
    copy_rows(client.copy_in::<_, Bytes>(statement).await?, data, piece).await
}

async fn copy_rows(sink: tokio_postgres::CopyInSink<Bytes>, data: &[u8], piece: usize) -> Result<u64, tokio_postgres::Error> {
    futures::pin_mut!(sink);
    for chunk in data.chunks(piece) {
        sink.send(Bytes::copy_from_slice(chunk)).await?;
    }
    sink.finish().await
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| format!("{} {}", d.code().code(), d.message())).unwrap_or_else(|| e.to_string())
}

async fn scenario(port: u16) -> Result<()> {
    let client = connect(port).await?;
    client.batch_execute("CREATE TABLE readings (id INT PRIMARY KEY, sensor TEXT, value FLOAT, note TEXT)").await?;

    // 100,000 rows of text format, cut at odd places.
    let mut text = Vec::new();
    for i in 1..=100_000u32 {
        match i {
            7 => writeln!(text, "7\ts-7\t\\N\ttab\\there, newline\\nthere, backslash \\\\")?,
            _ => writeln!(text, "{i}\ts-{}\t{}.5\t", i % 10, i % 1000)?,
        }
    }
    let started = std::time::Instant::now();
    let copied = copy(&client, "COPY readings FROM STDIN", &text, 65_521).await?;
    ensure!(copied == 100_000, "COPY answered {copied}");
    eprintln!("100,000 rows copied in {:?}", started.elapsed());
    let row = client.query_one("SELECT count(*), sum(id) FROM readings", &[]).await?;
    let (count, sum): (i64, i64) = (row.get(0), row.get(1));
    ensure!((count, sum) == (100_000, 5_000_050_000), "{count} rows summing to {sum}");
    let row = client.query_one("SELECT value, note FROM readings WHERE id = 7", &[]).await?;
    let (value, note): (Option<f64>, String) = (row.get(0), row.get(1));
    ensure!(value.is_none() && note == "tab\there, newline\nthere, backslash \\", "{value:?} {note:?}");
    let empty: String = client.query_one("SELECT note FROM readings WHERE id = 8", &[]).await?.get(0);
    ensure!(empty.is_empty(), "an empty field is an empty string in text format: {empty:?}");

    // CSV: a header, a delimiter and a newline inside quotes, doubled quotes,
    // an unquoted empty field (NULL) and a quoted one (empty text).
    let csv = b"id,sensor,note\n200001,\"a, \"\"b\"\"\nc\",\n200002,,\"\"\n";
    let copied = copy(&client, "COPY readings (id, sensor, note) FROM STDIN WITH (FORMAT csv, HEADER true)", csv, 5).await?;
    ensure!(copied == 2, "CSV COPY answered {copied}");
    let row = client.query_one("SELECT sensor, note FROM readings WHERE id = 200001", &[]).await?;
    let (sensor, note): (String, Option<String>) = (row.get(0), row.get(1));
    ensure!(sensor == "a, \"b\"\nc" && note.is_none(), "{sensor:?} {note:?}");
    let row = client.query_one("SELECT sensor, note FROM readings WHERE id = 200002", &[]).await?;
    let (sensor, note): (Option<String>, Option<String>) = (row.get(0), row.get(1));
    ensure!(sensor.is_none() && note.as_deref() == Some(""), "{sensor:?} {note:?}");

    // A bad value on line 2,500: the COPY fails naming it; the two batches of
    // 1,000 rows before it were written, nothing after.
    client.batch_execute("CREATE TABLE batches (id INT PRIMARY KEY, v INT)").await?;
    let mut data = String::new();
    for i in 1..=3000 {
        data.push_str(&if i == 2500 { "2500\tnot-a-number\n".to_string() } else { format!("{i}\t{i}\n") });
    }
    let err = copy(&client, "COPY batches FROM STDIN", data.as_bytes(), 4096).await.expect_err("a bad row");
    let db = err.as_db_error().context("a database error")?;
    ensure!(db.message().contains("line 2500"), "{}", sqlstate(&err));
    ensure!(db.detail().is_some_and(|d| d.contains("2000 rows were written")), "{:?}", db.detail());
    let n: i64 = client.query_one("SELECT count(*) FROM batches", &[]).await?.get(0);
    ensure!(n == 2000, "{n} rows after the failed COPY");
    // A short row, and malformed CSV, name their line too.
    let err = copy(&client, "COPY batches FROM STDIN", b"5001\t1\n5002\n", 64).await.expect_err("a short row");
    ensure!(sqlstate(&err).contains("line 2") && sqlstate(&err).contains("missing data for column"), "{}", sqlstate(&err));
    let err = copy(&client, "COPY batches FROM STDIN CSV", b"6001,1\n6002,\"2\n", 64).await.expect_err("an open quote");
    ensure!(sqlstate(&err).starts_with("22P04") && sqlstate(&err).contains("line 2"), "{}", sqlstate(&err));
    // Binary format and COPY TO are refused before any data is sent.
    for refused in ["COPY batches FROM STDIN WITH (FORMAT binary)", "COPY batches TO STDOUT"] {
        let err = client.simple_query(refused).await.expect_err("refused");
        ensure!(sqlstate(&err).starts_with("0A000"), "{refused}: {}", sqlstate(&err));
    }

    // Inside a transaction: the transaction sees its rows, nobody else does.
    client.batch_execute("CREATE TABLE staged (id INT PRIMARY KEY, v TEXT)").await?;
    let rows: String = (1..=500).map(|i| format!("{i}\tv{i}\n")).collect();
    let mut writer = connect(port).await?;
    let observer = connect(port).await?;
    let tx = writer.transaction().await?;
    tx.execute("INSERT INTO staged VALUES (0, 'first')", &[]).await?;
    let copied = copy_rows(tx.copy_in("COPY staged FROM STDIN").await?, rows.as_bytes(), 1000).await?;
    ensure!(copied == 500, "COPY in a transaction answered {copied}");
    let inside: i64 = tx.query_one("SELECT count(*) FROM staged", &[]).await?.get(0);
    let outside: i64 = observer.query_one("SELECT count(*) FROM staged", &[]).await?.get(0);
    ensure!((inside, outside) == (501, 0), "inside {inside}, outside {outside}");
    tx.rollback().await?;
    let after: i64 = observer.query_one("SELECT count(*) FROM staged", &[]).await?.get(0);
    ensure!(after == 0, "{after} rows after ROLLBACK");
    let tx = writer.transaction().await?;
    copy_rows(tx.copy_in("COPY staged FROM STDIN").await?, rows.as_bytes(), 333).await?;
    tx.commit().await?;
    let after: i64 = observer.query_one("SELECT count(*) FROM staged", &[]).await?.get(0);
    ensure!(after == 500, "{after} rows after COMMIT");

    // TRUNCATE empties every table it names.
    let done = writer.simple_query("TRUNCATE TABLE staged, batches").await?;
    ensure!(matches!(done.last(), Some(tokio_postgres::SimpleQueryMessage::CommandComplete(0))), "{done:?}");
    let left: i64 = writer.query_one("SELECT (SELECT count(*) FROM staged) + (SELECT count(*) FROM batches)", &[]).await?.get(0);
    ensure!(left == 0, "{left} rows after TRUNCATE");

    // A transaction's COPY past one replicated write's size is refused, and
    // fails the transaction.
    let big: String = (1_000..41_000).map(|i| format!("{i}\t{}\n", "x".repeat(20))).collect();
    let tx = writer.transaction().await?;
    let err = copy_rows(tx.copy_in("COPY staged FROM STDIN").await?, big.as_bytes(), 65_536).await.expect_err("too big for a transaction");
    ensure!(sqlstate(&err).starts_with("54000"), "{}", sqlstate(&err));
    let err = tx.query_one("SELECT 1", &[]).await.expect_err("the transaction failed");
    ensure!(sqlstate(&err).starts_with("25P02"), "{}", sqlstate(&err));
    tx.rollback().await?;
    // Outside a transaction the same rows load.
    let copied = copy(&writer, "COPY staged FROM STDIN", big.as_bytes(), 65_536).await?;
    ensure!(copied == 40_000, "{copied}");

    // psql's \copy (the simple protocol) from a CSV file with a header.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("staged.csv");
    std::fs::write(&file, "id,v\n1,one\n2,\"two, too\"\n")?;
    let out = std::process::Command::new("psql")
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", ADMIN_USER, "-c"])
        .arg(format!("\\copy staged FROM '{}' WITH (FORMAT csv, HEADER)", file.display()))
        .env("PGPASSWORD", ADMIN_PASSWORD)
        .env("PGCONNECT_TIMEOUT", "20")
        .output()
        .context("running psql")?;
    let said = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success() && said.contains("COPY 2"), "psql: {said} {}", String::from_utf8_lossy(&out.stderr));
    let v: String = writer.query_one("SELECT v FROM staged WHERE id = 2", &[]).await?.get(0);
    ensure!(v == "two, too", "{v:?}");
    drop(writer);
    Ok(())
}
