//! Latency rules: when does a segment meet its service's latency SLO?
//!
//! A service's requests are split across its segments in proportion to
//! their throughput, so every segment of a service runs at the same
//! *utilization* `u = rate / provisioned throughput` (≤ 1 when the rate is
//! covered). Rules see a segment's profile point and `u`.
//!
//! **`queueing`** (the default) bounds the latency of a request in a real
//! open-loop server. A process of a segment with batch `b`, batch latency
//! `L` and `p` processes receives `λ = u · b / L` requests per ms (its share
//! of the service's rate). The worst-placed request is the first of a batch:
//!
//! ```text
//! worst = fill + wait + run = (b − 1) / λ + L + L = L · (2 + (b − 1) / (b · u))
//! ```
//!
//! It waits for `b − 1` more requests to arrive, then for the process to
//! finish the batch it is running (at most `L`, since `u ≤ 1` means batches
//! arrive no faster than they complete), then for its own batch to run.
//! The segment is feasible when `worst ≤ SLO`. Filling a batch is slow at
//! low utilization, so a service must not be over-provisioned too much with
//! large batches: a configuration is usable only while
//! `provisioned / rate ≤ b · (SLO / L − 2) / (b − 1)` (its *maximum
//! provisioning ratio*); a batch of 1 has no fill time and no such limit.
//!
//! **`parva`** is ParvaGPU's rule: the batch latency must be strictly below
//! 0.45 × the SLO truncated to whole ms (half the SLO for batching, minus
//! 10%). It ignores utilization, so low-rate services with large batches
//! can miss their SLO in a real server.
//!
//! **`percentile`** (the default) holds a plan to what users judge it by:
//! the service's `percentile`% of requests, arriving at random (Poisson
//! unless the request names another arrival model), finish within the SLO. A segment may be routed at most its *capacity*:
//! the highest rate at which its percentile latency — waiting, batch
//! formation and running, each MPS process with its own queue behind a
//! random split, greedy dynamic batching — stays within the SLO, computed
//! exactly by tessera-serving's analytic model under Poisson arrivals (and
//! checked against its request-level simulator), searched for with that
//! simulator under the others. A service's requests are routed to its
//! segments in proportion to their capacities, so each segment runs at or
//! below its capacity; over-provisioning only shortens queues, so there is
//! no provisioning ratio. The planners plan with capacities in place of
//! throughputs (`judge`), and prove optimality under this model.

use std::fmt;
use std::str::FromStr;

use tessera_core::{ProfilePoint, ServiceSlo};

/// Relative tolerance of latency comparisons (floating-point noise).
const LATENCY_TOLERANCE: f64 = 1e-9;

/// The default robustness margin of the percentile rule: plans meet every
/// SLO with every batch this share slower than profiled. 6%: a GPU 5%
/// slower than its profile, plus the 1% a lent H200 measured between
/// profiling and serving (batches 0.3-0.5% slower, about 10 µs of dispatch
/// between batches); see docs/margins.md for what it costs and keeps.
pub const DEFAULT_MARGIN: f64 = 0.06;

pub use tessera_core::plan::MAX_MARGIN;

/// A rule that decides whether a segment meets a latency SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LatencyRule {
    /// The service's percentile of requests, arriving at random (Poisson
    /// unless told otherwise), within the SLO: queueing, batching and
    /// running included.
    Percentile,
    /// Fill + wait + run at the routed rate, requests evenly spaced, must
    /// fit in the SLO.
    Queueing,
    /// ParvaGPU's rule: batch latency < 0.45 × ⌊SLO⌋.
    Parva,
}

impl LatencyRule {
    /// Every rule, for `--help` texts and parsing.
    pub const ALL: [LatencyRule; 3] = [LatencyRule::Percentile, LatencyRule::Queueing, LatencyRule::Parva];

    /// The rule plans are made and checked under when nothing says
    /// otherwise: the `optimal` strategy's, and the one a plan that records
    /// no rule (a ParvaGPU deployment map) is checked under.
    pub const DEFAULT: LatencyRule = LatencyRule::Percentile;

