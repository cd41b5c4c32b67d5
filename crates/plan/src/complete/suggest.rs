//! Which configurations to measure next, given what is measured.
//!
//! A model without enough measurements to fit (fewer than
//! [`SEED_POINTS`] points, or one instance size) first gets a space-filling
//! design over the grid: each pick is the configuration farthest from
//! everything measured or picked (in grid steps), among those not known to
//! run out of memory. A model that can be fitted gets the configurations
//! that matter for planning and are least certain: planners choose, for a
//! latency budget, the configuration of an instance size with the highest
//! throughput, so what matters is each size's front of latency against
//! throughput. Every unmeasured configuration whose optimistic end (highest
//! throughput, lowest latency) no other configuration's conservative end
//! beats is a candidate; the widest interval is picked first, counted as
//! measured at its estimate, and the front recomputed for the next pick.
//! Configurations not yet known to fit in memory are candidates too:
//! measuring them settles their memory.

use std::collections::BTreeSet;

use tessera_core::{GpuModel, SegmentConfig, SourcedProfile};

use super::{check_enough, complete_profiles, CompletionRequest, Feasibility, ModelCompletion};
use crate::error::PlanError;

/// Measured points a model needs before its fit guides the choice.
pub const SEED_POINTS: usize = 8;

/// A configuration to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// The model.
    pub model: String,
    /// The configuration.
    pub config: SegmentConfig,
    /// Why, in words.
    pub reason: &'static str,
}

/// Why a seed point is chosen.
const SEED_REASON: &str = "spreads the first measurements over sizes, batches and processes";
/// Why a front point is chosen.
const FRONT_REASON: &str = "may be the best configuration for some latency budget, and its prediction is uncertain";
/// Why a memory point is chosen.
const MEMORY_REASON: &str = "may be the best configuration for some latency budget, and may not fit in memory";
/// Why any other point is chosen.
const WIDTH_REASON: &str = "its prediction is among the least certain";

/// Up to `budget` configurations of the grid to measure for every model
/// of `request.gpu_model` (also models with too few points to complete),
/// in model-name order, then in the order they are picked.
pub fn suggest_measurements(request: &CompletionRequest<'_>, budget: usize) -> Result<Vec<Suggestion>, PlanError> {
    let gpu_model = request.gpu_model;
    let grid = request.grid.configs(gpu_model)?;
    let mut ours: Vec<&SourcedProfile> = request.profiles.iter().filter(|p| p.gpu_model == gpu_model).collect();
    ours.sort_by(|a, b| a.model.cmp(&b.model));
    let ready: Vec<SourcedProfile> = ours.iter().filter(|p| can_fit(gpu_model, p)).map(|&p| p.clone()).collect();
    let completions = if ready.is_empty() {
        Vec::new()
    } else {
        complete_profiles(&CompletionRequest { profiles: &ready, ..*request })?
    };
    let mut suggestions = Vec::new();
    for profile in ours {
        let picks = match completions.iter().find(|c| c.profile.model == profile.model) {
            Some(completion) => front_picks(completion, budget),
            None => seed_picks(gpu_model, profile, &grid, budget),
        };
        suggestions.extend(picks.into_iter().map(|(config, reason)| Suggestion {
            model: profile.model.clone(),
            config,
            reason,
        }));
    }
    Ok(suggestions)
}

/// Whether a profile has enough measured points to guide the choice.
fn can_fit(gpu_model: GpuModel, profile: &SourcedProfile) -> bool {
    let measured: Vec<_> = profile.points().iter().filter(|p| p.is_measured()).copied().collect();
    measured.len() >= SEED_POINTS && check_enough(gpu_model, &profile.model, &measured).is_ok()
}

/// A space-filling design: farthest-point picks over the grid.
fn seed_picks(
    gpu_model: GpuModel,
    profile: &SourcedProfile,
    grid: &[SegmentConfig],
    budget: usize,
) -> Vec<(SegmentConfig, &'static str)> {
    let axes = Axes::of(grid);
    let oom = profile.out_of_memory();
    let mut taken: Vec<SegmentConfig> =
        profile.points().iter().map(|p| p.point.config).chain(oom.iter().copied()).collect();
    let memory = |c: SegmentConfig| gpu_model.spec().profile_for_size(c.size_gpcs).map_or(0, |p| p.memory_gb);
    let runs_out =
        |c: SegmentConfig| oom.iter().any(|o| memory(*o) >= memory(c) && o.batch <= c.batch && o.procs <= c.procs);
    let mut picks = Vec::new();
    while picks.len() < budget {
        let best = grid
            .iter()
            .copied()
            .filter(|c| !taken.contains(c) && !runs_out(*c))
            .map(|c| (axes.distance_to(c, &taken), c))
            .max_by(|(da, a), (db, b)| {
                // Farthest first; among equals, the smaller load (more
                // likely to fit), then the larger instance.
                da.total_cmp(db)
                    .then_with(|| (b.batch * b.procs).cmp(&(a.batch * a.procs)))
                    .then_with(|| a.size_gpcs.cmp(&b.size_gpcs))
            });
        let Some((_, config)) = best else { break };
        taken.push(config);
        picks.push((config, SEED_REASON));
    }
    picks
}

