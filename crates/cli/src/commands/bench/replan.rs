//! `tessera bench replan`: how much of a running plan survives a change of
//! rates, replanning from it against planning from scratch.
//!
//! For each catalogue (ParvaGPU's six scenarios when its data is present,
//! and catalogues built like `tessera bench scale`'s), the old plan is the
//! fresh optimum of the catalogue's rates. Each draw multiplies every rate
//! by a factor uniform in [0.8, 1.2] (SplitMix64, seeds 1 to N), then
//! replans from the old plan with no extra GPU and with one extra GPU per
//! 100 of the fresh optimum (rounded up). The baseline is the fresh optimum
//! of the new rates, numbered to match the old plan wherever a GPU is
//! identical, has the same layout or the same model (so it is credited with
//! every layout it happens to keep). Every plan is checked by the verifier.
//! Last, on the largest catalogue, one GPU of the old plan fails (the middle
//! one) with the rates unchanged.

use std::path::Path;
use std::time::{Duration, Instant};
use tessera_serving::ArrivalModel;

use anyhow::{bail, Result};
use tessera_core::rng::SplitMix64;
use tessera_core::{DiffTotals, GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{
    plan, verify, GpuPosition, LatencyRule, PlanInputs, PlanRequest, Planned, ProfileOrigin, ReplanComparison,
    ReplanFrom, VerifyRequest, DEFAULT_MAX_PROCS,
};
use tessera_store::read_slo_scenario;

use super::scale::{catalogue, parvagpu_family, synthetic_family, Family};
use crate::output::{note, out, outln};
use crate::progress::Progress;
use crate::table::TextTable;
use crate::terminal::wrap_words;

/// Range of the factor applied to each rate in a draw.
const RATE_CHANGE: (f64, f64) = (0.8, 1.2);

/// What the bench is asked.
pub struct ReplanBench<'a> {
    /// ParvaGPU's data folder.
    pub parvagpu: &'a Path,
    /// Catalogue sizes (services).
    pub sizes: &'a [usize],
    /// Draws of new rates per catalogue.
    pub draws: u64,
    /// Seed of the catalogues' rates.
    pub seed: u64,
    /// Latency rule.
    pub rule: LatencyRule,
    /// Time limit of each optimal planning, seconds.
    pub time_limit_s: f64,
}

/// How every plan is made.
struct Settings {
    rule: LatencyRule,
    time_limit: Option<Duration>,
}

impl Settings {
    /// A fresh plan of `inputs`.
    fn plan(&self, inputs: &PlanInputs) -> Result<Plan> {
        Ok(plan(&self.request(inputs, None))?.plan)
    }

    /// A replan of `inputs` from `from`: the replan and its comparison.
    fn replan(&self, inputs: &PlanInputs, from: ReplanFrom<'_>) -> Result<(Plan, ReplanComparison)> {
        let Planned { plan, replan } = plan(&self.request(inputs, Some(from)))?;
        let comparison = replan.ok_or_else(|| anyhow::anyhow!("a replan compares itself with the fresh plan"))?;
        Ok((plan, comparison))
    }

    fn request<'a>(&self, inputs: &'a PlanInputs, from: Option<ReplanFrom<'a>>) -> PlanRequest<'a> {
        PlanRequest { rule: Some(self.rule), time_limit: self.time_limit, from, ..PlanRequest::new(inputs) }
    }
}

/// One catalogue to replan.
struct Case<'f> {
    name: String,
    family: &'f Family,
    inputs: PlanInputs,
}

impl<'f> Case<'f> {
    fn new(name: String, family: &'f Family, services: Vec<ServiceSlo>) -> Result<Case<'f>> {
        let gpu = [GpuModel::A100_80GB];
        let inputs = PlanInputs::new(services, family.catalog.clone(), ProfileOrigin::Measured, &gpu)?;
        Ok(Case { name, family, inputs })
    }

    fn services(&self) -> &[ServiceSlo] {
        self.inputs.services()
    }
}

/// Means over the draws of one plan kind.
#[derive(Default)]
struct Tally {
    gpus: f64,
    kept_share: f64,
    min_kept_share: f64,
    unchanged_share: f64,
    instances: f64,
    processes: f64,
    services: f64,
    seconds: f64,
    failed_checks: usize,
    fallbacks: usize,
    runs: usize,
}

impl Tally {
    fn add(&mut self, gpus: usize, old_gpus: usize, totals: &DiffTotals, seconds: f64, verified: bool) {
        let share = totals.layouts_kept() as f64 / old_gpus.max(1) as f64;
        self.min_kept_share = if self.runs == 0 { share } else { self.min_kept_share.min(share) };
        self.runs += 1;
        self.gpus += gpus as f64;
        self.kept_share += share;
        self.unchanged_share += totals.gpus_unchanged as f64 / old_gpus.max(1) as f64;
        self.instances += (totals.instances_created + totals.instances_destroyed) as f64;
        self.processes += totals.processes_restarted as f64;
        self.services += totals.services_changed as f64;
        self.seconds += seconds;
        self.failed_checks += usize::from(!verified);
    }

