//! `tessera autopilot run`: the live loop (tessera-live's [`LiveLoop`]) on
//! the parts the flags ask for: a rate source, the controller, a deploy
//! target, a clock; each decision is printed and journaled in the store.
//! With `--leader-elect` a replica decides only while it holds the Lease,
//! and takes over from the plan the cluster records. With
//! `--observe-burstiness` each decision first reads every service's
//! burstiness and, when the fleet's arrival model changes, plans under the
//! new one and says so first in the decision's reason.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tessera_autopilot::{Controller, ControllerConfig, PlanSettings};
use tessera_gpu::NodeOptions;
use tessera_k8s::{ApplyOptions, LeaderElector, LeaseOptions};
use tessera_live::{
    Clock, DeployTarget, DryRun, FileRates, KubernetesTarget, LiveLoop, NodeTarget, PlanFile, PrometheusCounts,
    PrometheusRates, RateSource, Turn,
};
use tessera_plan::PlanOptions;
use tessera_store::{read_traffic_csv, Store};

use super::journal::decision_line;
use crate::args::{ApplyTarget, AutopilotRunArgs, ElectionArgs, ListFormat};
use crate::commands::deploy::absolute;
use crate::commands::serving;
use crate::inputs;
use crate::output::{note, outln};

/// Runs the loop until `--max-decisions` (or for ever).
pub fn run(args: &AutopilotRunArgs, store: Option<&Path>) -> Result<()> {
    let store_file = inputs::store_path(store)?;
    let mut journal = Store::open(&store_file)?;
    let target = deploy_target(args, &journal)?;
    let mut fleet = args.controller.plan.gpus.clone();
    let placement = target.placement()?;
    if let Some(placement) = &placement {
        fleet = placement.offers(&fleet)?;
    }
    let inputs = inputs::load(&args.inputs, &fleet, store)?;
    let names: Vec<String> = inputs.services().iter().map(|slo| slo.service.clone()).collect();
    if target.needs_images() {
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
    let timeout = Duration::from_secs_f64(args.query_timeout_s);
    let source: Box<dyn RateSource> = match (&args.prometheus, &args.rates_file) {
        (Some(url), _) => Box::new(PrometheusRates::new(url, &args.query_template, timeout, names.clone())?),
        (None, Some(path)) => {
            Box::new(FileRates::new(read_traffic_csv(path, &names)?, args.rates_window_s, path.display().to_string()))
        }
        (None, None) => unreachable!("clap requires --prometheus or --rates-file"),
    };
    let counts = match (&args.prometheus, args.observe_burstiness) {
        (Some(url), true) => Some(PrometheusCounts::new(
            url,
            &args.counts_template,
            timeout,
            names.clone(),
            args.burstiness_window_s,
            args.burstiness_step_s,
        )?),
        _ => None,
    };
    let running = match &args.plan {
        Some(path) => Some(inputs::read_sound_plan(path)?),
        None => target.running().map_err(|error| anyhow::anyhow!("reading the plan the cluster runs: {error}"))?,
    };
    let sharing =
        args.controller.plan.share.is_some() || running.as_ref().is_some_and(|p| p.shared_instances().count() > 0);
    if args.observe_burstiness && sharing {
        anyhow::bail!(
            "--observe-burstiness: shared instances are proven under Poisson arrivals only, and the plans here share \
             (--share, or a running plan with shared instances)"
        );
    }
    let options = PlanOptions { gpus: fleet, ..serving::with_trace_read(&args.controller.plan)? };
    let settings = PlanSettings { options, target: placement };
    let config = ControllerConfig { max_sample_age_s: args.max_sample_age_s, ..args.controller.config() };
    let controller = Controller::new(inputs, settings, config, running).context("the controller's options")?;
    let mut live = LiveLoop::new(controller, source, counts, target);
    if let Some(address) = args.metrics_addr {
        let bound = live.metrics().serve(address)?;
        note(format_args!("serving the autopilot's metrics at http://{bound}/metrics"));
    }
    note(format_args!(
        "autopilot: {} services, rates from {}, a decision every {} s, {}; journal in {}",
        names.len(),
        live.source().describe(),
        args.interval_s,
        live.target().describe(),
        store_file.display()
    ));
    let limit = if args.once { Some(1) } else { args.max_decisions };
    let mut clock = Clock::new(args.interval_s, args.no_wait);
    let mut made = 0u64;
    while limit.is_none_or(|limit| made < limit) {
        let (now_s, skipped) = clock.tick(&mut |duration| live.target().wait(duration));
        if skipped > 0 {
            note(format_args!("the last decision overran its interval: {skipped} decision times skipped"));
        }
        let record = match live.turn(now_s, &mut |line| note(format_args!("{line}"))) {
            Turn::StoodBy => {
                if args.no_wait {
                    live.target().stand_by();
                }
                continue;
            }
            Turn::Decided(record) => record,
        };
        journal.record_autopilot_decision(&record).context("journaling the decision (the loop stops)")?;
        match args.format {
            ListFormat::Table => outln!("{}", decision_line(&record))?,
            ListFormat::Json => outln!("{}", serde_json::to_string(&record)?)?,
        }
        made += 1;
    }
    Ok(())
}

/// The deploy target `args` ask for (a node's services are the workloads
/// `store` registers).
fn deploy_target(args: &AutopilotRunArgs, store: &Store) -> Result<Box<dyn DeployTarget>> {
    if args.election.leader_elect && (args.dry_run || !matches!(args.apply, Some(ApplyTarget::K8s))) {
        bail!("--leader-elect needs --apply k8s: the Lease and the plan the replicas share live in the cluster");
    }
    Ok(match (args.dry_run, args.apply) {
        (true, _) | (false, None) => Box::new(DryRun),
        (false, Some(ApplyTarget::PlanFile)) => {
            Box::new(PlanFile { path: args.plan_out.clone().context("--apply plan-file needs --plan-out FILE")? })
        }
        (false, Some(ApplyTarget::Node)) => {
            let node = args.node.context("--apply node needs --node N")?;
            let options = NodeOptions { node, mps_root: absolute(&args.mps_dir)?, assume_empty_without_driver: false };
            Box::new(NodeTarget::on_this_machine(
                options,
                store.registered_workloads()?,
                args.shared_command.clone(),
                false,
            ))
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
            Box::new(KubernetesTarget { cluster, options, elector })
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
    Ok(Some(Arc::new(LeaderElector::new(options).map_err(|error| anyhow::anyhow!(error))?)))
}
