//! `tessera autopilot run`: the live loop. It wires a rate source to the
//! controller (tessera-autopilot's, which makes every decision) and the
//! controller to an actuator, on a clock; each decision is printed,
//! journaled in the store and counted in the loop's metrics. With
//! `--leader-elect` a replica decides only while it holds the Lease, and
//! takes over from the plan the cluster records. With
//! `--observe-burstiness` each decision first reads every service's
//! burstiness and, when the fleet's arrival model changes, plans under the
//! new one and says so first in the decision's reason.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use tessera_autopilot::{
    observed_arrivals, renewal_cv, Action, ActionKind, Controller, ControllerConfig, Observation, PlanSettings,
};
use tessera_core::Plan;
use tessera_k8s::{ApplyOptions, LeaderElector, LeaseOptions};
use tessera_plan::PlanOptions;
use tessera_store::{read_traffic_csv, AutopilotDecision, Store};

use super::actuator::{Actuator, Outcome};
use super::burstiness::PrometheusCounts;
use super::journal::decision_line;
use super::metrics::LoopMetrics;
use super::prometheus::PrometheusRates;
use super::rates::{FileRates, RateSource};
use crate::args::{ApplyTarget, AutopilotRunArgs, ElectionArgs, ListFormat};
use crate::commands::serving;
use crate::inputs;
use crate::output::{note, outln};

/// Every action's name, for the metrics.
const ACTIONS: [ActionKind; 5] =
    [ActionKind::Start, ActionKind::Keep, ActionKind::Hold, ActionKind::ScaleUp, ActionKind::ScaleDown];

