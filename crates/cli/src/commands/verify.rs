//! `tessera verify`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::Plan;
use tessera_plan::{verify, LatencyRule, VerifyRequest};

use crate::args::VerifyArgs;
use crate::inputs;

pub fn run(args: &VerifyArgs, store: Option<&Path>) -> Result<()> {
    let text = std::fs::read_to_string(&args.plan).with_context(|| format!("cannot read {}", args.plan.display()))?;
    let plan: Plan =
        serde_json::from_str(&text).with_context(|| format!("{}: not a Tessera plan", args.plan.display()))?;
    let rule = match args.latency_rule {
        Some(rule) => rule,
        None => plan
            .latency_rule
            .parse::<LatencyRule>()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}: field 'latency_rule'", args.plan.display()))?,
    };
    let (catalog, services) = inputs::load(&args.inputs, store)?;
    let request = VerifyRequest { catalog: &catalog, services: &services, rule, max_procs: args.inputs.max_procs };
    let violations = verify(&plan, &request);
    if violations.is_empty() {
        println!(
            "{}: OK: {} GPUs, {} services, every rate covered and every segment within the {rule} latency rule",
            args.plan.display(),
            plan.gpu_count,
            services.len()
        );
        return Ok(());
    }
    for violation in &violations {
        println!("violation: {violation}");
    }
    bail!("{}: {} violation(s)", args.plan.display(), violations.len())
}
