//! `tessera bench scale`: both strategies on catalogues of many services,
//! each run as a whole `tessera plan` process.
//!
//! Catalogues are built the way the peer measurement built them: service
//! `i` runs the `i mod m`-th of `m` base models in alphabetical order, keeps
//! that model's latency SLO, and asks its base rate times a factor drawn
//! uniformly from [0.2, 3] (SplitMix64, fixed seed). The ParvaGPU catalogue
//! takes its base rates and SLOs from ParvaGPU's scenario 6; the synthetic
//! one from the built-in demo services (the first one of each model).
//!
//! Each run is timed from spawn to exit (loading, planning, writing the JSON
//! plan). Its peak resident memory is the child's own high-water mark
//! (`VmHWM`, written through the hidden `--peak-memory-report` option):
//! `wait4`'s `ru_maxrss` would also count the bench's own memory, which a
//! spawned child shares until it executes. The plan is then read back and
//! checked with the verifier, outside the timing.
//!
//! Beside each catalogue the bench solves the linear-programming relaxation
//! in-process (`relaxation_bound`, untimed): the LP bound that no plan can
//! beat, against which each plan's gap is shown, with whether the `optimal`
//! strategy proved its plan optimal; ParvaGPU's strategy runs beside it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_serving::ArrivalModel;

use anyhow::{bail, Context, Result};
use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{
    relaxation_bound, verify, LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy, VerifyRequest,
    MAX_GPUS_LIMIT,
};
use tessera_store::{read_profile_dir, read_slo_scenario};

