//! The live loop's own metrics (Prometheus text at `/metrics` on
//! `--metrics-addr`): GPUs of the running plan, each service's observed
//! and forecast rate, decisions by action (holds among them), transitions
//! by outcome, how far the forecasts were off, when the last decision was
//! made, and whether this replica leads; and `/healthz` for the pod's
//! probes. (Each decision's reason, free text, is in its Event and the
//! journal, not a label.) Served by a thread on a plain listener: one short
//! answer per connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::LiveError;

/// A gauge of floating-point values.
type FloatGauge = Gauge<f64, AtomicU64>;

/// Labels of a service.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
}

/// Labels of a transition: what became of a new plan.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// Labels of a decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
}

/// What can become of a new plan, as `tessera_autopilot_transitions_total`
/// counts it.
pub const TRANSITION_OUTCOMES: [&str; 3] = ["applied", "failed", "dry-run"];

/// The autopilot's metrics (cheap to clone: the metrics are shared).
#[derive(Debug, Clone)]
pub struct LoopMetrics {
    registry: Arc<Registry>,
    gpus: Gauge,
    observed_rps: Family<ServiceLabels, FloatGauge>,
    forecast_rps: Family<ServiceLabels, FloatGauge>,
    decisions: Family<ActionLabels, Counter>,
    last_decision_s: FloatGauge,
    leader: Gauge,
    transitions: Family<OutcomeLabels, Counter>,
    forecast_error: FloatGauge,
    forecast_under_share: FloatGauge,
    observed_cv: Family<ServiceLabels, FloatGauge>,
    arrival_cv: FloatGauge,
}

impl LoopMetrics {
    /// Every metric registered, at zero; every action's counter present.
    pub fn new(actions: &[&str]) -> LoopMetrics {
        let mut registry = Registry::with_prefix("tessera_autopilot");
        let gpus = Gauge::default();
        registry.register("gpus", "GPUs of the plan the autopilot considers running", gpus.clone());
        let observed_rps = Family::<ServiceLabels, FloatGauge>::default();
        registry.register("observed_rps", "A service's request rate as last read (req/s)", observed_rps.clone());
        let forecast_rps = Family::<ServiceLabels, FloatGauge>::default();
        registry.register("forecast_rps", "A service's forecast request rate (req/s)", forecast_rps.clone());
        let decisions = Family::<ActionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions made, by action (hold: metrics missing or stale, a transition running, the rate limit)",
            decisions.clone(),
        );
        for action in actions {
            let _ = decisions.get_or_create(&ActionLabels { action: action.to_string() });
        }
        let last_decision_s = FloatGauge::default();
        registry.register(
            "last_decision_timestamp_seconds",
            "When the last decision was made (seconds since the Unix epoch)",
            last_decision_s.clone(),
        );
        let transitions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "transitions",
            "New plans acted on, by outcome (applied, failed, dry-run)",
            transitions.clone(),
        );
        for outcome in TRANSITION_OUTCOMES {
            let _ = transitions.get_or_create(&OutcomeLabels { outcome: outcome.to_string() });
        }
        let forecast_error = FloatGauge::default();
        registry.register(
            "forecast_mean_abs_relative_error",
            "Mean |observed - forecast| / forecast over every forecast checked so far",
            forecast_error.clone(),
        );
        let forecast_under_share = FloatGauge::default();
        registry.register(
            "forecast_under_share",
            "The share of forecasts checked so far that fell below the rate then observed",
            forecast_under_share.clone(),
        );
        let observed_cv = Family::<ServiceLabels, FloatGauge>::default();
        registry.register(
            "observed_arrival_cv",
            "A service's inter-arrival coefficient of variation as last estimated (--observe-burstiness; 1: Poisson)",
            observed_cv.clone(),
        );
        let arrival_cv = FloatGauge::default();
        arrival_cv.set(1.0);
        registry.register(
            "planned_arrival_cv",
            "The inter-arrival coefficient of variation plans are made under (1: Poisson; NaN: not a renewal model)",
            arrival_cv.clone(),
        );
        let leader = Gauge::default();
        leader.set(1);
        registry.register(
            "leader",
            "1 while this replica acts (it holds the Lease, or runs without leader election), 0 standing by",
            leader.clone(),
        );
        LoopMetrics {
            registry: Arc::new(registry),
            gpus,
            observed_rps,
            forecast_rps,
            decisions,
            last_decision_s,
            leader,
            transitions,
            forecast_error,
            forecast_under_share,
            observed_cv,
            arrival_cv,
        }
    }

    /// Records what became of a new plan: one of [`TRANSITION_OUTCOMES`].
    pub fn record_transition(&self, outcome: &str) {
        self.transitions.get_or_create(&OutcomeLabels { outcome: outcome.to_string() }).inc();
    }

    /// Records how far the forecasts were off so far.
    pub fn record_forecast_error(&self, mean_abs_relative_error: f64, under_share: f64) {
        self.forecast_error.set(mean_abs_relative_error);
        self.forecast_under_share.set(under_share);
    }

    /// Records a service's estimated inter-arrival coefficient of variation.
    pub fn record_observed_cv(&self, service: &str, cv: f64) {
        self.observed_cv.get_or_create(&ServiceLabels { service: service.to_string() }).set(cv);
    }

    /// Records the coefficient of variation plans are made under (`None`:
    /// a model that is not a renewal process).
    pub fn set_arrival_cv(&self, cv: Option<f64>) {
        self.arrival_cv.set(cv.unwrap_or(f64::NAN));
    }

    /// Records whether this replica acts (leads) or stands by.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Records a decision: its action, the GPUs after it, the rates read
    /// (`None`: not read, its gauge removed) and forecast.
    pub fn record(
        &self,
        time_s: f64,
        action: &str,
        gpus: usize,
        observed: &[(&str, Option<f64>)],
        forecast: &[(&str, f64)],
    ) {
        self.decisions.get_or_create(&ActionLabels { action: action.to_string() }).inc();
        self.gpus.set(i64::try_from(gpus).unwrap_or(i64::MAX));
        for (service, rate) in observed {
            let labels = ServiceLabels { service: service.to_string() };
            match rate {
                Some(rate) => {
                    self.observed_rps.get_or_create(&labels).set(*rate);
                }
                None => {
                    self.observed_rps.remove(&labels);
                }
            }
        }
        for (service, rate) in forecast {
            self.forecast_rps.get_or_create(&ServiceLabels { service: service.to_string() }).set(*rate);
        }
        self.last_decision_s.set(time_s);
    }

    /// The metrics as Prometheus text.
    pub fn text(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// Serves `/metrics` at `address` from a thread of its own; the bound
    /// address (a port of 0 picks one).
    ///
    /// # Errors
    /// The address cannot be listened on.
    pub fn serve(&self, address: SocketAddr) -> Result<SocketAddr, LiveError> {
        let listen = |source| LiveError::Listen { address, source };
        let listener = TcpListener::bind(address).map_err(listen)?;
        let bound = listener.local_addr().map_err(listen)?;
        let metrics = self.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, &metrics);
            }
        });
        Ok(bound)
    }
}

