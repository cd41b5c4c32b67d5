//! `tessera plan`.

use std::path::Path;

use anyhow::Result;
use tessera_plan::{plan_parva, PlanRequest};

use super::emit;
use crate::args::{PlanArgs, Strategy};
use crate::inputs::{load_catalog, load_services};
use crate::render::render_plan;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
    let catalog = load_catalog(&args.profiles, args.demo, store)?;
    let services = load_services(&args.slos, args.demo, &catalog, args.profiles.gpu)?;
    let request = PlanRequest {
        gpu: args.profiles.gpu,
        catalog: &catalog,
        services: &services,
        rule: args.latency_rule,
        max_procs: args.rules.max_procs,
        gpus_per_node: args.gpus_per_node,
    };
    let plan = match args.strategy {
        Strategy::Parva => plan_parva(&request)?,
    };
    emit(&render_plan(&plan, args.format)?, args.output.as_deref())
}
