//! Two plans side by side: every GPU that changes drawn as it was and as it
//! will be, so an operator sees which layouts a transition touches.

use std::fmt::Write;

use tessera_core::text::escape_xml;
use tessera_core::{GpuAssignment, GpuChange, GpuModel, Plan, PlanDiff};

use crate::draw::{gpu_width_px, utilisation_by_service, write_gpu, GPU_HEIGHT_PX};
use crate::html::styled_page;
use crate::palette::Palette;

/// Extra page style: one row per GPU, the old figure left of the new one.
const DIFF_STYLE: &str = ".change{display:flex;align-items:center;gap:10px;margin:6px 0}\
.change h3{font-size:14px;margin:0;width:150px;flex:none}.arrow{font-size:22px;color:#6b7280}\
.absent{box-sizing:border-box;flex:none;display:flex;align-items:center;justify-content:center;color:#6b7280;\
border:1px dashed #ccc;border-radius:6px;font-size:13px}.change.layout_changed h3{color:#b45309}\
.change.added h3{color:#15803d}.change.removed h3{color:#b91c1c}";

/// The figure of `gpu` as inline SVG, or a placeholder of the size of a
/// `gpu_model` figure saying `absent`.
fn figure(gpu: Option<&GpuAssignment>, gpu_model: GpuModel, plan: &Plan, palette: &Palette, absent: &str) -> String {
    let Some(gpu) = gpu else {
        let width = gpu_width_px(gpu_model.spec().memory_slices);
        return format!(r#"<div class="absent" style="width:{width}px;height:{GPU_HEIGHT_PX}px">{absent}</div>"#);
    };
    let width = gpu_width_px(gpu.gpu_model.spec().memory_slices);
    let mut out = format!(
        r#"<svg class="gpu" data-node="{}" data-gpu="{}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{GPU_HEIGHT_PX}" viewBox="0 0 {width} {GPU_HEIGHT_PX}">"#,
        gpu.node, gpu.index
    );
    write_gpu(&mut out, gpu, palette, &utilisation_by_service(plan));
    out.push_str("</svg>");
    out
}

/// The GPU at (`node`, `index`) of `plan`, if it has one.
fn gpu_at(plan: &Plan, node: u32, index: u32) -> Option<&GpuAssignment> {
    plan.gpus.iter().find(|gpu| gpu.node == node && gpu.index == index)
}

/// A self-contained HTML page titled `title`: `summary` (plain text, one
/// paragraph per line), then one row per GPU of `diff` — unchanged ones only
/// with `all` — its old figure beside its new one, a service keeping its
/// colour in both.
pub fn diff_report_html(old: &Plan, new: &Plan, diff: &PlanDiff, summary: &str, title: &str, all: bool) -> String {
    let palette = Palette::of_plans(&[new, old]);
    let mut body = String::new();
    for line in summary.lines().filter(|line| !line.trim().is_empty()) {
        let _ = write!(body, r#"<p class="summary">{}</p>"#, escape_xml(line));
    }
    let mut shown = 0;
    for gpu in diff.gpus.iter().filter(|gpu| all || gpu.change != GpuChange::Unchanged) {
        shown += 1;
        let kind = serde_name(gpu.change);
        let _ = write!(
            body,
            r#"<div class="change {kind}" data-node="{}" data-gpu="{}" data-change="{kind}"><h3>node {} · GPU {}<br>{}</h3>{}<span class="arrow">→</span>{}</div>"#,
            gpu.node,
            gpu.index,
            gpu.node,
            gpu.index,
            gpu.change.name(),
            figure(gpu_at(old, gpu.node, gpu.index), gpu.gpu_model, old, &palette, "not in the old plan"),
            figure(gpu_at(new, gpu.node, gpu.index), gpu.gpu_model, new, &palette, "not in the new plan"),
        );
        body.push('\n');
    }
    if shown == 0 {
        body.push_str(r#"<p class="summary">No GPU changes.</p>"#);
    }
    styled_page(title, &[], DIFF_STYLE, &body)
}

/// The change's name as in the diff's JSON (`layout_changed`).
fn serde_name(change: GpuChange) -> String {
    change.name().replace(' ', "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use tessera_core::diff_plans;

    #[test]
    fn only_changed_gpus_are_drawn_old_beside_new() {
        let old = two_gpu_plan();
        let mut new = old.clone();
        new.gpus.remove(1);
        let diff = diff_plans(&old, &new);
        let html = diff_report_html(&old, &new, &diff, "1 GPU removed", "diff", false);
        assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("<script"));
        assert_eq!(html.matches(r#"<div class="change "#).count(), 1);
        assert!(html.contains(r#"data-change="removed""#));
        assert!(html.contains("not in the new plan"));
        // The removed GPU's old figure is drawn, with its tiles.
        let row = &html[html.find(r#"data-change="removed""#).unwrap()..];
        assert!(row.contains(r#"<svg class="gpu""#) && row.contains(r#"<g class="tile""#));
        let all = diff_report_html(&old, &new, &diff, "", "diff", true);
        assert_eq!(all.matches(r#"<div class="change "#).count(), 2);
        assert_eq!(all.matches(r#"<svg class="gpu""#).count(), 3);
    }

    #[test]
    fn a_plan_against_itself_says_nothing_changes() {
        let plan = two_gpu_plan();
        let html = diff_report_html(&plan, &plan, &diff_plans(&plan, &plan), "", "diff", false);
        assert!(html.contains("No GPU changes.") && !html.contains(r#"<svg class="gpu""#));
    }
}