/// Answers one request: the metrics for `GET /metrics`, `ok` for `GET
/// /healthz` (the loop's process answers: a standby replica is healthy
/// too), 404 otherwise.
fn answer(mut stream: TcpStream, metrics: &LoopMetrics) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let request = String::from_utf8_lossy(&head);
    let target = request.lines().next().unwrap_or_default().split(' ').take(2).collect::<Vec<_>>();
    let (status, content_type, body) = match target.as_slice() {
        ["GET", path] if path.split('?').next() == Some("/metrics") => {
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", metrics.text())
        }
        ["GET", path] if path.split('?').next() == Some("/healthz") => {
            ("200 OK", "text/plain; charset=utf-8", "ok\n".to_string())
        }
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "only GET /metrics and GET /healthz are served here\n".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_set_the_gauges_and_a_missing_rate_removes_its_gauge() {
        let metrics = LoopMetrics::new(&["keep", "hold"]);
        metrics.record(100.0, "keep", 3, &[("a", Some(12.5)), ("b", Some(1.0))], &[("a", 13.0), ("b", 1.0)]);
        metrics.record(160.0, "hold", 3, &[("a", Some(12.0)), ("b", None)], &[("a", 13.0), ("b", 1.0)]);
        let text = metrics.text();
        for line in [
            "tessera_autopilot_gpus 3",
            "tessera_autopilot_observed_rps{service=\"a\"} 12.0",
            "tessera_autopilot_forecast_rps{service=\"a\"} 13.0",
            "tessera_autopilot_decisions_total{action=\"keep\"} 1",
            "tessera_autopilot_decisions_total{action=\"hold\"} 1",
            "tessera_autopilot_last_decision_timestamp_seconds 160.0",
            "tessera_autopilot_leader 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(!text.contains("observed_rps{service=\"b\"}"), "{text}");
        metrics.set_leader(false);
        metrics.record_transition("failed");
        metrics.record_forecast_error(0.125, 0.5);
        let text = metrics.text();
        for line in [
            "tessera_autopilot_leader 0",
            "tessera_autopilot_transitions_total{outcome=\"failed\"} 1",
            "tessera_autopilot_transitions_total{outcome=\"applied\"} 0",
            "tessera_autopilot_forecast_mean_abs_relative_error 0.125",
            "tessera_autopilot_forecast_under_share 0.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn the_endpoint_serves_metrics_and_nothing_else() {
        let metrics = LoopMetrics::new(&["keep"]);
        let address = metrics.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        let get = |path: &str| {
            let mut stream = TcpStream::connect(address).unwrap();
            write!(stream, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
            let mut text = String::new();
            stream.read_to_string(&mut text).unwrap();
            text
        };
        let text = get("/metrics");
        assert!(text.starts_with("HTTP/1.1 200 OK") && text.contains("tessera_autopilot_gpus 0"), "{text}");
        assert!(get("/healthz").ends_with("\r\n\r\nok\n"), "{}", get("/healthz"));
        assert!(get("/").starts_with("HTTP/1.1 404"));
    }
}
