//! `tessera verify`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::{GpuModel, Plan, ProfileCatalog};
use tessera_plan::{verify, LatencyRule, VerifyRequest};
use tessera_store::read_deployment_csv;

use crate::args::VerifyArgs;
use crate::inputs;
use crate::output::outln;

pub fn run(args: &VerifyArgs, store: Option<&Path>) -> Result<()> {
    let inputs::Loaded { catalog, services, .. } = inputs::load(&args.inputs, store)?;
    let plan = read_plan(&args.plan, args.inputs.profiles.first_gpu(), &catalog)?;
    let rule = match args.latency_rule {
        Some(rule) => rule,
        None => plan
            .latency_rule
            .parse::<LatencyRule>()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}: field 'latency_rule'", args.plan.display()))?,
    };
    let request = VerifyRequest { catalog: &catalog, services: &services, rule, max_procs: args.inputs.max_procs };
    let violations = verify(&plan, &request);
    if violations.is_empty() {
        outln!(
            "{}: OK: {} GPUs, {} services, every rate covered and every segment within the {rule} latency rule",
            args.plan.display(),
            plan.gpu_count,
            services.len()
        )?;
        return Ok(());
    }
    for violation in &violations {
        outln!("violation: {violation}")?;
    }
    bail!("{}: {} violation(s)", args.plan.display(), violations.len())
}

/// A Tessera plan (JSON) or, for a `.csv` file, a ParvaGPU deployment map
/// on `gpu` with its numbers taken from `catalog`.
fn read_plan(path: &Path, gpu: GpuModel, catalog: &ProfileCatalog) -> Result<Plan> {
    if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("csv")) {
        return Ok(read_deployment_csv(path, gpu, catalog)?);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a Tessera plan", path.display()))
}
