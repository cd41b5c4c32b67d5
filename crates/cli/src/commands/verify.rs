//! `tessera verify`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::text::count;
use tessera_plan::{verify, LatencyRule, VerifyRequest};
use tessera_store::read_plan_file;

use crate::args::{ListFormat, VerifyArgs};
use crate::inputs;
use crate::output::{note, outln};

pub fn run(args: &VerifyArgs, store: Option<&Path>) -> Result<()> {
    let inputs::Loaded { catalog, services, .. } = inputs::load(&args.inputs, store)?;
    let path = args.plan.display();
    let plan = read_plan_file(&args.plan, args.inputs.profiles.first_gpu(), &catalog)?;
    let rule = match (args.latency_rule, plan.latency_rule.as_str()) {
        (Some(rule), _) => rule,
        (None, "") => {
            note(format_args!(
                "{path} records no latency rule (a ParvaGPU deployment map): checking it under the {} rule, \
                 `tessera plan`'s default; pass --latency-rule parva for ParvaGPU's own",
                LatencyRule::Queueing
            ));
            LatencyRule::Queueing
        }
        (None, recorded) => recorded
            .parse::<LatencyRule>()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{path}: field 'latency_rule'"))?,
    };
    let request = VerifyRequest { catalog: &catalog, services: &services, rule, max_procs: args.inputs.max_procs };
    let violations = verify(&plan, &request);
    match args.format {
        ListFormat::Json => {
            let report = serde_json::json!({
                "plan": args.plan,
                "latency_rule": rule.name(),
                "gpus": plan.gpu_count,
                "services": services.len(),
                "ok": violations.is_empty(),
                "violations": violations
                    .iter()
                    .map(|violation| serde_json::json!({ "message": violation.to_string() }))
                    .collect::<Vec<_>>(),
            });
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        }
        ListFormat::Table if violations.is_empty() => {
            outln!(
                "{path}: OK: {}, {}, every rate covered and every segment within the {rule} latency rule",
                count(plan.gpu_count, "GPU"),
                count(services.len(), "service")
            )?;
        }
        ListFormat::Table => {
            for violation in &violations {
                outln!("violation: {violation}")?;
            }
        }
    }
    if !violations.is_empty() {
        bail!("{path}: {} (under the {rule} latency rule)", count(violations.len(), "violation"));
    }
    Ok(())
}
