//! `tessera diff`, and the comparison `tessera plan --from` prints.

use anyhow::Result;
use tessera_core::text::count;
use tessera_core::{diff_plans, DiffTotals, GpuChange, GpuModel, Plan, PlanDiff, ProfileCatalog};
use tessera_store::read_plan_file;

use crate::args::{DiffArgs, ListFormat};
use crate::output::{out, outln};
use crate::table::TextTable;
use crate::terminal::wrap_words;

pub fn run(args: &DiffArgs) -> Result<()> {
    // Plan files written by `tessera plan` record their GPU model and need no
    // profiles; a ParvaGPU map (which needs both) is refused by the reader.
    let read = |path: &std::path::Path| read_plan_file(path, GpuModel::A100_80GB, &ProfileCatalog::new());
    let (old, new) = (read(&args.old)?, read(&args.new)?);
    let diff = diff_plans(&old, &new);
    match args.format {
        ListFormat::Json => {
            let report = serde_json::json!({
                "old": args.old,
                "new": args.new,
                "totals": diff.totals,
                "layouts_kept": diff.totals.layouts_kept(),
                "gpus": diff.gpus.iter().filter(|g| args.all || g.change != GpuChange::Unchanged).collect::<Vec<_>>(),
                "services": diff.services.iter().filter(|s| args.all || s.restarted()).collect::<Vec<_>>(),
            });
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        }
        ListFormat::Table => {
            outln!("{} → {}", args.old.display(), args.new.display())?;
            out!("{}", render_diff(&old, &new, &diff, args.all))?;
        }
    }
    Ok(())
}

/// The totals as three paragraphs of words, wrapped to the terminal.
pub fn totals_text(old_gpus: usize, new_gpus: usize, totals: &DiffTotals) -> String {
    let kept = totals.layouts_kept();
    let share = if old_gpus > 0 { format!(" ({:.1}%)", 100.0 * kept as f64 / old_gpus as f64) } else { String::new() };
    let text = format!(
        "{} → {}: {kept} of {old_gpus} layouts kept{share}\n\
         GPUs: {} unchanged, {} with services changed only, {} with the layout changed, {} added, {} removed\n\
         {} created, {} destroyed; {} started; {} restarted",
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
        count(totals.services_restarted, "service"),
    );
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
    for service in diff.services.iter().filter(|s| all || s.restarted()) {
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
/// restarted.
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
            totals.services_restarted.to_string(),
        ]);
    }
    table.render()
}
