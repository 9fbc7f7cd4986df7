//! One router over an in-process cluster, called like an HTTP client would.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::cluster::memory::MemoryCluster;
use crate::config::RouterConfig;
use crate::state::AppState;

pub const ADMIN_PASSWORD: &str = "in-process-admin-1";

/// A router with default configuration over an in-process cluster, and the
/// bearer token of its first admin.
pub struct TestRouter {
    pub cluster: Arc<MemoryCluster>,
    /// The router's state (for background tasks a test runs by hand).
    pub state: AppState,
    app: axum::Router,
    token: String,
}

/// An answer: status and JSON body (`Null` when the body is empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub json: Value,
}

impl Answer {
    /// Panics with the body unless the status is `expected`.
    #[track_caller]
    pub fn expect(self, expected: u16) -> Value {
        assert_eq!(self.status.as_u16(), expected, "unexpected answer: {}", self.json);
        self.json
    }
}

/// The state of a router over an in-memory cluster of one data group, with no
/// users (for tests of the routing layer itself).
pub fn bare_state() -> AppState {
    AppState::new(RouterConfig::default(), Arc::new(MemoryCluster::new(1))).expect("router state")
}

impl TestRouter {
    /// A router over `shards` data groups, its admin provisioned and logged in.
    pub async fn new(shards: u64) -> TestRouter {
        TestRouter::with_config(shards, |_| {}).await
    }

    /// [`TestRouter::new`] with `adjust` applied to the default configuration.
    pub async fn with_config(shards: u64, adjust: impl FnOnce(&mut RouterConfig)) -> TestRouter {
        let cluster = Arc::new(MemoryCluster::new(shards));
        let mut config = RouterConfig::default();
        adjust(&mut config);
        config.auth.admin_username = Some("admin".into());
        config.auth.admin_password = Some(ADMIN_PASSWORD.into());
        let state = AppState::new(config, cluster.clone()).expect("router state");
        crate::services::auth::provision_admin(state.clone()).await;
        let mut router = TestRouter { cluster, app: crate::routes(state.clone()), state, token: String::new() };
        let login = router.post("/api/v1/auth/login", &json!({"username": "admin", "password": ADMIN_PASSWORD})).await;
        router.token = login.expect(200)["token"].as_str().expect("a token").to_string();
        router
    }

