//! The commands other than `sql`: sign-in, key-value, cluster and nodes.
//! Each is a thin adapter: arguments to one or two `/api/v1` calls, the
//! answer printed as a table (or as the router's JSON with `-o json`).

use std::io::{BufRead, IsTerminal, Write};

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{Api, segment};
use crate::error::{CliError, Result};
use crate::output::{self, Format};
use crate::profiles::{Profile, Profiles};
use crate::{Global, request_timeout};

const DEFAULT_URL: &str = "http://127.0.0.1:9090";

/// The profile's saved sign-in, with what the command line overrides.
fn resolve(g: &Global) -> Result<Profile> {
    let saved = Profiles::load()?.profiles.get(&g.profile).cloned().unwrap_or_default();
    let mut p = saved.clone();
    if let Some(url) = &g.url {
        p.url = url.clone();
        // A token belongs to the router it was issued by.
        if saved.url.trim_end_matches('/') != url.trim_end_matches('/') {
            p.token = None;
        }
    }
    if p.url.is_empty() {
        p.url = DEFAULT_URL.into();
    }
    if g.token.is_some() {
        p.token = g.token.clone();
    }
    if g.cacert.is_some() {
        p.cacert = g.cacert.clone();
    }
    Ok(p)
}

/// A client signed in as the profile says.
pub fn connect(g: &Global) -> Result<Api> {
    let p = resolve(g)?;
    Ok(Api::new(&p.url, p.token, p.cacert.as_deref(), request_timeout(g))?.with_consistency(g.consistency.clone()))
}

fn stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

#[derive(Args)]
pub struct LoginArgs {
    /// The user (asked for when not given).
    #[arg(long, short = 'u', env = "TESSERA_USER")]
    username: Option<String>,
    /// Read the password from the first line of standard input.
    #[arg(long)]
    password_stdin: bool,
    /// The 6-digit code of the user's authenticator (asked for when needed).
    #[arg(long)]
    mfa_code: Option<String>,
}

/// A line typed by the user (the prompt on standard error).
fn ask(prompt: &str) -> Result<String> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!("{} needed: no terminal to ask on", prompt.trim_end_matches([':', ' ']))));
    }
    eprint!("{prompt}");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim().to_string())
}

pub async fn login(g: &Global, args: LoginArgs) -> Result<()> {
    let mut profile = resolve(g)?;
    let username = match args.username.or_else(|| profile.username.clone()) {
        Some(u) => u,
        None => ask("Username: ")?,
    };
    let password = if args.password_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_string()
    } else if let Some(p) = std::env::var("TESSERA_PASSWORD").ok().filter(|p| !p.is_empty()) {
        p
    } else if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("Password for {username}: "))?
    } else {
        return Err(CliError::Usage("a password is needed: --password-stdin, TESSERA_PASSWORD or a terminal".into()));
    };
    let api = Api::new(&profile.url, None, profile.cacert.as_deref(), request_timeout(g))?;
    let mut answer = api.post("/api/v1/auth/login", json!({"username": username, "password": password})).await?;
    if answer["mfa_required"] == true {
        let code = match args.mfa_code {
            Some(code) => code,
            None => ask("MFA code: ")?,
        };
        let temp = answer["temp_token"].clone();
        answer = api.post("/api/v1/auth/mfa/verify", json!({"token": temp, "code": code})).await?;
    }
    let token = answer["token"].as_str().ok_or_else(|| CliError::Local(format!("the router answered no token: {answer}")))?;
    profile.username = Some(username.clone());
    profile.token = Some(token.to_string());
    profile.expires_at = answer["expires_at"].as_str().map(str::to_string);
    let mut profiles = Profiles::load()?;
    profiles.profiles.insert(g.profile.clone(), profile.clone());
    profiles.save()?;
    if g.output == Format::Json {
        let mut shown = answer.clone();
        shown["token"] = json!("(saved)");
        return output::json(&mut stdout(), &json!({"profile": g.profile, "url": profile.url, "session": shown}));
    }
    let role = answer["user"]["role"].as_str().unwrap_or("?");
    let until = profile.expires_at.as_deref().map(|t| format!(", session until {t}")).unwrap_or_default();
    writeln!(stdout(), "signed in to {} as {username} ({role}){until}; saved as profile {:?}", profile.url, g.profile)?;
    if answer["mfa_enrollment_required"] == true {
        eprintln!("note: this cluster requires a second factor: turn it on (POST /api/v1/auth/mfa/enable) before anything else");
    }
    Ok(())
}

