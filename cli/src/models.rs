//! The data models other than SQL and key-value: documents, time-series,
//! streams (live tail over the WebSocket), graph, objects (files, with a
//! progress bar) and vectors. Thin adapters over `/api/v1`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{Api, segment};
use crate::commands::connect;
use crate::error::{CliError, Result};
use crate::output::{self, Format};
use crate::{Global, progress};

/// A JSON argument, named `what` in the error when it does not parse.
fn json_arg(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| CliError::Usage(format!("{what} is not JSON ({e}): {text}")))
}

/// Prints `answer` whole with `-o json`, else `items` of it as a table.
fn print_items(g: &Global, answer: &Value, items: &Value, columns: &[&str]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if g.output == Format::Json {
        return output::json(&mut out, answer);
    }
    output::items(&mut out, items.as_array().map(Vec::as_slice).unwrap_or_default(), columns, g.output)
}

fn print_json(answer: &Value) -> Result<()> {
    output::json(&mut std::io::stdout().lock(), answer)
}

#[derive(Subcommand)]
pub enum DocCommand {
    /// Documents of COLLECTION matching FILTER (JSON, e.g. '{"age": {"$gt": 30}}'; all when left out).
    Find {
        collection: String,
        filter: Option<String>,
        /// Sort, e.g. '{"age": -1}'.
        #[arg(long)]
        sort: Option<String>,
        #[arg(long)]
        limit: Option<u64>,
    },
    /// One document by id.
    Get { collection: String, id: String },
    /// Insert DOCUMENT (a JSON object) into COLLECTION (created when missing).
    Insert {
        collection: String,
        document: String,
        #[arg(long)]
        id: Option<String>,
    },
    /// Update a document: UPDATE is an update ('{"$set": {"age": 37}}').
    Update { collection: String, id: String, update: String },
    /// Delete a document.
    Rm { collection: String, id: String },
    /// The collections.
    Collections,
}

