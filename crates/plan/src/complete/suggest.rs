//! Which configurations to measure next, given what is measured.
//!
//! A model without enough measurements to fit (fewer than
//! [`SEED_POINTS`] points, or one instance size) first gets a space-filling
//! design over the grid: each pick is the configuration farthest from
//! everything measured or picked (in grid steps), among those not known to
//! run out of memory.
//!
//! A model that can be fitted gets the configurations that matter for
//! planning. Planners want, for a latency budget, the most throughput per
//! compute slice: what matters is the front of efficiency against latency
//! (the best efficiency at no more latency), over all instance sizes, and
//! for the last segments each size's own. Measured points stand on it at
//! their values, predicted ones at their conservative ends; an unmeasured
//! configuration may raise it to its optimistic ends (highest throughput,
//! lowest latency), and a configuration not known to fit in memory also
//! brings the configurations its measurement would show to fit. Each pick
//! is the one that may raise the front's area most (latency on a log
//! scale); it then counts as measured at its estimates, and the next pick
//! is made. Configurations that a best guess of memory use (linear in
//! batch and processes, fitted to what is measured) says run out of memory
//! count a fifth. When nothing can raise the global front, each size's
//! own front is raised; then the least certain predictions are measured.

use std::collections::BTreeSet;

use tessera_core::{GpuModel, SegmentConfig, SourcedProfile};

use super::completion::{check_enough, complete_profiles};
use super::interface::{CompletionRequest, Feasibility, ModelCompletion};
use super::memory::MemoryEvidence;
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
/// Why a point of the global front is chosen.
const GLOBAL_REASON: &str = "may be the most efficient configuration (throughput per compute slice) for some latency";
/// Why a point of a size's front is chosen.
const SIZE_REASON: &str = "may be its instance size's most efficient configuration for some latency";
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
    let measured = profile.points().iter().map(|p| p.point.config);
    let evidence = MemoryEvidence::new(gpu_model, measured.clone().collect(), profile.out_of_memory().to_vec());
    let mut taken: Vec<SegmentConfig> = measured.chain(profile.out_of_memory().iter().copied()).collect();
    let mut picks = Vec::new();
    while picks.len() < budget {
        let best = grid
            .iter()
            .copied()
            .filter(|c| !taken.contains(c) && evidence.feasibility(*c) != Feasibility::OutOfMemory)
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

/// A configuration's efficiency (throughput per compute slice) and
/// latency: known (measured, or predicted at its conservative ends) or
/// hoped for (an unmeasured one at its optimistic ends).
#[derive(Debug, Clone, Copy)]
struct Standing {
    config: SegmentConfig,
    /// Throughput per compute slice, req/s.
    efficiency: f64,
    /// Batch latency, ms.
    latency_ms: f64,
}

/// An unmeasured configuration that may be worth measuring.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// At its optimistic ends.
    hoped: Standing,
    /// At its estimates.
    expected: Standing,
    /// At its conservative ends.
    assured: Standing,
    /// Assumed to fit (or counted as measured to fit).
    fits: bool,
    /// Its intervals' width, ln units.
    width: f64,
    /// How much its gain counts: less when memory is guessed to run out.
    odds: f64,
}

/// The weight of a configuration that the memory guess says runs out of
/// memory (the guess is a guess: such a configuration may still be worth
/// measuring).
const UNLIKELY_FIT_ODDS: f64 = 0.2;

/// The area under the front of efficiency against latency (the best
/// efficiency at no more latency) of `points`, from `shortest_ms` to
/// `longest_ms`, latency on a log scale: a budget ten times looser counts
/// as one step, whatever the units.
fn front_area(points: &mut [Standing], shortest_ms: f64, longest_ms: f64) -> f64 {
    points.sort_by(|a, b| a.latency_ms.total_cmp(&b.latency_ms));
    let (mut level, mut from, mut area) = (0.0_f64, shortest_ms.ln(), 0.0);
    for point in points.iter() {
        let at = point.latency_ms.max(shortest_ms).ln();
        area += level * (at - from).max(0.0);
        from = from.max(at);
        level = level.max(point.efficiency);
    }
    area + level * (longest_ms.ln() - from).max(0.0)
}