use crate::output::{note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;

/// ParvaGPU's scenario whose objectives seed the catalogue.
const BASE_SCENARIO: usize = 6;

/// Range of the factor applied to each base rate.
const RATE_FACTOR: (f64, f64) = (0.2, 3.0);

/// The strategies measured under `rule` (`parva` implements only its own).
fn strategies(rule: LatencyRule) -> Vec<Strategy> {
    Strategy::ALL.into_iter().filter(|strategy| strategy.supports(rule)).collect()
}

/// One family of catalogues: base objectives, profiles, how to pass them.
pub(super) struct Family {
    pub(super) name: &'static str,
    pub(super) base: Vec<ServiceSlo>,
    pub(super) catalog: ProfileCatalog,
    profile_args: Vec<String>,
}

/// What one `tessera plan` process did.
struct Run {
    wall: Duration,
    peak_rss_kib: u64,
    plan: Plan,
}

pub fn run(parvagpu: &Path, sizes: &[usize], seed: u64, rule: LatencyRule, time_limit_s: f64) -> Result<()> {
    let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
    let mut families = Vec::new();
    if parvagpu.join("prof_data").is_dir() {
        families.push(parvagpu_family(parvagpu)?);
    } else {
        note(format_args!("{} is absent; measuring the synthetic catalogue only", parvagpu.display()));
    }
    families.push(synthetic_family());

    let runs = families.len() * sizes.len() * strategies(rule).len();
    let progress = Progress::bar(runs as u64, "runs", String::new());
    let mut table = TextTable::new(&[
        "catalogue",
        "services",
        "strategy",
        "GPUs",
        "LP bound",
        "gap %",
        "proven",
        "time s",
        "peak MiB",
        "SLOs met",
        "verified",
    ]);
    for family in &families {
        for &size in sizes {
            let services = catalogue(&family.base, size, seed);
            let slo_path = dir.path().join(format!("{}-{size}.csv", family.name));
            write_slo_csv(&slo_path, &services)?;
            let lp = {
                let gpu = [GpuModel::A100_80GB];
                let inputs = PlanInputs::new(services.clone(), family.catalog.clone(), ProfileOrigin::Measured, &gpu)?;
                let request = PlanRequest {
                    rule: Some(rule),
                    // Too long for a `Duration`: no limit, as in `tessera plan`.
                    time_limit: Duration::try_from_secs_f64(time_limit_s).ok(),
                    max_gpus: MAX_GPUS_LIMIT,
                    ..PlanRequest::new(&inputs)
                };
                relaxation_bound(&request)?
            };
            for strategy in strategies(rule) {
                progress.set_message(format!("{} × {size}: {strategy}", family.name));
                let plan_path = dir.path().join(format!("{}-{size}-{strategy}.json", family.name));
                let run = run_plan(family, &slo_path, &plan_path, strategy, rule, time_limit_s)?;
                progress.step();
                let request = VerifyRequest {
                    catalog: &family.catalog,
                    services: &services,
                    rule,
                    arrivals: &ArrivalModel::Poisson,
                    max_procs: 5,
                    margin: 0.0,
                };
                let violations = verify(&run.plan, &request);
                let met = run.plan.services.iter().filter(|s| s.met).count();
                let gpus = run.plan.gpu_count;
                table.row(vec![
                    family.name.to_string(),
                    size.to_string(),
                    strategy.to_string(),
                    gpus.to_string(),
                    format!("{:.2}{}", lp.value, if lp.optimal { "" } else { " (not converged)" }),
                    format!("{:.3}", (gpus as f64 / lp.value - 1.0) * 100.0),
                    match &run.plan.optimality {
                        Some(optimality) if optimality.proven_optimal => "yes".to_string(),
                        Some(_) => "no".to_string(),
                        None => "-".to_string(),
                    },
                    format!("{:.2}", run.wall.as_secs_f64()),
                    format!("{:.0}", run.peak_rss_kib as f64 / 1024.0),
                    format!("{met}/{}", services.len()),
                    if violations.is_empty() { "yes".to_string() } else { format!("NO ({})", violations.len()) },
                ]);
            }
        }
    }
    drop(progress);
    outln!(
        "latency rule {rule}, a100-80gb, up to 5 processes, seed {seed}, optimal time limit {time_limit_s} s; \
         LP bound = the linear-programming relaxation's optimum (no plan uses fewer GPUs), gap = GPUs above it"
    )?;
    out!("{}", table.render())?;
    Ok(())
}

pub(super) fn parvagpu_family(dir: &Path) -> Result<Family> {
    let profiles = dir.join("prof_data");
    let catalog: ProfileCatalog = read_profile_dir(&profiles, GpuModel::A100_80GB)?.catalog();
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let base =
        read_slo_scenario(&dir.join("slo/SLO_req_rate.csv"), &dir.join("slo/SLO_latency.csv"), BASE_SCENARIO, &models)?;
    Ok(Family {
        name: "parvagpu",
        base,
        catalog,
        profile_args: vec!["--profiles".to_string(), profiles.display().to_string()],
    })
}

pub(super) fn synthetic_family() -> Family {
    let mut base: Vec<ServiceSlo> = Vec::new();
    for service in demo_services() {
        if !base.iter().any(|b| b.model == service.model) {
            base.push(service);
        }
    }
    base.sort_by(|a, b| a.model.cmp(&b.model));
    Family { name: "synthetic", base, catalog: builtin_catalog(), profile_args: vec!["--demo".to_string()] }
}

/// `size` services over the base objectives (see the module docs).
pub(super) fn catalogue(base: &[ServiceSlo], size: usize, seed: u64) -> Vec<ServiceSlo> {
    let mut rng = SplitMix64::new(seed);
    (0..size)
        .map(|i| {
            let model = &base[i % base.len()];
            let rate_rps = model.rate_rps * rng.uniform(RATE_FACTOR.0, RATE_FACTOR.1);
            ServiceSlo::new(format!("svc{i:05}"), model.model.clone(), rate_rps, model.latency_slo_ms)
                .expect("scaled objectives stay valid")
        })
        .collect()
}

fn write_slo_csv(path: &Path, services: &[ServiceSlo]) -> Result<()> {
    let mut csv = Vec::new();
    tessera_store::write_slo_csv(&mut csv, services)?;
    Ok(tessera_store::write_atomic(path, &csv)?)
}

/// Runs `tessera plan` as a child process and measures it.
fn run_plan(
    family: &Family,
    slo: &Path,
    output: &Path,
    strategy: Strategy,
    rule: LatencyRule,
    time_limit_s: f64,
) -> Result<Run> {
    let exe = std::env::current_exe().context("cannot find the tessera executable")?;
    let log: PathBuf = output.with_extension("log");
    let peak: PathBuf = output.with_extension("peak");
    let mut command = Command::new(exe);
    command
        .arg("plan")
        .args(&family.profile_args)
        .args(["--slo", &slo.display().to_string(), "--strategy", strategy.name(), "--latency-rule", rule.name()])
        .args(["--time-limit", &time_limit_s.to_string()])
        .args(["--max-gpus", &MAX_GPUS_LIMIT.to_string()])
        .args(["--peak-memory-report", &peak.display().to_string()])
        .args(["--format", "json", "-o", &output.display().to_string()])
        .stdout(Stdio::null())
        .stderr(File::create(&log)?);
    let started = Instant::now();
    let status = command.status().context("cannot run tessera plan")?;
    let wall = started.elapsed();
    if !status.success() {
        let message = std::fs::read_to_string(&log).unwrap_or_default();
        bail!("tessera plan --strategy {strategy} failed: {}", message.trim());
    }
    let peak_rss_kib = std::fs::read_to_string(&peak)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .context("tessera plan did not report its peak memory")?;
    let plan = tessera_store::read_plan_file(output, None)?;
    Ok(Run { wall, peak_rss_kib, plan })
}
