//! `tessera bench slo`: plans judged by the traffic they meet.
//!
//! Every plan is made for the services' rates (or, for the uniform-headroom
//! baseline, for every rate times `1 + h`), then simulated request by
//! request at the services' real rates under Poisson arrivals, a renewal
//! process with coefficient of variation 2, and a production trace scaled
//! to each service's rate. Columns: GPUs; the share of all requests within
//! their SLO and the worst service's share under each arrival process; the
//! worst gap between a service's planned and simulated percentile latency
//! (plans that predict one); planning time. The simulation is
//! tessera-serving's: random routing to segments by the plan's capacities,
//! a FIFO queue per MPS process, greedy dynamic batching.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan, LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy, DEFAULT_TIME_LIMIT};
use tessera_serving::{simulate, ArrivalModel, ServingReport, ServingSystem, SimulationOptions};
use tessera_store::{read_arrival_trace, read_profile_dir, read_slo_scenario};

use super::scale::{catalogue, parvagpu_family};
use crate::output::{note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// What the bench is asked.
pub struct SloBench<'a> {
    /// ParvaGPU's data folder.
    pub parvagpu: &'a Path,
    /// The arrival trace (a CSV with a TIMESTAMP column).
    pub trace: &'a Path,
    /// ParvaGPU's scenarios to plan (1 to 6).
    pub scenarios: &'a [u8],
    /// Reference catalogue sizes (services), built as `bench scale` builds them.
    pub sizes: &'a [usize],
    /// Simulated seconds per scenario (the catalogues get a tenth).
    pub seconds: f64,
    /// Seed of the catalogues and the simulations.
    pub seed: u64,
}

/// One way of making a plan.
struct Variant {
    name: String,
    strategy: Strategy,
    rule: LatencyRule,
    /// Rates are planned at `1 + headroom` times the real ones.
    headroom: f64,
}

/// The plans compared: ParvaGPU's, the optimum under each rule, and the
/// optimum under the default rule with uniform headroom.
fn variants() -> Vec<Variant> {
    let variant = |name: &str, strategy, rule, headroom| Variant { name: name.to_string(), strategy, rule, headroom };
    let mut variants = vec![variant("parva", Strategy::Parva, LatencyRule::Parva, 0.0)];
    for rule in LatencyRule::ALL {
        variants.push(variant(&format!("optimal, {rule}"), Strategy::Optimal, rule, 0.0));
    }
    for percent in [5, 10, 20, 40] {
        let name = format!("optimal, queueing, +{percent}%");
        variants.push(variant(&name, Strategy::Optimal, LatencyRule::Queueing, f64::from(percent) / 100.0));
    }
    variants
}

/// One input: services over profiles.
struct Case {
    name: String,
    inputs: PlanInputs,
    seconds: f64,
}

pub fn run(bench: &SloBench<'_>) -> Result<()> {
    let cases = cases(bench)?;
    let trace = read_arrival_trace(bench.trace).ok();
    if trace.is_none() {
        note(format_args!("{} is absent or unreadable; the trace column is left out", bench.trace.display()));
    }
    let mut arrivals = vec![ArrivalModel::Poisson, ArrivalModel::Renewal { cv: 2.0 }];
    if let Some(times) = trace {
        let name = bench.trace.file_name().map_or_else(|| "trace".to_string(), |n| n.to_string_lossy().into_owned());
        arrivals.push(ArrivalModel::trace(name, times)?);
    }
    let variants = variants();
    let progress = Progress::bar((cases.len() * variants.len()) as u64, "plans", String::new());
    let mut header = vec!["input".to_string(), "plan".to_string(), "GPUs".to_string()];
    for model in &arrivals {
        header.push(format!("{} all %", short(model)));
        header.push(format!("{} worst %", short(model)));
    }
    header.extend(["p99 gap %".to_string(), "plan s".to_string()]);
    let mut table = TextTable::new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    let mut simulated_requests = 0u64;
    let mut simulated_wall = Duration::ZERO;
    for case in &cases {
        for variant in &variants {
            progress.set_message(format!("{}: {}", case.name, variant.name));
            let mut row = vec![case.name.clone(), variant.name.clone()];
            match plan_case(case, variant) {
                Ok((made, planning)) => {
                    row.push(made.gpu_count.to_string());
                    for model in &arrivals {
                        let options = SimulationOptions {
                            arrivals: model.clone(),
                            seconds: case.seconds,
                            warmup_s: case.seconds / 6.0,
                            seed: bench.seed,
                            ..SimulationOptions::default()
                        };
                        let started = Instant::now();
                        let report = simulate_plan(&made, case.inputs.catalog(), &options)?;
                        simulated_wall += started.elapsed();
                        simulated_requests += report.requests_simulated;
                        row.push(percent(report.attainment));
                        row.push(percent(report.worst.as_ref().map(|worst| worst.attainment)));
                    }
                    row.push("-".to_string());
                    row.push(format!("{:.2}", planning.as_secs_f64()));
                }
                Err(error) => {
                    row.push(format!("no plan: {error}"));
                    row.extend(std::iter::repeat_n("-".to_string(), 2 * arrivals.len() + 2));
                }
            }
            table.row(row);
            progress.step();
        }
    }
    drop(progress);
    let legend = format!(
        "a100-80gb, up to 5 processes, optimal time limit {} s; plans simulated at the services' real rates \
         (random routing by capacity, a queue per MPS process, greedy batching), {} s per scenario and {} s per \
         catalogue (a sixth warm-up), seed {}; all % = requests within their SLO, worst % = the worst service's; \
         +h% = every rate planned at 1 + h times; cv=2 = renewal arrivals with coefficient of variation 2",
        DEFAULT_TIME_LIMIT.as_secs_f64(),
        bench.seconds,
        bench.seconds / 10.0,
        bench.seed
    );
    outln!("{}", wrap_words(&legend, "", ""))?;
    out!("{}", table.render())?;
    outln!(
        "simulated {} requests in {:.1} s: {:.1} M requests/s",
        simulated_requests,
        simulated_wall.as_secs_f64(),
        simulated_requests as f64 / simulated_wall.as_secs_f64().max(1e-9) / 1e6
    )
}

