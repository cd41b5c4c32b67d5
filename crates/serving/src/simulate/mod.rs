//! The request-level serving simulator: the referee of every plan.
//!
//! Each service's requests arrive by the arrival model at the service's
//! mean rate, go to one of its segments at random in proportion to the
//! segments' weights, then to a process by the [`Discipline`]; a free
//! process takes up to its largest batch of waiting requests (first come,
//! first served) and runs them at the latency of that batch size. A shared
//! instance's members each queue their own requests, and its one executor
//! runs one batch at a time from the queue whose oldest request is oldest
//! (no batching delay). A request's latency is its completion minus its
//! arrival.
//!
//! What is not modelled: network and pre/post-processing time; request
//! sizes (every request of a service costs the same: no token counts, no
//! continuous batching — a process runs one batch at a time to its end);
//! a batch running faster while its segment's other processes idle (the
//! profile's latency, measured with all of them running, always applies);
//! interference between segments on one GPU beyond what their profiles
//! measured; admission control, drops, time-outs, failures and cold
//! starts; and arrivals after `seconds` (requests still waiting then run
//! to completion, with no new traffic behind them).

mod queue;
mod report;
mod service;
mod shared;
mod stats;

use rayon::prelude::*;

use crate::arrivals::ArrivalModel;
use crate::discipline::Discipline;
use crate::error::ServingError;
use crate::system::ServingSystem;

pub use report::{
    CdfPoint, SegmentOutcome, ServiceMeasures, ServiceOutcome, ServingReport, SloVerdict, TimelineBucket, WindowsMet,
    WorstService,
};
pub use service::MAX_WAITING;
pub use stats::Interval;

/// Batches of the measured time behind the confidence intervals of a run
/// with one replication.
pub const BATCHES: usize = 10;

/// The most timeline buckets a run may ask for, all services together (a
/// report holds each: 24 bytes).
pub const MAX_TIMELINE_BUCKETS: usize = 1_000_000;

/// How to run a simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulationOptions {
    /// How each service's requests arrive.
    pub arrivals: ArrivalModel,
    /// How a segment's processes share its requests.
    pub discipline: Discipline,
    /// How long an idle process with fewer than its largest batch waiting
    /// waits for more, ms: it starts when its batch is full or its oldest
    /// request has waited this long. 0: a free process takes what is
    /// waiting at once.
    pub max_queue_delay_ms: f64,
    /// Simulated seconds of arrivals per replication.
    pub seconds: f64,
    /// Requests arriving before this (seconds) are simulated but not
    /// measured.
    pub warmup_s: f64,
    /// The seed: the same seed and inputs give the same report, bit for
    /// bit, on every machine and with any number of threads.
    pub seed: u64,
    /// Independent replications (>= 1), each with its own streams.
    pub replications: u32,
    /// When set, attainment is also counted per bucket of this many
    /// seconds of arrival time.
    pub timeline_bucket_s: Option<f64>,
    /// When set, attainment is also judged per window of this many seconds
    /// after the warm-up (whole windows only), as operators measure SLOs:
    /// each service's share of windows meeting its percentile.
    pub window_s: Option<f64>,
    /// Every batch runs this share slower than its segment's shape says
    /// (0.05: 5% slower, as a GPU slower than its profile; negative:
    /// faster), in `(-1, 10]`.
    pub slowdown: f64,
}

impl Default for SimulationOptions {
    /// Poisson arrivals, random routing to per-process queues, no batching
    /// delay, 60 s with a 10 s warm-up, seed 0, one replication, no
    /// timeline, batches at their profiled speed.
    fn default() -> Self {
        SimulationOptions {
            arrivals: ArrivalModel::Poisson,
            discipline: Discipline::default(),
            max_queue_delay_ms: 0.0,
            seconds: 60.0,
            warmup_s: 10.0,
            seed: 0,
            replications: 1,
            timeline_bucket_s: None,
            window_s: None,
            slowdown: 0.0,
        }
    }
}

