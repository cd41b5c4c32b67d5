//! `tessera plan`.

use std::path::Path;

use anyhow::{bail, Result};
use std::time::Duration;
use tessera_core::GpuOffer;
use tessera_k8s::{place_on_cluster, Inventory};

use tessera_core::text::count;
use tessera_core::Plan;
use tessera_plan::{
    plan_optimal, plan_parva, replan, spread_segments, GpuPosition, LatencyRule, PlanRequest, Replan, ReplanRequest,
};
use tessera_store::read_plan_file;

use crate::args::{Format, PlanArgs, Strategy};
use crate::commands::diff::comparison_table;
use crate::inputs;
use crate::output::{emit, note};
use crate::progress::Progress;
use crate::render::render_plan;
use crate::terminal::wrap_words;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
    let mut args = args.clone();
    let inventory = if args.cluster { Some(cluster_fleet(&mut args)?) } else { None };
    let args = &args;
    let loaded = inputs::load(&args.inputs, store)?;
    let current = match &args.from {
        Some(path) => Some(read_current(path, args, &loaded.catalog)?),
        None => None,
    };
    let default_rule = match (args.strategy, &current) {
        (Strategy::Optimal, Some(current)) => current.latency_rule.parse().unwrap_or(LatencyRule::Queueing),
        (Strategy::Optimal, None) => LatencyRule::Queueing,
        (Strategy::Parva, _) => LatencyRule::Parva,
    };
    let request = PlanRequest {
        fleet: args.inputs.profiles.gpus.clone(),
        catalog: &loaded.catalog,
        services: &loaded.services,
        rule: args.latency_rule.unwrap_or(default_rule),
        max_procs: args.inputs.max_procs,
        gpus_per_node: args.gpus_per_node,
        // More seconds than a Duration holds means no limit.
        time_limit: Duration::try_from_secs_f64(args.time_limit).ok(),
        max_gpus: args.max_gpus,
    };
    if let Some(current) = &current {
        return replan_from(args, request, current, loaded.notes);
    }
    let limit = match request.time_limit {
        Some(_) => format!("up to {:.0} s", args.time_limit),
        None => "no time limit".to_string(),
    };
    let progress = Progress::spinner(format!(
        "planning {} services ({} strategy, {limit})",
        loaded.services.len(),
        args.strategy.name()
    ));
    let planned = match args.strategy {
        Strategy::Optimal => plan_optimal(&request),
        Strategy::Parva => plan_parva(&request),
    };
    drop(progress);
    let mut plan = planned?;
    plan.notes = loaded.notes;
    plan.images = loaded.images;
    if args.spread {
        let unspread = spread_segments(&mut plan);
        plan.notes.push(if unspread.is_empty() {
            "spread: every service with several segments runs on at least two GPUs".to_string()
        } else {
            format!(
                "spread: {} still on one GPU each (no other GPU of the model has an instance of their profile to trade)",
                unspread.join(", ")
            )
        });
    }
    if let Some(inventory) = inventory {
        plan = place_on_cluster(&plan, &inventory)?;
    }
    emit(&render_plan(&plan, args.format)?, args.output.as_deref())
}

/// The plan of `--from`, refused with `--strategy parva` (replanning runs
/// the optimal strategy).
fn read_current(path: &Path, args: &PlanArgs, catalog: &tessera_core::ProfileCatalog) -> Result<Plan> {
    if args.strategy == Strategy::Parva {
        bail!("--from replans with the optimal strategy; drop --strategy parva");
    }
    Ok(read_plan_file(path, args.inputs.profiles.first_gpu(), catalog)?)
}

/// `tessera plan --from`: the replan, with the fresh optimum beside it.
fn replan_from(args: &PlanArgs, request: PlanRequest<'_>, current: &Plan, notes: Vec<String>) -> Result<()> {
    let removed: Vec<GpuPosition> = args.drain.iter().chain(&args.lost).copied().collect();
    let progress = Progress::spinner(format!(
        "replanning {} services from a plan of {}",
        request.services.len(),
        count(current.gpu_count, "GPU")
    ));
    let replanned =
        replan(&ReplanRequest { plan: request, current, max_extra_gpus: args.max_extra_gpus, removed_gpus: &removed });
    drop(progress);
    let Replan { mut plan, fresh, diff, fresh_diff, from_fresh } = replanned?;
    for position in &args.drain {
        plan.notes.push(format!("GPU {position} drained: its services run elsewhere before it is emptied"));
    }
    for position in &args.lost {
        plan.notes.push(format!("GPU {position} lost: its services are replanned onto the rest"));
    }
    plan.notes.extend(notes);
    let comparison = comparison_table(
        current.gpu_count,
        &[("replan", plan.gpu_count, &diff.totals), ("fresh optimum", fresh.gpu_count, &fresh_diff.totals)],
    );
    let mut document = render_plan(&plan, args.format)?;
    if args.format == Format::Table {
        document.extend_from_slice(
            wrap_words(
                "\nfrom the current plan: MIG layouts kept, GPUs reconfigured, instances created + destroyed, \
                 processes started, services restarted:",
                "",
                "",
            )
            .as_bytes(),
        );
        document.push(b'\n');
        document.extend_from_slice(comparison.as_bytes());
    } else {
        note(format_args!(
            "replan: {}, {} of {} layouts kept; fresh optimum: {}, {} kept{}",
            count(plan.gpu_count, "GPU"),
            diff.totals.layouts_kept(),
            current.gpu_count,
            count(fresh.gpu_count, "GPU"),
            fresh_diff.totals.layouts_kept(),
            if from_fresh { " (the fresh plan's layouts changed least)" } else { "" }
        ));
    }
    emit(&document, args.output.as_deref())
}

/// Replaces the fleet of `args` with the cluster's MIG-capable GPUs (each
/// model's cost from its --gpu, else 1), saying which nodes were left out.
fn cluster_fleet(args: &mut PlanArgs) -> Result<Inventory> {
    let inventory = args.kube.connect()?.inventory()?;
    for line in &inventory.left_out {
        note(format_args!("{line}"));
    }
    let offers: Vec<GpuOffer> = inventory
        .fleet()
        .into_iter()
        .map(|(model, gpus)| {
            let cost = args.inputs.profiles.gpus.iter().find(|o| o.model == model).map_or(1.0, |o| o.cost);
            GpuOffer { model, cost, limit: Some(gpus) }
        })
        .collect();
    if offers.is_empty() {
        bail!("the cluster has no MIG-capable GPU node of a model Tessera knows (see `tessera k8s inventory`)");
    }
    args.inputs.profiles.gpus = offers;
    Ok(inventory)
}