pub async fn logout(g: &Global) -> Result<()> {
    let api = connect(g)?;
    if !api.signed_in() {
        return Err(CliError::Auth(format!("profile {:?} is not signed in", g.profile)));
    }
    let result = api.post("/api/v1/auth/logout", json!({})).await;
    let mut profiles = Profiles::load()?;
    if let Some(p) = profiles.profiles.get_mut(&g.profile) {
        p.token = None;
        p.expires_at = None;
        profiles.save()?;
    }
    match result {
        // A session that had ended already is logged out all the same.
        Ok(_) | Err(CliError::Auth(_)) => {
            writeln!(stdout(), "signed out of {}", api.url)?;
            Ok(())
        }
        Err(e) => Err(e),
    }
}

pub async fn whoami(g: &Global) -> Result<()> {
    let api = connect(g)?;
    if !api.signed_in() {
        return Err(CliError::Auth(format!("profile {:?} is not signed in (tessera login)", g.profile)));
    }
    let answer = api.get("/api/v1/auth/session").await?;
    if g.output == Format::Json {
        return output::json(&mut stdout(), &answer);
    }
    let user = &answer["user"];
    let permissions =
        answer["permissions"].as_array().map(|p| p.iter().map(output::cell).collect::<Vec<_>>().join(", ")).unwrap_or_default();
    let mut out = stdout();
    writeln!(out, "{} ({}) on {}", output::cell(&user["username"]), output::cell(&user["role"]), api.url)?;
    writeln!(out, "second factor: {}", if answer["mfa_verified"] == true { "used" } else { "not used" })?;
    writeln!(out, "permissions: {permissions}")?;
    Ok(())
}

