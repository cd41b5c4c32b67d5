//! `tessera verify`: the plan checked by [`verify_plan`], its
//! [`Verification`](tessera_plan::Verification) printed.

use std::path::Path;

use anyhow::{bail, Result};
use tessera_core::text::count;
use tessera_core::{Plan, ProfileCatalog};
use tessera_plan::verify_plan;
use tessera_serving::{SimulationOptions, SloVerdict};
use tessera_store::{read_plan_file, MapProfiles};

use crate::args::{ListFormat, VerifyArgs};
use crate::commands::serving::{self, Simulated};
use crate::inputs;
use crate::output::{note, out, outln};

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
    let simulated = match args.simulate && checked.ok {
        true => Some(simulate(args, &plan, inputs.catalog())?),
        false => None,
    };
    match args.format {
        // One document: the verification, with the simulation inside.
        ListFormat::Json => {
            let mut document = serde_json::to_value(&checked)?;
            if let (Some((options, simulated)), Some(object)) = (&simulated, document.as_object_mut()) {
                let simulation = serving::SimulationDocument::new(options, simulated);
                object.insert("simulation".to_string(), serde_json::to_value(&simulation)?);
            }
            outln!("{}", serde_json::to_string_pretty(&document)?)?
        }
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
    let Some((options, simulated)) = simulated else { return Ok(()) };
    if matches!(args.format, ListFormat::Table) {
        out!("{}", serving::render(&options, &simulated))?;
    }
    let unclear = simulated.judged(SloVerdict::Unclear);
    if !unclear.is_empty() {
        note(format_args!(
            "{path}: {} below the percentile in simulation but within the run's noise (simulate longer, --seconds, to tell): {}",
            count(unclear.len(), "service"),
            unclear.join(", ")
        ));
    }
    let missed = simulated.judged(SloVerdict::Missed);
    if !missed.is_empty() {
        bail!(
            "{path}: {} miss their SLO in simulation ({}): {}",
            count(missed.len(), "service"),
            serving::describe(&options),
            missed.join(", ")
        );
    }
    Ok(())
}

/// `verify --simulate`: the plan's requests simulated one by one.
fn simulate(args: &VerifyArgs, plan: &Plan, catalog: &ProfileCatalog) -> Result<(SimulationOptions, Simulated)> {
    let options = serving::options(&args.traffic)?;
    let simulated = serving::simulate_plan(plan, Some(catalog), &options)?;
    for line in &simulated.notes {
        note(format_args!("{line}"));
    }
    Ok((options, simulated))
}
