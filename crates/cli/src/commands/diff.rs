//! `tessera diff`, and the comparison `tessera plan --from` prints.

use anyhow::Result;
use tessera_core::text::count;
use tessera_core::{diff_plans, transition_steps, DiffTotals, GpuChange, Plan, PlanDiff, Step};

use crate::args::{DiffArgs, ListFormat};
use crate::inputs::read_sound_plan;
use crate::output::{emit, is_stdout, out, outln};
use crate::table::TextTable;
use crate::terminal::wrap_words;

pub fn run(args: &DiffArgs) -> Result<()> {
    // Plan files written by `tessera plan` record their GPU models and need
    // no profiles; a ParvaGPU map (which needs them) is refused by the
    // reader, a plan the hardware could not hold by the structural checks.
    let (old, new) = (read_sound_plan(&args.old)?, read_sound_plan(&args.new)?);
    if args.steps {
        if let Some(why) = tessera_core::hardware_change(&old, &new) {
            anyhow::bail!("--steps: {why}");
        }
    }
    let diff = diff_plans(&old, &new);
    let steps = if args.steps { transition_steps(&old, &new) } else { Vec::new() };
    if let Some(picture) = &args.picture {
        let title = format!("Tessera plan diff — {} → {}", file_name(&args.old), file_name(&args.new));
        let summary = totals_lines(old.gpu_count, new.gpu_count, &diff.totals);
        let page = tessera_report::diff_report_html(&old, &new, &diff, &summary, &title, args.all);
        emit(page.as_bytes(), Some(picture))?;
        if is_stdout(Some(picture)) {
            // The page is the output; a table after it would spoil it.
            return Ok(());
        }
    }
    match args.format {
        ListFormat::Json => {
            let mut report = serde_json::json!({
                "old": args.old,
                "new": args.new,
                "totals": diff.totals,
                "layouts_kept": diff.totals.layouts_kept(),
                "gpus": diff.gpus.iter().filter(|g| args.all || g.change != GpuChange::Unchanged).collect::<Vec<_>>(),
                "services": diff.services.iter().filter(|s| args.all || s.changed()).collect::<Vec<_>>(),
            });
            if args.steps {
                report["steps"] = serde_json::to_value(&steps)?;
            }
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        }
        ListFormat::Table => {
            outln!("{} → {}", args.old.display(), args.new.display())?;
            out!("{}", render_diff(&old, &new, &diff, args.all))?;
            if args.steps {
                out!("\n{}", render_steps(&steps))?;
            }
        }
    }
    Ok(())
}

/// The last component of `path`, for titles.
fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

/// The totals as three paragraphs of words, one a line.
fn totals_lines(old_gpus: usize, new_gpus: usize, totals: &DiffTotals) -> String {
    let kept = totals.layouts_kept();
    let share = if old_gpus > 0 { format!(" ({:.1}%)", 100.0 * kept as f64 / old_gpus as f64) } else { String::new() };
    format!(
        "{} → {}: {kept} of {old_gpus} layouts kept{share}\n\
         GPUs: {} unchanged, {} with services changed only, {} with the layout changed, {} added, {} removed\n\
         {} created, {} destroyed; {} started; {} with segments added or removed",
        count(old_gpus, "GPU"),
        count(new_gpus, "GPU"),
        totals.gpus_unchanged,
        totals.gpus_services_changed,
        totals.gpus_layout_changed,
        totals.gpus_added,
        totals.gpus_removed,
        count(totals.instances_created, "instance"),
        totals.instances_destroyed,
        count(totals.processes_restarted, "process"),
        count(totals.services_changed, "service"),
    )
}

/// The totals as three paragraphs of words, wrapped to the terminal.
pub fn totals_text(old_gpus: usize, new_gpus: usize, totals: &DiffTotals) -> String {
    let text = totals_lines(old_gpus, new_gpus, totals);
    text.lines().map(|line| wrap_words(line, "", "  ") + "\n").collect()
}

