//! Measuring a strategy's day with the request-level simulator, piece by
//! piece.
//!
//! The day is cut wherever the segments serving change, a service's rate
//! changes, or an hour ends; within a piece both are constant. Each piece
//! is measured by simulating a sampled window of traffic at its rates
//! (Poisson arrivals, `warmup_s` unmeasured then `window_s` measured) on
//! its segments, and each service's measured share within its SLO is
//! weighted by the requests the piece holds (its rate times its length).
//! A service with too few requests in the window for one to be measured
//! takes the serving model's prediction instead. Pieces that start at the
//! same time use the same seed, whatever the strategy (common random
//! numbers: differences between strategies are not sampling noise).
//!
//! **Requests lost** are those a transition takes capacity from: while it
//! runs, a service whose serving segments' capacity is below both its rate
//! and the capacity it had before the transition loses the difference
//! (requests per second, times the piece's length). A rate above the old
//! capacity too is the traffic's doing, not the transition's: it shows in
//! the share within the SLO. A service with no segment serving has none of
//! its requests within its SLO.

use serde::Serialize;
use tessera_core::rng::SplitMix64;
use tessera_core::Plan;
use tessera_serving::{simulate, SimulationOptions};

use super::timeline::Timeline;
use crate::error::AutopilotError;
use crate::planner::Planner;
use crate::traffic::TrafficCurve;

/// Default measured seconds of each sampled window.
pub const DEFAULT_WINDOW_S: f64 = 30.0;
/// Default unmeasured seconds at the start of each window.
pub const DEFAULT_WARMUP_S: f64 = 5.0;

/// How each piece of the day is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sampling {
    /// Measured seconds of each window.
    pub window_s: f64,
    /// Unmeasured seconds before them.
    pub warmup_s: f64,
    /// The seed of the windows' arrivals.
    pub seed: u64,
}

impl Default for Sampling {
    /// [`DEFAULT_WINDOW_S`] after [`DEFAULT_WARMUP_S`], seed 0.
    fn default() -> Self {
        Sampling { window_s: DEFAULT_WINDOW_S, warmup_s: DEFAULT_WARMUP_S, seed: 0 }
    }
}

impl Sampling {
    /// Checks the sampling, naming the first field out of range.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            return Err(AutopilotError::invalid("window_s", format!("{} is not a positive duration", self.window_s)));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0) {
            return Err(AutopilotError::invalid(
                "warmup_s",
                format!("{} is not a duration of 0 s or more", self.warmup_s),
            ));
        }
        Ok(())
    }
}

/// What the pieces of one hour held.
#[derive(Debug, Clone, Default)]
pub(super) struct HourMeasures {
    /// GPU-seconds held.
    pub gpu_s: f64,
    /// Per service: requests that arrived.
    pub requests: Vec<f64>,
    /// Per service: requests within the SLO.
    pub within: Vec<f64>,
    /// Requests lost in transitions, all services.
    pub lost: f64,
    /// Most GPUs held at once.
    pub gpus_max: usize,
}

/// A day measured, hour by hour.
#[derive(Debug, Clone)]
pub(super) struct Measured {
    pub hours: Vec<HourMeasures>,
    /// Pieces simulated.
    pub pieces: usize,
    /// Requests simulated in all windows.
    pub requests_simulated: u64,
}

/// One piece: a span of constant segments and rates within an hour.
struct Piece {
    span: usize,
    start_s: f64,
    end_s: f64,
}

/// The pieces of `timeline` under `traffic`.
fn pieces(timeline: &Timeline, traffic: &TrafficCurve) -> Vec<Piece> {
    let mut pieces = Vec::new();
    for (span_index, span) in timeline.spans.iter().enumerate() {
        let mut cuts = traffic.change_times(span.start_s, span.end_s);
        let first_hour = (span.start_s / 3600.0).floor() as usize + 1;
        cuts.extend((first_hour..).map(|hour| hour as f64 * 3600.0).take_while(|&t| t < span.end_s));
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let bounds: Vec<f64> = std::iter::once(span.start_s).chain(cuts).chain(std::iter::once(span.end_s)).collect();
        for window in bounds.windows(2) {
            pieces.push(Piece { span: span_index, start_s: window[0], end_s: window[1] });
        }
    }
    pieces
}

/// The number of pieces [`measure`] will simulate.
pub(super) fn piece_count(timeline: &Timeline, traffic: &TrafficCurve) -> usize {
    pieces(timeline, traffic).len()
}

/// Measures `timeline` (see the module documentation); `step` is called
/// after each piece.
pub(super) fn measure(
    planner: &Planner,
    timeline: &Timeline,
    traffic: &TrafficCurve,
    sampling: &Sampling,
    hours: usize,
    step: &mut dyn FnMut(),
) -> Result<Measured, AutopilotError> {
    let services = planner.services().len();
    let empty = HourMeasures { requests: vec![0.0; services], within: vec![0.0; services], ..Default::default() };
    let mut measured = Measured { hours: vec![empty; hours], pieces: 0, requests_simulated: 0 };
    for piece in pieces(timeline, traffic) {
        let span = &timeline.spans[piece.span];
        let hour = ((piece.start_s / 3600.0) as usize).min(hours - 1);
        let length_s = piece.end_s - piece.start_s;
        let rates_rps = traffic.rates_rps(piece.start_s);
        let tally = &mut measured.hours[hour];
        tally.gpu_s += span.gpus as f64 * length_s;
        tally.gpus_max = tally.gpus_max.max(span.gpus);
        let attainment = match planner.system_at(&span.serving, &rates_rps)? {
            None => Vec::new(),
            Some((system, indices)) => {
                let options = SimulationOptions {
                    seconds: sampling.warmup_s + sampling.window_s,
                    warmup_s: sampling.warmup_s,
                    seed: SplitMix64::new(sampling.seed ^ (piece.start_s * 1000.0).round() as u64).next_u64(),
                    ..SimulationOptions::default()
                };
                let report = simulate(&system, &options)?;
                measured.requests_simulated += report.requests_simulated;
                let mut attainment = Vec::with_capacity(indices.len());
                for (served, (outcome, &index)) in report.services.iter().zip(&indices).enumerate() {
                    let share = match outcome.requests {
                        0 => system.predicted_attainment(served)?,
                        requests => outcome.within_slo as f64 / requests as f64,
                    };
                    attainment.push((index, share));
                }
                attainment
            }
        };
        for (service, &rate_rps) in rates_rps.iter().enumerate() {
            tally.requests[service] += rate_rps * length_s;
        }
        for (index, share) in attainment {
            tally.within[index] += share * rates_rps[index] * length_s;
        }
        if let Some(before) = &span.before {
            let (now_rps, before_rps) = (capacities(planner, &span.serving), capacities(planner, before));
            let lost_rps: f64 = (0..services).map(|s| (rates_rps[s].min(before_rps[s]) - now_rps[s]).max(0.0)).sum();
            tally.lost += lost_rps * length_s;
        }
        measured.pieces += 1;
        step();
    }
    Ok(measured)
}

/// Each service's capacity in `plan` (the sum of its segments'), req/s, in
/// the planner's order.
fn capacities(planner: &Planner, plan: &Plan) -> Vec<f64> {
    let mut capacity_rps = vec![0.0; planner.services().len()];
    for instance in plan.gpus.iter().flat_map(|gpu| &gpu.instances) {
        if let Some(index) = planner.services().iter().position(|slo| slo.service == instance.service) {
            capacity_rps[index] += instance.capacity();
        }
    }
    capacity_rps
}
