//! `tessera bench long-tail`: long-tail catalogues (a few heavy services,
//! many light ones) planned with dedicated segments only and with shared
//! instances, each plan simulated request by request with every batch 5%
//! slower than profiled.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tessera_core::rng::SplitMix64;
use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::{GpuModel, Plan, ServiceSlo, Sharing};
use tessera_plan::{plan, PlanInputs, PlanRequest, ProfileOrigin};
use tessera_serving::{simulate, ServingSystem, SimulationOptions};

use super::scale::parvagpu_family;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// The slowdown every simulated batch runs at (5% slower than profiled).
const SLOWDOWN: f64 = 0.05;

/// What to measure.
pub struct LongTailBench<'a> {
    /// ParvaGPU's data folder.
    pub parvagpu: &'a Path,
    /// Catalogue sizes, services.
    pub sizes: &'a [usize],
    /// The heaviest service's rate, req/s.
    pub head_rps: f64,
    /// How fast rates fall: service `i` (from 0) runs at
    /// `max(1, round(head / (i + 1)^exponent))` req/s.
    pub exponent: f64,
    /// Seed of the models drawn and of the simulations.
    pub seed: u64,
    /// Simulated seconds per plan.
    pub seconds: f64,
}

/// `n` services over `models` (each with its latency SLO, ms): service `i`
/// runs a model drawn at random at `max(1, round(head / (i + 1)^exponent))`
/// req/s.
pub(super) fn long_tail(
    models: &[(String, f64)],
    n: usize,
    head_rps: f64,
    exponent: f64,
    seed: u64,
) -> Vec<ServiceSlo> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|i| {
            let (model, slo_ms) = &models[rng.below(models.len())];
            let rate_rps = (head_rps / ((i + 1) as f64).powf(exponent)).round().max(1.0);
            ServiceSlo::new(format!("svc{i:05}"), model.clone(), rate_rps, *slo_ms)
                .expect("a long-tail service has a name, a model and positive figures")
        })
        .collect()
}

pub fn run(bench: &LongTailBench<'_>) -> Result<()> {
    let family = parvagpu_family(bench.parvagpu)
        .with_context(|| format!("bench long-tail needs ParvaGPU's data ({})", bench.parvagpu.display()))?;
    let models: Vec<(String, f64)> = family.base.iter().map(|slo| (slo.model.clone(), slo.latency_slo_ms)).collect();
    let gpu = [GpuModel::A100_80GB];
    let mut table = TextTable::new(&[
        "services",
        "plan",
        "GPUs",
        "saved",
        "bound",
        "sharing",
        "instances",
        "plan s",
        "all %",
        "worst %",
        "worst",
    ]);
    let progress = Progress::bar(2 * bench.sizes.len() as u64, "plans", String::new());
    let mut dedicated_gpus = 0;
    for &size in bench.sizes {
        let services = long_tail(&models, size, bench.head_rps, bench.exponent, bench.seed);
        let inputs = PlanInputs::new(services, family.catalog.clone(), ProfileOrigin::Measured, &gpu)?;
        for share in [None, Some(Sharing::Serialized)] {
            progress.set_message(format!("{size} services, {}", if share.is_some() { "shared" } else { "dedicated" }));
            let started = Instant::now();
            let made = plan(&PlanRequest { share, ..PlanRequest::new(&inputs) })?.plan;
            let planning = started.elapsed();
            let (all, worst, worst_name) = simulated(&made, &inputs, bench)?;
            let sharing: usize = made.shared_instances().map(|(_, i)| i.members.len()).sum();
            if share.is_none() {
                dedicated_gpus = made.gpu_count;
            }
            table.row(vec![
                size.to_string(),
                if share.is_some() { "shared" } else { "dedicated" }.to_string(),
                made.gpu_count.to_string(),
                format!("{:.0}%", 100.0 * (1.0 - made.gpu_count as f64 / dedicated_gpus.max(1) as f64)),
                made.optimality.as_ref().map_or_else(|| "-".to_string(), |o| format!("{:.0}", o.lower_bound)),
                sharing.to_string(),
                made.shared_instances().count().to_string(),
                seconds(planning),
                format!("{:.3}", 100.0 * all),
                format!("{:.2}", 100.0 * worst),
                worst_name,
            ]);
            progress.step();
        }
    }
    drop(progress);
    let legend = format!(
        "long-tail catalogues over ParvaGPU's A100-80GB profiles: service i runs a model drawn at random (seed {}) \
         with scenario 6's latency SLO for it, at max(1, round({} / (i + 1)^{})) req/s; optimal strategy, \
         percentile rule (p99), Poisson arrivals, the default margin; dedicated = every service on segments of its \
         own, shared = --share serialized; saved = GPUs fewer than dedicated; bound = the planner's lower bound (for shared: given which services \
         share); sharing = services in shared instances; plan s = planning time on this machine; all %, worst % = \
         requests within SLO in a request-level simulation of {} s (a sixth warm-up) with every batch {:.0}% slower \
         than profiled: all requests, the worst service (and its name)",
        bench.seed,
        bench.head_rps,
        bench.exponent,
        bench.seconds,
        100.0 * SLOWDOWN
    );
    outln!("{}", wrap_words(&legend, "", ""))?;
    out!("{}", table.render())
}

/// The share of `made`'s requests within SLO, its worst service's share
/// and name, simulated with every batch [`SLOWDOWN`] slower.
fn simulated(made: &Plan, inputs: &PlanInputs, bench: &LongTailBench<'_>) -> Result<(f64, f64, String)> {
    let (system, _) = ServingSystem::from_plan(made, Some(inputs.catalog()), DEFAULT_PERCENTILE)?;
    let options = SimulationOptions {
        seconds: bench.seconds,
        warmup_s: bench.seconds / 6.0,
        seed: bench.seed,
        slowdown: SLOWDOWN,
        ..SimulationOptions::default()
    };
    let report = simulate(&system, &options)?;
    let worst = report.worst.as_ref();
    Ok((
        report.attainment.unwrap_or(1.0),
        worst.map_or(1.0, |worst| worst.attainment),
        worst.map_or_else(
            || "-".to_string(),
            |worst| {
                let member = made.shared_instances().any(|(_, i)| i.members.iter().any(|m| m.service == worst.name));
                format!("{}{}", worst.name, if member { " (shared)" } else { "" })
            },
        ),
    ))
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.2}", elapsed.as_secs_f64())
}
