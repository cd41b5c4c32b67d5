//! `tessera bench slo`: plans judged by the traffic they meet, on a GPU as
//! fast as profiled and on GPUs a little slower.
//!
//! Every plan is made for the services' rates (or, for the uniform-headroom
//! baseline, for every rate times `1 + h`), then simulated request by
//! request at the services' real rates: under Poisson arrivals with every
//! batch as fast as profiled, 3% and 5% slower; and at the profiled speed
//! under a renewal process with coefficient of variation 2 and a
//! production trace scaled to each service's rate. Columns: GPUs; per
//! Poisson speed the share of all requests within their SLO, the worst
//! service's share and the worst service's one-minute window attainment
//! that 95% of its windows reach; the same two shares under the bursty
//! arrivals; the worst gap between a service's planned and simulated
//! percentile latency (plans that predict one); planning time. The
//! simulation is tessera-serving's: random routing to segments by the
//! plan's capacities, a FIFO queue per MPS process, greedy dynamic
//! batching.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{
    plan, Arrivals, LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy, DEFAULT_MARGIN, DEFAULT_TIME_LIMIT,
};
use tessera_serving::{simulate, ArrivalModel, ServingReport, ServingSystem, SimulationOptions};
use tessera_store::{read_profile_dir, read_slo_scenario};

use super::scale::{catalogue, parvagpu_family};
use crate::commands::serving::read_arrivals;
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

/// Slowdowns of every batch the Poisson simulations run at: the profiled
/// speed, 3% and 5% slower.
const SLOWDOWNS: [f64; 3] = [0.0, 0.03, 0.05];

/// Margins the percentile rule plans with, beside its default.
const MARGINS: [f64; 3] = [0.0, 0.02, 0.05];

/// Uniform headrooms of the baseline, percent: every rate planned this
/// much higher under the percentile rule at margin 0.
const HEADROOMS_PERCENT: [u32; 4] = [3, 5, 10, 20];

/// Length of the windows each service is judged in, seconds.
const WINDOW_S: f64 = 60.0;

/// One way of making a plan.
struct Variant {
    name: String,
    strategy: Strategy,
    rule: LatencyRule,
    /// The robustness margin asked (`None`: the rule's default).
    margin: Option<f64>,
    /// Rates are planned at `1 + headroom` times the real ones.
    headroom: f64,
}

/// The plans compared: ParvaGPU's; the optimum under each rule, under the
/// percentile rule with each margin; and the optimum at margin 0 with
/// uniform headroom.
fn variants() -> Vec<Variant> {
    let variant = |name: String, strategy, rule, margin, headroom| Variant { name, strategy, rule, margin, headroom };
    let mut variants = vec![variant("parva".into(), Strategy::Parva, LatencyRule::Parva, None, 0.0)];
    for rule in LatencyRule::ALL {
        if rule == LatencyRule::Percentile {
            for margin in MARGINS {
                let name = format!("optimal, {rule}, margin {}", percent_of(margin));
                variants.push(variant(name, Strategy::Optimal, rule, Some(margin), 0.0));
            }
            let name = format!("optimal, {rule}, margin {} (default)", percent_of(DEFAULT_MARGIN));
            variants.push(variant(name, Strategy::Optimal, rule, None, 0.0));
        } else {
            variants.push(variant(format!("optimal, {rule}"), Strategy::Optimal, rule, None, 0.0));
        }
    }
    for headroom in HEADROOMS_PERCENT {
        let name = format!("optimal, percentile, margin 0%, +{headroom}%");
        let headroom = f64::from(headroom) / 100.0;
        variants.push(variant(name, Strategy::Optimal, LatencyRule::Percentile, Some(0.0), headroom));
    }
    variants
}

/// One input: services over profiles.
struct Case {
    name: String,
    inputs: PlanInputs,
    seconds: f64,
}

/// One simulation of every plan: its arrivals and batch slowdown.
struct Run {
    arrivals: ArrivalModel,
    slowdown: f64,
}

impl Run {
    /// The column names' prefix.
    fn label(&self) -> String {
        match (&self.arrivals, self.slowdown) {
            (ArrivalModel::Poisson, 0.0) => "profiled".to_string(),
            (ArrivalModel::Poisson, slowdown) => format!("+{}", percent_of(slowdown)),
            (ArrivalModel::Trace { .. }, _) => "trace".to_string(),
            (other, _) => other.to_string(),
        }
    }

    /// Whether the run reports window attainment.
    fn windowed(&self) -> bool {
        self.arrivals == ArrivalModel::Poisson
    }
}