    fn row(&self, case: &str, services: usize, extra: &str, plan: &str) -> Vec<String> {
        let n = self.runs.max(1) as f64;
        vec![
            case.to_string(),
            services.to_string(),
            extra.to_string(),
            plan.to_string(),
            format!("{:.1}", self.gpus / n),
            format!("{:.1}", 100.0 * self.kept_share / n),
            format!("{:.1}", 100.0 * self.min_kept_share),
            format!("{:.1}", 100.0 * self.unchanged_share / n),
            format!("{:.1}", self.instances / n),
            format!("{:.0}", self.processes / n),
            format!("{:.1}", self.services / n),
            format!("{:.2}", self.seconds / n),
            if self.failed_checks == 0 { "yes".to_string() } else { format!("NO ({})", self.failed_checks) },
        ]
    }
}

pub fn run(bench: &ReplanBench<'_>) -> Result<()> {
    let mut families = Vec::new();
    if bench.parvagpu.join("prof_data").is_dir() {
        families.push(parvagpu_family(bench.parvagpu)?);
    } else {
        note(format_args!("{} is absent; measuring the synthetic catalogue only", bench.parvagpu.display()));
    }
    families.push(synthetic_family());
    let mut cases = Vec::new();
    if let Some(parvagpu) = families.iter().find(|f| f.name == "parvagpu") {
        let models: Vec<String> = parvagpu.catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
        let slo = bench.parvagpu.join("slo");
        for scenario in 1..=6 {
            let services =
                read_slo_scenario(&slo.join("SLO_req_rate.csv"), &slo.join("SLO_latency.csv"), scenario, &models)?;
            cases.push(Case::new(format!("parvagpu s{scenario}"), parvagpu, services)?);
        }
    }
    for family in &families {
        for &size in bench.sizes {
            cases.push(Case::new(family.name.to_string(), family, catalogue(&family.base, size, bench.seed))?);
        }
    }
    let time_limit = Duration::try_from_secs_f64(bench.time_limit_s).ok();
    let progress = Progress::bar(cases.len() as u64 * bench.draws, "draws", String::new());
    let mut table = TextTable::new(&[
        "catalogue",
        "services",
        "max extra",
        "plan",
        "GPUs",
        "kept %",
        "min %",
        "same %",
        "inst ±",
        "procs",
        "restarts",
        "s",
        "verified",
    ]);
    let settings = Settings { rule: bench.rule, time_limit };
    for case in &cases {
        progress.set_message(format!("{} × {}", case.name, case.services().len()));
        let old = settings.plan(&case.inputs)?;
        // [max extra 0, 1 per 100]: replan and scratch tallies.
        let mut tallies: [(Tally, Tally); 2] = Default::default();
        let mut extras = [0u64; 2];
        for draw in 1..=bench.draws {
            let mut rng = SplitMix64::new(draw);
            let new: Vec<ServiceSlo> = case
                .services()
                .iter()
                .map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(RATE_CHANGE.0, RATE_CHANGE.1), ..s.clone() })
                .collect();
            let mut fresh_gpus = None;
            for (setting, (replanned_tally, scratch_tally)) in tallies.iter_mut().enumerate() {
                let max_extra_gpus = match (setting, fresh_gpus) {
                    (0, _) => 0,
                    (_, Some(gpus)) => (gpus as u64).div_ceil(100),
                    (_, None) => bail!("the fresh optimum is known after the first setting"),
                };
                extras[setting] = extras[setting].max(max_extra_gpus);
                let new_inputs = case.inputs.for_services(new.clone());
                let from = ReplanFrom {
                    current: &old,
                    max_extra_gpus,
                    drained: Vec::new(),
                    lost: Vec::new(),
                    within_layouts: false,
                };
                let started = Instant::now();
                let (plan, comparison) = settings.replan(&new_inputs, from)?;
                let seconds = started.elapsed().as_secs_f64();
                fresh_gpus = Some(comparison.fresh.gpu_count);
                let verified = |plan: &Plan| verifies(plan, &case.family.catalog, &new, bench.rule);
                let ReplanComparison { fresh, diff, fresh_diff, from_fresh } = &comparison;
                replanned_tally.add(plan.gpu_count, old.gpu_count, &diff.totals, seconds, verified(&plan));
                replanned_tally.fallbacks += usize::from(*from_fresh);
                scratch_tally.add(fresh.gpu_count, old.gpu_count, &fresh_diff.totals, 0.0, verified(fresh));
            }
            progress.step();
        }
        for (setting, (replanned, scratch)) in tallies.iter().enumerate() {
            let extra = if setting == 0 { "0".to_string() } else { format!("1/100 (≤{})", extras[setting]) };
            let services = case.services().len();
            table.row(replanned.row(&case.name, services, &extra, &format!("replan ({} fresh)", replanned.fallbacks)));
            let mut scratch_row = scratch.row(&case.name, services, &extra, "scratch");
            scratch_row[11] = "-".to_string();
            table.row(scratch_row);
        }
    }
    let failure = cases.iter().max_by_key(|case| case.services().len()).map(|case| failure(case, &settings));
    drop(progress);
    let legend = format!(
        "latency rule {}, a100-80gb, up to {DEFAULT_MAX_PROCS} processes, {} draws of rates × U[{}, {}] from the \
         fresh optimum of the old rates, optimal time limit {} s; kept % = old GPUs whose MIG layout is kept (mean; \
         min over draws); same % = old GPUs left exactly as they were (layout and segments); inst ± = instances \
         created + destroyed; procs = MPS processes started; restarts = services with a segment added or \
         removed; s = seconds per replan (fresh plan included); replan (n fresh) = draws where the fresh plan \
         changed least and was returned",
        bench.rule, bench.draws, RATE_CHANGE.0, RATE_CHANGE.1, bench.time_limit_s
    );
    outln!("{}", wrap_words(&legend, "", ""))?;
    out!("{}", table.render())?;
    if let Some(failure) = failure {
        out!("\n{}", failure?)?;
    }
    Ok(())
}

