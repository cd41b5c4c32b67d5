//! `tessera bench profiles`: profile completion on ParvaGPU's real grid.
//!
//! For every budget (a share of each model's 225-point grid), each model
//! keeps that many of its configurations — a random subset per seed, or the
//! ones `suggest` picks (a space-filling start, then rounds of picks, each
//! round "measured" by revealing the true values; deterministic, so one
//! run) — and the rest is completed. Reported: the error of the predicted
//! throughput and latency on every held-out configuration that truly fits
//! (median and 90th percentile, %), how often the intervals cover the true
//! values, configurations assumed to fit that truly run out of memory, the
//! GPUs planned for ParvaGPU's six scenarios with the completed profiles
//! (`optimal` strategy, `parva` latency rule), and the violations of those
//! plans verified against the full measured profiles. A plan's recorded
//! throughput and latency are the completed profile's, which differ from
//! the measured ones by design; only violations that break a service (SLO,
//! rate, memory, a configuration that does not run) count.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tessera_serving::ArrivalModel;

use anyhow::{bail, Result};
use tessera_core::rng::SplitMix64;
use tessera_core::{GpuModel, PointSource, ProfileCatalog, SegmentConfig, ServiceSlo, SourcedPoint, SourcedProfile};
use tessera_plan::{
    complete_profiles, suggest_measurements, verify, CompletionMethod, CompletionRequest, Feasibility, LatencyRule,
    ModelCompletion, ProfileGrid, VerifyRequest, Violation, DEFAULT_MAX_PROCS, SEED_POINTS,
};
use tessera_store::{read_profile_dir, read_slo_scenario};

use super::optimal_under_parva;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// ParvaGPU's SLO files hold six scenarios.
const SCENARIOS: usize = 6;

/// The GPU model ParvaGPU's profiles were measured on.
const GPU: GpuModel = GpuModel::A100_80GB;

/// Points per model `suggest` adds in each round after its start.
const SUGGEST_ROUND: usize = 5;

/// What the bench measures.
pub struct ProfilesBench<'a> {
    /// ParvaGPU's data folder.
    pub parvagpu: &'a Path,
    /// Budgets, % of each model's grid.
    pub budgets_percent: &'a [u32],
    /// Random subsets per budget (seeds 1..=N).
    pub seeds: u64,
    /// Seconds one profiled point takes, for the time saved.
    pub seconds_per_point: f64,
}

/// How a subset was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    Random(u64),
    Suggest,
}

/// The outcome of the runs of one budget and kind of subset (every seed of
/// the random subsets together).
#[derive(Debug, Clone, Default)]
struct RunResult {
    runs: usize,
    measured_points: usize,
    throughput_errors: Vec<f64>,
    latency_errors: Vec<f64>,
    throughput_covered: usize,
    latency_covered: usize,
    held_out: usize,
    baseline_throughput_errors: Vec<f64>,
    baseline_latency_errors: Vec<f64>,
    assumed_but_out_of_memory: usize,
    fitting_not_assumed: usize,
    /// Per run, the GPUs of each scenario.
    gpus: Vec<Vec<Option<usize>>>,
    violations: usize,
    elapsed: Duration,
}

pub fn run(bench: &ProfilesBench<'_>) -> Result<()> {
    let prof_data = bench.parvagpu.join("prof_data");
    if !prof_data.is_dir() {
        bail!(
            "{} is not a folder: `tessera bench profiles` needs ParvaGPU's data (pass --parvagpu DIR)",
            prof_data.display()
        );
    }
    let truth = read_profile_dir(&prof_data, GPU)?.profiles;
    let catalog: ProfileCatalog = truth.iter().map(SourcedProfile::planning_profile).collect();
    let models: Vec<String> = truth.iter().map(|p| p.model.clone()).collect();
    let (rates, latency) = (bench.parvagpu.join("slo/SLO_req_rate.csv"), bench.parvagpu.join("slo/SLO_latency.csv"));
    let scenarios: Vec<Vec<ServiceSlo>> =
        (1..=SCENARIOS).map(|k| read_slo_scenario(&rates, &latency, k, &models)).collect::<Result<_, _>>()?;
    let full: Vec<Option<usize>> = scenarios.iter().map(|services| gpus_for(&catalog, services)).collect();
    let grid = ProfileGrid::default();
    let grid_size = grid.configs(GPU)?.len();

    let runs = bench.budgets_percent.len() * (bench.seeds as usize + 1);
    let bar = Progress::bar(runs as u64, "runs", "completing subsets".to_string());
    let mut rows: Vec<(u32, &str, RunResult)> = Vec::new();
    for &percent in bench.budgets_percent {
        let budget = ((f64::from(percent) / 100.0 * grid_size as f64).round() as usize).clamp(1, grid_size);
        let mut random = RunResult::default();
        let mut suggested = RunResult::default();
        for selection in (1..=bench.seeds).map(Selection::Random).chain([Selection::Suggest]) {
            bar.set_message(format!("{percent}% of the grid, {}", selection_name(selection)));
            let started = Instant::now();
            let (partial, result) = match selection {
                Selection::Random(seed) => (random_subset(&truth, &grid, budget, seed)?, &mut random),
                Selection::Suggest => (suggested_subset(&truth, &grid, budget)?, &mut suggested),
            };
            evaluate(&truth, &catalog, &partial, &grid, &scenarios, result)?;
            result.elapsed += started.elapsed();
            bar.step();
        }
        rows.push((percent, "random", random));
        rows.push((percent, "suggest", suggested));
    }
    drop(bar);
    render(bench, &full, grid_size, truth.len(), &rows)
}

