//! The tiles: one GPU as its memory and compute slices, each MIG instance a
//! tile over the memory slices it occupies from its start slice, its
//! compute slices marked below.
//!
//! A MIG placement counts in memory slices; compute slice `c` sits under
//! memory slice `c` (on an A100, memory slice 7 has no compute slice of its
//! own), so an instance of `g` compute slices starting at memory slice `s`
//! holds compute slices `s .. s + g`.

use std::collections::HashMap;
use std::fmt::Write;

use tessera_core::{GpuAssignment, Plan};

use tessera_core::text::escape_xml;

use crate::palette::Palette;

/// Width of one memory slice, px.
pub(crate) const SLICE_WIDTH_PX: u32 = 64;
/// Space around a GPU's slices, px.
const PAD_PX: u32 = 6;
/// Height of the GPU's caption line, px.
const CAPTION_PX: u32 = 18;
/// Height of the memory band that holds the tiles, px.
const MEMORY_BAND_PX: u32 = 72;
/// Height of the compute band, px.
const COMPUTE_BAND_PX: u32 = 14;
/// Height of the slice numbers under the bands, px.
const AXIS_PX: u32 = 14;
/// Top of the memory band.
const MEMORY_TOP_PX: u32 = CAPTION_PX + 4;
/// Top of the compute band.
const COMPUTE_TOP_PX: u32 = MEMORY_TOP_PX + MEMORY_BAND_PX + 4;
/// Height of one GPU's figure.
pub(crate) const GPU_HEIGHT_PX: u32 = COMPUTE_TOP_PX + COMPUTE_BAND_PX + AXIS_PX + 2;
/// Roughly how wide one character of the tile text is, px (11 px sans).
const CHAR_WIDTH_PX: f64 = 6.2;

/// Each service's utilisation under the plan: rate / provisioned.
pub(crate) fn utilisation_by_service(plan: &Plan) -> HashMap<&str, f64> {
    plan.services.iter().filter_map(|report| Some((report.service.as_str(), report.utilisation()?))).collect()
}

/// Width of a GPU figure with `memory_slices` slices.
pub(crate) fn gpu_width_px(memory_slices: u8) -> u32 {
    2 * PAD_PX + u32::from(memory_slices) * SLICE_WIDTH_PX
}

/// Left edge of memory slice `slice`.
fn slice_x(slice: u32) -> u32 {
    PAD_PX + slice * SLICE_WIDTH_PX
}

/// The drawing's measures as a JSON array, for the report's script (which
/// draws GPUs exactly as [`write_gpu`]): padding, slice width, memory band
/// top and height, compute band top and height, the slice numbers'
/// baseline, a GPU's height, the width of one character of tile text.
pub(crate) fn geometry_json() -> String {
    format!(
        "[{PAD_PX},{SLICE_WIDTH_PX},{MEMORY_TOP_PX},{MEMORY_BAND_PX},{COMPUTE_TOP_PX},{COMPUTE_BAND_PX},{},{GPU_HEIGHT_PX},{CHAR_WIDTH_PX}]",
        AXIS_BASELINE_PX
    )
}

/// The baseline of the slice numbers.
const AXIS_BASELINE_PX: u32 = COMPUTE_TOP_PX + COMPUTE_BAND_PX + AXIS_PX - 3;

