//! `tessera plan`.

use std::path::Path;

use anyhow::{bail, Result};
use std::time::Duration;
use tessera_core::GpuOffer;
use tessera_k8s::{place_on_cluster, Inventory};

use tessera_plan::{plan_optimal, plan_parva, LatencyRule, PlanRequest};

use crate::args::{PlanArgs, Strategy};
use crate::inputs;
use crate::output::{emit, note};
use crate::progress::Progress;
use crate::render::render_plan;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
    let mut args = args.clone();
    let inventory = if args.cluster { Some(cluster_fleet(&mut args)?) } else { None };
    let args = &args;
    let loaded = inputs::load(&args.inputs, store)?;
    let default_rule = match args.strategy {
        Strategy::Optimal => LatencyRule::Queueing,
        Strategy::Parva => LatencyRule::Parva,
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
    if let Some(inventory) = inventory {
        plan = place_on_cluster(&plan, &inventory)?;
    }
    emit(&render_plan(&plan, args.format)?, args.output.as_deref())
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
