//! The error type of `tessera-plan`.

use tessera_core::text::{count, number};
use tessera_core::{ProfilePoint, ServiceSlo};

use crate::latency::LatencyRule;

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The plan fails the verifier's structural checks (the MIG lattice,
    /// the fleet); the violations, `; `-separated.
    #[error("the plan is invalid: {0} (`tessera verify` checks it in full)")]
    Invalid(String),
    /// Whoever ran the request asked it to stop ([`crate::Cancel`]).
    #[error("planning was cancelled before it finished")]
    Cancelled,
    /// No service to plan for.
    #[error("no service to plan: the SLO set is empty")]
    NoServices,
    /// Two services share a name.
    #[error("service '{0}' is listed twice; service names must be unique")]
    DuplicateService(String),
    /// A service's model has no profile on the GPU model.
    #[error("service '{service}': no profile for model '{model}' on {gpu} (profiled models: {known})")]
    NoProfile {
        /// The service.
        service: String,
        /// Its model.
        model: String,
        /// The GPU model.
        gpu: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// Every profiled configuration of the service's model needs more
    /// memory than its MIG instance has.
    #[error(
        "service '{service}' (model '{model}'): no profiled configuration fits its MIG instance's memory on {gpu} \
         (the closest, {closest}, needs {needed_gb} GB of {instance_gb} GB)"
    )]
    NoPointFits {
        /// The service.
        service: String,
        /// Its model.
        model: String,
        /// The GPU model.
        gpu: String,
        /// The configuration that comes closest.
        closest: String,
        /// The memory it needs, GB.
        needed_gb: f64,
        /// The MIG instance's memory, GB.
        instance_gb: f64,
    },
    /// No profiled configuration meets the service's latency objective.
    #[error(transparent)]
    Unmeetable(Box<UnmeetableSlo>),
    /// A strategy asked to plan under a latency rule it does not implement.
    #[error("the {strategy} strategy implements the {supported} latency rule only (asked for {asked})")]
    UnsupportedRule {
        /// The strategy.
        strategy: &'static str,
        /// The rules it implements, comma-separated.
        supported: String,
        /// The rule asked for.
        asked: &'static str,
    },
    /// No GPU model to plan on.
    #[error("the fleet is empty: name at least one GPU model")]
    EmptyFleet,
    /// A GPU model of the fleet has no profile, measured or estimated.
    #[error(
        "no profiles for GPU model {gpu}, and none can be estimated (profiles exist for: {have}); pick one with --gpu"
    )]
    NoProfilesOnGpu {
        /// The GPU model.
        gpu: String,
        /// The GPU models that have profiles, comma-separated, or `none`.
        have: String,
    },
    /// Replanning from a running plan was asked of a strategy that cannot.
    #[error("replanning from a running plan uses the optimal strategy; the {strategy} strategy cannot")]
    ReplanNeedsOptimal {
        /// The strategy asked for.
        strategy: &'static str,
    },
    /// A planning option out of its range (the command line's parsers
    /// refuse these; JSON has none).
    #[error("{field}: {message}")]
    InvalidOption {
        /// The option, as its JSON field is named.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// Arrivals from a trace file that was not read before planning (the
    /// edge reads files; the planner does not).
    #[error("arrivals from trace {0}: the trace must be read before planning (a trace is a command-line option)")]
    TraceNotRead(String),
    /// A running plan records a latency rule this build does not know.
    #[error("the running plan's latency rule: {0}")]
    RecordedRule(String),
    /// A running plan records an arrival model that cannot be rebuilt from
    /// its name (a trace).
    #[error("the running plan's arrival model: {0}")]
    RecordedArrivals(String),
    /// An arrival model other than Poisson under a rule that assumes evenly
    /// spaced arrivals.
    #[error("the {rule} rule assumes evenly spaced arrivals; {arrivals} arrivals need the percentile rule")]
    ArrivalsNeedPercentile {
        /// The rule asked for.
        rule: &'static str,
        /// The arrival model asked for.
        arrivals: String,
    },
    /// A robustness margin under a rule without capacities.
    #[error("the {rule} rule has no capacities for a margin to slow: a margin above 0 needs the percentile rule")]
    MarginNeedsPercentile {
        /// The rule asked for.
        rule: &'static str,
    },
    /// The deploy target has no GPU a plan can use.
    #[error("the deploy target has no MIG-capable GPU of a model Tessera knows")]
    EmptyTarget,
    /// A plan does not fit the deploy target's nodes.
    #[error("{0}")]
    Placement(String),
    /// The serving model refused a segment (a profile it cannot read).
    #[error("the serving model: {0}")]
    ServingModel(String),
    /// A GPU model listed twice in the fleet.
    #[error("GPU model {0} is listed twice in the fleet")]
    DuplicateGpu(String),
    /// A strategy that plans one GPU model was given several.
    #[error("the {strategy} strategy plans one GPU model; use --strategy optimal for a mixed fleet")]
    SingleGpuOnly {
        /// The strategy.
        strategy: &'static str,
    },
    /// No plan within the fleet's count limits exists: a lower bound on
    /// the GPUs of the limited models exceeds their limits.
    #[error(
        "the fleet is too small: every plan needs at least {needed} GPUs of {gpus}, whose count limits allow {allowed}"
    )]
    NoPlanWithinLimits {
        /// The GPU models concerned, comma-separated.
        gpus: String,
        /// The fewest GPUs of those models any plan needs.
        needed: u64,
        /// What their count limits allow in total.
        allowed: u64,
    },
    /// A replan within the running MIG instances leaves services short:
    /// they need instances the running layouts do not have.
    #[error("the running MIG instances cannot cover {short}: more need new or changed layouts")]
    NotWithinLayouts {
        /// The services left short, comma-separated.
        short: String,
    },
    /// The strategy found no plan within the fleet's count limits, though
    /// one may exist.
    #[error(
        "no plan within the fleet's count limits was found (one may exist): the best plan found needs {needed} {gpu} \
         GPUs, count={limit} allows"
    )]
    LimitsNotMet {
        /// The limited GPU model.
        gpu: String,
        /// The GPUs of that model the best plan found uses.
        needed: u64,
        /// Its count limit.
        limit: u64,
    },
    /// One service alone needs more GPUs than the ceiling.
    #[error(
        "service '{service}' (model '{model}') needs at least {} GPUs for {} req/s, \
         more than the ceiling of {} (max_gpus; --max-gpus on the command line)",
        number(*needed as f64, 0),
        number(*rate_rps, 0),
        count(*max_gpus, "GPU")
    )]
    ServiceOverCeiling {
        /// The service.
        service: String,
        /// Its model.
        model: String,
        /// The request rate, req/s.
        rate_rps: f64,
        /// The fewest GPUs it needs.
        needed: u64,
        /// The ceiling (`--max-gpus`).
        max_gpus: u64,
    },
    /// The services together need more GPUs than the ceiling.
    #[error(
        "the services together need at least {} GPUs in total, more than the ceiling of {} \
         (max_gpus; --max-gpus on the command line)",
        number(*needed as f64, 0),
        count(*max_gpus, "GPU")
    )]
    TotalOverCeiling {
        /// The fewest GPUs they need.
        needed: u64,
        /// The ceiling (`--max-gpus`).
        max_gpus: u64,
    },
    /// The plan found has more GPUs than the ceiling.
    #[error(
        "the plan found needs {gpus} GPUs in total, more than the ceiling of {} (max_gpus; --max-gpus on the \
         command line)",
        count(*max_gpus, "GPU")
    )]
    PlanOverCeiling {
        /// The GPUs the plan uses.
        gpus: u64,
        /// The ceiling (`--max-gpus`).
        max_gpus: u64,
    },
    /// The current plan of a replan has a GPU of a model the fleet lacks.
    #[error("the current plan's GPU {node}:{index} is {gpu}, which is not in the fleet ({fleet}); name it with --gpu")]
    ForeignGpu {
        /// Its node.
        node: u32,
        /// Its index in the node.
        index: u32,
        /// Its model.
        gpu: String,
        /// The fleet's models, comma-separated.
        fleet: String,
    },
    /// The current plan of a replan names a MIG profile its GPU lacks.
    #[error("the current plan's GPU {node}:{index} ({gpu}) has no MIG profile '{profile}'")]
    ForeignProfile {
        /// Its node.
        node: u32,
        /// Its index in the node.
        index: u32,
        /// Its model.
        gpu: String,
        /// The profile named.
        profile: String,
    },
    /// A GPU to drain or replace is not in the current plan.
    #[error("GPU {node}:{index} is not in the current plan (its GPUs: {known})")]
    GpuNotInPlan {
        /// The node given.
        node: u32,
        /// The index given.
        index: u32,
        /// The plan's GPUs, abbreviated.
        known: String,
    },
    /// A ceiling of no GPU, or one beyond what the planners handle.
    #[error("the GPU ceiling must be between 1 and {limit}, got {max_gpus}")]
    CeilingOutOfRange {
        /// The ceiling given.
        max_gpus: u64,
        /// The largest ceiling allowed.
        limit: u64,
    },
    /// `--max-procs 0` or similar.
    #[error("max processes per segment must be at least 1")]
    NoProcesses,
    /// Profile completion was given no profile of the GPU model.
    #[error("no profile measured on {gpu} to complete (the profiles are of: {found})")]
    NothingToComplete {
        /// The GPU model asked for.
        gpu: String,
        /// The GPU models the profiles are of, comma-separated, or `none`.
        found: String,
    },
    /// A model's measured points are too few to predict the rest from.
    #[error("cannot complete the profile of '{model}' on {gpu}: {reason}")]
    CannotComplete {
        /// The model.
        model: String,
        /// The GPU model.
        gpu: String,
        /// What is missing and what to measure, in words.
        reason: String,
    },
    /// A profile grid without batch sizes or process counts.
    #[error("the profile grid needs at least one {what} (and none may be 0)")]
    EmptyGrid {
        /// `batch size` or `process count`.
        what: &'static str,
    },
    /// Several services cannot be served, each for its own reason.
    #[error("{} cannot be served: {}", count(.0.len(), "service"), join(.0))]
    Unservable(Vec<PlanError>),
}