#[derive(Subcommand)]
pub enum KvCommand {
    /// Print a key's value (JSON).
    Get { key: String },
    /// Set a key: VALUE is JSON when it parses as JSON (42, true, {"a":1}), else a string.
    Put {
        key: String,
        value: String,
        /// Seconds until the entry expires.
        #[arg(long)]
        ttl: Option<u64>,
        /// Take VALUE as a string even when it parses as JSON.
        #[arg(long)]
        string: bool,
    },
    /// List keys (with their values) under a prefix.
    List {
        #[arg(long, default_value = "")]
        prefix: String,
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Delete a key, or every key under --prefix.
    Rm {
        key: Option<String>,
        #[arg(long, conflicts_with = "key")]
        prefix: Option<String>,
    },
    /// Count keys under a prefix.
    Count {
        #[arg(long, default_value = "")]
        prefix: String,
    },
}

pub async fn kv(g: &Global, command: KvCommand) -> Result<()> {
    let api = connect(g)?;
    let mut out = stdout();
    match command {
        KvCommand::Get { key } => {
            let answer = api.get(&format!("/api/v1/kv/keys/{}", segment(&key))).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            let value = if answer.get("value").is_some() { &answer["value"] } else { &answer };
            writeln!(out, "{}", serde_json::to_string_pretty(value).unwrap_or_default())?;
        }
        KvCommand::Put { key, value, ttl, string } => {
            let value = if string { Value::String(value) } else { serde_json::from_str(&value).unwrap_or(Value::String(value)) };
            let mut body = json!({"key": key, "value": value});
            if let Some(ttl) = ttl {
                body["ttl"] = json!(ttl);
            }
            let answer = api.post("/api/v1/kv/keys", body).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            writeln!(out, "OK")?;
        }
        KvCommand::List { prefix, limit } => {
            let mut path = format!("/api/v1/kv/keys?prefix={}", segment(&prefix));
            if let Some(limit) = limit {
                path.push_str(&format!("&limit={limit}"));
            }
            let answer = api.get(&path).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            let entries = answer["keys"].as_array().or_else(|| answer["entries"].as_array()).cloned().unwrap_or_default();
            let rows: Vec<Vec<Value>> = entries
                .iter()
                .map(|e| match e {
                    Value::String(k) => vec![json!(k), Value::Null, Value::Null],
                    e => vec![e["key"].clone(), json!(e["value"].to_string()), e["ttl"].clone()],
                })
                .collect();
            output::rows(&mut out, &["key".into(), "value".into(), "ttl".into()], &rows, g.output)?;
        }
        KvCommand::Rm { key: Some(key), .. } => {
            let answer = api.delete(&format!("/api/v1/kv/keys/{}", segment(&key))).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            writeln!(out, "deleted {key}")?;
        }
        KvCommand::Rm { key: None, prefix: Some(prefix) } => {
            let answer = api.delete(&format!("/api/v1/kv/keys?prefix={}", segment(&prefix))).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            let n = answer["deleted"].as_u64().or_else(|| answer["count"].as_u64()).unwrap_or(0);
            writeln!(out, "deleted {n} key{}", if n == 1 { "" } else { "s" })?;
        }
        KvCommand::Rm { key: None, prefix: None } => return Err(CliError::Usage("name a KEY or --prefix".into())),
        KvCommand::Count { prefix } => {
            let answer = api.get(&format!("/api/v1/kv/count?prefix={}", segment(&prefix))).await?;
            if g.output == Format::Json {
                return output::json(&mut out, &answer);
            }
            writeln!(out, "{}", output::cell(&answer["count"]))?;
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Nodes (state, reachability, what they lead) and groups (members, leader, term).
    Status,
}

pub async fn cluster(g: &Global, command: ClusterCommand) -> Result<()> {
    let api = connect(g)?;
    let mut out = stdout();
    match command {
        ClusterCommand::Status => {
            let nodes = api.get("/api/v1/admin/nodes").await?;
            let cluster = api.get("/api/v1/admin/cluster").await?;
            if g.output == Format::Json {
                return output::json(&mut out, &json!({"nodes": nodes, "cluster": cluster}));
            }
            print_nodes(&mut out, &nodes, g.output)?;
            writeln!(out)?;
            let groups = cluster["groups"].as_array().cloned().unwrap_or_default();
            let rows: Vec<Vec<Value>> = groups
                .iter()
                .map(|grp| vec![grp["id"].clone(), json!(list(&grp["members"])), grp["leader"].clone(), grp["term"].clone()])
                .collect();
            output::rows(&mut out, &["group".into(), "members".into(), "leader".into(), "term".into()], &rows, g.output)?;
        }
    }
    Ok(())
}

/// A JSON array as `1, 2, 3`.
fn list(v: &Value) -> String {
    v.as_array().map(|a| a.iter().map(output::cell).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

fn print_nodes(out: &mut impl Write, nodes: &Value, format: Format) -> Result<()> {
    let rows: Vec<Vec<Value>> = nodes["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|n| {
            vec![
                n["id"].clone(),
                n["address"].clone(),
                n["state"].clone(),
                n["reachable"].clone(),
                n["applied_lag"].clone(),
                json!(list(&n["groups_led"])),
                json!(list(&n["groups_hosted"])),
            ]
        })
        .collect();
    let columns = ["node", "address", "state", "reachable", "lag", "leads", "hosts"].map(String::from);
    output::rows(out, &columns, &rows, format)
}

/// Waits for `call` (the router answers once the change is done, as the
/// consistency level says) while showing, on a terminal, the node's state and
/// the replicas it hosts, from the node list once a second.
async fn with_live_progress(api: &Api, id: u64, call: impl std::future::Future<Output = Result<Value>>) -> Result<Value> {
    let spinner = crate::progress::spinner(&format!("node {id}"));
    tokio::pin!(call);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            answer = &mut call => {
                spinner.finish_and_clear();
                return answer;
            }
            _ = tick.tick(), if !spinner.is_hidden() => {
                if let Ok(nodes) = api.get("/api/v1/admin/nodes").await {
                    spinner.set_message(node_progress(&nodes, id));
                }
            }
        }
    }
}

/// `node 4: joining, 3 replicas, moving group 5 from node 2 to node 4`.
fn node_progress(nodes: &Value, id: u64) -> String {
    let node = nodes["nodes"].as_array().and_then(|n| n.iter().find(|n| n["id"] == id));
    let mut text = match node {
        Some(n) => format!(
            "node {id}: {}, {} replicas, leads {}{}",
            output::cell(&n["state"]),
            n["groups_hosted"].as_array().map_or(0, Vec::len),
            n["groups_led"].as_array().map_or(0, Vec::len),
            if n["reachable"] == false { ", not answering" } else { "" }
        ),
        None => format!("node {id}: not a member"),
    };
    let mv = &nodes["replica_move"];
    if mv.is_object() {
        text.push_str(&format!(", moving group {} from node {} to node {}", mv["group"], mv["from"], mv["to"]));
    }
    text
}

#[derive(Subcommand)]
pub enum NodeCommand {
    /// The cluster's nodes.
    List,
    /// Add a node that runs already (started to join the existing cluster).
    Add { id: u64, address: String },
    /// Move a node's leaderships and replicas away (waits as --consistency says; quorum by default).
    Drain { id: u64 },
    /// Take a drained node out of the cluster (it stops).
    Remove { id: u64 },
    /// Restart a node's process (its groups stop as on SIGTERM and start again).
    Restart { id: u64 },
}

pub async fn node(g: &Global, command: NodeCommand) -> Result<()> {
    let api = connect(g)?;
    let mut out = stdout();
    let (id, method, path, body) = match command {
        NodeCommand::List => {
            let nodes = api.get("/api/v1/admin/nodes").await?;
            if g.output == Format::Json {
                return output::json(&mut out, &nodes);
            }
            return print_nodes(&mut out, &nodes, g.output);
        }
        NodeCommand::Add { id, address } => {
            (id, Method::POST, "/api/v1/admin/nodes".to_string(), Some(json!({"node_id": id, "address": address})))
        }
        NodeCommand::Drain { id } => (id, Method::POST, format!("/api/v1/admin/nodes/{id}/drain"), Some(json!({}))),
        NodeCommand::Remove { id } => (id, Method::DELETE, format!("/api/v1/admin/nodes/{id}"), None),
        NodeCommand::Restart { id } => (id, Method::POST, format!("/api/v1/admin/nodes/{id}/restart"), Some(json!({}))),
    };
    let answer = with_live_progress(&api, id, api.call(method, &path, body)).await?;
    if g.output == Format::Json {
        return output::json(&mut out, &answer);
    }
    let moves = answer["moves"].as_array().map(Vec::len);
    let state = answer["state"].as_str().map(|s| format!(" ({s})")).unwrap_or_default();
    let took = answer["took_ms"].as_u64().map(|ms| format!(" in {ms} ms")).unwrap_or_default();
    let moved = moves.map(|n| format!(", {n} replica{} moved", if n == 1 { "" } else { "s" })).unwrap_or_default();
    writeln!(out, "node {}{state}: done{moved}{took}", output::cell(&answer["node_id"]))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_names_the_state_the_replicas_and_the_move() {
        let nodes = json!({
            "nodes": [{"id": 4, "state": "joining", "groups_hosted": [1, 2, 3], "groups_led": [], "reachable": true}],
            "replica_move": {"group": 5, "from": 2, "to": 4},
        });
        assert_eq!(node_progress(&nodes, 4), "node 4: joining, 3 replicas, leads 0, moving group 5 from node 2 to node 4");
        assert_eq!(node_progress(&json!({"nodes": []}), 4), "node 4: not a member");
    }
}