/// A single GPU of the largest catalogue's old plan lost, rates unchanged.
fn failure(case: &Case<'_>, settings: &Settings) -> Result<String> {
    let old = settings.plan(&case.inputs)?;
    let Some(middle) = old.gpus.get(old.gpus.len() / 2) else {
        bail!("the old plan of {} has no GPU", case.name);
    };
    let lost = GpuPosition { node: middle.node, index: middle.index };
    let mut table =
        TextTable::new(&["max extra", "plan", "GPUs", "layouts kept", "GPUs changed", "inst ±", "restarts"]);
    for max_extra_gpus in [0, (old.gpu_count as u64).div_ceil(100)] {
        let from =
            ReplanFrom { current: &old, max_extra_gpus, drained: Vec::new(), lost: vec![lost], within_layouts: false };
        let (replanned, comparison) = settings.replan(&case.inputs, from)?;
        for (name, plan, totals) in [
            ("replan", &replanned, &comparison.diff.totals),
            ("scratch", &comparison.fresh, &comparison.fresh_diff.totals),
        ] {
            table.row(vec![
                max_extra_gpus.to_string(),
                name.to_string(),
                plan.gpu_count.to_string(),
                format!("{}/{}", totals.layouts_kept(), old.gpu_count),
                // The lost GPU is removed in every plan; count the others.
                totals.gpus_reconfigured().saturating_sub(1).to_string(),
                (totals.instances_created + totals.instances_destroyed).to_string(),
                totals.services_changed.to_string(),
            ]);
        }
    }
    Ok(format!(
        "GPU {} of {} lost ({}, {} services, rates unchanged); GPUs changed = layout changed, added or removed, \
         besides the lost one\n{}",
        lost,
        old.gpu_count,
        case.name,
        case.services().len(),
        table.render()
    ))
}

fn verifies(plan: &Plan, catalog: &ProfileCatalog, services: &[ServiceSlo], rule: LatencyRule) -> bool {
    let request = VerifyRequest {
        catalog,
        services,
        rule,
        arrivals: &ArrivalModel::Poisson,
        max_procs: DEFAULT_MAX_PROCS,
        margin: 0.0,
    };
    verify(plan, &request).is_empty() && plan.services.iter().all(|s| s.met)
}
