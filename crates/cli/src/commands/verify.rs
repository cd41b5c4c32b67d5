//! `tessera verify`: the plan checked by [`verify_plan`], its
//! [`Verification`] printed.

use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_core::text::{count, number, percent};
use tessera_core::{Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{verify_plan, CheckOptions, Verification};
use tessera_serving::{SimulationOptions, SloVerdict};
use tessera_store::{read_plan_file, MapProfiles};

use crate::args::{ListFormat, VerifyArgs};
use crate::commands::serving::{self, Simulated};
use crate::inputs;
use crate::output::{note, out, outln};
use crate::table::TextTable;
use crate::terminal::wrap_words;

pub fn run(args: &VerifyArgs, store: Option<&Path>) -> Result<()> {
    let path = args.plan.display();
    let gpu = inputs::first_gpu(&args.gpus);
    let (plan, inputs) = if inputs::slos_given(&args.inputs) {
        let inputs = inputs::load(&args.inputs, &args.gpus, store)?;
        (read_plan_file(&args.plan, Some(MapProfiles { gpu, catalog: inputs.catalog() }))?, inputs)
    } else {
        // No SLOs given: the plan is checked against the services it
        // records (a ParvaGPU map records none).
        let mut plan = None;
        let inputs = inputs::load_with_services(&args.inputs, &args.gpus, store, |catalog| {
            let read = read_plan_file(&args.plan, Some(MapProfiles { gpu, catalog }))?;
            let services = recorded_services(&read).map_err(|error| anyhow::anyhow!("{path}: {error:#}"))?;
            plan = Some(read);
            Ok(services)
        })?;
        note(format_args!(
            "{path}: no SLOs given: checked against the rates and SLOs the plan records (--slo FILE checks against others)"
        ));
        (plan.context("the plan was read with the profiles")?, inputs)
    };
    let arrivals = args.traffic.arrivals.as_deref().map(serving::arrival_model).transpose()?;
    let options = CheckOptions {
        rule: args.latency_rule,
        arrivals: arrivals.as_ref(),
        margin: args.margin,
        max_procs: args.max_procs,
    };
    let checked = verify_plan(&plan, &inputs, options).map_err(|error| anyhow::anyhow!("{path}: {error}"))?;
    for line in &checked.notes {
        note(format_args!("{path}: {line}"));
    }
    // The simulation runs whatever the static checks say, on any plan the
    // hardware can hold: it names the services that miss in it.
    let simulated = match args.simulate && tessera_plan::check_structure(&plan).is_ok() {
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
        ListFormat::Table => {
            if checked.ok {
                let verdict = format!(
                    "{path}: OK: {}, {}, every rate covered and every segment within the {}",
                    count(checked.gpus, "GPU"),
                    count(checked.services, "service"),
                    rule_words(&checked)
                );
                outln!("{}", wrap_words(&verdict, "", "  "))?;
            }
            for violation in &checked.violations {
                outln!("violation: {}", violation.message)?;
            }
            out!("\n{}", services_table(&checked))?;
        }
    }
    let static_failure =
        || format!("{path}: {} (under the {})", count(checked.violations.len(), "violation"), rule_words(&checked));
    let Some((options, simulated)) = simulated else {
        if !checked.ok {
            bail!("{}", static_failure());
        }
        return Ok(());
    };
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
    let in_simulation = if missed.is_empty() {
        format!("every service keeps its SLO in simulation ({})", serving::describe(&options))
    } else {
        format!(
            "{} {} in simulation ({}): {}",
            count(missed.len(), "service"),
            if missed.len() == 1 { "misses its SLO" } else { "miss their SLO" },
            serving::describe(&options),
            missed.join(", ")
        )
    };
    if !checked.ok {
        bail!("{}; {in_simulation}", static_failure());
    }
    if !missed.is_empty() {
        bail!("{path}: {in_simulation}");
    }
    Ok(())
}

/// Every service as the check saw it: rate, what its segments provide,
/// SLO and, under the percentile rule with Poisson arrivals, the predicted
/// percentile latency and share within the SLO (else the rule's worst
/// latency, or nothing where the simulation is the judge), its tolerance
/// (how much slower than profiled its batches may run) and its busiest
/// segment's load.
fn services_table(checked: &Verification) -> String {
    let predicted = checked.by_service.iter().any(|check| check.predicted_attainment.is_some());
    let latency_header = if predicted { "predicted ms" } else { "worst ms" };
    let mut header = vec!["service", "req/s", "provided", "slo ms"];
    if checked.arrivals.is_some() {
        header.push("at");
    }
    header.push(latency_header);
    if predicted {
        header.extend(["within slo", "tolerance", "load"]);
    }
    header.push("met");
    let mut table = TextTable::new(&header);
    for check in &checked.by_service {
        let mut row = vec![
            check.service.clone(),
            number(check.rate_rps, 1),
            number(check.provisioned_rps, 1),
            number(check.latency_slo_ms, 1),
        ];
        if checked.arrivals.is_some() {
            row.push(check.percentile.map_or_else(|| "-".to_string(), |percentile| format!("p{percentile}")));
        }
        row.push(check.worst_latency_ms.map_or_else(|| "-".to_string(), |ms| number(ms, 1)));
        if predicted {
            row.push(check.predicted_attainment.map_or_else(|| "-".to_string(), |a| format!("{:.2}%", 100.0 * a)));
            row.push(check.tolerance.map_or_else(|| "-".to_string(), tessera_core::plan::tolerance_text));
            row.push(check.busiest_load.map_or_else(|| "-".to_string(), |load| number(load, 2)));
        }
        row.push(if check.met { "yes" } else { "NO" }.to_string());
        table.row(row);
    }
    table.render()
}

/// The rule a check was made under, and its arrival model and margin where
/// it has them: "percentile latency rule, poisson arrivals, margin 5%".
fn rule_words(checked: &Verification) -> String {
    let mut words = format!("{} latency rule", checked.latency_rule);
    if let Some(arrivals) = &checked.arrivals {
        words.push_str(&format!(", {arrivals} arrivals"));
    }
    if let Some(margin) = checked.margin.filter(|margin| *margin > 0.0) {
        words.push_str(&format!(", margin {}", percent(margin)));
    }
    words
}

/// The services `plan` records, as SLOs; an error when it records none (a
/// ParvaGPU map names models, not services, rates or SLOs).
fn recorded_services(plan: &Plan) -> Result<Vec<ServiceSlo>> {
    if plan.services.is_empty() {
        bail!(
            "no SLOs given, and the plan records none (a ParvaGPU deployment map names models only): pass --slo \
             FILE, or --slo-rates FILE --slo-latency FILE --scenario K"
        );
    }
    plan.services
        .iter()
        .map(|report| {
            let slo =
                ServiceSlo::new(report.service.clone(), report.model.clone(), report.rate_rps, report.latency_slo_ms)?;
            Ok(match report.percentile {
                Some(percentile) => slo.with_percentile(percentile)?,
                None => slo,
            })
        })
        .collect()
}

/// `verify --simulate`: the plan's requests simulated one by one.
fn simulate(args: &VerifyArgs, plan: &Plan, catalog: &ProfileCatalog) -> Result<(SimulationOptions, Simulated)> {
    let options = serving::options(&args.traffic, plan)?;
    let simulated = serving::simulate_plan(plan, Some(catalog), &options)?;
    for line in &simulated.notes {
        note(format_args!("{line}"));
    }
    Ok((options, simulated))
}