/// Runs the loop until `--max-decisions` (or for ever).
pub fn run(args: &AutopilotRunArgs, store: Option<&Path>) -> Result<()> {
    let actuator = actuator(args)?;
    let mut fleet = args.controller.plan.gpus.clone();
    let target = match &actuator {
        Actuator::Kubernetes { cluster, .. } => Some(cluster.inventory()?.nodes),
        _ => None,
    };
    if let Some(target) = &target {
        fleet = target.offers(&fleet)?;
    }
    let inputs = inputs::load(&args.inputs, &fleet, store)?;
    let names: Vec<String> = inputs.services().iter().map(|slo| slo.service.clone()).collect();
    if matches!(actuator, Actuator::Kubernetes { .. }) {
        let missing: Vec<&str> =
            names.iter().map(String::as_str).filter(|name| !inputs.images().contains_key(*name)).collect();
        if !missing.is_empty() {
            bail!(
                "--apply k8s needs a container image for every service; none for {} (add `image` and `args` \
                 columns to the SLO file)",
                missing.join(", ")
            );
        }
    }
    let mut source: Box<dyn RateSource> = match (&args.prometheus, &args.rates_file) {
        (Some(url), _) => Box::new(
            PrometheusRates::new(
                url,
                &args.query_template,
                Duration::from_secs_f64(args.query_timeout_s),
                names.clone(),
            )
            .map_err(|error| anyhow!(error))?,
        ),
        (None, Some(path)) => {
            Box::new(FileRates::new(read_traffic_csv(path, &names)?, args.rates_window_s, path.display().to_string()))
        }
        (None, None) => unreachable!("clap requires --prometheus or --rates-file"),
    };
    let counts = match (&args.prometheus, args.observe_burstiness) {
        (Some(url), true) => Some(
            PrometheusCounts::new(
                url,
                &args.counts_template,
                Duration::from_secs_f64(args.query_timeout_s),
                names.clone(),
                args.burstiness_window_s,
                args.burstiness_step_s,
            )
            .map_err(|error| anyhow!(error))?,
        ),
        _ => None,
    };
    let running = match &args.plan {
        Some(path) => Some(inputs::read_dedicated_plan(path)?),
        None => actuator.running().map_err(|error| anyhow!("reading the plan the cluster runs: {error}"))?,
    };
    let options = PlanOptions { gpus: fleet, ..serving::with_trace_read(&args.controller.plan)? };
    let settings = PlanSettings { options, target };
    let config = ControllerConfig { max_sample_age_s: args.max_sample_age_s, ..args.controller.config() };
    let mut controller = Controller::new(inputs, settings, config, running).context("the controller's options")?;
    let store_file = inputs::store_path(store)?;
    let mut journal = Store::open(&store_file)?;
    let metrics = LoopMetrics::new(&ACTIONS.map(ActionKind::name));
    if let Some(address) = args.metrics_addr {
        let bound = metrics.serve(address)?;
        note(format_args!("serving the autopilot's metrics at http://{bound}/metrics"));
    }
    note(format_args!(
        "autopilot: {} services, rates from {}, a decision every {} s, {}; journal in {}",
        names.len(),
        source.describe(),
        args.interval_s,
        match &actuator {
            Actuator::DryRun => "dry run (acting on nothing)".to_string(),
            Actuator::PlanFile(path) => format!("new plans written to {}", path.display()),
            Actuator::Kubernetes { cluster, options, .. } => {
                format!("new plans applied to namespace {} of {}", options.namespace, cluster.context())
            }
        },
        store_file.display()
    ));
    let limit = if args.once { Some(1) } else { args.max_decisions };
    let mut clock = Clock::new(args.interval_s, args.no_wait);
    let mut made = 0u64;
    let mut leading = None;
    while limit.is_none_or(|limit| made < limit) {
        let (now_s, skipped) = clock.tick(&mut |duration| actuator.wait(duration));
        if skipped > 0 {
            note(format_args!("the last decision overran its interval: {skipped} decision times skipped"));
        }
        if !actuator.may_decide(&mut leading, &mut controller) {
            metrics.set_leader(false);
            if args.no_wait {
                actuator.stand_by();
            }
            continue;
        }
        metrics.set_leader(true);
        let rates = source.rates(now_s);
        let arrivals_change = counts.as_ref().and_then(|counts| {
            let reading = counts.read(now_s);
            for observed in &reading.observed {
                metrics.record_observed_cv(&observed.service, observed.cv);
            }
            let change = observed_arrivals(&controller.arrivals(), &reading.observed)?;
            controller.set_arrivals(change.model.clone());
            Some(match reading.missing.as_slice() {
                [] => change.words,
                missing => format!("{} (no estimate for {})", change.words, missing.join("; ")),
            })
        });
        metrics.set_arrival_cv(renewal_cv(&controller.arrivals()));
        let gpus_before = gpu_count(controller.plan());
        let decision = controller.observe(&Observation { time_s: now_s, samples: rates.samples.clone() });
        let mut reason = match arrivals_change {
            Some(words) => format!("{words}; {}", decision.reason),
            None => decision.reason.clone(),
        };
        if !rates.faults.is_empty() {
            reason.push_str(&format!(" ({})", rates.faults.join("; ")));
        }
        let new_plan = match &decision.action {
            Action::Start(plan) => Some(plan),
            Action::ScaleUp(change) | Action::ScaleDown(change) => Some(&change.plan),
            Action::Keep | Action::Hold => None,
        };
        let (mut outcome, failed) = match new_plan {
            None => ("nothing to do".to_string(), false),
            Some(plan) => {
                let outcome = actuator.act(plan, &mut |step| note(format_args!("{step}")));
                metrics.record_transition(outcome.metric_name());
                if let Outcome::Failed { running: Some(running), .. } = &outcome {
                    controller.adopt(running.as_ref().clone());
                }
                (outcome.words(), matches!(outcome, Outcome::Failed { .. }))
            }
        };
        let event_note = format!("{reason} ({outcome})");
        if let Some(error) = actuator.record(now_s, decision.action.kind(), &event_note, failed) {
            outcome.push_str(&format!("; its event was not recorded: {error}"));
        }
        let forecast = controller.forecast_rps();
        let accuracy = controller.forecast_accuracy();
        metrics.record_forecast_error(accuracy.mean_abs_relative_error, accuracy.under_share);
        let record = AutopilotDecision {
            time_s: now_s,
            action: decision.action.kind().name().to_string(),
            reason,
            gpus_before,
            gpus_after: gpu_count(controller.plan()),
            observed_rps: names.iter().cloned().zip(rates.samples.iter().map(|s| s.map(|s| s.rate_rps))).collect(),
            forecast_rps: names.iter().cloned().zip(forecast.iter().copied()).collect(),
            outcome,
        };
        journal.record_autopilot_decision(&record).context("journaling the decision (the loop stops)")?;
        let observed: Vec<(&str, Option<f64>)> =
            names.iter().map(String::as_str).zip(rates.samples.iter().map(|s| s.map(|s| s.rate_rps))).collect();
        let forecast: Vec<(&str, f64)> = names.iter().map(String::as_str).zip(forecast.iter().copied()).collect();
        metrics.record(now_s, &record.action, record.gpus_after, &observed, &forecast);
        match args.format {
            ListFormat::Table => outln!("{}", decision_line(&record))?,
            ListFormat::Json => outln!("{}", serde_json::to_string(&record)?)?,
        }
        made += 1;
    }
    Ok(())
}