    /// The robustness margin a plan under this rule is made with when none
    /// is asked for (and, for a replan, none recorded): [`DEFAULT_MARGIN`]
    /// under the percentile rule, whose capacities sit where one more
    /// percent of batch time breaks the percentile; none under the rules
    /// without capacities (ParvaGPU's and evenly spaced arrivals), which
    /// take none.
    pub fn default_margin(self) -> f64 {
        if self.uses_capacity() {
            DEFAULT_MARGIN
        } else {
            0.0
        }
    }

    /// The rule's name on the command line and in plans.
    pub fn name(self) -> &'static str {
        match self {
            LatencyRule::Percentile => "percentile",
            LatencyRule::Queueing => "queueing",
            LatencyRule::Parva => "parva",
        }
    }

    /// Whether the rule gives each segment a capacity below its throughput
    /// (from the serving model) rather than a provisioning ratio: then the
    /// planners plan with capacities (see `judge`), and a plan records
    /// them.
    pub(crate) fn uses_capacity(self) -> bool {
        self == LatencyRule::Percentile
    }

    /// ParvaGPU's largest allowed batch latency (ms) for an SLO.
    fn parva_budget_ms(slo_ms: f64) -> f64 {
        slo_ms.trunc() / 2.0 * 0.9
    }

    /// What the rule asks of a segment of `slo`'s service, for error
    /// messages.
    pub fn requirement(self, slo: &ServiceSlo) -> String {
        let slo_ms = slo.latency_slo_ms;
        match self {
            LatencyRule::Percentile => {
                format!("{}% of requests (queueing included, a queue per process) within {slo_ms} ms", slo.percentile)
            }
            LatencyRule::Queueing => {
                format!("2 × batch latency + batch fill time ≤ {slo_ms} ms")
            }
            LatencyRule::Parva => format!("batch latency < {:.2} ms", Self::parva_budget_ms(slo_ms)),
        }
    }

    /// The worst-case latency (ms) of a request served by `point` when its
    /// service runs at `utilization` (rate / provisioned, capped to (0, 1]).
    /// For `parva`, the batch latency the rule bounds; for `percentile`,
    /// also the batch latency (its floor: the serving model predicts the
    /// percentile latency from the segment's whole shape, see `judge`).
    pub fn worst_latency_ms(self, point: &ProfilePoint, utilization: f64) -> f64 {
        match self {
            // Predicted by the serving model from the segment's shape
            // (`judge`); the batch latency is its floor.
            LatencyRule::Percentile => point.latency_ms,
            LatencyRule::Queueing => {
                let batch = f64::from(point.config.batch);
                let utilization = utilization.clamp(f64::MIN_POSITIVE, 1.0);
                point.latency_ms * (2.0 + (batch - 1.0) / (batch * utilization))
            }
            LatencyRule::Parva => point.latency_ms,
        }
    }

    /// `true` when `point` meets an SLO of `slo_ms` at `utilization`. Under
    /// `percentile`, `point` is as the planners see it (its throughput is
    /// its capacity, see `judge`): it meets the SLO at any routed rate up to
    /// a positive capacity.
    pub fn meets(self, point: &ProfilePoint, utilization: f64, slo_ms: f64) -> bool {
        match self {
            // A point the planners see under the percentile rule carries its
            // capacity (`judge`): it meets the SLO at any routed rate up to it.
            LatencyRule::Percentile => point.throughput_rps > 0.0 && point.latency_ms <= slo_ms,
            LatencyRule::Queueing => self.worst_latency_ms(point, utilization) <= slo_ms * (1.0 + LATENCY_TOLERANCE),
            LatencyRule::Parva => point.latency_ms < Self::parva_budget_ms(slo_ms),
        }
    }

    /// The largest provisioned / rate ratio at which `point` still meets the
    /// SLO (`f64::INFINITY` when there is no limit), or `None` when it never
    /// does, not even fully utilized.
    pub fn max_provision_ratio(self, point: &ProfilePoint, slo_ms: f64) -> Option<f64> {
        match self {
            LatencyRule::Percentile => self.meets(point, 1.0, slo_ms).then_some(f64::INFINITY),
            LatencyRule::Parva => self.meets(point, 1.0, slo_ms).then_some(f64::INFINITY),
            LatencyRule::Queueing => {
                let batch = f64::from(point.config.batch);
                let headroom = slo_ms / point.latency_ms - 2.0;
                if point.config.batch == 1 {
                    return (headroom >= -LATENCY_TOLERANCE).then_some(f64::INFINITY);
                }
                let ratio = batch * headroom / (batch - 1.0);
                (ratio >= 1.0 && self.meets(point, 1.0, slo_ms)).then_some(ratio * (1.0 - LATENCY_TOLERANCE))
            }
        }
    }
}

