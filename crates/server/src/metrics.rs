//! Prometheus metrics (`prometheus-client`, OpenMetrics text at
//! `/metrics`), named after Prometheus conventions: a `tessera_` prefix,
//! base units in the name (`_seconds`, `_rps`), `_total` on counters.
//!
//! The current plan's metrics describe MIG instances with the labels
//! NVIDIA's DCGM exporter uses for them, so the two join: `gpu` (the GPU's
//! index on its node), `GPU_I_PROFILE` (the MIG profile, e.g. `3g.40gb`).
//! `UUID` and `GPU_I_ID` are assigned by the driver when an instance is
//! created, so a plan cannot know them; a plan's instance is told apart by
//! `node`, `gpu` and `start_slice` instead.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tessera_core::{GpuAssignment, Plan};

/// Labels of an HTTP request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

/// Labels of an HTTP route.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// Labels of a finished planning job.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    status: String,
}

/// Labels of a service of the current plan.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
    model: String,
}

/// Labels of a GPU of the current plan (DCGM's `gpu`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GpuLabels {
    node: u32,
    gpu: u32,
    gpu_model: String,
}

/// Labels of a MIG instance of the current plan (DCGM's `gpu` and
/// `GPU_I_PROFILE`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct InstanceLabels {
    node: u32,
    gpu: u32,
    GPU_I_PROFILE: String,
    start_slice: u8,
    service: String,
    model: String,
}

impl InstanceLabels {
    /// The labels of the instance of `profile` at `start` on `gpu` serving
    /// `service` (`model`).
    fn at(gpu: &GpuAssignment, profile: &str, start: u8, service: &str, model: &str) -> InstanceLabels {
        InstanceLabels {
            node: gpu.node,
            gpu: gpu.index,
            GPU_I_PROFILE: profile.to_string(),
            start_slice: start,
            service: service.to_string(),
            model: model.to_string(),
        }
    }
}

/// Labels of a MIG instance of the current plan shared by several
/// services: where it is (as [`InstanceLabels`]) and how its members take
/// turns.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct SharedLabels {
    node: u32,
    gpu: u32,
    GPU_I_PROFILE: String,
    start_slice: u8,
    sharing: String,
}

/// A gauge of floating-point values.
type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric the server exports.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Family<RouteLabels, Histogram>,
    in_flight: Gauge,
    jobs_finished: Family<JobLabels, Counter>,
    job_seconds: Histogram,
    jobs_queued: Gauge,
    jobs_running: Gauge,
    plan: Mutex<PlanMetrics>,
}

/// The current plan's metrics, replaced whole when the plan changes.
#[derive(Debug, Default)]
struct PlanMetrics {
    id: Gauge,
    gpus: Gauge,
    lower_bound: FloatGauge,
    gap: FloatGauge,
    demanded_rps: Family<ServiceLabels, FloatGauge>,
    provisioned_rps: Family<ServiceLabels, FloatGauge>,
    worst_latency_seconds: Family<ServiceLabels, FloatGauge>,
    latency_slo_seconds: Family<ServiceLabels, FloatGauge>,
    predicted_attainment: Family<ServiceLabels, FloatGauge>,
    tolerance: Family<ServiceLabels, FloatGauge>,
    busiest_load: Family<ServiceLabels, FloatGauge>,
    margin: FloatGauge,
    free_compute_slices: Family<GpuLabels, Gauge>,
    instance_compute_slices: Family<InstanceLabels, Gauge>,
    instance_utilisation: Family<InstanceLabels, FloatGauge>,
    shared_compute_slices: Family<SharedLabels, Gauge>,
    shared_busy: Family<SharedLabels, FloatGauge>,
    member_busy: Family<InstanceLabels, FloatGauge>,
}

/// Request durations: 0.25 ms to about 8 s.
fn request_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

