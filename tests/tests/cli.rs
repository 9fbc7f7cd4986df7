//! Scenario: a person uses the `tessera` command-line client against a real
//! three-node cluster through its router. They sign in (the session is kept
//! in a profile only they can read), run SQL one-shot in each output format,
//! see a syntax error pointed at under the statement, work with key-value
//! entries, documents, time-series, a stream followed live, objects (a 3 MB
//! file up and down), import a CSV file, back up (and restore in place), manage users, erase a data
//! subject, look at the cluster (adding, draining and removing a fourth node),
//! and use the interactive SQL shell through a
//! terminal: a statement over two lines, `\dt`, `\timing`, a failing
//! statement that does not end the shell, `\q`. Scripts get the documented
//! exit statuses: 1 refused, 3 unreachable, 4 not signed in or not allowed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tessera_tests::{ADMIN_PASSWORD, ADMIN_USER, Cluster, ClusterOptions, binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_client_against_a_cluster() {
    let options = ClusterOptions { router_env: vec![("SERVICE_COMPLIANCE_ENABLED".into(), "true".into())], ..ClusterOptions::default() };
    let mut cluster = Cluster::start(options).await.expect("cluster start");
    let config = tempfile::tempdir().expect("config dir");
    let cli = Cli { bin: binary("tessera").expect("the tessera binary"), url: cluster.router_url(0), config: config.path().to_path_buf() };
    // A fourth node, started and waiting to be added from the client.
    let fourth = cluster.start_new_node(4).expect("node 4 started");
    let result = tokio::task::spawn_blocking(move || scenario(&cli, &fourth)).await.expect("scenario thread");
    if let Err(e) = result {
        panic!("cli scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

/// Scenario: a router serving HTTPS with its own CA. The client signs in with
/// `--cacert` (kept in the profile) and follows a stream live over `wss://`,
/// verified against that CA; without it, the connection is refused as
/// unreachable (status 3), never made unverified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_a_stream_over_https() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).expect("a certificate");
    let (cert_path, key_path) = (dir.path().join("router.pem"), dir.path().join("router.key"));
    std::fs::write(&cert_path, cert.cert.pem()).expect("cert written");
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).expect("key written");
    let options = ClusterOptions {
        router_env: vec![
            ("SERVICE_TLS_CERT".into(), cert_path.display().to_string()),
            ("SERVICE_TLS_KEY".into(), key_path.display().to_string()),
        ],
        https_ca: Some(cert.cert.pem().into_bytes()),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(options).await.expect("cluster start");
    let cli = Cli { bin: binary("tessera").expect("the tessera binary"), url: cluster.router_url(0), config: dir.path().join("config") };
    let result = tokio::task::spawn_blocking(move || following_over_tls(&cli, &cert_path)).await.expect("scenario thread");
    if let Err(e) = result {
        panic!("cli https scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

fn following_over_tls(cli: &Cli, ca: &Path) -> Result<()> {
    ensure!(cli.url.starts_with("https://"), "{}", cli.url);
    let ca = ca.display().to_string();
    let unverified = cli.run_with(&["login", "-u", ADMIN_USER, "--password-stdin"], &format!("{ADMIN_PASSWORD}\n"))?;
    ensure!(exit_code(&unverified) == 3, "without the CA: {unverified:?}");
    let out = cli.run_with(&["login", "-u", ADMIN_USER, "--password-stdin", "--cacert", &ca], &format!("{ADMIN_PASSWORD}\n"))?;
    ensure!(out.status.success(), "login: {}", text(&out.stderr));
    cli.ok(&["stream", "publish", "orders", "created", r#"{"id": 1}"#])?;
    let tail =
        cli.command(&["stream", "tail", "orders", "--from", "1", "-n", "2"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    cli.ok(&["stream", "publish", "orders", "paid", r#"{"id": 1}"#])?;
    let out = tail.wait_with_output()?;
    let lines: Vec<serde_json::Value> = text(&out.stdout).lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    ensure!(lines.len() == 2 && lines[1]["event_type"] == "paid", "{lines:?} {}", text(&out.stderr));
    Ok(())
}

fn scenario(cli: &Cli, fourth: &str) -> Result<()> {
    signing_in_keeps_the_session_private(cli)?;
    sql_one_shot_in_every_format(cli)?;
    key_value_entries(cli)?;
    cluster_views(cli)?;
    a_node_joins_and_leaves(cli, fourth)?;
    documents_time_series_and_streams(cli)?;
    objects_with_files(cli)?;
    operations(cli)?;
    the_interactive_shell(cli)?;
    exit_statuses_for_scripts(cli)
}

struct Cli {
    bin: PathBuf,
    url: String,
    config: PathBuf,
}

impl Cli {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args).env("TESSERA_URL", &self.url).env("TESSERA_CONFIG_DIR", &self.config).env_remove("TESSERA_TOKEN");
        c
    }

    /// Runs `tessera args` with `stdin` as its standard input.
    fn run_with(&self, args: &[&str], stdin: &str) -> Result<Output> {
        let mut child = self.command(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        std::io::Write::write_all(child.stdin.as_mut().context("stdin")?, stdin.as_bytes())?;
        drop(child.stdin.take());
        Ok(child.wait_with_output()?)
    }

    fn run(&self, args: &[&str]) -> Result<Output> {
        self.run_with(args, "")
    }

    /// Runs it, requiring success; answers standard output.
    fn ok(&self, args: &[&str]) -> Result<String> {
        let out = self.run(args)?;
        ensure!(out.status.success(), "tessera {args:?} failed ({}): {}", out.status, text(&out.stderr));
        Ok(text(&out.stdout))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn exit_code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn signing_in_keeps_the_session_private(cli: &Cli) -> Result<()> {
    let wrong = cli.run_with(&["login", "-u", ADMIN_USER, "--password-stdin"], "not-the-password\n")?;
    ensure!(exit_code(&wrong) == 4, "a wrong password is exit 4: {wrong:?}");
    let out = cli.run_with(&["login", "-u", ADMIN_USER, "--password-stdin"], &format!("{ADMIN_PASSWORD}\n"))?;
    ensure!(out.status.success(), "login: {}", text(&out.stderr));
    ensure!(text(&out.stdout).contains("as admin (admin)"), "{}", text(&out.stdout));
    let profiles = cli.config.join("profiles.json");
    let mode = std::fs::metadata(&profiles)?.permissions().mode() & 0o777;
    ensure!(mode == 0o600, "the token file is {mode:o}, not 600");
    ensure!(!std::fs::read_to_string(&profiles)?.contains(ADMIN_PASSWORD), "the password is never saved");
    let me = cli.ok(&["whoami"])?;
    ensure!(me.contains("admin (admin)") && me.contains("manage:cluster"), "{me}");
    Ok(())
}

fn sql_one_shot_in_every_format(cli: &Cli) -> Result<()> {
    let out = cli.ok(&[
        "sql",
        "-c",
        "CREATE TABLE people (id INT PRIMARY KEY, name TEXT, age INT); INSERT INTO people VALUES (1, 'ada', 36), (2, 'grace', 45)",
    ])?;
    ensure!(out.contains("OK, 2 rows affected"), "{out}");
    let table = cli.ok(&["sql", "-c", "SELECT id, name, age FROM people ORDER BY id"])?;
    ensure!(table == " id | name  | age\n----+-------+-----\n  1 | ada   |  36\n  2 | grace |  45\n(2 rows)\n", "{table}");
    let csv = cli.ok(&["sql", "--format", "csv", "-c", "SELECT name FROM people WHERE id = 2"])?;
    ensure!(csv == "name\ngrace\n", "{csv}");
    let json: serde_json::Value = serde_json::from_str(&cli.ok(&["sql", "-o", "json", "-c", "SELECT COUNT(*) AS n FROM people"])?)?;
    ensure!(json["data"]["rows"][0][0] == 2, "{json}");
    // A script from a file; statements run one by one, the first error stops it.
    let script = cli.config.join("script.sql");
    std::fs::write(&script, "-- two more\nINSERT INTO people VALUES (3, 'linus', 28);\nSELECT COUNT(*) AS n FROM people;\n")?;
    let out = cli.ok(&["sql", "-f", script.to_str().context("path")?])?;
    ensure!(out.contains("OK, 1 row affected") && out.contains(" 3\n"), "{out}");
    let bad = cli.run(&["sql", "-c", "SELECT 1;\nSELEC name FROM people"])?;
    let err = text(&bad.stderr);
    ensure!(exit_code(&bad) == 1, "a SQL error is exit 1: {bad:?}");
    ensure!(
        err.contains("PARSE_ERROR") && err.contains("LINE 1: SELEC name FROM people\n        ^"),
        "the position under the statement: {err}"
    );
    ensure!(text(&bad.stdout).contains("(1 row)"), "the statement before the error ran");
    Ok(())
}

fn key_value_entries(cli: &Cli) -> Result<()> {
    cli.ok(&["kv", "put", "app/greeting", "hello world"])?;
    cli.ok(&["kv", "put", "app/limits", r#"{"max": 5}"#])?;
    cli.ok(&["kv", "put", "app/answer", "42", "--ttl", "600"])?;
    ensure!(cli.ok(&["kv", "get", "app/greeting"])? == "\"hello world\"\n", "a plain word is a string");
    let limits: serde_json::Value = serde_json::from_str(&cli.ok(&["kv", "get", "app/limits"])?)?;
    ensure!(limits == serde_json::json!({"max": 5}), "{limits}");
    ensure!(cli.ok(&["kv", "count", "--prefix", "app/"])?.trim() == "3");
    let list = cli.ok(&["kv", "list", "--prefix", "app/"])?;
    ensure!(list.contains("app/answer") && list.contains("(3 rows)"), "{list}");
    cli.ok(&["kv", "rm", "app/answer"])?;
    let missing = cli.run(&["kv", "get", "app/answer"])?;
    ensure!(exit_code(&missing) == 1 && text(&missing.stderr).contains("not found"), "{missing:?}");
    ensure!(cli.ok(&["kv", "rm", "--prefix", "app/"])?.contains("deleted 2 keys"));
    Ok(())
}

fn cluster_views(cli: &Cli) -> Result<()> {
    let status = cli.ok(&["cluster", "status"])?;
    for node in ["127.0.0.1", "active"] {
        ensure!(status.contains(node), "{status}");
    }
    ensure!(status.contains("(3 rows)"), "three nodes: {status}");
    let nodes: serde_json::Value = serde_json::from_str(&cli.ok(&["node", "list", "-o", "json"])?)?;
    ensure!(nodes["nodes"].as_array().is_some_and(|n| n.len() == 3), "{nodes}");
    // A restart answers (quorum) once the node is back and its groups are led.
    let restarted = cli.ok(&["node", "restart", "3"])?;
    ensure!(restarted.starts_with("node 3") && restarted.contains("done"), "{restarted}");
    let bash = cli.ok(&["completions", "bash"])?;
    ensure!(bash.contains("_tessera") && bash.contains("whoami"), "a bash completion script");
    Ok(())
}

/// Node 4 (at `addr`) is added, drained and removed from the client; each
/// command answers once the change is made (`--consistency all`).
fn a_node_joins_and_leaves(cli: &Cli, addr: &str) -> Result<()> {
    let count = |cli: &Cli| -> Result<usize> {
        let nodes: serde_json::Value = serde_json::from_str(&cli.ok(&["node", "list", "-o", "json"])?)?;
        Ok(nodes["nodes"].as_array().map_or(0, Vec::len))
    };
    let added = cli.ok(&["--consistency", "all", "node", "add", "4", addr])?;
    ensure!(added.starts_with("node 4") && added.contains("done"), "{added}");
    ensure!(count(cli)? == 4, "four nodes");
    let drained = cli.ok(&["--consistency", "all", "node", "drain", "4"])?;
    ensure!(drained.starts_with("node 4") && drained.contains("done"), "{drained}");
    let removed = cli.ok(&["--consistency", "all", "node", "remove", "4"])?;
    ensure!(removed.starts_with("node 4") && removed.contains("done"), "{removed}");
    ensure!(count(cli)? == 3, "three nodes again");
    Ok(())
}

fn documents_time_series_and_streams(cli: &Cli) -> Result<()> {
    ensure!(cli.ok(&["doc", "insert", "pets", r#"{"name": "rex", "age": 3}"#, "--id", "rex"])?.contains("inserted rex"));
    cli.ok(&["doc", "insert", "pets", r#"{"name": "tom", "age": 9}"#])?;
    let old = cli.ok(&["doc", "find", "pets", r#"{"age": {"$gt": 5}}"#])?;
    ensure!(old.contains("tom") && !old.contains("rex") && old.contains("(1 row)"), "{old}");
    cli.ok(&["doc", "update", "pets", "rex", r#"{"$set": {"age": 4}}"#])?;
    let rex: serde_json::Value = serde_json::from_str(&cli.ok(&["doc", "get", "pets", "rex"])?)?;
    ensure!(rex["data"]["age"] == 4, "{rex}");
    cli.ok(&["doc", "rm", "pets", "rex"])?;
    ensure!(exit_code(&cli.run(&["doc", "get", "pets", "rex"])?) == 1, "a deleted document is gone");

    cli.ok(&["ts", "write", "cpu", "0.5", "--tag", "host=a", "--at", "1795000000000"])?;
    cli.ok(&["ts", "write", "cpu", "0.7", "--tag", "host=a", "--at", "1795000001000"])?;
    let avg = cli.ok(&["ts", "query", "cpu", "--start", "1794999990000", "--end", "1795000010000", "--agg", "avg", "--interval", "1m"])?;
    ensure!(avg.contains("0.6") && avg.contains("host"), "{avg}");

    // The first event creates the channel; a live tail from event 1 sees it
    // and the one published while it runs.
    cli.ok(&["stream", "publish", "orders", "created", r#"{"id": 1}"#])?;
    let tail =
        cli.command(&["stream", "tail", "orders", "--from", "1", "-n", "2"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    cli.ok(&["stream", "publish", "orders", "paid", r#"{"id": 1}"#])?;
    let out = tail.wait_with_output()?;
    let lines: Vec<serde_json::Value> = text(&out.stdout).lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    ensure!(lines.len() == 2 && lines[0]["event_type"] == "created" && lines[1]["event_type"] == "paid", "{lines:?} {}", text(&out.stderr));
    let history = cli.ok(&["stream", "history", "orders"])?;
    ensure!(history.contains("paid") && history.contains("(2 rows)"), "{history}");
    Ok(())
}

fn objects_with_files(cli: &Cli) -> Result<()> {
    let file = cli.config.join("blob.bin");
    let content: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&file, &content)?;
    cli.ok(&["object", "mb", "files"])?;
    cli.ok(&["object", "put", "files", "dir/blob.bin", file.to_str().context("path")?])?;
    let listed = cli.ok(&["object", "ls", "files", "--prefix", "dir/"])?;
    ensure!(listed.contains("dir/blob.bin") && listed.contains("3000000"), "{listed}");
    let back = cli.config.join("blob.back");
    cli.ok(&["object", "get", "files", "dir/blob.bin", back.to_str().context("path")?])?;
    ensure!(std::fs::read(&back)? == content, "the file comes back byte for byte");
    cli.ok(&["object", "rm", "files", "dir/blob.bin"])?;
    ensure!(exit_code(&cli.run(&["object", "get", "files", "dir/blob.bin", "-"])?) == 1);
    Ok(())
}

fn operations(cli: &Cli) -> Result<()> {
    let csv = cli.config.join("people.csv");
    std::fs::write(&csv, "id,name,age\n10,\"Hopper, Grace\",85\n11,Linus,28\n")?;
    let report = cli.ok(&["import", "sql", csv.to_str().context("path")?, "--table", "people", "--batch", "1"])?;
    ensure!(report.contains("2 rows read, 2 imported"), "{report}");
    ensure!(cli.ok(&["sql", "-c", "SELECT name FROM people WHERE id = 10"])?.contains("Hopper, Grace"));
    let backup = cli.ok(&["backup", "create"])?;
    ensure!(backup.starts_with("backup bkp-"), "{backup}");
    let id = backup.split_whitespace().nth(1).context("backup id")?.trim_end_matches(':');
    ensure!(cli.ok(&["backup", "list"])?.contains(id));
    let created = cli.run_with(
        &["user", "add", "carol", "--email", "carol@example.com", "--role", "viewer", "--password-stdin"],
        "Carol-Passw0rd-12\n",
    )?;
    ensure!(created.status.success(), "{}", text(&created.stderr));
    ensure!(cli.ok(&["user", "list"])?.contains("carol"));
    ensure!(cli.ok(&["role", "list"])?.contains("operator"));
    cli.ok(&["kv", "put", "customer/42", r#"{"email": "x@example.com"}"#])?;
    let erased = cli.ok(&["compliance", "erase", "42", "--reason", "the customer asked"])?;
    ensure!(erased.contains("certificate"), "{erased}");
    let trail = cli.ok(&["-o", "json", "audit", "42"])?;
    ensure!(serde_json::from_str::<serde_json::Value>(&trail)?["subject_id"] == "42", "{trail}");
    let users: serde_json::Value = serde_json::from_str(&cli.ok(&["user", "list", "-o", "json"])?)?;
    let carol = users["users"].as_array().and_then(|u| u.iter().find(|u| u["username"] == "carol")).context("carol")?["id"].clone();
    cli.ok(&["user", "rm", carol.as_str().context("id")?])?;
    ensure!(!cli.ok(&["user", "list"])?.contains("carol"), "carol is gone");
    cli.ok(&["role", "create", "auditor", "read:kv", "read:sql"])?;
    cli.ok(&["role", "set", "auditor", "read:kv"])?;
    let roles: serde_json::Value = serde_json::from_str(&cli.ok(&["role", "list", "-o", "json"])?)?;
    let auditor = roles["roles"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "auditor")).context("auditor")?;
    ensure!(auditor["permissions"] == serde_json::json!(["read:kv"]), "{auditor}");
    cli.ok(&["role", "rm", "auditor"])?;
    let pairs = cli.config.join("pairs.json");
    std::fs::write(&pairs, r#"{"import/a": 1, "import/b": {"x": true}}"#)?;
    ensure!(cli.ok(&["import", "kv", pairs.to_str().context("path")?])?.contains("2 imported"));
    ensure!(cli.ok(&["kv", "count", "--prefix", "import/"])?.trim() == "2");
    // A graph and a vector collection made through the API, queried from the client.
    let graph = cli.ok(&["graph", "query", "MATCH (p:Person) RETURN p.name"])?;
    ensure!(graph.contains("(0 rows)"), "{graph}");
    let missing = cli.run(&["vector", "search", "nothing", "[1, 2]"])?;
    ensure!(exit_code(&missing) == 1 && text(&missing.stderr).contains("does not exist"), "{missing:?}");
    let bad = cli.run(&["vector", "search", "nothing", "not json"])?;
    ensure!(exit_code(&bad) == 2 && text(&bad.stderr).contains("VECTOR is not JSON"), "{bad:?}");

    // The backup made above, restored in place: what was written since is
    // gone, what it holds is back (the session predates it, so it stays).
    cli.ok(&["kv", "put", "after/backup", "1"])?;
    let restored = cli.ok(&["backup", "restore", id])?;
    ensure!(restored.contains(&format!("restored backup {id}")), "{restored}");
    ensure!(exit_code(&cli.run(&["kv", "get", "after/backup"])?) == 1, "a key written after the backup is gone");
    ensure!(cli.ok(&["sql", "-c", "SELECT name FROM people WHERE id = 10"])?.contains("Hopper, Grace"), "the backup's rows are back");
    Ok(())
}

fn the_interactive_shell(cli: &Cli) -> Result<()> {
    let mut shell = expectrl::Session::spawn(cli.command(&["sql"]))?;
    shell.set_expect_timeout(Some(Duration::from_secs(60)));
    shell.expect("default=> ")?;
    shell.send_line("SELECT name")?;
    shell.expect("default-> ")?;
    shell.send_line("  FROM people WHERE id = 3;")?;
    shell.expect("linus")?;
    shell.expect("(1 row)")?;
    shell.send_line("\\dt")?;
    shell.expect("people")?;
    shell.send_line("\\timing")?;
    shell.expect("Timing is on.")?;
    shell.send_line("SELECT nope FROM people;")?;
    shell.expect("COLUMN_NOT_FOUND")?;
    shell.send_line("SELECT 40 + 2 AS answer;")?;
    shell.expect("42")?;
    shell.expect("Time: ")?;
    shell.send_line("\\q")?;
    shell.expect(expectrl::Eof)?;
    let history = std::fs::read_to_string(cli.config.join("sql_history")).unwrap_or_default();
    ensure!(history.contains("SELECT 40 + 2 AS answer;"), "the history is kept: {history}");
    Ok(())
}

fn exit_statuses_for_scripts(cli: &Cli) -> Result<()> {
    let nowhere = cli.run(&["--url", "http://127.0.0.1:1", "kv", "count"])?;
    ensure!(exit_code(&nowhere) == 3 && text(&nowhere.stderr).contains("cannot reach"), "{nowhere:?}");
    let usage = cli.run(&["kv", "frobnicate"])?;
    ensure!(exit_code(&usage) == 2, "{usage:?}");
    cli.ok(&["logout"])?;
    let out = cli.run(&["whoami"])?;
    ensure!(exit_code(&out) == 4, "signed out: {out:?}");
    let anonymous = cli.run(&["sql", "-c", "SELECT 1"])?;
    ensure!(exit_code(&anonymous) == 4 && text(&anonymous.stderr).contains("tessera login"), "{anonymous:?}");
    ensure!(Path::new(&cli.config).join("profiles.json").is_file());
    Ok(())
}