/// The actuator `args` ask for.
fn actuator(args: &AutopilotRunArgs) -> Result<Actuator> {
    if args.election.leader_elect && (args.dry_run || !matches!(args.apply, Some(ApplyTarget::K8s))) {
        bail!("--leader-elect needs --apply k8s: the Lease and the plan the replicas share live in the cluster");
    }
    Ok(match (args.dry_run, args.apply) {
        (true, _) | (false, None) => Actuator::DryRun,
        (false, Some(ApplyTarget::PlanFile)) => {
            Actuator::PlanFile(args.plan_out.clone().context("--apply plan-file needs --plan-out FILE")?)
        }
        (false, Some(ApplyTarget::K8s)) => {
            let (routes, pods) = args.objects.resolve()?;
            let mut cluster = args.cluster.connect()?;
            let elector = elector(&args.election, &args.namespace)?;
            if let Some(elector) = &elector {
                cluster = cluster.fenced_by(elector.clone());
            }
            let options = ApplyOptions {
                namespace: args.namespace.clone(),
                dry_run: false,
                force_conflicts: false,
                layout_timeout: Duration::from_secs(args.apply_timeout),
                poll: Duration::from_secs_f64(args.apply_poll_s),
                routes,
                pods,
                concurrency: 32,
            };
            Actuator::Kubernetes { cluster: Box::new(cluster), options: Box::new(options), elector }
        }
    })
}

/// The elector `election` asks for, `None` without `--leader-elect`.
fn elector(election: &ElectionArgs, namespace: &str) -> Result<Option<Arc<LeaderElector>>> {
    if !election.leader_elect {
        return Ok(None);
    }
    let identity = match &election.identity {
        Some(identity) => identity.clone(),
        None => std::env::var("POD_NAME").ok().filter(|name| !name.is_empty()).unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").ok().filter(|name| !name.is_empty());
            format!("{}-{}", host.unwrap_or_else(|| "tessera".to_string()), std::process::id())
        }),
    };
    let duration = Duration::from_secs_f64(election.lease_duration_s);
    let options = LeaseOptions::scaled(namespace, &election.lease_name, &identity, duration);
    Ok(Some(Arc::new(LeaderElector::new(options).map_err(|error| anyhow!(error))?)))
}

/// GPUs of `plan`, 0 without one.
fn gpu_count(plan: Option<&Plan>) -> usize {
    plan.map_or(0, |plan| plan.gpu_count)
}

/// When decisions are made: on the wall clock's multiples of the
/// interval (sleeping until each), or, replaying a file without waiting,
/// one interval after the other at once.
#[derive(Debug, Clone)]
struct Clock {
    interval_s: f64,
    no_wait: bool,
    next_s: Option<f64>,
}

impl Clock {
    fn new(interval_s: f64, no_wait: bool) -> Clock {
        Clock { interval_s, no_wait, next_s: None }
    }

    /// The next decision time (seconds since the Unix epoch), after
    /// waiting until it with `wait`, and how many decision times were
    /// skipped because the last decision overran.
    fn tick(&mut self, wait: &mut dyn FnMut(Duration)) -> (f64, u64) {
        let now_s = unix_now_s();
        let mut next_s = self.next_s.unwrap_or_else(|| (now_s / self.interval_s).ceil() * self.interval_s);
        let mut skipped = 0;
        if !self.no_wait {
            if now_s > next_s {
                let missed = ((now_s - next_s) / self.interval_s).ceil();
                next_s += missed * self.interval_s;
                skipped = missed as u64;
            }
            wait(Duration::from_secs_f64((next_s - now_s).max(0.0)));
        }
        self.next_s = Some(next_s + self.interval_s);
        (next_s, skipped)
    }
}

/// Seconds since the Unix epoch.
fn unix_now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |elapsed| elapsed.as_secs_f64())
}
