//! `tessera verify`: the plan checked by [`verify_plan`], its
//! [`Verification`](tessera_plan::Verification) printed.

use std::path::Path;

use anyhow::{bail, Result};
use tessera_core::text::count;
use tessera_plan::verify_plan;
use tessera_store::{read_plan_file, MapProfiles};

use crate::args::{ListFormat, VerifyArgs};
use crate::inputs;
use crate::output::{note, outln};

pub fn run(args: &VerifyArgs, store: Option<&Path>) -> Result<()> {
    let inputs = inputs::load(&args.inputs, &args.inputs.profiles.gpus, store)?;
    let path = args.plan.display();
    let map_profiles = MapProfiles { gpu: args.inputs.profiles.first_gpu(), catalog: inputs.catalog() };
    let plan = read_plan_file(&args.plan, Some(map_profiles))?;
    let checked = verify_plan(&plan, &inputs, args.latency_rule, args.inputs.max_procs)
        .map_err(|error| anyhow::anyhow!("{path}: {error}"))?;
    for line in &checked.notes {
        note(format_args!("{path}: {line}"));
    }
    match args.format {
        ListFormat::Json => outln!("{}", serde_json::to_string_pretty(&checked)?)?,
        ListFormat::Table if checked.ok => outln!(
            "{path}: OK: {}, {}, every rate covered and every segment within the {} latency rule",
            count(checked.gpus, "GPU"),
            count(checked.services, "service"),
            checked.latency_rule
        )?,
        ListFormat::Table => {
            for violation in &checked.violations {
                outln!("violation: {}", violation.message)?;
            }
        }
    }
    if !checked.ok {
        bail!(
            "{path}: {} (under the {} latency rule)",
            count(checked.violations.len(), "violation"),
            checked.latency_rule
        );
    }
    Ok(())
}
