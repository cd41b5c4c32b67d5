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
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan_optimal, plan_parva, LatencyRule, PlanError, PlanRequest};
use tessera_store::{read_profile_dir, read_slo_scenario};

use crate::output::{note, out, outln};
use crate::table::TextTable;

/// ParvaGPU's SLO files hold six scenarios.
const PARVAGPU_SCENARIOS: usize = 6;

pub fn run(parvagpu: &Path, iterations: u32) -> Result<()> {
    let mut inputs: Vec<(String, ProfileCatalog, Vec<ServiceSlo>)> =
        vec![("demo (synthetic)".to_string(), builtin_catalog(), demo_services())];
    if parvagpu.join("prof_data").is_dir() {
        inputs.extend(parvagpu_scenarios(parvagpu)?);
    } else {
        note(format_args!("{} is absent; timing the built-in demo only", parvagpu.display()));
    }
    let mut table = TextTable::new(&["input", "services", "strategy", "rule", "GPUs", "proven", "median µs", "min µs"]);
    let runs: [(&str, Planner, LatencyRule); 3] = [
        ("parva", plan_parva, LatencyRule::Parva),
        ("optimal", plan_optimal, LatencyRule::Parva),
        ("optimal", plan_optimal, LatencyRule::Queueing),
    ];
    for (name, catalog, services) in &inputs {
        for (strategy, planner, rule) in runs {
            let request = PlanRequest { rule, ..PlanRequest::new(GpuModel::A100_80GB, catalog, services) };
            let (plan, times) = time_plans(planner, &request, iterations)?;
            let proven = plan.optimality.as_ref().map_or("-", |o| if o.proven_optimal { "yes" } else { "no" });
            table.row(vec![
                name.clone(),
                services.len().to_string(),
                strategy.to_string(),
                rule.name().to_string(),
                plan.gpu_count.to_string(),
                proven.to_string(),
                format!("{:.1}", micros(times[times.len() / 2])),
                format!("{:.1}", micros(times[0])),
            ]);
        }
    }
    outln!("a100-80gb, up to 5 processes, {iterations} runs each")?;
    out!("{}", table.render())?;
    Ok(())
}

fn parvagpu_scenarios(dir: &Path) -> Result<Vec<(String, ProfileCatalog, Vec<ServiceSlo>)>> {
    let catalog: ProfileCatalog = read_profile_dir(&dir.join("prof_data"), GpuModel::A100_80GB)?.catalog();
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let (rates, latency) = (dir.join("slo/SLO_req_rate.csv"), dir.join("slo/SLO_latency.csv"));
    (1..=PARVAGPU_SCENARIOS)
        .map(|k| {
            let services = read_slo_scenario(&rates, &latency, k, &models)?;
            Ok((format!("parvagpu scenario {k}"), catalog.clone(), services))
        })
        .collect()
}

/// A planning strategy.
type Planner = fn(&PlanRequest<'_>) -> Result<Plan, PlanError>;

/// Plans `iterations` times; returns the plan and the sorted durations.
fn time_plans(planner: Planner, request: &PlanRequest<'_>, iterations: u32) -> Result<(Plan, Vec<Duration>)> {
    let mut times = Vec::with_capacity(iterations as usize);
    let mut plan = None;
    for _ in 0..iterations {
        let start = Instant::now();
        let made = planner(request)?;
        times.push(start.elapsed());
        plan = Some(made);
    }
    times.sort();
    Ok((plan.expect("at least one iteration"), times))
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
