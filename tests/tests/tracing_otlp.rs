//! Scenario: an operator points the router and every node at an OTLP/gRPC
//! collector (`SERVICE_OTLP_ENDPOINT`). A key-value write through the router
//! then yields one trace: the router's `http_request` span and, as its child,
//! the serving node's `grpc` span, each exported by its own process under its
//! own service name; Raft's traffic between the nodes is not traced. A small
//! OTLP receiver in the test plays the collector.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use serde_json::json;
use tessera_tests::{Cluster, ClusterOptions};

/// One exported span as the collector saw it.
#[derive(Debug, Clone)]
struct ReceivedSpan {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: HashMap<String, String>,
}

/// The collector: keeps every span it is sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.value.as_ref())
                .map(|v| match v {
                    Value::StringValue(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    let attributes = span
                        .attributes
                        .iter()
                        .map(|a| {
                            let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                                Some(Value::StringValue(s)) => s.clone(),
                                Some(Value::IntValue(i)) => i.to_string(),
                                other => format!("{other:?}"),
                            };
                            (a.key.clone(), value)
                        })
                        .collect();
                    kept.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: span.trace_id,
                        span_id: span.span_id,
                        parent_span_id: span.parent_span_id,
                        attributes,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kv_write_yields_one_trace_across_router_and_node() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Receiver::default();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let otlp = vec![("SERVICE_OTLP_ENDPOINT".to_string(), endpoint)];
    let options = ClusterOptions { shard_count: 2, node_env: otlp.clone(), router_env: otlp, ..ClusterOptions::default() };
    let cluster = Cluster::start(options).await.expect("cluster start");
    let outcome = scenario(&cluster, &receiver).await;
    server.abort();
    if let Err(e) = outcome {
        panic!("trace scenario failed: {e:?}\n{}", cluster.log_tails(30));
    }
}

async fn scenario(c: &Cluster, receiver: &Receiver) -> Result<()> {
    c.http.kv_put("traced/key", json!("v"), None).await?.ensure_status(200)?;
    // The batch exporters send about once a second: wait for the write's spans.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = receiver.spans.lock().unwrap().clone();
        let write = spans.iter().find(|s| {
            s.service == "tessera-router"
                && s.name == "http_request"
                && s.attributes.get("http.method").map(String::as_str) == Some("POST")
                && s.attributes.get("http.route").is_some_and(|r| r.starts_with("/api/v1/kv"))
        });
        if let Some(root) = write {
            let in_trace: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.trace_id == root.trace_id).collect();
            let node_spans: Vec<&&ReceivedSpan> = in_trace.iter().filter(|s| s.service == "tessera-node").collect();
            if let Some(node_span) = node_spans.iter().find(|s| s.parent_span_id == root.span_id) {
                ensure!(root.parent_span_id.is_empty(), "the router's request span is the trace's root: {root:?}");
                ensure!(node_span.name == "grpc", "{node_span:?}");
                ensure!(
                    node_span.attributes.get("rpc.method").is_some_and(|m| m.contains("DataService")),
                    "the node span names the gRPC method: {node_span:?}"
                );
                ensure!(root.attributes.get("http.status_code").map(String::as_str) == Some("200"), "{root:?}");
                // Raft's heartbeats and appends between the nodes are not traced.
                let raft = spans.iter().filter(|s| s.attributes.get("rpc.method").is_some_and(|m| m.contains("RaftService"))).count();
                ensure!(raft == 0, "{raft} spans of Raft traffic were exported");
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            let summary: Vec<String> = spans.iter().map(|s| format!("{} {} {:?}", s.service, s.name, s.attributes)).take(40).collect();
            bail!("no trace with the router's write span and a node span under it; received {}:\n{}", spans.len(), summary.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
