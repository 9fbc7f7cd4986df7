//! What a handler's signature says about its route: the request body (from a
//! [`JsonBody`]/[`OptionalJsonBody`] extractor), the query parameters (from
//! [`QueryParams`]) and, for handlers that answer a typed value, the response
//! body. [`crate::http::route_table::RouteTable`] reads it when a route is declared,
//! so the OpenAPI document cannot drift from the handlers: a handler whose
//! extractor has no description here does not compile into the table.

use std::future::Future;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use schemars::generate::SchemaGenerator;
use schemars::{JsonSchema, Schema};

use crate::error::ApiError;
use crate::http::handlers::{JsonBody, OptionalJsonBody, QueryParams, ReadPrefs};
use crate::services::auth::Caller;
use crate::state::AppState;

pub use crate::route_access::{RequestBody, RouteDoc};

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// `T`'s own schema (not a reference), transformed for OpenAPI 3.0; the types
/// it refers to stay in the generator's definitions.
fn inline_schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.root_schema_for::<T>();
    if let Some(object) = schema.as_object_mut() {
        for key in ["$schema", "title", "components"] {
            object.remove(key);
        }
    }
    schema
}

/// An extractor's part of the route's description (most extractors add nothing).
pub trait DescribeInput {
    fn describe(_doc: &mut RouteDoc) {}
}

impl DescribeInput for State<AppState> {}
impl DescribeInput for Caller {}
impl DescribeInput for ReadPrefs {}
impl DescribeInput for HeaderMap {}
impl DescribeInput for Method {}
impl DescribeInput for Uri {}
impl DescribeInput for WebSocketUpgrade {}
impl<T> DescribeInput for ConnectInfo<T> {}
impl<T> DescribeInput for Path<T> {}
impl<T: DescribeInput> DescribeInput for Option<T> {}
impl<T: DescribeInput, E> DescribeInput for Result<T, E> {}
impl<T> DescribeInput for axum::Extension<T> {}

impl<T: JsonSchema> DescribeInput for JsonBody<T> {
    fn describe(doc: &mut RouteDoc) {
        doc.request = Some(RequestBody::Json { schema: subschema::<T>, required: true });
    }
}

impl<T: JsonSchema> DescribeInput for OptionalJsonBody<T> {
    fn describe(doc: &mut RouteDoc) {
        doc.request = Some(RequestBody::Json { schema: subschema::<T>, required: false });
    }
}

impl<T: JsonSchema> DescribeInput for QueryParams<T> {
    fn describe(doc: &mut RouteDoc) {
        doc.query = Some(inline_schema::<T>);
    }
}

impl DescribeInput for Bytes {
    fn describe(doc: &mut RouteDoc) {
        doc.request = Some(RequestBody::Bytes);
    }
}

impl DescribeInput for Body {
    fn describe(doc: &mut RouteDoc) {
        doc.request = Some(RequestBody::Bytes);
    }
}

impl DescribeInput for Request {
    fn describe(doc: &mut RouteDoc) {
        doc.request = Some(RequestBody::Bytes);
    }
}

/// A handler's answer's part of the route's description.
pub trait DescribeOutput {
    fn describe(_doc: &mut RouteDoc) {}
}

impl<T: JsonSchema> DescribeOutput for Json<T> {
    fn describe(doc: &mut RouteDoc) {
        // `serde_json::Value` says nothing: the observed shape documents those.
        if T::schema_name() != "AnyValue" {
            doc.response = Some(subschema::<T>);
        }
    }
}

impl<T: DescribeOutput> DescribeOutput for Result<T, ApiError> {
    fn describe(doc: &mut RouteDoc) {
        T::describe(doc)
    }
}

impl<T: DescribeOutput> DescribeOutput for (StatusCode, T) {
    fn describe(doc: &mut RouteDoc) {
        T::describe(doc)
    }
}

impl<T: DescribeOutput> DescribeOutput for (HeaderMap, T) {
    fn describe(doc: &mut RouteDoc) {
        T::describe(doc)
    }
}

impl<T: DescribeOutput> DescribeOutput for (StatusCode, HeaderMap, T) {
    fn describe(doc: &mut RouteDoc) {
        T::describe(doc)
    }
}

impl DescribeOutput for () {}
impl DescribeOutput for &'static str {
    fn describe(doc: &mut RouteDoc) {
        doc.raw_response = true;
    }
}
impl DescribeOutput for StatusCode {}

impl DescribeOutput for Response {
    fn describe(doc: &mut RouteDoc) {
        doc.raw_response = true;
    }
}

impl<H, const N: usize> DescribeOutput for (StatusCode, [H; N], String) {
    fn describe(doc: &mut RouteDoc) {
        doc.raw_response = true;
    }
}

impl DescribeOutput for String {
    fn describe(doc: &mut RouteDoc) {
        doc.raw_response = true;
    }
}

/// A handler function whose route can be described (implemented for every
/// `async fn` whose extractors and answer are described above).
pub trait Documented<T> {
    fn route_doc() -> RouteDoc;
}

impl<F, Fut, Res> Documented<((),)> for F
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Res>,
    Res: DescribeOutput,
{
    fn route_doc() -> RouteDoc {
        let mut doc = RouteDoc::default();
        Res::describe(&mut doc);
        doc
    }
}

macro_rules! documented {
    ($($ty:ident),+) => {
        impl<F, Fut, Res, M, $($ty,)+> Documented<(M, $($ty,)+)> for F
        where
            F: FnOnce($($ty,)+) -> Fut,
            Fut: Future<Output = Res>,
            Res: DescribeOutput,
            $($ty: DescribeInput,)+
        {
            fn route_doc() -> RouteDoc {
                let mut doc = RouteDoc::default();
                $($ty::describe(&mut doc);)+
                Res::describe(&mut doc);
                doc
            }
        }
    };
}

documented!(T1);
documented!(T1, T2);
documented!(T1, T2, T3);
documented!(T1, T2, T3, T4);
documented!(T1, T2, T3, T4, T5);
documented!(T1, T2, T3, T4, T5, T6);
documented!(T1, T2, T3, T4, T5, T6, T7);
documented!(T1, T2, T3, T4, T5, T6, T7, T8);