/// The totals, then the GPUs and services that change (all with `all`).
fn render_diff(old: &Plan, new: &Plan, diff: &PlanDiff, all: bool) -> String {
    let mut text = totals_text(old.gpu_count, new.gpu_count, &diff.totals);
    let mut gpus = TextTable::new(&["node", "gpu", "change", "old layout", "new layout"]);
    let mut listed = 0;
    for gpu in diff.gpus.iter().filter(|g| all || g.change != GpuChange::Unchanged) {
        listed += 1;
        gpus.row_of_pieces(vec![
            vec![gpu.node.to_string()],
            vec![gpu.index.to_string()],
            vec![gpu.change.name().to_string()],
            pieces(&gpu.old_layout),
            pieces(&gpu.new_layout),
        ]);
    }
    if listed > 0 {
        text.push('\n');
        text.push_str(&gpus.render());
    }
    let mut services = TextTable::new(&["service", "kept", "added", "removed"]);
    let mut listed = 0;
    for service in diff.services.iter().filter(|s| all || s.changed()) {
        listed += 1;
        services.row(vec![
            service.service.clone(),
            service.segments_kept.to_string(),
            service.segments_added.to_string(),
            service.segments_removed.to_string(),
        ]);
    }
    if listed > 0 {
        text.push('\n');
        text.push_str(&services.render());
    }
    text
}

fn pieces(layout: &[String]) -> Vec<String> {
    if layout.is_empty() {
        vec!["-".to_string()]
    } else {
        layout.iter().enumerate().map(|(i, tile)| if i == 0 { tile.clone() } else { format!(" {tile}") }).collect()
    }
}

/// Plans side by side against the same old plan: GPUs, layouts kept, GPUs
/// reconfigured, instances created + destroyed, processes started, services
/// with segments added or removed.
pub fn comparison_table(old_gpus: usize, rows: &[(&str, usize, &DiffTotals)]) -> String {
    let mut table = TextTable::new(&["plan", "GPUs", "kept", "reconfigured", "instances ±", "processes", "services"]);
    for (name, gpus, totals) in rows {
        table.row(vec![
            name.to_string(),
            gpus.to_string(),
            format!("{}/{old_gpus}", totals.layouts_kept()),
            totals.gpus_reconfigured().to_string(),
            (totals.instances_created + totals.instances_destroyed).to_string(),
            totals.processes_restarted.to_string(),
            totals.services_changed.to_string(),
        ]);
    }
    table.render()
}

/// The steps as a table (step, GPU, its operations), then each service that
/// dips: in how many steps, and how low.
fn render_steps(steps: &[Step]) -> String {
    let mut text = wrap_words(
        &format!("{}, make before break (each GPU's operations in order):", count(steps.len(), "step")),
        "",
        "",
    );
    text.push('\n');
    if steps.is_empty() {
        return text;
    }
    let mut table = TextTable::new(&["step", "gpu", "operations"]);
    let mut dips: std::collections::BTreeMap<&str, (usize, f64, f64)> = std::collections::BTreeMap::new();
    for (number, step) in steps.iter().enumerate() {
        for gpu in &step.gpus {
            let last = gpu.operations.len().saturating_sub(1);
            let operations: Vec<String> = gpu
                .operations
                .iter()
                .enumerate()
                .map(|(i, op)| if i == last { op.to_string() } else { format!("{op}, ") })
                .collect();
            table.row_of_pieces(vec![
                vec![(number + 1).to_string()],
                vec![format!("{}:{}", gpu.node, gpu.index)],
                operations,
            ]);
        }
        for dip in &step.dips {
            let share = dip.provisioned_rps.max(0.0) / dip.rate_rps;
            let entry = dips.entry(&dip.service).or_insert((0, share, dip.rate_rps));
            entry.0 += 1;
            entry.1 = entry.1.min(share);
        }
    }
    text.push_str(&table.render());
    if dips.is_empty() {
        text.push_str("no service falls below its rate\n");
    }
    for (service, (count_of_steps, lowest, rate_rps)) in dips {
        let line = format!(
            "{service} dips below its {rate_rps} req/s in {} (down to {:.0}% of it): no spare capacity covers it",
            count(count_of_steps, "step"),
            100.0 * lowest
        );
        text.push_str(&wrap_words(&line, "", "  "));
        text.push('\n');
    }
    text
}
