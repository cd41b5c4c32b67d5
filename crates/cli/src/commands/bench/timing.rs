//! `tessera bench plan`: planning time on ParvaGPU's scenarios and the demo,
//! for `parva` and `optimal` under ParvaGPU's latency rule and `optimal`
//! under the queueing rule.
//!
//! Times only the planner (inputs are loaded once, outside the timing) and
//! reports the median and minimum over repetitions, plus the GPUs used and
//! whether the count is proven optimal.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use tessera_core::{GpuModel, Plan, ProfileCatalog};
use tessera_plan::{plan, LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy};
use tessera_store::{read_profile_dir, read_slo_scenario};

use crate::output::{note, out, outln};
use crate::table::TextTable;

/// ParvaGPU's SLO files hold six scenarios.
const PARVAGPU_SCENARIOS: usize = 6;

pub fn run(parvagpu: &Path, iterations: u32) -> Result<()> {
    let mut inputs: Vec<(String, PlanInputs)> =
        vec![("demo (synthetic)".to_string(), PlanInputs::demo(&[GpuModel::A100_80GB])?)];
    if parvagpu.join("prof_data").is_dir() {
        inputs.extend(parvagpu_scenarios(parvagpu)?);
    } else {
        note(format_args!("{} is absent; timing the built-in demo only", parvagpu.display()));
    }
    let mut table = TextTable::new(&["input", "services", "strategy", "rule", "GPUs", "proven", "median µs", "min µs"]);
    let runs = [
        (Strategy::Parva, LatencyRule::Parva),
        (Strategy::Optimal, LatencyRule::Parva),
        (Strategy::Optimal, LatencyRule::Queueing),
    ];
    for (name, inputs) in &inputs {
        for (strategy, rule) in runs {
            let request = PlanRequest { strategy, rule: Some(rule), time_limit: None, ..PlanRequest::new(inputs) };
            let (plan, times) = time_plans(&request, iterations)?;
            let proven = plan.optimality.as_ref().map_or("-", |o| if o.proven_optimal { "yes" } else { "no" });
            table.row(vec![
                name.clone(),
                inputs.services().len().to_string(),
                strategy.to_string(),
                rule.name().to_string(),
                plan.gpu_count.to_string(),
                proven.to_string(),
                format!("{:.1}", micros(times[times.len() / 2])),
                format!("{:.1}", micros(times[0])),
            ]);
        }
    }
    outln!("a100-80gb, up to 5 processes, {} each", tessera_core::text::count(iterations as usize, "run"))?;
    out!("{}", table.render())?;
    Ok(())
}

fn parvagpu_scenarios(dir: &Path) -> Result<Vec<(String, PlanInputs)>> {
    let catalog: ProfileCatalog = read_profile_dir(&dir.join("prof_data"), GpuModel::A100_80GB)?.catalog();
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let (rates, latency) = (dir.join("slo/SLO_req_rate.csv"), dir.join("slo/SLO_latency.csv"));
    (1..=PARVAGPU_SCENARIOS)
        .map(|k| {
            let services = read_slo_scenario(&rates, &latency, k, &models)?;
            let inputs = PlanInputs::new(services, catalog.clone(), ProfileOrigin::Measured, &[GpuModel::A100_80GB])?;
            Ok((format!("parvagpu scenario {k}"), inputs))
        })
        .collect()
}

/// Plans `iterations` times; returns the plan and the sorted durations.
fn time_plans(request: &PlanRequest<'_>, iterations: u32) -> Result<(Plan, Vec<Duration>)> {
    let mut times = Vec::with_capacity(iterations as usize);
    let mut last = None;
    for _ in 0..iterations {
        let start = Instant::now();
        let made = plan(request)?.plan;
        times.push(start.elapsed());
        last = Some(made);
    }
    times.sort();
    Ok((last.expect("at least one iteration"), times))
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
