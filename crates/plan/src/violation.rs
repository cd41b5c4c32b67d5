//! What the verifier reports: the request a plan is checked against, where
//! in a plan a violation is, and each kind of violation. Below both
//! `verify` and `verify_shared`, which push them.

use std::fmt;

use tessera_core::{LayoutError, ProfileCatalog, ProfilePoint, SegmentConfig, ServiceSlo};
use tessera_serving::ArrivalModel;

use crate::latency::LatencyRule;

/// Relative tolerance when comparing the plan's numbers with the profile's.
const VALUE_TOLERANCE: f64 = 1e-9;

/// The plan's `(throughput_rps, latency_ms)` of a segment at `at` that are
/// better than `point`'s. Only a claim better than the profile is wrong: a
/// plan made on conservative figures (a prediction's bounds) that a
/// measurement since beat still holds.
pub(crate) fn claims_beyond_profile(
    at: &InstanceRef,
    (throughput_rps, latency_ms): (f64, f64),
    point: &ProfilePoint,
) -> Vec<Violation> {
    [("throughput_rps", 1.0, throughput_rps, point.throughput_rps), ("latency_ms", -1.0, latency_ms, point.latency_ms)]
        .into_iter()
        .filter(|&(_, better_by, claimed, profiled)| {
            better_by * (claimed - profiled) > VALUE_TOLERANCE * profiled.abs()
        })
        .map(|(field, _, claimed, profiled)| Violation::WrongValue { at: at.clone(), field, claimed, profiled })
        .collect()
}

/// What a plan is checked against.
#[derive(Debug, Clone, Copy)]
pub struct VerifyRequest<'a> {
    /// The profiles.
    pub catalog: &'a ProfileCatalog,
    /// The services and their objectives.
    pub services: &'a [ServiceSlo],
    /// The latency rule every segment must meet.
    pub rule: LatencyRule,
    /// How requests arrive (the percentile rule's capacities and
    /// predictions depend on it).
    pub arrivals: &'a ArrivalModel,
    /// Most MPS processes allowed per segment.
    pub max_procs: u32,
    /// The robustness margin capacities must hold under (every batch this
    /// share slower than profiled; capacity rules only).
    pub margin: f64,
}

/// Where in a plan a violation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRef {
    /// Node of the GPU.
    pub node: u32,
    /// Index of the GPU in its node.
    pub index: u32,
    /// Profile name as written in the plan.
    pub profile: String,
    /// Start slice as written in the plan.
    pub start: u8,
}

impl fmt::Display for InstanceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} gpu {} {}@{}", self.node, self.index, self.profile, self.start)
    }
}