pub async fn doc(g: &Global, command: DocCommand) -> Result<()> {
    let api = connect(g)?;
    let docs = |c: &str| format!("/api/v1/documents/collections/{}", segment(c));
    match command {
        DocCommand::Find { collection, filter, sort, limit } => {
            let mut body = json!({"filter": filter.map(|f| json_arg("FILTER", &f)).transpose()?.unwrap_or(json!({}))});
            if let Some(sort) = sort {
                body["sort"] = json_arg("--sort", &sort)?;
            }
            if let Some(limit) = limit {
                body["limit"] = json!(limit);
            }
            let answer = api.post(&format!("{}/query", docs(&collection)), body).await?;
            print_items(g, &answer, &answer["documents"], &["id", "data"])?;
        }
        DocCommand::Get { collection, id } => {
            print_json(&api.get(&format!("{}/documents/{}", docs(&collection), segment(&id))).await?)?;
        }
        DocCommand::Insert { collection, document, id } => {
            let mut body = json!({"document": json_arg("DOCUMENT", &document)?});
            if let Some(id) = id {
                body["id"] = json!(id);
            }
            let path = format!("{}/documents", docs(&collection));
            let answer = match api.post(&path, body.clone()).await {
                Err(CliError::Refused { status: 404, .. }) => {
                    api.post("/api/v1/documents/collections", json!({"name": collection})).await?;
                    api.post(&path, body).await?
                }
                other => other?,
            };
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "inserted {}", output::cell(&answer["id"]))?;
        }
        DocCommand::Update { collection, id, update } => {
            let answer =
                api.post(&format!("{}/documents/{}/update", docs(&collection), segment(&id)), json_arg("UPDATE", &update)?).await?;
            print_json(&answer)?;
        }
        DocCommand::Rm { collection, id } => {
            let answer = api.delete(&format!("{}/documents/{}", docs(&collection), segment(&id))).await?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "deleted {id}")?;
        }
        DocCommand::Collections => {
            let answer = api.get("/api/v1/documents/collections").await?;
            print_items(g, &answer, &answer["collections"], &["name", "document_count", "created_at"])?;
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum TsCommand {
    /// Write one point of METRIC (created when missing).
    Write {
        metric: String,
        value: f64,
        /// When (RFC 3339 or epoch milliseconds; now when left out).
        #[arg(long)]
        at: Option<String>,
        /// A tag, KEY=VALUE (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Points of METRIC between --start and --end, raw or aggregated.
    Query {
        metric: String,
        #[arg(long)]
        start: Option<String>,
        #[arg(long)]
        end: Option<String>,
        /// avg, sum, min, max, count, first, last...
        #[arg(long)]
        agg: Option<String>,
        /// The aggregation's bucket, e.g. 1m.
        #[arg(long, requires = "agg")]
        interval: Option<String>,
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
}

fn tags_of(tags: &[String]) -> Result<Value> {
    let mut map = serde_json::Map::new();
    for t in tags {
        let (k, v) = t.split_once('=').ok_or_else(|| CliError::Usage(format!("--tag {t:?} is not KEY=VALUE")))?;
        map.insert(k.to_string(), json!(v));
    }
    Ok(Value::Object(map))
}

/// A time argument: epoch milliseconds as a number, anything else as given.
fn time_arg(t: &str) -> Value {
    t.parse::<i64>().map(|ms| json!(ms)).unwrap_or_else(|_| json!(t))
}

pub async fn ts(g: &Global, command: TsCommand) -> Result<()> {
    let api = connect(g)?;
    match command {
        TsCommand::Write { metric, value, at, tags } => {
            let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            let timestamp = at.map_or_else(|| json!(now_ms), |at| time_arg(&at));
            let point = json!({"value": value, "timestamp": timestamp});
            let body = json!({"metric": metric, "points": [point], "tags": tags_of(&tags)?});
            let answer = api.post("/api/v1/timeseries/write", body).await?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "wrote {} point(s) to {metric}", output::cell(&answer["points_written"]))?;
        }
        TsCommand::Query { metric, start, end, agg, interval, tags } => {
            let mut body = json!({"metric": metric});
            if let Some(s) = start {
                body["start"] = time_arg(&s);
            }
            if let Some(e) = end {
                body["end"] = time_arg(&e);
            }
            if let Some(function) = agg {
                body["aggregation"] = match interval {
                    Some(interval) => json!({"function": function, "interval": interval}),
                    None => json!(function),
                };
            }
            if !tags.is_empty() {
                body["tags"] = tags_of(&tags)?;
            }
            let answer = api.post("/api/v1/timeseries/query", body).await?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            let mut rows = Vec::new();
            for series in answer["series"].as_array().cloned().unwrap_or_default() {
                let tags = if series["tags"].as_object().is_some_and(|t| !t.is_empty()) { series["tags"].clone() } else { Value::Null };
                for p in series["points"].as_array().cloned().unwrap_or_default() {
                    rows.push(vec![p["timestamp"].clone(), p["value"].clone(), tags.clone()]);
                }
            }
            output::rows(&mut std::io::stdout().lock(), &["timestamp".into(), "value".into(), "tags".into()], &rows, g.output)?;
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum StreamCommand {
    /// Publish an event: DATA is JSON (a bare word is a string); the channel is created when missing.
    Publish { channel: String, event_type: String, data: String },
    /// The channel's newest events (or those after --after).
    History {
        channel: String,
        #[arg(long)]
        limit: Option<u64>,
        #[arg(long)]
        after: Option<u64>,
    },
    /// Follow the channel live over the WebSocket: one JSON event per line.
    Tail {
        channel: String,
        /// Start with the events after this id (default: only new ones).
        #[arg(long, conflicts_with = "from")]
        after: Option<u64>,
        /// Start with this event id.
        #[arg(long)]
        from: Option<u64>,
        /// Stop after this many events.
        #[arg(long, short = 'n')]
        count: Option<u64>,
    },
}

pub async fn stream(g: &Global, command: StreamCommand) -> Result<()> {
    let api = connect(g)?;
    match command {
        StreamCommand::Publish { channel, event_type, data } => {
            let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
            let body = json!({"channel": channel, "event_type": event_type, "data": data});
            let answer = match api.post("/api/v1/streaming/publish", body.clone()).await {
                // A channel is created by its first event, as a topic would be.
                Err(CliError::Refused { status: 404, .. }) => {
                    api.post("/api/v1/streaming/channels", json!({"name": channel})).await?;
                    api.post("/api/v1/streaming/publish", body).await?
                }
                other => other?,
            };
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "published event {} to {channel}", output::cell(&answer["id"]))?;
        }
        StreamCommand::History { channel, limit, after } => {
            let mut path = format!("/api/v1/streaming/channels/{}/history?", segment(&channel));
            if let Some(limit) = limit {
                path.push_str(&format!("limit={limit}&"));
            }
            if let Some(after) = after {
                path.push_str(&format!("after={after}"));
            }
            let answer = api.get(path.trim_end_matches(['&', '?'])).await?;
            print_items(g, &answer, &answer["events"], &["id", "timestamp", "event_type", "data"])?;
        }
        StreamCommand::Tail { channel, after, from, count } => tail(&api, &channel, after, from, count).await?,
    }
    Ok(())
}

/// Prints the channel's events as they come, one JSON object per line.
async fn tail(api: &Api, channel: &str, after: Option<u64>, from: Option<u64>, count: Option<u64>) -> Result<()> {
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut url = format!("{}/api/v1/streaming/{}", api.url.replacen("http", "ws", 1), segment(channel));
    match (after, from) {
        (Some(a), _) => url.push_str(&format!("?after={a}")),
        (None, Some(f)) => url.push_str(&format!("?from={f}")),
        _ => {}
    }
    let connector = match url.starts_with("wss://") {
        true => tokio_tungstenite::Connector::Rustls(api.websocket_tls()?),
        false => tokio_tungstenite::Connector::Plain,
    };
    let mut request = url.as_str().into_client_request().map_err(|e| CliError::Usage(format!("{url}: {e}")))?;
    if let Some(token) = api.token() {
        let value = format!("Bearer {token}").parse().map_err(|_| CliError::Local("the token is not a header value".into()))?;
        request.headers_mut().insert("authorization", value);
    }
    let connecting = tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector));
    let (mut socket, _) = connecting.await.map_err(|e| match e {
        tokio_tungstenite::tungstenite::Error::Http(resp) if matches!(resp.status().as_u16(), 401 | 403) => {
            CliError::Auth(format!("{} on {url} (tessera login)", resp.status()))
        }
        tokio_tungstenite::tungstenite::Error::Http(resp) => CliError::Refused {
            status: resp.status().as_u16(),
            code: "REFUSED".into(),
            message: format!("{url}: {}", resp.status()),
            position: None,
        },
        other => CliError::Unavailable(format!("cannot follow {url}: {other}")),
    })?;
    let mut seen = 0;
    let mut out = std::io::stdout();
    while let Some(frame) = socket.next().await {
        match frame.map_err(|e| CliError::Unavailable(format!("the stream ended: {e}")))? {
            Message::Text(text) => {
                writeln!(out, "{text}")?;
                out.flush()?;
                seen += 1;
                if count.is_some_and(|n| seen >= n) {
                    break;
                }
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum GraphCommand {
    /// Run a query (Cypher-like: CREATE, MATCH … RETURN) on --graph (the default graph otherwise).
    Query {
        query: String,
        #[arg(long)]
        graph: Option<String>,
        /// Query parameters (a JSON object).
        #[arg(long)]
        params: Option<String>,
    },
}

pub async fn graph(g: &Global, command: GraphCommand) -> Result<()> {
    let GraphCommand::Query { query, graph, params } = command;
    let api = connect(g)?;
    let mut body = json!({"query": query});
    if let Some(graph) = graph {
        body["graph"] = json!(graph);
    }
    if let Some(params) = params {
        body["params"] = json_arg("--params", &params)?;
    }
    let answer = api.post("/api/v1/graph/query", body).await?;
    if g.output == Format::Json {
        return print_json(&answer);
    }
    let columns: Vec<String> = answer["columns"].as_array().map(|c| c.iter().map(output::cell).collect()).unwrap_or_default();
    let rows: Vec<Vec<Value>> =
        answer["rows"].as_array().map(|r| r.iter().map(|r| r.as_array().cloned().unwrap_or_default()).collect()).unwrap_or_default();
    output::rows(&mut std::io::stdout().lock(), &columns, &rows, g.output)
}

#[derive(Subcommand)]
pub enum ObjectCommand {
    /// Buckets, or the objects of BUCKET (under --prefix).
    Ls {
        bucket: Option<String>,
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Create a bucket.
    Mb { bucket: String },
    /// Upload FILE as BUCKET/KEY.
    Put {
        bucket: String,
        key: String,
        file: PathBuf,
        /// Its media type (default application/octet-stream).
        #[arg(long)]
        content_type: Option<String>,
    },
    /// Download BUCKET/KEY to FILE (standard output when - or left out).
    Get { bucket: String, key: String, file: Option<PathBuf> },
    /// Delete BUCKET/KEY.
    Rm { bucket: String, key: String },
}

/// Files at least this large show a progress bar (on a terminal).
const PROGRESS_FROM_BYTES: u64 = 1 << 20;

pub async fn object(g: &Global, command: ObjectCommand) -> Result<()> {
    let api = connect(g)?;
    let object_path = |b: &str, k: &str| format!("/api/v1/objects/buckets/{}/object/{}", segment(b), segment(k));
    match command {
        ObjectCommand::Ls { bucket: None, .. } => {
            let answer = api.get("/api/v1/objects/buckets").await?;
            print_items(g, &answer, &answer["buckets"], &["name", "created_at"])?;
        }
        ObjectCommand::Ls { bucket: Some(bucket), prefix } => {
            let answer = api.get(&format!("/api/v1/objects/buckets/{}/objects?prefix={}", segment(&bucket), segment(&prefix))).await?;
            print_items(g, &answer, &answer["objects"], &["key", "size", "content_type", "updated_at"])?;
        }
        ObjectCommand::Mb { bucket } => {
            let answer = api.post("/api/v1/objects/buckets", json!({"name": bucket})).await?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "created bucket {bucket}")?;
        }
        ObjectCommand::Put { bucket, key, file, content_type } => {
            let handle = tokio::fs::File::open(&file).await.map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
            let size = handle.metadata().await?.len();
            let bar = progress::bytes(size, PROGRESS_FROM_BYTES, &key);
            let counted = bar.clone();
            let chunks = tokio_util::io::ReaderStream::new(handle).inspect(move |chunk| {
                if let Ok(c) = chunk {
                    counted.inc(c.len() as u64);
                }
            });
            let req = api
                .request(Method::PUT, &object_path(&bucket, &key))
                .header("content-type", content_type.unwrap_or_else(|| "application/octet-stream".into()))
                .header("content-length", size)
                .body(reqwest::Body::wrap_stream(chunks));
            let answer = api.json(req).await;
            bar.finish_and_clear();
            let answer = answer?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "uploaded {} ({size} bytes) to {bucket}/{key}", file.display())?;
        }
        ObjectCommand::Get { bucket, key, file } => {
            let mut resp = api.send(api.request(Method::GET, &object_path(&bucket, &key))).await?;
            let size = resp.content_length().unwrap_or(0);
            let to_stdout = file.as_ref().is_none_or(|f| f.as_os_str() == "-");
            let bar = progress::bytes(size, if to_stdout { u64::MAX } else { PROGRESS_FROM_BYTES }, &key);
            let mut sink: Box<dyn Write> = match &file {
                Some(path) if !to_stdout => Box::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
                _ => Box::new(std::io::stdout().lock()),
            };
            let mut written = 0u64;
            while let Some(chunk) = resp.chunk().await.map_err(|e| CliError::Unavailable(format!("the download stopped: {e}")))? {
                sink.write_all(&chunk)?;
                written += chunk.len() as u64;
                bar.inc(chunk.len() as u64);
            }
            sink.flush()?;
            bar.finish_and_clear();
            if let Some(path) = file.filter(|_| !to_stdout) {
                eprintln!("downloaded {bucket}/{key} ({written} bytes) to {}", path.display());
            }
        }
        ObjectCommand::Rm { bucket, key } => {
            let answer = api.delete(&object_path(&bucket, &key)).await?;
            if g.output == Format::Json {
                return print_json(&answer);
            }
            writeln!(std::io::stdout(), "deleted {bucket}/{key}")?;
        }
    }
    Ok(())
}

pub async fn vector_search(g: &Global, collection: String, vector: String, k: u64, filter: Option<String>) -> Result<()> {
    let api = connect(g)?;
    let mut body = json!({"vector": json_arg("VECTOR", &vector)?, "k": k});
    if let Some(filter) = filter {
        body["filter"] = json_arg("--filter", &filter)?;
    }
    let answer = api.post(&format!("/api/v1/vector/collections/{}/search", segment(&collection)), body).await?;
    print_items(g, &answer, &answer["hits"], &["id", "score", "distance", "metadata"])
}