impl Metrics {
    /// Every metric registered, at zero.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("tessera");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests answered, by method, route and status", requests.clone());
        let request_seconds =
            Family::<RouteLabels, Histogram>::new_with_constructor(request_histogram as fn() -> Histogram);
        registry.register("http_request_duration_seconds", "Time to answer an HTTP request", request_seconds.clone());
        let in_flight = Gauge::default();
        registry.register("http_requests_in_flight", "HTTP requests being answered", in_flight.clone());
        let jobs_finished = Family::<JobLabels, Counter>::default();
        registry.register("planning_jobs", "Planning jobs finished, by status (done, failed)", jobs_finished.clone());
        let job_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        registry.register("planning_job_duration_seconds", "Time a planning job ran", job_seconds.clone());
        let jobs_queued = Gauge::default();
        registry.register("planning_jobs_queued", "Planning jobs waiting for a worker", jobs_queued.clone());
        let jobs_running = Gauge::default();
        registry.register("planning_jobs_running", "Planning jobs being planned", jobs_running.clone());
        let plan = PlanMetrics::default();
        registry.register("plan_id", "Id of the current plan (the newest finished one)", plan.id.clone());
        registry.register("plan_gpus", "GPUs the current plan uses", plan.gpus.clone());
        registry.register("plan_lower_bound", "Lower bound on the current plan's objective", plan.lower_bound.clone());
        registry.register(
            "plan_gap_ratio",
            "(value - lower bound) / lower bound of the current plan",
            plan.gap.clone(),
        );
        registry.register("service_demanded_rps", "Request rate a service must sustain", plan.demanded_rps.clone());
        registry.register(
            "service_provisioned_rps",
            "Throughput the current plan provisions for a service",
            plan.provisioned_rps.clone(),
        );
        registry.register(
            "service_worst_latency_seconds",
            "Latency of a service's slowest segment under the current plan's latency rule (under the percentile rule: its percentile latency)",
            plan.worst_latency_seconds.clone(),
        );
        registry.register(
            "service_latency_slo_seconds",
            "A service's latency objective",
            plan.latency_slo_seconds.clone(),
        );
        registry.register(
            "service_predicted_attainment_ratio",
            "Share of a service's requests the current plan predicts within its latency SLO (percentile rule, Poisson arrivals)",
            plan.predicted_attainment.clone(),
        );
        registry.register(
            "service_tolerance_ratio",
            "Largest uniform slowdown of a service's batches (0.05: 5% slower than profiled) at which the current plan still meets its SLO (percentile rule, Poisson arrivals)",
            plan.tolerance.clone(),
        );
        registry.register(
            "service_busiest_load_ratio",
            "Offered load of a service's busiest segment under the current plan: routed rate over full-batch throughput as profiled",
            plan.busiest_load.clone(),
        );
        registry.register(
            "plan_margin_ratio",
            "Slowdown of every batch the current plan was made to bear (NaN when it records none)",
            plan.margin.clone(),
        );
        registry.register(
            "gpu_free_compute_slices",
            "Compute slices no MIG instance of the current plan uses, per GPU",
            plan.free_compute_slices.clone(),
        );
        registry.register(
            "mig_instance_compute_slices",
            "Compute slices of a MIG instance of the current plan",
            plan.instance_compute_slices.clone(),
        );
        registry.register(
            "mig_instance_utilisation_ratio",
            "Planned utilisation of a MIG instance: its service's rate over its provisioned throughput",
            plan.instance_utilisation.clone(),
        );
        registry.register(
            "mig_shared_instance_compute_slices",
            "Compute slices of a MIG instance of the current plan shared by several services",
            plan.shared_compute_slices.clone(),
        );
        registry.register(
            "mig_shared_instance_busy_ratio",
            "Share of time a shared MIG instance's executor is busy at its members' planned rates, as profiled",
            plan.shared_busy.clone(),
        );
        registry.register(
            "mig_shared_member_busy_ratio",
            "Share of time a shared MIG instance's executor is busy with one member (service) at its planned rate, as profiled",
            plan.member_busy.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            in_flight,
            jobs_finished,
            job_seconds,
            jobs_queued,
            jobs_running,
            plan: Mutex::new(plan),
        }
    }

    /// Counts a request as started (in flight).
    pub(crate) fn request_started(&self) {
        self.in_flight.inc();
    }

    /// Records a request as answered (or abandoned: `status` 499).
    pub(crate) fn request_finished(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.in_flight.dec();
        let route = route.to_string();
        self.requests.get_or_create(&RequestLabels { method: method.to_string(), route: route.clone(), status }).inc();
        self.request_seconds.get_or_create(&RouteLabels { method: method.to_string(), route }).observe(seconds);
    }

    /// A job entered the queue.
    pub(crate) fn job_queued(&self) {
        self.jobs_queued.inc();
    }

    /// A queued job started running.
    pub(crate) fn job_started(&self) {
        self.jobs_queued.dec();
        self.jobs_running.inc();
    }

    /// A job finished with `status` after `seconds` of running (`None` when
    /// it never ran: it left the queue).
    pub(crate) fn job_finished(&self, status: &str, seconds: Option<f64>) {
        match seconds {
            Some(seconds) => {
                self.jobs_running.dec();
                self.job_seconds.observe(seconds);
            }
            None => {
                self.jobs_queued.dec();
            }
        }
        self.jobs_finished.get_or_create(&JobLabels { status: status.to_string() }).inc();
    }

    /// Replaces the current plan's metrics with those of `plan` (job `id`).
    pub(crate) fn set_plan(&self, id: u64, plan: &Plan) {
        let metrics = self.plan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        metrics.id.set(i64::try_from(id).unwrap_or(i64::MAX));
        metrics.gpus.set(i64::try_from(plan.gpu_count).unwrap_or(i64::MAX));
        let (bound, gap) = plan.optimality.as_ref().map_or((f64::NAN, f64::NAN), |o| (o.lower_bound, o.gap));
        metrics.lower_bound.set(bound);
        metrics.gap.set(gap);
        metrics.margin.set(plan.margin.unwrap_or(f64::NAN));
        for family in [
            &metrics.demanded_rps,
            &metrics.provisioned_rps,
            &metrics.worst_latency_seconds,
            &metrics.latency_slo_seconds,
            &metrics.predicted_attainment,
            &metrics.tolerance,
            &metrics.busiest_load,
        ] {
            family.clear();
        }
        metrics.free_compute_slices.clear();
        metrics.instance_compute_slices.clear();
        metrics.instance_utilisation.clear();
        metrics.shared_compute_slices.clear();
        metrics.shared_busy.clear();
        metrics.member_busy.clear();
        let mut utilisation = std::collections::HashMap::new();
        for report in &plan.services {
            let labels = ServiceLabels { service: report.service.clone(), model: report.model.clone() };
            metrics.demanded_rps.get_or_create(&labels).set(report.rate_rps);
            metrics.provisioned_rps.get_or_create(&labels).set(report.provisioned_rps);
            metrics.worst_latency_seconds.get_or_create(&labels).set(report.worst_latency_ms / 1000.0);
            metrics.latency_slo_seconds.get_or_create(&labels).set(report.latency_slo_ms / 1000.0);
            if let Some(attainment) = report.predicted_attainment {
                metrics.predicted_attainment.get_or_create(&labels).set(attainment);
            }
            if let Some(tolerance) = report.tolerance {
                metrics.tolerance.get_or_create(&labels).set(tolerance);
            }
            if let Some(load) = report.busiest_load {
                metrics.busiest_load.get_or_create(&labels).set(load);
            }
            if let Some(u) = report.utilisation() {
                utilisation.insert(report.service.as_str(), u);
            }
        }
        for gpu in &plan.gpus {
            let spec = gpu.gpu_model.spec();
            let used: i64 = gpu.layout().map(|(_, size, _)| i64::from(size)).sum();
            let labels = GpuLabels { node: gpu.node, gpu: gpu.index, gpu_model: gpu.gpu_model.id().to_string() };
            metrics.free_compute_slices.get_or_create(&labels).set(i64::from(spec.compute_slices) - used);
            for instance in &gpu.instances {
                let labels =
                    InstanceLabels::at(gpu, &instance.profile, instance.start, &instance.service, &instance.model);
                metrics.instance_compute_slices.get_or_create(&labels).set(i64::from(instance.size));
                if let Some(&u) = utilisation.get(instance.service.as_str()) {
                    metrics.instance_utilisation.get_or_create(&labels).set(u);
                }
            }
            for shared in &gpu.shared {
                let labels = SharedLabels {
                    node: gpu.node,
                    gpu: gpu.index,
                    GPU_I_PROFILE: shared.profile.clone(),
                    start_slice: shared.start,
                    sharing: shared.sharing.to_string(),
                };
                metrics.shared_compute_slices.get_or_create(&labels).set(i64::from(shared.size));
                metrics.shared_busy.get_or_create(&labels).set(shared.busy_share(0.0));
                for member in &shared.members {
                    let labels = InstanceLabels::at(gpu, &shared.profile, shared.start, &member.service, &member.model);
                    metrics.member_busy.get_or_create(&labels).set(member.busy_share());
                }
            }
        }
    }

    /// Every metric in the OpenMetrics text format.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).unwrap_or_else(|_| unreachable!("writing to a String cannot fail"));
        text
    }

    /// Every metric in Prometheus's text format (version 0.0.4), for
    /// scrapers and tools that do not ask for OpenMetrics.
    pub(crate) fn render_prometheus_text(&self) -> String {
        prometheus_text(&self.render())
    }
}

