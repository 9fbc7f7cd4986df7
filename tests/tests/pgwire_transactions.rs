//! Scenario: interactive transactions over the PostgreSQL wire listener with
//! the `tokio-postgres` driver, on a three-node cluster.
//!
//! A transaction sees its own writes and nobody else does until it commits;
//! ROLLBACK and a dropped connection leave nothing; a failed statement fails
//! the transaction (25P02 until it ends); a transaction whose reads a
//! concurrent commit changed is refused at COMMIT with 40001 and the
//! connection goes on. Then bank transfers: clients read two balances, write
//! the new balances they computed and a ledger row, and retry on 40001. The
//! money is conserved and every balance equals its ledger: no lost update, no
//! write skew.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, ensure};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, pick_port};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

const ACCOUNTS: i64 = 6;
const OPENING: i64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_transactions_are_serializable() {
    let port = pick_port().expect("a port");
    let options = ClusterOptions {
        router_env: vec![("SERVICE_PGWIRE_ENABLED".into(), "true".into()), ("SERVICE_PGWIRE_PORT".into(), port.to_string())],
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).await.expect("cluster start");
    if let Err(e) = scenario(port).await {
        panic!("interactive transaction scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn connect(port: u16) -> Result<Client> {
    let config = format!("host=127.0.0.1 port={port} user={ADMIN_USER} password={ADMIN_PASSWORD} connect_timeout=20");
    let (client, connection) = tokio_postgres::connect(&config, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn balance(client: &impl tokio_postgres::GenericClient, id: i64) -> Result<i64> {
    let row = client.query_typed_one("SELECT balance FROM accounts WHERE id = $1", &[(&id, Type::INT8)]).await?;
    Ok(row.get(0))
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.code().code().to_string()).unwrap_or_else(|| format!("not a database error: {e}"))
}

async fn scenario(port: u16) -> Result<()> {
    let mut a = connect(port).await?;
    let b = connect(port).await?;
    a.batch_execute("CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)").await?;
    a.batch_execute("CREATE TABLE ledger (id BIGINT PRIMARY KEY, src BIGINT, dst BIGINT, amount BIGINT)").await?;
    let rows: Vec<String> = (1..=ACCOUNTS).map(|i| format!("({i}, {OPENING})")).collect();
    a.batch_execute(&format!("INSERT INTO accounts VALUES {}", rows.join(", "))).await?;

    // Its own writes are visible inside; outside nothing until COMMIT.
    let tx = a.transaction().await?;
    tx.execute_typed("UPDATE accounts SET balance = $1 WHERE id = 1", &[(&90i64, Type::INT8)]).await?;
    ensure!(balance(&tx, 1).await? == 90, "the transaction sees its own write");
    ensure!(balance(&b, 1).await? == OPENING, "another session does not");
    tx.rollback().await?;
    ensure!(balance(&b, 1).await? == OPENING, "ROLLBACK leaves nothing");
    let tx = a.transaction().await?;
    tx.execute("UPDATE accounts SET balance = balance - 10 WHERE id = 1", &[]).await?;
    tx.execute("UPDATE accounts SET balance = balance + 10 WHERE id = 2", &[]).await?;
    tx.commit().await?;
    ensure!((balance(&b, 1).await?, balance(&b, 2).await?) == (90, 110), "COMMIT applies both");

    // A failed statement fails the transaction until it ends.
    let tx = a.transaction().await?;
    let err = tx.execute("INSERT INTO accounts VALUES (1, 5)", &[]).await.expect_err("a duplicate key");
    ensure!(sqlstate(&err) == "23505", "{err:?}");
    let err = tx.query("SELECT 1", &[]).await.expect_err("the transaction is aborted");
    ensure!(sqlstate(&err) == "25P02", "{err:?}");
    tx.rollback().await?;
    ensure!(balance(&a, 1).await? == 90, "the connection goes on");

    // A read that a concurrent commit changed before COMMIT: refused with 40001.
    let tx = a.transaction().await?;
    let seen = balance(&tx, 3).await?;
    tx.execute_typed("UPDATE accounts SET balance = $1 WHERE id = 3", &[(&(seen + 50), Type::INT8)]).await?;
    b.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 3", &[]).await?;
    let err = tx.commit().await.expect_err("a serialization failure");
    ensure!(sqlstate(&err) == "40001", "{err:?}");
    ensure!(balance(&a, 3).await? == OPENING + 1, "the refused commit wrote nothing; the connection goes on");
    // Changed before the transaction's next statement: that statement fails at once.
    let tx = a.transaction().await?;
    let seen = balance(&tx, 3).await?;
    b.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 3", &[]).await?;
    let err = tx.execute_typed("UPDATE accounts SET balance = $1 WHERE id = 3", &[(&(seen + 50), Type::INT8)]).await.expect_err("40001");
    ensure!(sqlstate(&err) == "40001", "{err:?}");
    tx.rollback().await?;
    ensure!(balance(&a, 3).await? == OPENING, "nothing written");

    // A connection that ends inside a transaction rolls it back.
    {
        let mut gone = connect(port).await?;
        let tx = gone.transaction().await?;
        tx.execute("UPDATE accounts SET balance = 0 WHERE id = 4", &[]).await?;
        std::mem::forget(tx);
    }
    ensure!(balance(&a, 4).await? == OPENING, "a dropped connection's transaction left nothing");

    transfers(port).await
}

/// Four clients move money between random accounts; each transfer reads both
/// balances and writes the values it computed (a lost update would create or
/// destroy money), plus a ledger row; a 40001 is retried.
async fn transfers(port: u16) -> Result<()> {
    const CLIENTS: u64 = 4;
    const EACH: u64 = 12;
    let client = connect(port).await?;
    let mut expected = vec![0i64; ACCOUNTS as usize + 1];
    for id in 1..=ACCOUNTS {
        expected[id as usize] = balance(&client, id).await?;
    }
    let next_id = Arc::new(AtomicU64::new(1));
    let conflicts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (next_id, conflicts) = (next_id.clone(), conflicts.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = connect(port).await?;
            let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ c;
            let mut done = 0;
            while done < EACH {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let src = (seed % ACCOUNTS as u64) as i64 + 1;
                let dst = ((seed >> 8) % (ACCOUNTS as u64 - 1)) as i64 + 1;
                let dst = if dst >= src { dst + 1 } else { dst };
                let amount = (seed >> 16) as i64 % 20 + 1;
                let id = next_id.fetch_add(1, Ordering::SeqCst) as i64;
                let outcome: Result<(), tokio_postgres::Error> = async {
                    let tx = client.transaction().await?;
                    let read = "SELECT balance FROM accounts WHERE id = $1";
                    let from: i64 = tx.query_typed_one(read, &[(&src, Type::INT8)]).await?.get(0);
                    let to: i64 = tx.query_typed_one(read, &[(&dst, Type::INT8)]).await?.get(0);
                    let amount = amount.min(from);
                    let write = "UPDATE accounts SET balance = $1 WHERE id = $2";
                    tx.execute_typed(write, &[(&(from - amount), Type::INT8), (&src, Type::INT8)]).await?;
                    tx.execute_typed(write, &[(&(to + amount), Type::INT8), (&dst, Type::INT8)]).await?;
                    let ledger = "INSERT INTO ledger VALUES ($1, $2, $3, $4)";
                    let row = [(&id, Type::INT8), (&src, Type::INT8), (&dst, Type::INT8), (&amount, Type::INT8)];
                    let row: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> =
                        row.iter().map(|(v, t)| (*v as _, t.clone())).collect();
                    tx.execute_typed(ledger, &row).await?;
                    tx.commit().await
                }
                .await;
                match outcome {
                    Ok(()) => done += 1,
                    Err(e) if sqlstate(&e) == "40001" => {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return Err(anyhow::Error::new(e).context(format!("client {c}, transfer {done}"))),
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let total: i64 = client.query_one("SELECT sum(balance) FROM accounts", &[]).await?.get(0);
    ensure!(total == ACCOUNTS * OPENING, "money not conserved: {total}");
    let ledger = client.query("SELECT src, dst, amount FROM ledger", &[]).await?;
    ensure!(ledger.len() as u64 == CLIENTS * EACH, "{} ledger rows", ledger.len());
    for row in &ledger {
        let (src, dst, amount): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        expected[src as usize] -= amount;
        expected[dst as usize] += amount;
    }
    for id in 1..=ACCOUNTS {
        let b = balance(&client, id).await.with_context(|| format!("account {id}"))?;
        ensure!(b == expected[id as usize] && b >= 0, "account {id}: balance {b}, ledger says {}", expected[id as usize]);
    }
    eprintln!("{} transfers committed, {} retried after 40001", CLIENTS * EACH, conflicts.load(Ordering::Relaxed));
    Ok(())
}