// A rule travels by its name, in plans, options and the API.
tessera_core::serde_as_text!(LatencyRule);

impl fmt::Display for LatencyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LatencyRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LatencyRule::ALL.into_iter().find(|rule| rule.name() == s).ok_or_else(|| {
            let known: Vec<&str> = LatencyRule::ALL.iter().map(|rule| rule.name()).collect();
            format!("unknown latency rule '{s}' (known: {})", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::SegmentConfig;

    fn point(batch: u32, latency_ms: f64) -> ProfilePoint {
        let config = SegmentConfig { size_gpcs: 1, batch, procs: 1 };
        ProfilePoint::new(config, 1000.0 * f64::from(batch) / latency_ms, latency_ms, None).unwrap()
    }

    #[test]
    fn parva_truncates_the_slo_and_keeps_045_of_it_strictly() {
        let rule = LatencyRule::Parva;
        // 216.5 ms truncates to 216; 0.45 × 216 = 97.2.
        assert!(rule.meets(&point(1, 97.0), 1.0, 216.5));
        assert!(!rule.meets(&point(1, 97.3), 1.0, 216.5));
        assert!(!rule.meets(&point(1, 9.0), 0.01, 20.0), "the bound is strict");
        assert_eq!(rule.max_provision_ratio(&point(8, 9.0), 100.0), Some(f64::INFINITY));
        assert_eq!("parva".parse::<LatencyRule>().unwrap(), LatencyRule::Parva);
        assert!("fast".parse::<LatencyRule>().is_err());
    }

    #[test]
    fn queueing_adds_fill_time_that_grows_as_utilization_falls() {
        let rule = LatencyRule::Queueing;
        let p = point(8, 10.0);
        // Fully utilized: 10 × (2 + 7/8) = 28.75 ms.
        assert!((rule.worst_latency_ms(&p, 1.0) - 28.75).abs() < 1e-9);
        // Half utilized, the batch takes twice as long to fill.
        assert!((rule.worst_latency_ms(&p, 0.5) - 37.5).abs() < 1e-9);
        assert!(rule.meets(&p, 1.0, 30.0) && !rule.meets(&p, 0.5, 30.0));
    }

    #[test]
    fn max_provision_ratio_is_where_the_worst_case_reaches_the_slo() {
        let rule = LatencyRule::Queueing;
        let p = point(8, 10.0);
        let ratio = rule.max_provision_ratio(&p, 40.0).unwrap();
        // 10 × (2 + 7 / (8u)) = 40  ⇔  u = 7/16, ratio 16/7.
        assert!((ratio - 16.0 / 7.0).abs() < 1e-6, "{ratio}");
        assert!(rule.meets(&p, 1.0 / ratio, 40.0));
        assert!(!rule.meets(&p, 1.0 / (ratio * 1.001), 40.0));
        assert_eq!(rule.max_provision_ratio(&p, 25.0), None, "too slow even fully utilized");
        assert_eq!(rule.max_provision_ratio(&point(1, 10.0), 20.0), Some(f64::INFINITY));
        assert_eq!(rule.max_provision_ratio(&point(1, 10.0), 19.0), None);
    }
}