pub fn run(bench: &SloBench<'_>) -> Result<()> {
    let cases = cases(bench)?;
    let runs = runs(bench)?;
    let variants = variants();
    let progress = Progress::bar((cases.len() * variants.len()) as u64, "plans", String::new());
    let mut header = vec!["input".to_string(), "plan".to_string(), "GPUs".to_string()];
    for run in &runs {
        header.push(format!("{} all %", run.label()));
        header.push(format!("{} worst %", run.label()));
        if run.windowed() {
            header.push(format!("{} win95 %", run.label()));
        }
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
                    let (system, _) = ServingSystem::from_plan(&made, Some(case.inputs.catalog()), DEFAULT_PERCENTILE)?;
                    let mut gap = None;
                    for run in &runs {
                        let options = SimulationOptions {
                            arrivals: run.arrivals.clone(),
                            slowdown: run.slowdown,
                            seconds: case.seconds,
                            warmup_s: case.seconds / 6.0,
                            window_s: (run.windowed() && case.seconds / 6.0 + WINDOW_S <= case.seconds)
                                .then_some(WINDOW_S),
                            seed: bench.seed,
                            ..SimulationOptions::default()
                        };
                        let started = Instant::now();
                        let report = simulate(&system, &options)?;
                        simulated_wall += started.elapsed();
                        simulated_requests += report.requests_simulated;
                        row.push(percent(report.attainment));
                        row.push(percent(report.worst.as_ref().map(|worst| worst.attainment)));
                        if run.windowed() {
                            row.push(percent(worst_window_p5(&report)));
                        }
                        if made.traffic.is_some() && run.arrivals == ArrivalModel::Poisson && run.slowdown == 0.0 {
                            gap = Some(worst_gap(&system, &report)?);
                        }
                    }
                    row.push(gap.map_or_else(|| "-".to_string(), |gap| format!("{:.2}", 100.0 * gap)));
                    row.push(format!("{:.2}", planning.as_secs_f64()));
                }
                Err(error) => {
                    row.push(format!("no plan: {error}"));
                    row.extend(std::iter::repeat_n("-".to_string(), header.len() - 3));
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
         profiled, +3%, +5% = Poisson arrivals with every batch as fast as profiled, 3% and 5% slower; win95 % = \
         the worst service's attainment in {WINDOW_S} s windows that 95% of its windows reach (- without a whole \
         window); margin m = capacities with every batch m slower; +h% = every rate planned at 1 + h times; \
         cv=2 and trace at the profiled speed: renewal arrivals with coefficient of variation 2, and the trace \
         scaled to each service's rate",
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

/// The simulations every plan gets: Poisson at each slowdown, then
/// coefficient of variation 2 and the trace (when readable) at the
/// profiled speed.
fn runs(bench: &SloBench<'_>) -> Result<Vec<Run>> {
    let mut runs: Vec<Run> =
        SLOWDOWNS.iter().map(|&slowdown| Run { arrivals: ArrivalModel::Poisson, slowdown }).collect();
    runs.push(Run { arrivals: ArrivalModel::Renewal { cv: 2.0 }, slowdown: 0.0 });
    match read_arrivals(&Arrivals::TraceFile(bench.trace.to_path_buf())) {
        Ok(arrivals) => runs.push(Run { arrivals, slowdown: 0.0 }),
        Err(error) => note(format_args!("{error:#}; the trace columns are left out")),
    }
    Ok(runs)
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
    let request = PlanRequest {
        strategy: variant.strategy,
        rule: Some(variant.rule),
        margin: variant.margin,
        ..PlanRequest::new(&inputs)
    };
    let started = Instant::now();
    let mut made = plan(&request)?.plan;
    let planning = started.elapsed();
    for (report, slo) in made.services.iter_mut().zip(case.inputs.services()) {
        report.rate_rps = slo.rate_rps;
    }
    Ok((made, planning))
}

/// The worst relative gap between a service's planned percentile latency
/// (the analytic model's) and its simulated one, over services whose
/// percentile the simulation reports (99) and that had requests.
fn worst_gap(system: &ServingSystem, report: &ServingReport) -> Result<f64> {
    let mut worst: f64 = 0.0;
    for (service, outcome) in report.services.iter().enumerate() {
        let Some(measures) = &outcome.measures else { continue };
        if outcome.percentile != 99.0 {
            continue;
        }
        let planned = system.predict(service)?.latency_ms;
        worst = worst.max((planned - measures.p99_ms).abs() / measures.p99_ms);
    }
    Ok(worst)
}

/// The least, over services with windows, of the attainment 95% of a
/// service's windows reach; `None` without windows.
fn worst_window_p5(report: &ServingReport) -> Option<f64> {
    report
        .services
        .iter()
        .filter_map(|outcome| outcome.windows.as_ref().and_then(|windows| windows.p5_attainment))
        .reduce(f64::min)
}

/// A share as a percentage with two decimals, or `-`.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |share| format!("{:.2}", 100.0 * share))
}

/// A share as a whole percentage when it is one (`6%`), else with one
/// decimal (`2.5%`).
fn percent_of(share: f64) -> String {
    let percent = 100.0 * share;
    if (percent - percent.round()).abs() < 1e-9 {
        format!("{percent:.0}%")
    } else {
        format!("{percent:.1}%")
    }
}
