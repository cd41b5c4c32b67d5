//! `tessera plan`.

use std::path::Path;

use anyhow::Result;
use tessera_plan::{plan_parva, PlanRequest};

use super::emit;
use crate::args::{PlanArgs, Strategy};
use crate::inputs;
use crate::render::render_plan;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
    let (catalog, services) = inputs::load(&args.inputs, store)?;
    let request = PlanRequest {
        gpu: args.inputs.profiles.gpu,
        catalog: &catalog,
        services: &services,
        rule: args.latency_rule,
        max_procs: args.inputs.max_procs,
        gpus_per_node: args.gpus_per_node,
    };
    let plan = match args.strategy {
        Strategy::Parva => plan_parva(&request)?,
    };
    emit(&render_plan(&plan, args.format)?, args.output.as_deref())
}