impl SimulationOptions {
    /// Checks the options, naming the first one out of range.
    pub fn validate(&self) -> Result<(), ServingError> {
        self.arrivals.validate()?;
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return Err(ServingError::invalid("seconds", format!("{} is not a positive duration", self.seconds)));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s < self.seconds) {
            return Err(ServingError::invalid(
                "warmup_s",
                format!("{} s is not in [0, {}) (the run's seconds)", self.warmup_s, self.seconds),
            ));
        }
        if !(self.max_queue_delay_ms.is_finite() && self.max_queue_delay_ms >= 0.0) {
            return Err(ServingError::invalid(
                "max_queue_delay_ms",
                format!("{} is not a non-negative delay", self.max_queue_delay_ms),
            ));
        }
        if let Some(window_s) = self.window_s {
            if !(window_s.is_finite() && window_s > 0.0) {
                return Err(ServingError::invalid("window_s", format!("{window_s} is not a positive duration")));
            }
            if (self.seconds - self.warmup_s) / window_s > MAX_TIMELINE_BUCKETS as f64 {
                return Err(ServingError::invalid(
                    "window_s",
                    format!("{window_s} s makes more than {MAX_TIMELINE_BUCKETS} windows of a {} s run", self.seconds),
                ));
            }
        }
        if !(self.slowdown > -1.0 && self.slowdown <= 10.0) {
            return Err(ServingError::invalid(
                "slowdown",
                format!("{} is not a share in (-1, 10] (0.05: every batch 5% slower)", self.slowdown),
            ));
        }
        if self.replications == 0 {
            return Err(ServingError::invalid("replications", "at least one replication is needed"));
        }
        if let Some(bucket_s) = self.timeline_bucket_s {
            if !(bucket_s.is_finite() && bucket_s > 0.0) {
                return Err(ServingError::invalid(
                    "timeline_bucket_s",
                    format!("{bucket_s} is not a positive duration"),
                ));
            }
            if self.seconds / bucket_s > MAX_TIMELINE_BUCKETS as f64 {
                return Err(ServingError::invalid(
                    "timeline_bucket_s",
                    format!("{bucket_s} s makes more than {MAX_TIMELINE_BUCKETS} buckets of a {} s run", self.seconds),
                ));
            }
        }
        Ok(())
    }

    /// Whole measurement windows after the warm-up (0 without windows).
    pub(crate) fn whole_windows(&self) -> usize {
        self.window_s.map_or(0, |window_s| ((self.seconds - self.warmup_s) / window_s + 1e-9).floor() as usize)
    }

    /// Timeline buckets covering the run (0 without a timeline).
    pub(crate) fn timeline_buckets(&self) -> usize {
        self.timeline_bucket_s.map_or(0, |bucket_s| ((self.seconds / bucket_s).ceil() as usize).max(1))
    }
}

/// Runs every service of `system` for `options.seconds` of arrivals in
/// each replication, and reports attainment, latency percentiles with
/// confidence intervals, and segment utilisation.
///
/// Services (and replications) are independent and run on rayon's
/// threads; the report does not depend on their number. A run stops with
/// [`ServingError::QueueLimit`] when a service's queues hold more than
/// [`MAX_WAITING`] requests (a segment far past its throughput), so memory
/// stays bounded. A member of a shared instance whose service has other
/// segments too is refused, named.
pub fn simulate(system: &ServingSystem, options: &SimulationOptions) -> Result<ServingReport, ServingError> {
    let (runs, slowed) = run_services(system, options, false)?;
    let system = slowed.as_ref().unwrap_or(system);
    let summaries = (runs.into_par_iter().enumerate())
        .map(|(service, runs)| report::summarise_service(&system.services()[service], options, runs))
        .collect();
    Ok(report::assemble(system, options, summaries))
}

/// One service's counts from [`simulate_attainment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attained {
    /// Requests measured (arrived after the warm-up), all replications.
    pub requests: u64,
    /// Those within the service's latency SLO.
    pub within_slo: u64,
    /// Arrivals simulated, warm-up included.
    pub simulated: u64,
}

