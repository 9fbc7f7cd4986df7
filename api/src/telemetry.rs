//! Logging and tracing shared by `tessera-node` and `tessera-router`: the log
//! to stderr (text or JSON, filtered by `log_level`), and OpenTelemetry traces
//! exported over OTLP/gRPC when `telemetry.otlp_endpoint` is set (off by
//! default). A router request's trace crosses into the nodes: the router puts
//! the W3C `traceparent` of its current span into the gRPC metadata
//! ([`inject_trace`]) and the node's server span takes it as its parent
//! ([`grpc_server_span`]).

use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::runtime::LogFormat;

/// The `[telemetry]` section of both binaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySection {
    /// OTLP/gRPC collector endpoint, e.g. `http://127.0.0.1:4317`
    /// (`SERVICE_OTLP_ENDPOINT`); empty: no traces are exported.
    pub otlp_endpoint: String,
    /// Fraction of new traces kept, 0.0–1.0 (`SERVICE_TRACE_SAMPLE_RATIO`); a
    /// span with a remote parent follows the parent's decision.
    pub sample_ratio: f64,
}

impl Default for TelemetrySection {
    fn default() -> Self {
        TelemetrySection { otlp_endpoint: String::new(), sample_ratio: 1.0 }
    }
}

/// A layer of the process's subscriber (the node adds its log ring).
pub type BoxedLayer = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Keeps the trace exporter of the process; dropping it flushes the spans
/// still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the buffered spans now.
    pub fn flush(&self) {
        if let Some(p) = &self.provider {
            let _ = p.force_flush();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Errors setting up logging and tracing.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.sample_ratio must be between 0 and 1, not {0}")]
    SampleRatio(f64),
    #[error("telemetry.otlp_endpoint {0:?} must be an http:// or https:// URL")]
    Endpoint(String),
    #[error("OTLP exporter: {0}")]
    Exporter(String),
}

/// Whether this process exports traces (`telemetry.otlp_endpoint` set).
static EXPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process exports traces: request spans are worth making even
/// when no log line would show them.
pub fn exporting() -> bool {
    EXPORTING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Installs the process's subscriber: `filter` (an `EnvFilter` directive such
/// as `info` or `info,openraft=warn`), the stderr log in `format`, `extra`
/// layers, and the OTLP trace layer when `telemetry.otlp_endpoint` is set.
/// Must run inside the Tokio runtime (the gRPC exporter's channel lives there).
pub fn init(
    service_name: &'static str,
    instance_id: String,
    filter: &str,
    format: LogFormat,
    extra: Vec<BoxedLayer>,
    telemetry: &TelemetrySection,
) -> Result<Telemetry, TelemetryError> {
    if !(0.0..=1.0).contains(&telemetry.sample_ratio) {
        return Err(TelemetryError::SampleRatio(telemetry.sample_ratio));
    }
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let mut layers: Vec<BoxedLayer> = extra;
    layers.push(match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer().json().boxed(),
    });
    let provider = if telemetry.otlp_endpoint.is_empty() {
        None
    } else {
        let endpoint = telemetry.otlp_endpoint.trim();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(TelemetryError::Endpoint(endpoint.to_string()));
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let batches = BatchSpanProcessor::builder(exporter)
            .with_batch_config(BatchConfigBuilder::default().with_scheduled_delay(Duration::from_secs(1)).build())
            .build();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service_name)
            .with_attribute(opentelemetry::KeyValue::new("service.instance.id", instance_id))
            .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batches)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(telemetry.sample_ratio))))
            .with_resource(resource)
            .build();
        layers.push(tracing_opentelemetry::layer().with_tracer(provider.tracer(service_name)).boxed());
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        EXPORTING.store(true, std::sync::atomic::Ordering::Relaxed);
        Some(provider)
    };
    tracing_subscriber::registry().with(layers).with(filter).init();
    if provider.is_some() {
        tracing::info!(endpoint = %telemetry.otlp_endpoint, ratio = telemetry.sample_ratio, "exporting traces over OTLP");
    }
    Ok(Telemetry { provider })
}

/// Puts the current span's trace context into outgoing gRPC metadata.
pub fn inject_trace(metadata: &mut tonic::metadata::MetadataMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut MetadataInjector(metadata)));
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (tonic::metadata::MetadataKey::from_bytes(key.as_bytes()), value.parse()) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a tonic::codegen::http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The span a node serves one gRPC request in (tonic's `trace_fn`): named
/// after the method, the child of the caller's span when the request carries
/// a trace context.
///
/// Raft's own traffic between peers (heartbeats, appends, votes) gets no span:
/// it would be most of the spans and none of the requests.
pub fn grpc_server_span(request: &tonic::codegen::http::Request<()>) -> tracing::Span {
    if request.uri().path().starts_with("/tessera.v1.RaftService/") {
        return tracing::Span::none();
    }
    let span = tracing::info_span!("grpc", rpc.method = %request.uri().path());
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(request.headers()));
    let _ = span.set_parent(parent);
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_ratio_outside_zero_to_one_is_refused() {
        let t = TelemetrySection { sample_ratio: 1.5, ..Default::default() };
        assert!(matches!(init("t", "1".into(), "info", LogFormat::Text, vec![], &t), Err(TelemetryError::SampleRatio(_))));
    }
}