/// The front area of `points` over all sizes together, or the sum of each
/// size's own.
fn total_area(points: &[Standing], per_size: bool, shortest_ms: f64, longest_ms: f64) -> f64 {
    if !per_size {
        return front_area(&mut points.to_vec(), shortest_ms, longest_ms);
    }
    let sizes: BTreeSet<u8> = points.iter().map(|p| p.config.size_gpcs).collect();
    sizes
        .into_iter()
        .map(|size| {
            let mut own: Vec<Standing> = points.iter().filter(|p| p.config.size_gpcs == size).copied().collect();
            front_area(&mut own, shortest_ms, longest_ms)
        })
        .sum()
}

/// The points of `points` on its front (no other has both less latency and
/// more efficiency), per size when `per_size`.
fn front_of(points: &[Standing], per_size: bool) -> Vec<Standing> {
    points
        .iter()
        .filter(|p| {
            !points.iter().any(|q| {
                (!per_size || q.config.size_gpcs == p.config.size_gpcs)
                    && q.latency_ms <= p.latency_ms
                    && q.efficiency >= p.efficiency
                    && (q.latency_ms < p.latency_ms || q.efficiency > p.efficiency)
            })
        })
        .copied()
        .collect()
}

/// The picks for a fitted model: first what could raise the front of
/// efficiency against latency over all instance sizes most, then each
/// size's own front, then the least certain predictions. A configuration
/// that may not fit in memory counts with the configurations it would show
/// to fit (those it needs at least as much memory as), at their
/// conservative ends. Each pick counts as measured (fitting, at its
/// estimates) before the next.
fn front_picks(completion: &ModelCompletion, budget: usize) -> Vec<(SegmentConfig, &'static str)> {
    let profile = &completion.profile;
    let gpu_model = profile.gpu_model;
    let standing = |config: SegmentConfig, throughput: f64, latency_ms: f64| Standing {
        config,
        efficiency: throughput / f64::from(config.size_gpcs),
        latency_ms,
    };
    let measured: Vec<SegmentConfig> =
        profile.points().iter().filter(|p| p.is_measured()).map(|p| p.point.config).collect();
    let evidence = MemoryEvidence::new(gpu_model, measured, profile.out_of_memory().to_vec());
    let guess = evidence.guess();
    let mut known: Vec<Standing> = profile
        .points()
        .iter()
        .filter(|p| p.is_measured())
        .map(|p| standing(p.point.config, p.point.throughput_rps, p.point.latency_ms))
        .collect();
    let mut open: Vec<Candidate> = completion
        .predictions
        .iter()
        .filter(|p| p.feasibility != Feasibility::OutOfMemory)
        .map(|p| Candidate {
            odds: if p.feasibility == Feasibility::Fits || guess.fits(gpu_model, p.config) {
                1.0
            } else {
                UNLIKELY_FIT_ODDS
            },
            hoped: standing(p.config, p.throughput_rps.high, p.latency_ms.low),
            expected: standing(p.config, p.throughput_rps.estimate, p.latency_ms.estimate),
            assured: standing(p.config, p.throughput_rps.low, p.latency_ms.high),
            fits: p.feasibility == Feasibility::Fits,
            width: (p.throughput_rps.high / p.throughput_rps.low).ln() + (p.latency_ms.high / p.latency_ms.low).ln(),
        })
        .collect();
    let latencies = || open.iter().map(|c| c.hoped.latency_ms).chain(known.iter().map(|k| k.latency_ms));
    let shortest_ms = latencies().fold(f64::INFINITY, f64::min).max(1e-6);
    let longest_ms = latencies().fold(shortest_ms, f64::max);
    let mut picks = Vec::new();
    for (per_size, reason) in [(false, GLOBAL_REASON), (true, SIZE_REASON)] {
        while picks.len() < budget {
            let assured: Vec<Standing> =
                known.iter().copied().chain(open.iter().filter(|c| c.fits).map(|c| c.assured)).collect();
            let front = front_of(&assured, per_size);
            let base = total_area(&front, per_size, shortest_ms, longest_ms);
            let best = open
                .iter()
                .enumerate()
                .map(|(index, candidate)| {
                    let mut with: Vec<Standing> = front.clone();
                    with.push(candidate.hoped);
                    with.extend(
                        open.iter()
                            .filter(|other| {
                                !other.fits && evidence.needs_at_least(candidate.hoped.config, other.hoped.config)
                            })
                            .map(|other| other.assured),
                    );
                    (index, candidate.odds * (total_area(&with, per_size, shortest_ms, longest_ms) - base))
                })
                .filter(|(_, gain)| *gain > 1e-9 * base.max(1.0))
                .max_by(|(a, ga), (b, gb)| {
                    ga.total_cmp(gb).then_with(|| open[*b].hoped.config.cmp(&open[*a].hoped.config))
                });
            let Some((index, _)) = best else { break };
            let chosen = open.remove(index);
            for other in open.iter_mut() {
                if evidence.needs_at_least(chosen.hoped.config, other.hoped.config) {
                    other.fits = true;
                }
            }
            known.push(chosen.expected);
            picks.push((chosen.hoped.config, reason));
        }
    }
    open.sort_by(|a, b| b.width.total_cmp(&a.width).then_with(|| a.hoped.config.cmp(&b.hoped.config)));
    picks.extend(open.iter().take(budget - picks.len()).map(|c| (c.hoped.config, WIDTH_REASON)));
    picks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complete::interface::{CompletionMethod, ProfileGrid};
    use tessera_core::synthetic::{synthetic_profile, MODELS};

    fn config(size_gpcs: u8, batch: u32, procs: u32) -> SegmentConfig {
        SegmentConfig { size_gpcs, batch, procs }
    }

    #[test]
    fn a_new_model_gets_a_spread_of_first_measurements() {
        let grid = ProfileGrid::default();
        let oom = vec![config(1, 64, 1)];
        let empty = [SourcedProfile::new(GpuModel::A100_80GB, "new", vec![], oom).unwrap()];
        let request = CompletionRequest {
            gpu_model: GpuModel::A100_80GB,
            profiles: &empty,
            grid: &grid,
            method: CompletionMethod::Model,
        };
        let picks = suggest_measurements(&request, SEED_POINTS).unwrap();
        assert_eq!(picks.len(), SEED_POINTS);
        let configs: BTreeSet<SegmentConfig> = picks.iter().map(|s| s.config).collect();
        assert_eq!(configs.len(), SEED_POINTS, "{picks:?}");
        let sizes: BTreeSet<u8> = configs.iter().map(|c| c.size_gpcs).collect();
        assert!(sizes.len() >= 3 && sizes.contains(&1) && sizes.contains(&7), "{sizes:?}");
        assert!(configs.iter().all(|c| !(c.size_gpcs == 1 && c.batch >= 64)), "known out of memory: {configs:?}");
        assert!(picks.iter().all(|s| s.model == "new" && s.reason == SEED_REASON));
    }

    #[test]
    fn a_fitted_model_gets_unmeasured_configurations_that_may_raise_its_front_first() {
        let grid = ProfileGrid::default();
        let full = synthetic_profile(GpuModel::A100_80GB, &MODELS[3]).unwrap();
        let kept: Vec<_> = full.points().iter().step_by(6).copied().collect();
        let partial = tessera_core::ModelProfile::new(GpuModel::A100_80GB, "resnet50", kept).unwrap();
        let profiles = [SourcedProfile::measured(&partial, vec![]).unwrap()];
        let request = CompletionRequest {
            gpu_model: GpuModel::A100_80GB,
            profiles: &profiles,
            grid: &grid,
            method: CompletionMethod::Model,
        };
        let picks = suggest_measurements(&request, 20).unwrap();
        assert_eq!(picks.len(), 20);
        let configs: BTreeSet<SegmentConfig> = picks.iter().map(|s| s.config).collect();
        assert_eq!(configs.len(), 20);
        assert!(configs.iter().all(|c| partial.point(*c).is_none()), "measured again: {picks:?}");
        assert_eq!(picks[0].reason, GLOBAL_REASON);
        // The front of efficiency is at large batches: the first picks are not single requests.
        assert!(picks[..5].iter().any(|s| s.config.batch * s.config.procs >= 8), "{picks:?}");
    }

    #[test]
    fn the_front_area_counts_efficiency_over_log_latency() {
        let at = |latency_ms, efficiency| Standing { config: config(1, 1, 1), efficiency, latency_ms };
        // Efficiency 1 from 10 ms to 100 ms, then 2 up to 1000 ms: ln 10 × (1 + 2).
        let area = front_area(&mut [at(100.0, 2.0), at(10.0, 1.0)], 10.0, 1000.0);
        assert!((area - 3.0 * 10f64.ln()).abs() < 1e-9, "{area}");
        // A dominated point adds nothing.
        let dominated = front_area(&mut [at(100.0, 2.0), at(10.0, 1.0), at(200.0, 1.5)], 10.0, 1000.0);
        assert!((dominated - area).abs() < 1e-9);
    }
}