/// The GPUs `optimal` plans for `services` under the `parva` rule (`None`
/// when it cannot plan them).
fn gpus_for(catalog: &ProfileCatalog, services: &[ServiceSlo]) -> Option<usize> {
    optimal_under_parva(catalog, services).ok().map(|plan| plan.gpu_count)
}

fn selection_name(selection: Selection) -> String {
    match selection {
        Selection::Random(seed) => format!("random, seed {seed}"),
        Selection::Suggest => "suggest".to_string(),
    }
}

/// What measuring `configs` of a model reveals: the true points that fit,
/// and the configurations that run out of memory.
fn reveal(truth: &SourcedProfile, configs: &[SegmentConfig]) -> Result<SourcedProfile> {
    let mut points = Vec::new();
    let mut out_of_memory = Vec::new();
    for &config in configs {
        match truth.points().iter().find(|p| p.point.config == config) {
            Some(point) => points.push(SourcedPoint { point: point.point, source: PointSource::Measured }),
            None => out_of_memory.push(config),
        }
    }
    Ok(SourcedProfile::new(truth.gpu_model, truth.model.as_str(), points, out_of_memory)?)
}

/// Each model keeps `budget` configurations of the grid drawn uniformly
/// without replacement (seeded per model).
fn random_subset(
    truth: &[SourcedProfile],
    grid: &ProfileGrid,
    budget: usize,
    seed: u64,
) -> Result<Vec<SourcedProfile>> {
    let configs = grid.configs(GPU)?;
    truth
        .iter()
        .enumerate()
        .map(|(index, profile)| {
            let mut rng = SplitMix64::new(seed.wrapping_mul(1_000_003).wrapping_add(index as u64));
            let mut pool = configs.clone();
            let mut chosen = Vec::with_capacity(budget);
            while chosen.len() < budget && !pool.is_empty() {
                chosen.push(pool.swap_remove(rng.below(pool.len())));
            }
            reveal(profile, &chosen)
        })
        .collect()
}

/// Each model keeps the configurations `suggest` picks: a start of
/// [`SEED_POINTS`], then rounds of [`SUGGEST_ROUND`], each round measured
/// (revealed) before the next.
fn suggested_subset(truth: &[SourcedProfile], grid: &ProfileGrid, budget: usize) -> Result<Vec<SourcedProfile>> {
    let mut chosen: BTreeMap<String, Vec<SegmentConfig>> = BTreeMap::new();
    let mut partial: Vec<SourcedProfile> = truth
        .iter()
        .map(|p| SourcedProfile::new(GPU, p.model.as_str(), Vec::new(), Vec::new()))
        .collect::<Result<_, _>>()?;
    loop {
        let taken = chosen.values().map(Vec::len).min().unwrap_or(0);
        if taken >= budget {
            return Ok(partial);
        }
        let round = if taken == 0 { SEED_POINTS } else { SUGGEST_ROUND }.min(budget - taken);
        let request = CompletionRequest { gpu_model: GPU, profiles: &partial, grid, method: CompletionMethod::Model };
        let suggestions = suggest_measurements(&request, round)?;
        if suggestions.is_empty() {
            return Ok(partial);
        }
        for suggestion in suggestions {
            chosen.entry(suggestion.model).or_default().push(suggestion.config);
        }
        for profile in truth {
            chosen.entry(profile.model.clone()).or_default();
        }
        partial = truth.iter().map(|p| reveal(p, &chosen[&p.model])).collect::<Result<_>>()?;
        if chosen.values().map(Vec::len).min().unwrap_or(0) == taken {
            return Ok(partial);
        }
    }
}