impl PlanError {
    /// `Ok` when `errors` is empty, the error when there is one, and
    /// [`PlanError::Unservable`] naming them all when there are several.
    pub(crate) fn all(mut errors: Vec<PlanError>) -> Result<(), PlanError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(PlanError::Unservable(errors)),
        }
    }
}

/// The errors' messages, `; `-separated.
fn join(errors: &[PlanError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// A service whose latency SLO no profiled configuration meets.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "service '{service}' (model '{model}'): no configuration meets the latency SLO of {slo_ms} ms \
     under the {rule} rule ({requirement}); the fastest is {fastest} at {fastest_ms:.2} ms"
)]
pub struct UnmeetableSlo {
    /// The service.
    pub service: String,
    /// Its model.
    pub model: String,
    /// The latency rule's name.
    pub rule: &'static str,
    /// The SLO.
    pub slo_ms: f64,
    /// What the rule asks, in words.
    pub requirement: String,
    /// The configuration with the lowest worst-case latency.
    pub fastest: String,
    /// Its worst-case latency at full utilization.
    pub fastest_ms: f64,
}

/// The error for a service that no configuration among `candidates` can
/// serve: it names the configuration with the lowest worst-case latency.
pub(crate) fn unmeetable(
    candidates: impl Iterator<Item = ProfilePoint>,
    slo: &ServiceSlo,
    rule: LatencyRule,
) -> PlanError {
    let fastest = candidates.map(|p| (rule.worst_latency_ms(&p, 1.0), p)).min_by(|a, b| a.0.total_cmp(&b.0));
    PlanError::Unmeetable(Box::new(UnmeetableSlo {
        service: slo.service.clone(),
        model: slo.model.clone(),
        rule: rule.name(),
        slo_ms: slo.latency_slo_ms,
        requirement: rule.requirement(slo),
        fastest: fastest.map_or_else(|| "none (no configuration profiled)".to_string(), |(_, p)| p.config.to_string()),
        fastest_ms: fastest.map_or(f64::NAN, |(ms, _)| ms),
    }))
}
