//! What a segment's pods ask of their node and how they are checked and
//! replaced: CPU and memory requests (per service), readiness, liveness and
//! startup probes, and the rolling update that keeps the MIG claim shared.
//!
//! # Rolling updates and the MIG claim
//!
//! A segment's `procs` pods share one `ResourceClaim` (referenced by name,
//! so every pod of the Deployment, old or new, uses the same allocated MIG
//! device; a claim may be reserved for up to 256 pods). Sharing the device
//! is therefore not the limit during an update; the number of MPS clients
//! is: the claim's MPS configuration gives each of the `procs` processes
//! `100 / procs` per cent of the device's threads, and the plan's latency
//! and memory assume `procs` processes. A surge pod would be a
//! `procs + 1`-th process on the device (more memory than planned, more
//! interference), so the Deployment rolls with `maxSurge: 0` and
//! `maxUnavailable: 1`: one pod at a time is replaced, the segment runs at
//! `(procs - 1) / procs` of its capacity meanwhile, never above `procs`
//! processes. A changed claim (a new device after a layout change) is a
//! new claim name in the pod template; a rolling update cannot move pods
//! between two claims of the same MIG device (the new claim waits for the
//! old one's pods to be gone), so such a change is applied by draining the
//! segment first, as a layout change does anyway.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::K8sError;

/// The CPU each pod requests unless told otherwise: one core for the
/// process that feeds its share of the GPU.
pub const DEFAULT_CPU: &str = "1";
/// The memory each pod requests (and is limited to) unless told otherwise.
pub const DEFAULT_MEMORY: &str = "4Gi";
/// The port the serving container listens on unless told otherwise.
pub const DEFAULT_PORT: i32 = 8080;
/// The path of the readiness, liveness and startup probes unless told
/// otherwise.
pub const DEFAULT_PROBE_PATH: &str = "/health";

/// A pod's CPU and memory requests (Kubernetes quantities: `500m`, `2`,
/// `4Gi`). Memory is also the limit (a pod over it is restarted rather than
/// starving its node); CPU has no limit (throttling would add latency).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requests {
    /// CPU, e.g. `1` or `500m`.
    pub cpu: String,
    /// Memory, e.g. `4Gi`.
    pub memory: String,
}

impl Default for Requests {
    fn default() -> Self {
        Requests { cpu: DEFAULT_CPU.into(), memory: DEFAULT_MEMORY.into() }
    }
}

/// Whether `text` reads as a Kubernetes quantity (digits with an optional
/// fraction, then an optional SI, binary or exponent suffix).
fn is_quantity(text: &str) -> bool {
    let number_end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    let plain_suffix = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].contains(&suffix);
    let exponent = suffix.strip_prefix(['e', 'E']).is_some_and(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    digits > 0 && number.matches('.').count() <= 1 && (plain_suffix || exponent)
}

impl Requests {
    /// `CPU,MEMORY`, e.g. `2,8Gi`; each a Kubernetes quantity.
    pub fn parse(text: &str) -> Result<Requests, K8sError> {
        let bad = |why: String| K8sError::Plan(format!("requests '{text}': {why} (expected CPU,MEMORY, e.g. 2,8Gi)"));
        let Some((cpu, memory)) = text.split_once(',') else {
            return Err(bad("no comma".into()));
        };
        for (what, value) in [("CPU", cpu), ("memory", memory)] {
            if !is_quantity(value.trim()) {
                return Err(bad(format!("the {what} '{value}' is not a Kubernetes quantity")));
            }
        }
        Ok(Requests { cpu: cpu.trim().into(), memory: memory.trim().into() })
    }

    /// As a container's `requests` and `limits`.
    pub(crate) fn requests_and_limits(&self) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
        let requests = BTreeMap::from([
            ("cpu".to_string(), Quantity(self.cpu.clone())),
            ("memory".to_string(), Quantity(self.memory.clone())),
        ]);
        let limits = BTreeMap::from([("memory".to_string(), Quantity(self.memory.clone()))]);
        (requests, limits)
    }
}

/// What every segment's pods get: requests (a default and per-service
/// overrides, by the service's name in the plan), the serving port and the
/// probes' path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOptions {
    /// The requests of every service not in `service_requests`.
    pub requests: Requests,
    /// Requests by service (the plan's service names).
    pub service_requests: BTreeMap<String, Requests>,
    /// The port the serving container listens on (the Service's target and
    /// the probes' port).
    pub port: i32,
    /// The HTTP path the probes ask (a 2xx or 3xx answer is healthy).
    pub probe_path: String,
}

impl Default for PodOptions {
    fn default() -> Self {
        PodOptions {
            requests: Requests::default(),
            service_requests: BTreeMap::new(),
            port: DEFAULT_PORT,
            probe_path: DEFAULT_PROBE_PATH.into(),
        }
    }
}

impl PodOptions {
    /// The requests of `service`.
    pub fn requests_of(&self, service: &str) -> &Requests {
        self.service_requests.get(service).unwrap_or(&self.requests)
    }

    fn probe(&self, period_seconds: i32, failure_threshold: i32) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some(self.probe_path.clone()),
                port: IntOrString::Int(self.port),
                ..Default::default()
            }),
            period_seconds: Some(period_seconds),
            failure_threshold: Some(failure_threshold),
            timeout_seconds: Some(2),
            ..Default::default()
        }
    }

    /// Readiness: every 5 s, out of the Service after 3 failures (no
    /// traffic to a process that cannot answer).
    pub(crate) fn readiness(&self) -> Probe {
        self.probe(5, 3)
    }

    /// Liveness: every 10 s, restarted after 3 failures.
    pub(crate) fn liveness(&self) -> Probe {
        self.probe(10, 3)
    }

    /// Startup: up to 10 minutes (60 × 10 s) to load the model before the
    /// liveness probe counts.
    pub(crate) fn startup(&self) -> Probe {
        self.probe(10, 60)
    }

    /// The container's one port.
    pub(crate) fn container_port(&self) -> ContainerPort {
        ContainerPort {
            name: Some("http".into()),
            container_port: self.port,
            protocol: Some("TCP".into()),
            ..Default::default()
        }
    }
}

/// One pod at a time, never more than planned (see the module's docs).
pub(crate) fn rolling_update() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(0)),
            max_unavailable: Some(IntOrString::Int(1)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_quantities_and_refuse_the_rest() {
        assert_eq!(Requests::parse("2,8Gi").unwrap(), Requests { cpu: "2".into(), memory: "8Gi".into() });
        assert_eq!(Requests::parse("500m, 1.5Gi").unwrap().memory, "1.5Gi");
        assert!(Requests::parse("1e3,4G").is_ok());
        let error = Requests::parse("two,8Gi").unwrap_err().to_string();
        assert!(error.contains("the CPU 'two' is not a Kubernetes quantity"), "{error}");
        assert!(Requests::parse("2").unwrap_err().to_string().contains("no comma"));
        assert!(Requests::parse("2,8GB").is_err());
        assert!(Requests::parse("2,").is_err());
    }

    #[test]
    fn per_service_requests_override_the_default() {
        let options = PodOptions {
            service_requests: BTreeMap::from([("a".to_string(), Requests::parse("4,16Gi").unwrap())]),
            ..Default::default()
        };
        assert_eq!(options.requests_of("a").cpu, "4");
        assert_eq!(options.requests_of("b"), &Requests::default());
    }
}