/// `text` cut to fit `width_px` (an ellipsis marks the cut).
fn fit(text: &str, width_px: u32) -> String {
    let room = ((f64::from(width_px) - 8.0) / CHAR_WIDTH_PX).floor().max(1.0) as usize;
    if text.chars().count() <= room {
        return text.to_string();
    }
    let kept: String = text.chars().take(room.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// Writes one GPU's figure (its contents only: the caller wraps it in an
/// `<svg>` or a `<g>`).
pub(crate) fn write_gpu(out: &mut String, gpu: &GpuAssignment, palette: &Palette, utilisation: &HashMap<&str, f64>) {
    let spec = gpu.gpu_model.spec();
    let used: u32 = gpu.instances.iter().map(|instance| u32::from(instance.size)).sum();
    let free = u32::from(spec.compute_slices).saturating_sub(used);
    let _ = write!(
        out,
        r#"<text class="caption" x="{PAD_PX}" y="13">node {} · GPU {} · {} · {} of {} compute slices free</text>"#,
        gpu.node, gpu.index, spec.display_name, free, spec.compute_slices
    );
    for slice in 0..u32::from(spec.memory_slices) {
        let _ = write!(
            out,
            r#"<rect class="mem-slice" data-slice="{slice}" x="{}" y="{MEMORY_TOP_PX}" width="{SLICE_WIDTH_PX}" height="{MEMORY_BAND_PX}"/>"#,
            slice_x(slice)
        );
        let _ = write!(out, r#"<text class="axis" x="{}" y="{}">{slice}</text>"#, slice_x(slice) + 3, AXIS_BASELINE_PX);
    }
    for slice in 0..u32::from(spec.compute_slices) {
        let _ = write!(
            out,
            r#"<rect class="compute-slice" data-slice="{slice}" x="{}" y="{COMPUTE_TOP_PX}" width="{SLICE_WIDTH_PX}" height="{COMPUTE_BAND_PX}"/>"#,
            slice_x(slice)
        );
    }
    for instance in &gpu.instances {
        let memory_slices = spec
            .profile_by_name(&instance.profile)
            .map_or(u32::from(instance.size), |profile| u32::from(profile.memory_slices));
        let (x, width) = (slice_x(u32::from(instance.start)), memory_slices * SLICE_WIDTH_PX);
        let service = &instance.service;
        let util = utilisation.get(service.as_str());
        let util_text = util.map_or("util —".to_string(), |u| format!("util {:.0}%", u * 100.0));
        let _ = write!(
            out,
            r#"<g class="tile" data-service="{}" data-profile="{}" data-start="{}" data-memory-slices="{memory_slices}">"#,
            escape_xml(service),
            escape_xml(&instance.profile),
            instance.start
        );
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{MEMORY_TOP_PX}" width="{width}" height="{MEMORY_BAND_PX}" rx="4" fill="{}"/>"#,
            palette.fill(service)
        );
        let _ = write!(
            out,
            "<title>{} on {} at memory slice {}: {} of {}, batch {} × {} processes, {:.1} req/s, {:.1} ms per batch, \
             {}</title>",
            escape_xml(&instance.profile),
            escape_xml(service),
            instance.start,
            escape_xml(service),
            escape_xml(&instance.model),
            instance.batch,
            instance.procs,
            instance.throughput_rps,
            instance.latency_ms,
            util_text
        );
        let lines = [
            (format!("<tspan class=\"profile\">{}</tspan>", escape_xml(&instance.profile)), 16),
            (escape_xml(&fit(service, width)), 31),
            (format!("b{}×{}", instance.batch, instance.procs), 46),
            (util_text.clone(), 61),
        ];
        for (text, dy) in lines {
            let _ = write!(out, r#"<text class="tile-text" x="{}" y="{}">{text}</text>"#, x + 5, MEMORY_TOP_PX + dy);
        }
        let compute_x = x;
        let compute_width = u32::from(instance.size) * SLICE_WIDTH_PX;
        let _ = write!(
            out,
            r#"<rect class="compute-used" x="{compute_x}" y="{COMPUTE_TOP_PX}" width="{compute_width}" height="{COMPUTE_BAND_PX}" fill="{}"/>"#,
            palette.strong(service)
        );
        out.push_str("</g>");
    }
}

/// The tiles of every GPU of `plan` as one SVG document, GPUs one under
/// another in plan order, nodes headed by their number.
pub fn plan_svg(plan: &Plan) -> String {
    let palette = Palette::of(plan);
    let utilisation = utilisation_by_service(plan);
    let width = plan.gpus.iter().map(|gpu| gpu_width_px(gpu.gpu_model.spec().memory_slices)).max().unwrap_or(200);
    let mut body = String::new();
    let mut y = 0;
    let mut node = None;
    for gpu in &plan.gpus {
        if node != Some(gpu.node) {
            node = Some(gpu.node);
            y += 22;
            let _ = write!(body, r#"<text class="node" x="{PAD_PX}" y="{}">node {}</text>"#, y - 6, gpu.node);
        }
        let _ = write!(
            body,
            r#"<g class="gpu" data-node="{}" data-gpu="{}" transform="translate(0,{y})">"#,
            gpu.node, gpu.index
        );
        write_gpu(&mut body, gpu, &palette, &utilisation);
        body.push_str("</g>");
        y += GPU_HEIGHT_PX + 6;
    }
    let height = y.max(20);
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="system-ui, sans-serif"><style>{}</style>{body}</svg>
"#,
        SVG_STYLE
    )
}

/// The style of the tiles, shared by the SVG document and the HTML report.
pub(crate) const SVG_STYLE: &str = ".caption{font-size:12px;fill:#333}.node{font-size:14px;font-weight:600;fill:#111}\
.axis{font-size:9px;fill:#888}.mem-slice{fill:#f4f4f4;stroke:#c8c8c8;stroke-width:1}\
.compute-slice{fill:#f4f4f4;stroke:#c8c8c8;stroke-width:1}.compute-used{stroke:#fff;stroke-width:1}\
.tile rect:first-of-type{stroke:#555;stroke-width:1}.tile-text{font-size:11px;fill:#1a1a1a}\
.profile{font-weight:700}";

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tessera_core::{GpuModel, InstanceAssignment, ServiceReport};

    fn instance(profile: &str, size: u8, start: u8, service: &str) -> InstanceAssignment {
        InstanceAssignment {
            profile: profile.to_string(),
            size,
            start,
            service: service.to_string(),
            model: "bert-base".to_string(),
            batch: 8,
            procs: 2,
            throughput_rps: 100.0,
            latency_ms: 20.0,
            capacity_rps: None,
        }
    }

    pub(crate) fn two_gpu_plan() -> Plan {
        let gpus = vec![
            GpuAssignment {
                node: 0,
                index: 0,
                gpu_model: GpuModel::A100_80GB,
                instances: vec![instance("4g.40gb", 4, 0, "search"), instance("3g.40gb", 3, 4, "chat<&>")],
                shared: Vec::new(),
            },
            GpuAssignment {
                node: 1,
                index: 0,
                gpu_model: GpuModel::A100_80GB,
                instances: vec![instance("1g.10gb", 1, 6, "a-service-with-a-long-name")],
                shared: Vec::new(),
            },
        ];
        let report = |service: &str, rate_rps: f64| ServiceReport {
            service: service.to_string(),
            model: "bert-base".to_string(),
            rate_rps,
            latency_slo_ms: 100.0,
            provisioned_rps: 100.0,
            worst_latency_ms: 60.0,
            segments: 1,
            met: true,
            percentile: None,
            predicted_attainment: None,
            tolerance: None,
            busiest_load: None,
        };
        Plan {
            services: vec![report("search", 50.0), report("chat<&>", 80.0), report("a-service-with-a-long-name", 25.0)],
            ..Plan::from_gpus(gpus, "optimal", "queueing", 1)
        }
    }

    #[test]
    fn every_instance_is_a_tile_at_its_start_slice() {
        let svg = plan_svg(&two_gpu_plan());
        assert_eq!(svg.matches(r#"<g class="tile""#).count(), 3);
        // 3g.40gb at memory slice 4 spans four memory slices, three compute slices.
        let x = slice_x(4);
        assert!(svg.contains(&format!(r#"<rect x="{x}" y="{MEMORY_TOP_PX}" width="256""#)), "{svg}");
        assert!(svg.contains(&format!(r#"class="compute-used" x="{x}" y="{COMPUTE_TOP_PX}" width="192""#)));
        // 1g.10gb at memory slice 6.
        assert!(svg.contains(&format!(r#"<rect x="{}" y="{MEMORY_TOP_PX}" width="64""#, slice_x(6))));
        assert!(svg.contains("0 of 7 compute slices free") && svg.contains("6 of 7 compute slices free"));
    }

    #[test]
    fn names_are_escaped_and_cut_to_fit_with_the_whole_name_in_the_tooltip() {
        let svg = plan_svg(&two_gpu_plan());
        assert!(svg.contains("chat&lt;&amp;&gt;") && !svg.contains("chat<&>"));
        assert!(svg.contains(">a-servic…<"), "{svg}");
        assert!(svg.contains("<title>1g.10gb on a-service-with-a-long-name"));
        assert!(svg.contains("util 25%") && svg.contains("util 80%") && svg.contains("b8×2"));
    }

    #[test]
    fn services_get_distinct_colours_and_the_same_plan_the_same_bytes() {
        let plan = two_gpu_plan();
        let palette = Palette::of(&plan);
        assert_ne!(palette.fill("search"), palette.fill("chat<&>"));
        assert_eq!(plan_svg(&plan), plan_svg(&plan));
    }
}
