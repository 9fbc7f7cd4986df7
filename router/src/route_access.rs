//! What the route table records of each route, below everything that uses it:
//! the access a route needs, what its handler's signature says of its bodies
//! (for the OpenAPI document), and the lookup of a request's decision. The
//! router's state holds the decisions; the permission check and the OpenAPI
//! document read them.

use schemars::Schema;
use schemars::generate::SchemaGenerator;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No authentication.
    Public,
    /// Any authenticated caller (self-service routes).
    Authenticated,
    /// A caller holding this permission.
    Permission(&'static str),
    /// Prometheus scrapes: a caller holding `read:cluster`, or one presenting
    /// the metrics token (`Authorization: Bearer <server.metrics_token>`).
    Metrics,
}

/// Builds a schema with the document's generator (its definitions become
/// `components/schemas`).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// A route's request body.
#[derive(Clone, Copy)]
pub enum RequestBody {
    /// A JSON object of this schema; `required` false when an empty body is taken as `{}`.
    Json { schema: SchemaFn, required: bool },
    /// Bytes of any media type (objects, import files), streamed or read whole.
    Bytes,
}

/// What the OpenAPI document says of one route beyond its path and permission.
#[derive(Clone, Copy, Default)]
pub struct RouteDoc {
    pub request: Option<RequestBody>,
    /// The query string's fields (an object schema; each property a parameter).
    pub query: Option<SchemaFn>,
    /// The success body, when the handler answers a typed value.
    pub response: Option<SchemaFn>,
    /// The success statuses of a typed answer (none stated: 200).
    pub statuses: &'static [u16],
    /// The handler answers bytes or a stream rather than a JSON value.
    pub raw_response: bool,
    /// Besides its typed JSON answer, the route answers a file of one of
    /// these media types when asked (an incident report as a PDF document).
    pub file_media: &'static [&'static str],
    /// Its success answer is the resource's own bytes, in the media type they
    /// were stored with, and never a JSON body of Tessera's (an object's content).
    pub bytes_only: bool,
}

impl std::fmt::Debug for RouteDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteDoc")
            .field("request", &self.request.map(|r| matches!(r, RequestBody::Json { .. })))
            .field("query", &self.query.is_some())
            .field("response", &self.response.is_some())
            .finish()
    }
}

/// What one method of one route needs, and what its handler's signature says
/// of its bodies (for the OpenAPI document).
#[derive(Debug, Clone)]
pub struct Decision {
    pub method: &'static str,
    /// The route template, as axum matches it (`/api/v1/kv/keys/{*key}`).
    pub path: String,
    pub access: Access,
    pub doc: RouteDoc,
}

impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        (self.method, &self.path, self.access) == (other.method, &other.path, other.access)
    }
}

/// The decision for a request among `decisions`; `HEAD` without its own is decided as `GET`.
pub fn decision<'a>(decisions: &'a [Decision], method: &str, template: &str) -> Option<&'a Decision> {
    let find = |m: &str| decisions.iter().find(|d| d.method == m && d.path == template);
    find(method).or_else(|| if method == "HEAD" { find("GET") } else { None })
}

/// The methods `template` takes (HEAD with GET), for a 405's `Allow`.
pub fn methods_of(decisions: &[Decision], template: &str) -> Vec<&'static str> {
    let mut methods: Vec<&'static str> = decisions.iter().filter(|d| d.path == template).map(|d| d.method).collect();
    if methods.contains(&"GET") && !methods.contains(&"HEAD") {
        methods.push("HEAD");
    }
    methods.sort_unstable();
    methods.dedup();
    methods
}