/// OpenMetrics text as Prometheus's text format: a counter's family is
/// named with its `_total` suffix (as its samples are), and the `# UNIT`
/// and `# EOF` lines, which that format lacks, are left out.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_requests_jobs_and_the_plan_with_dcgm_labels() {
        let metrics = Metrics::new();
        metrics.request_started();
        metrics.request_finished("GET", "/v1/services", 200, 0.002);
        metrics.job_queued();
        metrics.job_started();
        metrics.job_finished("done", Some(0.5));
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "gpu_count": 1, "strategy": "optimal", "latency_rule": "percentile", "gpus_per_node": 8, "margin": 0.06,
            "gpus": [{"node": 0, "index": 0, "gpu_model": "a100-80gb", "instances": [
                {"profile": "3g.40gb", "size": 3, "start": 4, "service": "chat", "model": "gpt2", "batch": 4,
                 "procs": 2, "throughput_rps": 100.0, "latency_ms": 10.0},
                {"profile": "1g.10gb", "size": 1, "start": 0, "sharing": "serialized", "members": [
                    {"service": "tag", "model": "resnet50", "batch": 1, "latency_ms": 5.0,
                     "throughput_rps": 200.0, "capacity_rps": 20.0, "memory_gb": 2.0},
                    {"service": "ocr", "model": "resnet50", "batch": 1, "latency_ms": 5.0,
                     "throughput_rps": 200.0, "capacity_rps": 40.0, "memory_gb": 2.0}]}]}],
            "services": [{"service": "chat", "model": "gpt2", "rate_rps": 50.0, "latency_slo_ms": 200.0,
                "provisioned_rps": 100.0, "worst_latency_ms": 40.0, "segments": 1, "met": true,
                "percentile": 99.0, "predicted_attainment": 0.995,
                "tolerance": 0.072, "busiest_load": 0.93}]
        }))
        .unwrap();
        metrics.set_plan(7, &plan);
        let text = metrics.render();
        for expected in [
            r#"tessera_http_requests_total{method="GET",route="/v1/services",status="200"} 1"#,
            "tessera_http_requests_in_flight 0",
            r#"tessera_planning_jobs_total{status="done"} 1"#,
            "tessera_plan_id 7",
            "tessera_plan_gpus 1",
            "tessera_plan_margin_ratio 0.06",
            r#"tessera_service_provisioned_rps{service="chat",model="gpt2"} 100.0"#,
            r#"tessera_service_worst_latency_seconds{service="chat",model="gpt2"} 0.04"#,
            r#"tessera_service_predicted_attainment_ratio{service="chat",model="gpt2"} 0.995"#,
            r#"tessera_service_tolerance_ratio{service="chat",model="gpt2"} 0.072"#,
            r#"tessera_service_busiest_load_ratio{service="chat",model="gpt2"} 0.93"#,
            r#"tessera_gpu_free_compute_slices{node="0",gpu="0",gpu_model="a100-80gb"} 3"#,
            r#"tessera_mig_shared_instance_compute_slices{node="0",gpu="0",GPU_I_PROFILE="1g.10gb",start_slice="0",sharing="serialized"} 1"#,
            r#"tessera_mig_shared_instance_busy_ratio{node="0",gpu="0",GPU_I_PROFILE="1g.10gb",start_slice="0",sharing="serialized"} 0.3"#,
            r#"tessera_mig_shared_member_busy_ratio{node="0",gpu="0",GPU_I_PROFILE="1g.10gb",start_slice="0",service="ocr",model="resnet50"} 0.2"#,
            r#"tessera_mig_instance_utilisation_ratio{node="0",gpu="0",GPU_I_PROFILE="3g.40gb",start_slice="4",service="chat",model="gpt2"} 0.5"#,
        ] {
            assert!(text.contains(expected), "{expected} not in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        let classic = metrics.render_prometheus_text();
        assert!(classic.contains("# TYPE tessera_http_requests_total counter\n"), "{classic}");
        assert!(classic.contains("# HELP tessera_http_requests_total HTTP requests"), "{classic}");
        assert!(classic.contains("# TYPE tessera_plan_gpus gauge\n") && !classic.contains("# EOF"));
    }
}
