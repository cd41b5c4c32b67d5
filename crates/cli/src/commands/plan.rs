//! `tessera plan`.

use std::path::Path;

use anyhow::Result;
use std::time::Duration;

use tessera_plan::{plan_optimal, plan_parva, LatencyRule, PlanRequest};

use crate::args::{PlanArgs, Strategy};
use crate::inputs;
use crate::output::emit;
use crate::progress::Progress;
use crate::render::render_plan;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
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
    emit(&render_plan(&plan, args.format)?, args.output.as_deref())
}
