//! The route table: every route is declared once, with its access decision, and
//! the table builds both the axum router and the decisions the permission check
//! ([`crate::http::permissions::authorize`]) reads. A route cannot exist without a
//! decision, nor a decision without its route.
//!
//! ```ignore
//! RouteTable::new()
//!     .get("/api/v1/graph/nodes/{id}", P("read:graph"), get_node)
//!     .delete("/api/v1/graph/nodes/{id}", P("write:graph"), delete_node)
//! ```

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};

use schemars::JsonSchema;

use crate::http::openapi::describe::Documented;
use crate::route_access::Access;
use crate::route_access::{RequestBody, RouteDoc};
use crate::state::AppState;

pub use crate::route_access::Decision;

/// Routes with their decisions, in declaration order.
#[derive(Default)]
pub struct RouteTable {
    routes: Vec<(String, MethodRouter<AppState>)>,
    decisions: Vec<Decision>,
}

macro_rules! method {
    ($(#[$doc:meta])* $name:ident, $filter:ident) => {
        $(#[$doc])*
        pub fn $name<H, T>(self, path: impl Into<String>, access: Access, handler: H) -> Self
        where
            H: Handler<T, AppState> + Documented<T>,
            T: 'static,
        {
            self.with(path, stringify!($filter), access, H::route_doc(), on(MethodFilter::$filter, handler))
        }
    };
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }

    method!(/// A `GET` route (it answers `HEAD` too, unless [`RouteTable::head`] gives one).
        get, GET);
    method!(/// A `POST` route.
        post, POST);
    method!(/// A `PUT` route.
        put, PUT);
    method!(/// A `PATCH` route.
        patch, PATCH);
    method!(/// A `DELETE` route.
        delete, DELETE);

    /// A `HEAD` handler for a path whose `GET` is declared: decided as that `GET`,
    /// so it adds no decision of its own.
    pub fn head<H, T>(mut self, path: impl Into<String>, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.routes.push((path.into(), on(MethodFilter::HEAD, handler)));
        self
    }

    /// A route served by `route`, an already built method router; `method` is
    /// the one it serves, `doc` what the document says of it.
    fn with(mut self, path: impl Into<String>, method: &'static str, access: Access, doc: RouteDoc, route: MethodRouter<AppState>) -> Self {
        let path = path.into();
        self.decisions.push(Decision { method, path: path.clone(), access, doc });
        self.routes.push((path, route));
        self
    }

    /// Documents the last declared route's success answer as the bytes a
    /// client stored, in their own media type (never a JSON body of Tessera's).
    pub fn answers_stored_bytes(mut self) -> Self {
        let last = self.decisions.last_mut().expect("a route declared before its answer");
        last.doc.raw_response = true;
        last.doc.bytes_only = true;
        self
    }

    /// Documents the success statuses of the last declared route's typed
    /// answer (201 for a creation; a PUT that creates or replaces states both).
    pub fn answers(mut self, statuses: &'static [u16]) -> Self {
        let last = self.decisions.last_mut().expect("a route declared before its statuses");
        last.doc.statuses = statuses;
        self
    }

    /// Documents the last declared route's success answer as `T`, for a
    /// handler that builds its response by hand (to keep its headers on a
    /// refusal) from a `T` it serializes.
    pub fn returns<T: JsonSchema>(mut self) -> Self {
        let last = self.decisions.last_mut().expect("a route declared before its answer");
        last.doc.response = Some(|g| g.subschema_for::<T>());
        self
    }

    /// Documents the last declared route's success answer as `T` in JSON or,
    /// when the request asks for it, a file of one of the `media` types (a PDF
    /// document; an export as CSV or XML).
    pub fn returns_or_files<T: JsonSchema>(mut self, media: &'static [&'static str]) -> Self {
        let last = self.decisions.last_mut().expect("a route declared before its answer");
        last.doc.response = Some(|g| g.subschema_for::<T>());
        last.doc.file_media = media;
        self
    }

    /// Documents the last declared route's JSON body as `T`, for a handler
    /// that reads its body by hand (to word its own errors) rather than
    /// through [`crate::http::handlers::JsonBody`]; `required` false when an empty
    /// body is accepted.
    pub fn body<T: JsonSchema>(mut self, required: bool) -> Self {
        let last = self.decisions.last_mut().expect("a route declared before its body");
        last.doc.request = Some(RequestBody::Json { schema: |g| g.subschema_for::<T>(), required });
        self
    }

    /// Every route of this table accepts bodies up to `bytes` (instead of the
    /// router's default limit).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.routes = self.routes.into_iter().map(|(path, route)| (path, route.layer(DefaultBodyLimit::max(bytes)))).collect();
        self
    }

    /// Adds every route of `other`.
    pub fn merge(mut self, other: RouteTable) -> Self {
        self.routes.extend(other.routes);
        self.decisions.extend(other.decisions);
        self
    }

    /// The axum router (the methods of one path merged into one route) and every decision.
    /// Panics on a method declared twice for one path, as axum does.
    pub fn build(self) -> (Router<AppState>, Vec<Decision>) {
        let mut paths: Vec<(String, MethodRouter<AppState>)> = Vec::new();
        for (path, route) in self.routes {
            match paths.iter_mut().find(|(p, _)| *p == path) {
                Some((_, existing)) => {
                    let merged = std::mem::take(existing).merge(route);
                    *existing = merged;
                }
                None => paths.push((path, route)),
            }
        }
        let router = paths.into_iter().fold(Router::new(), |router, (path, route)| router.route(&path, route));
        (router, self.decisions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_access::Access::{Permission as P, Public};
    use crate::route_access::decision;

    async fn ok() -> &'static str {
        "ok"
    }

    fn table() -> RouteTable {
        RouteTable::new()
            .get("/a", Public, ok)
            .delete("/a", P("write:a"), ok)
            .merge(RouteTable::new().post("/b", P("write:b"), ok).body_limit(10))
            .head("/a", ok)
    }

    #[test]
    fn every_declared_method_has_its_decision_and_head_is_decided_as_get() {
        let (_, decisions) = table().build();
        assert_eq!(decisions.len(), 3, "{decisions:?}");
        assert_eq!(decision(&decisions, "DELETE", "/a").map(|d| d.access), Some(P("write:a")));
        assert_eq!(decision(&decisions, "HEAD", "/a").map(|d| d.access), Some(Public));
        assert_eq!(decision(&decisions, "POST", "/b").map(|d| d.access), Some(P("write:b")));
        assert_eq!(decision(&decisions, "GET", "/b"), None, "an undeclared method has no decision");
        assert_eq!(decision(&decisions, "GET", "/c"), None);
    }

    #[tokio::test]
    async fn the_built_router_serves_every_method_of_a_path() {
        use tower::ServiceExt;
        let (router, _) = table().build();
        let state = crate::tests::harness::bare_state();
        let app = router.with_state(state);
        for (method, path, status) in
            [("GET", "/a", 200), ("DELETE", "/a", 200), ("HEAD", "/a", 200), ("POST", "/b", 200), ("PUT", "/a", 405)]
        {
            let req = axum::http::Request::builder().method(method).uri(path).body(axum::body::Body::empty()).unwrap();
            let res = app.clone().oneshot(req).await.unwrap();
            assert_eq!(res.status().as_u16(), status, "{method} {path}");
        }
    }

    #[test]
    #[should_panic]
    fn a_method_declared_twice_for_one_path_is_refused() {
        let _ = RouteTable::new().get("/a", Public, ok).get("/a", Public, ok).build();
    }
}
