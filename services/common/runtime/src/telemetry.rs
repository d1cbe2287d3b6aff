//! Logging and tracing set-up shared by every entry point.
//!
//! Logs go to stderr through `tracing`. When `[telemetry] otlp_endpoint` is
//! set, spans are also exported over OTLP/gRPC to that collector, with the
//! W3C trace context of the request: a request's gateway span and the
//! spans of the services it calls form one trace.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes it.
#[derive(Default)]
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered (call before the process exits).
    pub fn shutdown(&self) {
        if let Some(p) = &self.provider {
            if let Err(e) = p.shutdown() {
                eprintln!("keelson: flushing traces failed: {e}");
            }
        }
    }
}

static OTEL_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Installs the global subscriber: the log filter (`RUST_LOG` wins over the
/// configured one), stderr output, and the OTLP exporter when an endpoint
/// is given. Must run inside the tokio runtime when exporting.
pub fn init(default_filter: &str, otlp_endpoint: Option<&str>, service_name: &str) -> Telemetry {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // stderr keeps command output (`db version`, `ctl --json`) clean on
    // stdout; colours only for a terminal, so log files stay greppable.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_target(true).with_ansi(ansi).with_writer(std::io::stderr);
    let Some(endpoint) = otlp_endpoint.filter(|e| !e.is_empty()) else {
        let _ = tracing_subscriber::registry().with(filter()).with(fmt).try_init();
        return Telemetry::default();
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build();
    let exporter = match exporter {
        Ok(e) => e,
        Err(e) => {
            let _ = tracing_subscriber::registry().with(filter()).with(fmt).try_init();
            tracing::error!(target: "keelson::telemetry", "OTLP exporter to {endpoint} not started: {e}");
            return Telemetry::default();
        }
    };
    let processor = opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
        exporter,
        opentelemetry_sdk::runtime::Tokio,
    )
    .build();
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service_name.to_string()).build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("keelson");
    let _ = tracing_subscriber::registry()
        .with(filter())
        .with(fmt)
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .try_init();
    OTEL_ON.store(true, std::sync::atomic::Ordering::Relaxed);
    tracing::info!(target: "keelson::telemetry", "exporting traces over OTLP to {endpoint}");
    Telemetry { provider: Some(provider) }
}

/// Installs logging only (tests, one-shot commands).
pub fn init_logging(default_filter: &str) {
    let _ = init(default_filter, None, "keelson");
}

/// Makes `span` a child of the caller's `traceparent` and answers the
/// traceparent to send downstream: when spans are exported it names this
/// span, so the services' spans hang under it in the same trace.
pub fn link(span: &tracing::Span, incoming: Option<&str>, fallback: &str) -> String {
    if !OTEL_ON.load(std::sync::atomic::Ordering::Relaxed) {
        return fallback.to_string();
    }
    if let Some(tp) = incoming {
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_string(), tp.to_string());
        let parent = TraceContextPropagator::new().extract(&carrier);
        let _ = span.set_parent(parent);
    }
    traceparent_of(span).unwrap_or_else(|| fallback.to_string())
}

/// The traceparent naming the current span, when spans are exported: what
/// an outgoing call sends so the callee's span is its child (also from a
/// task spawned without the request's context).
pub fn current_traceparent() -> Option<String> {
    if !OTEL_ON.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    traceparent_of(&tracing::Span::current())
}

fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}