/// Positions of a configuration's size, batch and processes on the grid's
/// axes, scaled to [0, 1].
struct Axes {
    sizes: Vec<u8>,
    batches: Vec<u32>,
    procs: Vec<u32>,
}

impl Axes {
    fn of(grid: &[SegmentConfig]) -> Axes {
        let sizes: BTreeSet<u8> = grid.iter().map(|c| c.size_gpcs).collect();
        let batches: BTreeSet<u32> = grid.iter().map(|c| c.batch).collect();
        let procs: BTreeSet<u32> = grid.iter().map(|c| c.procs).collect();
        Axes {
            sizes: sizes.into_iter().collect(),
            batches: batches.into_iter().collect(),
            procs: procs.into_iter().collect(),
        }
    }

    fn position(&self, config: SegmentConfig) -> [f64; 3] {
        fn scaled<T: PartialOrd>(values: &[T], value: &T) -> f64 {
            let index = values.iter().filter(|v| *v < value).count() as f64;
            index / (values.len().max(2) - 1) as f64
        }
        [
            scaled(&self.sizes, &config.size_gpcs),
            scaled(&self.batches, &config.batch),
            scaled(&self.procs, &config.procs),
        ]
    }

    /// The squared distance from `config` to the nearest of `taken`
    /// (infinite when none).
    fn distance_to(&self, config: SegmentConfig, taken: &[SegmentConfig]) -> f64 {
        let here = self.position(config);
        taken
            .iter()
            .map(|&other| self.position(other).iter().zip(&here).map(|(a, b)| (a - b).powi(2)).sum::<f64>())
            .fold(f64::INFINITY, f64::min)
    }
}

/// An unmeasured configuration's standing on its size's front.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    config: SegmentConfig,
    /// Optimistic and conservative throughput, req/s.
    throughput_high: f64,
    throughput_low: f64,
    /// Optimistic and conservative latency, ms.
    latency_low: f64,
    latency_high: f64,
    /// Known to fit.
    fits: bool,
}

/// The front picks for a fitted model.
fn front_picks(completion: &ModelCompletion, budget: usize) -> Vec<(SegmentConfig, &'static str)> {
    // Measured points are certain; candidates carry their intervals.
    let mut known: Vec<Candidate> = completion
        .profile
        .points()
        .iter()
        .filter(|p| p.is_measured())
        .map(|p| Candidate {
            config: p.point.config,
            throughput_high: p.point.throughput_rps,
            throughput_low: p.point.throughput_rps,
            latency_low: p.point.latency_ms,
            latency_high: p.point.latency_ms,
            fits: true,
        })
        .collect();
    let mut open: Vec<Candidate> = completion
        .predictions
        .iter()
        .filter(|p| p.feasibility != Feasibility::OutOfMemory)
        .map(|p| Candidate {
            config: p.config,
            throughput_high: p.throughput_rps.high,
            throughput_low: p.throughput_rps.low,
            latency_low: p.latency_ms.low,
            latency_high: p.latency_ms.high,
            fits: p.feasibility == Feasibility::Fits,
        })
        .collect();
    let mut picks = Vec::new();
    while picks.len() < budget && !open.is_empty() {
        let beaten = |c: &Candidate| {
            known.iter().chain(open.iter().filter(|o| o.fits)).any(|other| {
                other.config != c.config
                    && other.config.size_gpcs == c.config.size_gpcs
                    && other.latency_high <= c.latency_low
                    && other.throughput_low >= c.throughput_high
            })
        };
        let best = open
            .iter()
            .enumerate()
            .filter(|(_, c)| !beaten(c))
            .max_by(|(_, a), (_, b)| width(a).total_cmp(&width(b)).then_with(|| b.config.cmp(&a.config)))
            .map(|(index, _)| index);
        let Some(index) = best else { break };
        let mut chosen = open.remove(index);
        picks.push((chosen.config, if chosen.fits { FRONT_REASON } else { MEMORY_REASON }));
        let (throughput, latency) = (
            (chosen.throughput_high * chosen.throughput_low).sqrt(),
            (chosen.latency_high * chosen.latency_low).sqrt(),
        );
        chosen = Candidate {
            throughput_high: throughput,
            throughput_low: throughput,
            latency_low: latency,
            latency_high: latency,
            fits: true,
            ..chosen
        };
        known.push(chosen);
    }
    // The front is settled: the least certain of the rest.
    open.sort_by(|a, b| width(b).total_cmp(&width(a)).then_with(|| a.config.cmp(&b.config)));
    picks.extend(open.iter().take(budget - picks.len()).map(|c| (c.config, WIDTH_REASON)));
    picks
}

/// The width of a candidate's intervals, in ln units.
fn width(c: &Candidate) -> f64 {
    (c.throughput_high / c.throughput_low).ln() + (c.latency_high / c.latency_low).ln()
}