/// [`simulate`]'s counts alone, per service in the system's order: the
/// same numbers as its report's, from a run that records no latency and
/// never runs a request that surely misses its SLO whatever arrives after
/// it (a queue far past its throughput). What a caller that needs only
/// the share within each SLO asks.
pub fn simulate_attainment(system: &ServingSystem, options: &SimulationOptions) -> Result<Vec<Attained>, ServingError> {
    let (runs, _) = run_services(system, options, true)?;
    Ok(runs
        .iter()
        .map(|runs| Attained {
            requests: runs.iter().map(|run| run.counted.requests).sum(),
            within_slo: runs.iter().map(|run| run.counted.within_slo).sum(),
            simulated: runs.iter().map(|run| run.simulated).sum(),
        })
        .collect())
}

/// Each service's runs (one per replication) in the system's order, and
/// the system slowed as `options` asks (`None`: as profiled);
/// `counting_only` as [`service::run_service`] takes it.
fn run_services(
    system: &ServingSystem,
    options: &SimulationOptions,
    counting_only: bool,
) -> Result<(Vec<Vec<service::ServiceRun>>, Option<ServingSystem>), ServingError> {
    options.validate()?;
    let services = system.services().len();
    if options.timeline_buckets().saturating_mul(services) > MAX_TIMELINE_BUCKETS {
        return Err(ServingError::invalid(
            "timeline_bucket_s",
            format!(
                "{} s makes {} buckets for each of {services} services, more than {MAX_TIMELINE_BUCKETS} in all",
                options.timeline_bucket_s.unwrap_or_default(),
                options.timeline_buckets()
            ),
        ));
    }
    if let Some(service) = system.member_served_elsewhere() {
        return Err(ServingError::invalid(
            "shared",
            format!(
                "service '{}' is served by a shared instance and by other segments: the simulator runs a member on \
                 its executor alone (the analytic model predicts it)",
                system.services()[service].name
            ),
        ));
    }
    let slowed = (options.slowdown != 0.0).then(|| system.slowed_by(options.slowdown));
    let system = slowed.as_ref().unwrap_or(system);
    let units = if options.replications == 1 { BATCHES } else { 1 };
    // What runs on its own: a service with segments of its own, or a
    // shared instance with all its members.
    let mut sharing = vec![false; services];
    let mut runs_alone: Vec<Vec<usize>> = system.shared().to_vec();
    for group in system.shared() {
        for &segment in group {
            sharing[system.segments()[segment].service] = true;
        }
    }
    runs_alone.extend((0..services).filter(|&service| !sharing[service]).map(|service| vec![service]));
    let shared_instances = system.shared().len();
    type Runs = Vec<(usize, Vec<service::ServiceRun>)>;
    let results: Vec<Result<Runs, ServingError>> = runs_alone
        .par_iter()
        .enumerate()
        .map(|(k, members)| {
            let runs: Vec<Result<Vec<service::ServiceRun>, ServingError>> = (0..options.replications)
                .into_par_iter()
                .map(|replication| match k < shared_instances {
                    true => shared::run_shared(system, options, (members, replication), units, counting_only),
                    false => service::run_service(system, options, (members[0], replication), units, counting_only)
                        .map(|run| vec![run]),
                })
                .collect();
            // The first error in replication order, whichever thread met it.
            let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
            let served: Vec<usize> = match k < shared_instances {
                true => members.iter().map(|&segment| system.segments()[segment].service).collect(),
                false => members.clone(),
            };
            Ok(served
                .iter()
                .enumerate()
                .map(|(m, &service)| (service, runs.iter().map(|run| run[m].clone()).collect()))
                .collect())
        })
        .collect();
    // Likewise the first error in order.
    let mut runs: Runs = results.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect();
    runs.sort_by_key(|(service, _)| *service);
    Ok((runs.into_iter().map(|(_, runs)| runs).collect(), slowed))
}