    /// The same router, calling with another bearer token.
    pub fn with_token(&self, token: &str) -> TestRouter {
        TestRouter { cluster: self.cluster.clone(), state: self.state.clone(), app: self.app.clone(), token: token.to_string() }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let mut req = Request::builder().method(method).uri(path);
        if !self.token.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.token));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let body = body.map_or_else(Body::empty, |b| Body::from(serde_json::to_vec(b).expect("json")));
        let mut req = req.body(body).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let (status, _, bytes) = self.send(req).await;
        Answer { status, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// A GET's status and body as text (for answers that are not JSON).
    pub async fn get_text(&self, path: &str) -> String {
        let mut req = Request::builder().method(Method::GET).uri(path);
        if !self.token.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.token));
        }
        let mut req = req.body(Body::empty()).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let resp = self.app.clone().oneshot(req).await.expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK, "GET {path}");
        String::from_utf8(axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body").to_vec()).expect("utf-8")
    }

    /// A call with raw bytes in and out (binary files): status and body.
    pub async fn call_bytes(&self, method: Method, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        let mut req = Request::builder().method(method).uri(path).header("authorization", format!("Bearer {}", self.token));
        if !body.is_empty() {
            req = req.header("content-type", "application/octet-stream");
        }
        let mut req = req.body(Body::from(body)).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let (status, _, bytes) = self.send(req).await;
        (status, bytes)
    }

    /// Sends `req` and reads the whole answer; a JSON answer's shape is checked
    /// against the OpenAPI document (see [`crate::http::openapi::observed`]).
    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let method = req.method().to_string();
        let resp = self.app.clone().oneshot(req).await.expect("infallible");
        let (status, headers) = (resp.status(), resp.headers().clone());
        let template = resp.extensions().get::<crate::http::openapi::RouteTemplate>().map(|t| t.0.clone()).unwrap_or_default();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body").to_vec();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let typed = typed_answer(&self.state, &method, &template, status.as_u16());
        crate::http::openapi::observed::observe(&method, &template, status.as_u16(), &json, typed);
        (status, headers, bytes)
    }

    /// Rewrites, outside Raft, the first audit entry of `subject` with
    /// `change` applied (a tampering the chain must notice); answers its sequence.
    pub fn rewrite_audit_entry(&self, subject: &str, change: impl FnOnce(&mut tessera_api::compliance::AuditEntry)) -> u64 {
        use tessera_api::command::{MetaQuery, MetaQueryResult, Query, QueryResult};
        use tessera_api::compliance::{AuditAnswer, AuditQuery};
        let reader = self.cluster.store().reader(tessera_api::META_GROUP);
        let q = Query::Meta(MetaQuery::Audit(AuditQuery::Subject { subject_id: subject.into() }));
        let QueryResult::Meta(MetaQueryResult::Audit(AuditAnswer::Entries(entries))) = reader.query(&q, 0).expect("audit query") else {
            panic!("no audit entries of {subject}")
        };
        let mut forged = entries[0].clone();
        change(&mut forged);
        let key = format!("aud/e/{:016x}", forged.seq);
        let space = tessera_storage::engine::space::META;
        self.cluster
            .store()
            .overwrite_record(tessera_api::META_GROUP, space, key.as_bytes(), &serde_json::to_vec(&forged).expect("json"))
            .expect("overwrite");
        forged.seq
    }

    /// This router's bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Sends a request built by the caller (from 127.0.0.1); status, headers and body.
    pub async fn send_raw(&self, mut req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        self.send(req).await
    }

    /// A JSON POST with one extra header.
    pub async fn post_with_header(&self, path: &str, body: &Value, header: (&str, &str)) -> Answer {
        let req = Request::builder().method(Method::POST).uri(path).header("content-type", "application/json").header(header.0, header.1);
        let mut req = req.body(Body::from(serde_json::to_vec(body).expect("json"))).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let (status, _, bytes) = self.send(req).await;
        Answer { status, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// A GET with this router's token and one extra header.
    pub async fn get_with_header(&self, path: &str, header: (&str, &str)) -> Answer {
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.token))
            .header(header.0, header.1);
        let mut req = req.body(Body::empty()).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let (status, _, bytes) = self.send(req).await;
        Answer { status, json: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// A GET's status, headers and raw body.
    pub async fn raw(&self, method: Method, path: &str) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let req = Request::builder().method(method).uri(path).header("authorization", format!("Bearer {}", self.token));
        let mut req = req.body(Body::empty()).expect("request");
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        self.send(req).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Answer {
        self.call(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.call(Method::DELETE, path, None).await
    }
}

/// The schema the document states for a typed route's answer with `status`
/// (`Err` when it states none); `None` for routes documented by observation.
fn typed_answer(state: &AppState, method: &str, template: &str, status: u16) -> Option<Result<Value, String>> {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let decision = crate::route_access::decision(state.decisions(), method, template)?;
    if decision.doc.response.is_none() || !(200..300).contains(&status) || status == 204 {
        return None;
    }
    let doc = DOCUMENT.get_or_init(|| crate::http::openapi::document(state.decisions()));
    let operation = &doc["paths"][crate::http::openapi::openapi_path(template)][decision.method.to_ascii_lowercase()];
    let schema = &operation["responses"][status.to_string()]["content"]["application/json"]["schema"];
    if schema.is_null() {
        return Some(Err(format!("the document states no JSON answer with status {status} (RouteTable::answers)")));
    }
    Some(Ok(crate::http::openapi::observed::inline_refs(schema, &doc["components"]["schemas"], 16)))
}
