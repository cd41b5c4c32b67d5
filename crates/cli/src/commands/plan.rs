//! `tessera plan`: the command line as a [`PlanRequest`], the plan
//! rendered.

use std::path::Path;

use anyhow::Result;
use tessera_core::text::count;
use tessera_core::Plan;
use tessera_plan::{plan, Inventory, PlanRequest, Planned, ReplanComparison, ReplanFrom};
use tessera_store::{read_plan_file, MapProfiles};

use crate::args::{Format, PlanArgs};
use crate::commands::diff::comparison_table;
use crate::commands::serving;
use crate::inputs;
use crate::output::{emit, note};
use crate::progress::Progress;
use crate::render::render_plan;
use crate::terminal::wrap_words;

pub fn run(args: &PlanArgs, store: Option<&Path>) -> Result<()> {
    let target = if args.cluster { Some(cluster_inventory(args)?) } else { None };
    let fleet = match &target {
        Some(target) => target.offers(&args.options.gpus)?,
        None => args.options.gpus.clone(),
    };
    let inputs = inputs::load(&args.inputs, &fleet, store)?;
    let current = match &args.from {
        Some(path) => {
            let map_profiles = MapProfiles { gpu: inputs::first_gpu(&args.options.gpus), catalog: inputs.catalog() };
            Some(read_plan_file(path, Some(map_profiles))?)
        }
        None => None,
    };
    let options = serving::with_trace_read(&args.options)?;
    let from = current.as_ref().map(|current| ReplanFrom::new(current, &args.replan));
    let request = PlanRequest { target: target.as_ref(), ..PlanRequest::from_options(&options, &inputs, from)? };
    let progress = Progress::spinner(match &current {
        Some(current) => format!(
            "replanning {} services from a plan of {}",
            inputs.services().len(),
            count(current.gpu_count, "GPU")
        ),
        None => format!(
            "planning {} services ({} strategy, {})",
            inputs.services().len(),
            args.options.strategy,
            match request.time_limit {
                Some(_) =>
                    format!("the segments' capacities, then a search of up to {:.0} s", args.options.time_limit_s),
                None => "no time limit".to_string(),
            }
        ),
    });
    let planned = plan(&request);
    drop(progress);
    let Planned { plan, replan } = planned?;
    let mut document = render_plan(&plan, args.format)?;
    if let (Some(current), Some(comparison)) = (&current, &replan) {
        compare_with_fresh(&mut document, args.format, &plan, current, comparison);
    }
    emit(&document, args.output.as_deref())
}

/// After a replan: the comparison with the fresh optimum, as a table under
/// a table, or one line on stderr beside a machine format.
fn compare_with_fresh(
    document: &mut Vec<u8>,
    format: Format,
    plan: &Plan,
    current: &Plan,
    comparison: &ReplanComparison,
) {
    let ReplanComparison { fresh, diff, fresh_diff, from_fresh } = comparison;
    if format == Format::Table {
        let table = comparison_table(
            current.gpu_count,
            &[("replan", plan.gpu_count, &diff.totals), ("fresh optimum", fresh.gpu_count, &fresh_diff.totals)],
        );
        document.extend_from_slice(
            wrap_words(
                "\nfrom the current plan: MIG layouts kept, GPUs reconfigured, instances created + destroyed, \
                 processes started, services with segments added or removed:",
                "",
                "",
            )
            .as_bytes(),
        );
        document.push(b'\n');
        document.extend_from_slice(table.as_bytes());
    } else {
        note(format_args!(
            "replan: {}, {} of {} layouts kept; fresh optimum: {}, {} kept{}",
            count(plan.gpu_count, "GPU"),
            diff.totals.layouts_kept(),
            current.gpu_count,
            count(fresh.gpu_count, "GPU"),
            fresh_diff.totals.layouts_kept(),
            if *from_fresh { " (the fresh plan's layouts changed least)" } else { "" }
        ));
    }
}

/// The Kubernetes cluster's GPU nodes (`--cluster`), saying which were left
/// out.
fn cluster_inventory(args: &PlanArgs) -> Result<Inventory> {
    let inventory = args.kube.connect()?.inventory()?.nodes;
    for line in &inventory.left_out {
        note(format_args!("{line}"));
    }
    Ok(inventory)
}