/// ParvaGPU's scenarios, then the reference catalogues.
fn cases(bench: &SloBench<'_>) -> Result<Vec<Case>> {
    let gpu = [GpuModel::A100_80GB];
    let profiles = bench.parvagpu.join("prof_data");
    let catalog: ProfileCatalog = read_profile_dir(&profiles, GpuModel::A100_80GB)
        .with_context(|| format!("bench slo needs ParvaGPU's data ({})", bench.parvagpu.display()))?
        .catalog();
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let slo = bench.parvagpu.join("slo");
    let mut cases = Vec::new();
    for &scenario in bench.scenarios {
        let services = read_slo_scenario(
            &slo.join("SLO_req_rate.csv"),
            &slo.join("SLO_latency.csv"),
            usize::from(scenario),
            &models,
        )?;
        let inputs = PlanInputs::new(services, catalog.clone(), ProfileOrigin::Measured, &gpu)?;
        cases.push(Case { name: format!("scenario {scenario}"), inputs, seconds: bench.seconds });
    }
    let sizes: Vec<usize> = bench.sizes.iter().copied().filter(|&size| size > 0).collect();
    if !sizes.is_empty() {
        let family = parvagpu_family(bench.parvagpu)?;
        for size in sizes {
            let services: Vec<ServiceSlo> = catalogue(&family.base, size, bench.seed);
            let inputs = PlanInputs::new(services, family.catalog.clone(), ProfileOrigin::Measured, &gpu)?;
            cases.push(Case { name: format!("{size} services"), inputs, seconds: bench.seconds / 10.0 });
        }
    }
    Ok(cases)
}

/// The plan of `case` by `variant`, with the services' real rates in its
/// report, and how long planning took.
fn plan_case(case: &Case, variant: &Variant) -> Result<(Plan, Duration)> {
    let scaled: Vec<ServiceSlo> = case
        .inputs
        .services()
        .iter()
        .map(|slo| ServiceSlo { rate_rps: slo.rate_rps * (1.0 + variant.headroom), ..slo.clone() })
        .collect();
    let inputs = case.inputs.for_services(scaled);
    let request = PlanRequest { strategy: variant.strategy, rule: Some(variant.rule), ..PlanRequest::new(&inputs) };
    let started = Instant::now();
    let mut made = plan(&request)?.plan;
    let planning = started.elapsed();
    for (report, slo) in made.services.iter_mut().zip(case.inputs.services()) {
        report.rate_rps = slo.rate_rps;
    }
    Ok((made, planning))
}

/// Simulates `plan` with partial batches from `catalog`.
fn simulate_plan(plan: &Plan, catalog: &ProfileCatalog, options: &SimulationOptions) -> Result<ServingReport> {
    let (system, _) = ServingSystem::from_plan(plan, Some(catalog), tessera_core::slo::DEFAULT_PERCENTILE)?;
    Ok(simulate(&system, options)?)
}

/// An arrival model's column name.
fn short(model: &ArrivalModel) -> String {
    match model {
        ArrivalModel::Trace { .. } => "trace".to_string(),
        other => other.to_string(),
    }
}

/// A share as a percentage with two decimals, or `-`.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |share| format!("{:.2}", 100.0 * share))
}