/// Completes `partial`, measures the completion against `truth` and adds
/// the run to `result`.
fn evaluate(
    truth: &[SourcedProfile],
    catalog: &ProfileCatalog,
    partial: &[SourcedProfile],
    grid: &ProfileGrid,
    scenarios: &[Vec<ServiceSlo>],
    result: &mut RunResult,
) -> Result<()> {
    let complete = |method| complete_profiles(&CompletionRequest { gpu_model: GPU, profiles: partial, grid, method });
    let completions = complete(CompletionMethod::Model)?;
    let baseline = complete(CompletionMethod::Interpolation)?;
    result.runs += 1;
    result.measured_points += partial.iter().map(|p| p.points().len() + p.out_of_memory().len()).sum::<usize>();
    for ((model, base), truth) in completions.iter().zip(&baseline).zip(truth) {
        score(model, truth, result, false);
        score(base, truth, result, true);
    }
    let mut gpus = Vec::with_capacity(scenarios.len());
    let completed: ProfileCatalog = completions.iter().map(|c| c.profile.planning_profile()).collect();
    for services in scenarios {
        match optimal_under_parva(&completed, services) {
            Ok(plan) => {
                gpus.push(Some(plan.gpu_count));
                let check = VerifyRequest {
                    catalog,
                    services,
                    rule: LatencyRule::Parva,
                    arrivals: &ArrivalModel::Poisson,
                    max_procs: DEFAULT_MAX_PROCS,
                    margin: 0.0,
                };
                result.violations +=
                    verify(&plan, &check).iter().filter(|v| !matches!(v, Violation::WrongValue { .. })).count();
            }
            Err(_) => gpus.push(None),
        }
    }
    result.gpus.push(gpus);
    Ok(())
}

/// Adds one model's prediction errors, coverage and memory mistakes.
fn score(completion: &ModelCompletion, truth: &SourcedProfile, result: &mut RunResult, baseline: bool) {
    for prediction in &completion.predictions {
        let actual = truth.points().iter().find(|p| p.point.config == prediction.config).map(|p| p.point);
        let relative = |predicted: f64, actual: f64| 100.0 * (predicted / actual - 1.0).abs();
        match actual {
            Some(actual) if baseline => {
                result
                    .baseline_throughput_errors
                    .push(relative(prediction.throughput_rps.estimate, actual.throughput_rps));
                result.baseline_latency_errors.push(relative(prediction.latency_ms.estimate, actual.latency_ms));
            }
            Some(actual) => {
                result.held_out += 1;
                result.throughput_errors.push(relative(prediction.throughput_rps.estimate, actual.throughput_rps));
                result.latency_errors.push(relative(prediction.latency_ms.estimate, actual.latency_ms));
                result.throughput_covered += usize::from(prediction.throughput_rps.covers(actual.throughput_rps));
                result.latency_covered += usize::from(prediction.latency_ms.covers(actual.latency_ms));
                if prediction.feasibility != Feasibility::Fits {
                    result.fitting_not_assumed += 1;
                }
            }
            None if !baseline && prediction.feasibility == Feasibility::Fits => result.assumed_but_out_of_memory += 1,
            None => {}
        }
    }
}

/// The `q`-quantile of `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n => sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