/// One thing wrong with a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    /// `gpu_count` disagrees with the GPU list.
    #[error("gpu_count is {claimed} but the plan lists {listed} GPUs")]
    GpuCount {
        /// What the plan says.
        claimed: usize,
        /// What it lists.
        listed: usize,
    },
    /// More GPUs of a model than the plan's fleet allows.
    #[error("the plan uses {gpus} {gpu} GPUs, its fleet allows {limit} (count={limit})")]
    FleetLimit {
        /// The GPU model.
        gpu: String,
        /// The GPUs of that model the plan uses.
        gpus: u64,
        /// Its count limit.
        limit: u64,
    },
    /// A GPU of a model the plan's fleet does not offer.
    #[error("node {node} gpu {index} is a {gpu}, which the plan's fleet does not offer")]
    OutsideFleet {
        /// The node.
        node: u32,
        /// The GPU's index on its node.
        index: u32,
        /// The GPU model.
        gpu: String,
    },
    /// Two GPUs share a (node, index).
    #[error("node {node} gpu {index} is listed twice")]
    DuplicateGpu {
        /// The node.
        node: u32,
        /// The GPU's index on its node.
        index: u32,
    },
    /// A GPU with no instance.
    #[error("node {node} gpu {index} has no instance")]
    EmptyGpu {
        /// The node.
        node: u32,
        /// The GPU's index on its node.
        index: u32,
    },
    /// A profile name the GPU model does not have, or a size that disagrees.
    #[error("{at}: {problem}")]
    Profile {
        /// The instance.
        at: InstanceRef,
        /// What is wrong, in words.
        problem: String,
    },
    /// The GPU's layout is physically invalid.
    #[error("node {node} gpu {index}: {error}")]
    Layout {
        /// The node.
        node: u32,
        /// The GPU's index on its node.
        index: u32,
        /// Why the layout is invalid.
        error: LayoutError,
    },
    /// A segment of a service that is not in the SLO set.
    #[error("{at}: service '{service}' is not in the SLOs")]
    UnknownService {
        /// The instance.
        at: InstanceRef,
        /// The plan's service name.
        service: String,
    },
    /// A segment whose model differs from its service's model.
    #[error("{at}: service '{service}' runs model '{expected}', the plan says '{found}'")]
    ModelMismatch {
        /// The instance.
        at: InstanceRef,
        /// The service.
        service: String,
        /// The service's model.
        expected: String,
        /// What the plan says.
        found: String,
    },
    /// A configuration that is not in the profiles (or infeasible there).
    #[error("{at}: {config} of model '{model}' is not a feasible profiled configuration on {gpu}")]
    NotProfiled {
        /// The instance.
        at: InstanceRef,
        /// The model.
        model: String,
        /// The GPU model.
        gpu: String,
        /// The configuration.
        config: SegmentConfig,
    },
    /// A segment that needs more memory than its MIG instance has.
    #[error("{at}: {config} of model '{model}' needs {needed_gb} GB, the instance has {instance_gb} GB")]
    Memory {
        /// The instance.
        at: InstanceRef,
        /// The model.
        model: String,
        /// The configuration.
        config: SegmentConfig,
        /// The memory it needs, GB.
        needed_gb: f64,
        /// The MIG instance's memory, GB.
        instance_gb: f64,
    },
    /// More MPS processes than allowed.
    #[error("{at}: {procs} processes, at most {max} allowed")]
    TooManyProcs {
        /// The instance.
        at: InstanceRef,
        /// Its MPS processes.
        procs: u32,
        /// The most allowed.
        max: u32,
    },
    /// The plan's throughput is above the profile's, or its latency below.
    #[error("{at}: plan says {field} = {claimed}, the profile says {profiled}")]
    WrongValue {
        /// The instance.
        at: InstanceRef,
        /// The field (`throughput_rps` or `latency_ms`).
        field: &'static str,
        /// What the plan says.
        claimed: f64,
        /// The profile's value.
        profiled: f64,
    },
    /// A segment breaks its service's latency rule.
    #[error(
        "{at}: service '{service}' misses its {slo_ms} ms SLO under the {rule} rule \
         ({requirement}; this segment: {worst_ms:.3} ms at utilization {utilization:.3})"
    )]
    Latency {
        /// The instance.
        at: InstanceRef,
        /// The service.
        service: String,
        /// The latency rule's name.
        rule: &'static str,
        /// The latency SLO, ms.
        slo_ms: f64,
        /// What the rule asks, in words.
        requirement: String,
        /// The segment's worst-case latency, ms.
        worst_ms: f64,
        /// The segment's utilization (rate / provisioned).
        utilization: f64,
    },
    /// Under a capacity rule, the plan routes more to a segment than the
    /// serving model lets it serve within the SLO.
    #[error(
        "{at}: service '{service}' is routed up to {claimed_rps:.3} req/s here, but the serving model gives this \
         segment a capacity of {capacity_rps:.3} req/s"
    )]
    CapacityClaimed {
        /// The instance.
        at: InstanceRef,
        /// The service.
        service: String,
        /// The plan's capacity (routing weight) of the segment, req/s.
        claimed_rps: f64,
        /// The serving model's capacity, req/s.
        capacity_rps: f64,
    },
    /// Under arrivals other than Poisson, the plan routes more to a segment
    /// than its capacity under them (found by simulation).
    #[error(
        "{at}: service '{service}' is routed {routed_rps:.3} req/s here, above this segment's capacity of \
         {capacity_rps:.3} req/s under {arrivals} arrivals"
    )]
    OverCapacity {
        /// The instance.
        at: InstanceRef,
        /// The service.
        service: String,
        /// The rate the plan's weights route to the segment, req/s.
        routed_rps: f64,
        /// The segment's capacity under the arrival model, req/s.
        capacity_rps: f64,
        /// The arrival model, as written.
        arrivals: String,
    },
    /// A service's segments do not cover its rate.
    #[error("service '{service}': provisioned {provisioned_rps:.3} req/s < rate {rate_rps} req/s")]
    RateNotCovered {
        /// The service.
        service: String,
        /// What its segments provide, req/s.
        provisioned_rps: f64,
        /// The request rate, req/s.
        rate_rps: f64,
    },
}

impl Violation {
    /// The service whose objective it breaks, if it names one (a latency
    /// or capacity beyond the rule, a rate not covered, a segment running
    /// another model).
    pub fn service(&self) -> Option<&str> {
        match self {
            Violation::ModelMismatch { service, .. }
            | Violation::Latency { service, .. }
            | Violation::CapacityClaimed { service, .. }
            | Violation::OverCapacity { service, .. }
            | Violation::RateNotCovered { service, .. } => Some(service),
            _ => None,
        }
    }
}