fn render(
    bench: &ProfilesBench<'_>,
    full: &[Option<usize>],
    grid_size: usize,
    models: usize,
    rows: &[(u32, &str, RunResult)],
) -> Result<()> {
    let count_text = |gpus: Option<usize>| gpus.map_or("-".to_string(), |g| g.to_string());
    let title = format!(
        "ParvaGPU's {models} models on {GPU}, {grid_size} configurations per model; plans: optimal strategy, parva \
         rule, scenarios 1-6; full grid: {} GPUs; random subsets: seeds 1-{}",
        full.iter().map(|&g| count_text(g)).collect::<Vec<_>>().join(", "),
        bench.seeds
    );
    outln!("{}", wrap_words(&title, "", ""))?;
    let mut prediction = TextTable::new(&[
        "budget",
        "subset",
        "points per model",
        "throughput error % median/p90",
        "latency error % median/p90",
        "baseline error % median thr/lat",
        "coverage % thr/lat",
        "memory wrong",
    ]);
    let mut header = vec!["budget", "subset"];
    let scenario_names: Vec<String> = (1..=full.len()).map(|k| format!("GPUs {k}")).collect();
    header.extend(scenario_names.iter().map(String::as_str));
    header.extend(["most extra", "runs ≥ 5 of 6", "SLO misses"]);
    let mut planning = TextTable::new(&header);
    for (percent, subset, result) in rows {
        let runs = result.runs.max(1);
        let extra = |run: &[Option<usize>]| {
            run.iter().zip(full).filter_map(|(got, full)| Some(*got.as_ref()? as i64 - *full.as_ref()? as i64)).max()
        };
        let most_extra = result.gpus.iter().filter_map(|run| extra(run)).max().unwrap_or(0);
        let on_goal = result
            .gpus
            .iter()
            .filter(|run| run.iter().zip(full).filter(|(got, full)| got == full).count() >= 5)
            .count();
        let pair = |values: &[f64]| format!("{:.1} / {:.1}", quantile(values, 0.5), quantile(values, 0.9));
        prediction.row(vec![
            format!("{percent}%"),
            subset.to_string(),
            format!("{:.0}", result.measured_points as f64 / (models * runs) as f64),
            pair(&result.throughput_errors),
            pair(&result.latency_errors),
            format!(
                "{:.1} / {:.1}",
                quantile(&result.baseline_throughput_errors, 0.5),
                quantile(&result.baseline_latency_errors, 0.5)
            ),
            format!(
                "{:.0} / {:.0}",
                100.0 * result.throughput_covered as f64 / result.held_out.max(1) as f64,
                100.0 * result.latency_covered as f64 / result.held_out.max(1) as f64
            ),
            format!("{} / {}", result.assumed_but_out_of_memory / runs, result.fitting_not_assumed / runs),
        ]);
        let mut cells = vec![format!("{percent}%"), subset.to_string()];
        cells.extend((0..full.len()).map(|k| {
            let counts: Vec<Option<usize>> = result.gpus.iter().map(|run| run[k]).collect();
            let (low, high) = (counts.iter().min().copied().flatten(), counts.iter().max().copied().flatten());
            if low == high {
                count_text(low)
            } else {
                format!("{}-{}", count_text(low), count_text(high))
            }
        }));
        cells.extend([format!("{most_extra:+}"), format!("{on_goal}/{}", result.runs), result.violations.to_string()]);
        planning.row(cells);
    }
    out!("{}", prediction.render())?;
    outln!(
        "{}",
        wrap_words(
            "errors and interval coverage on every held-out configuration that fits; baseline: plain interpolation in \
             log space; memory wrong, per run: configurations assumed to fit that run out of memory / that fit but are \
             not assumed to",
            "",
            ""
        )
    )?;
    out!("{}", planning.render())?;
    outln!(
        "{}",
        wrap_words(
            "GPUs k: scenario k, the range over runs; most extra: over the full grid's count in any scenario and \
             run; runs ≥ 5 of 6: runs whose count equals the full grid's in at least five scenarios; SLO misses: \
             violations of every run's plans, verified on the full measured profiles",
            "",
            ""
        )
    )?;
    let mut saved =
        TextTable::new(&["budget", "points/model", "profiling per model", "saved per model", "saved, all models"]);
    for &percent in bench.budgets_percent {
        let points = ((f64::from(percent) / 100.0 * grid_size as f64).round() as usize).clamp(1, grid_size);
        let hours = |points: usize| points as f64 * bench.seconds_per_point / 3600.0;
        saved.row(vec![
            format!("{percent}%"),
            points.to_string(),
            format!("{:.2} h", hours(points)),
            format!("{:.2} h", hours(grid_size - points)),
            format!("{:.1} h", hours(grid_size - points) * models as f64),
        ]);
    }
    let elapsed: f64 = rows.iter().map(|(_, _, result)| result.elapsed.as_secs_f64()).sum();
    outln!("completing, planning and verifying took {elapsed:.1} s")?;
    outln!(
        "profiling time at {} s per point (the full grid: {:.2} h per model)",
        bench.seconds_per_point,
        grid_size as f64 * bench.seconds_per_point / 3600.0
    )?;
    out!("{}", saved.render())?;
    Ok(())
}
