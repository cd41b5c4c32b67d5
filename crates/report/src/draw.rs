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

use tessera_core::text::{count, escape_xml};
use tessera_core::{GpuAssignment, InstanceAssignment, Plan, SharedInstance};

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

/// The fill and the compute band's shade of every shared instance's tile:
/// a neutral grey, so that no member's colour stands for the others.
pub(crate) const SHARED_SWATCH: (&str, &str) = ("#e3e6ea", "#8d96a0");

/// One instance's tile: where it sits and what it says. Its text is
/// escaped and cut to fit.
struct Tile {
    /// The tile's data attributes (escaped), after `class="tile"`.
    attributes: String,
    /// MIG profile name.
    profile: String,
    /// Compute slices.
    size: u8,
    /// Memory slices, from the start slice.
    memory_slices: u32,
    /// Start memory slice.
    start: u8,
    /// Fill and compute band shade.
    swatch: (String, String),
    /// The tooltip.
    title: String,
    /// The second to fourth lines of text (the first is the profile).
    lines: [String; 3],
}

/// The tile of a dedicated instance: its service, configuration and the
/// service's utilisation.
fn dedicated_tile(
    instance: &InstanceAssignment,
    memory_slices: u32,
    palette: &Palette,
    utilisation: &HashMap<&str, f64>,
) -> Tile {
    let service = &instance.service;
    let width = memory_slices * SLICE_WIDTH_PX;
    let util_text =
        utilisation.get(service.as_str()).map_or("util —".to_string(), |u| format!("util {:.0}%", u * 100.0));
    Tile {
        attributes: format!(r#"data-service="{}""#, escape_xml(service)),
        profile: escape_xml(&instance.profile),
        size: instance.size,
        memory_slices,
        start: instance.start,
        swatch: (palette.fill(service).to_string(), palette.strong(service).to_string()),
        title: format!(
            "{} on {} at memory slice {}: {} of {}, batch {} × {} processes, {:.1} req/s, {:.1} ms per batch, {}",
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
        ),
        lines: [escape_xml(&fit(service, width)), format!("b{}×{}", instance.batch, instance.procs), util_text],
    }
}

/// What a shared instance's tile says of it: "5 shared" (services), the discipline,
/// the executor's busy share, and the tooltip's members (each with its
/// model, rate and batch) — as the report's script says it too.
pub(crate) fn shared_text(shared: &SharedInstance) -> (String, String, String) {
    let members: Vec<String> = shared
        .members
        .iter()
        .map(|m| format!("{} ({}, {:.1} req/s, batch {})", m.service, m.model, m.capacity_rps, m.batch))
        .collect();
    let busy = format!("busy {:.0}%", shared.busy_share(0.0) * 100.0);
    let title = format!(
        "shared by {} under the {} discipline, {:.1} GB of members, executor {busy}: {}",
        count(shared.members.len(), "service"),
        shared.sharing,
        shared.memory_gb(),
        members.join(", ")
    );
    (format!("{} shared", shared.members.len()), busy, title)
}

/// The tile of a shared instance: how many services, the discipline, the
/// executor's busy share; every member in the tooltip.
fn shared_tile(shared: &SharedInstance, memory_slices: u32) -> Tile {
    let (label, busy, members) = shared_text(shared);
    let names: Vec<&str> = shared.members.iter().map(|m| m.service.as_str()).collect();
    Tile {
        attributes: format!(r#"data-members="{}""#, escape_xml(&names.join(" "))),
        profile: escape_xml(&shared.profile),
        size: shared.size,
        memory_slices,
        start: shared.start,
        swatch: (SHARED_SWATCH.0.to_string(), SHARED_SWATCH.1.to_string()),
        title: format!("{} at memory slice {}: {}", escape_xml(&shared.profile), shared.start, escape_xml(&members)),
        lines: [escape_xml(&fit(&label, memory_slices * SLICE_WIDTH_PX)), shared.sharing.to_string(), busy],
    }
}

/// Writes one tile.
fn write_tile(out: &mut String, tile: &Tile) {
    let (x, width) = (slice_x(u32::from(tile.start)), tile.memory_slices * SLICE_WIDTH_PX);
    let _ = write!(
        out,
        r#"<g class="tile" {} data-profile="{}" data-start="{}" data-memory-slices="{}">"#,
        tile.attributes, tile.profile, tile.start, tile.memory_slices
    );
    let _ = write!(
        out,
        r#"<rect x="{x}" y="{MEMORY_TOP_PX}" width="{width}" height="{MEMORY_BAND_PX}" rx="4" fill="{}"/>"#,
        tile.swatch.0
    );
    let _ = write!(out, "<title>{}</title>", tile.title);
    let profile = format!(r#"<tspan class="profile">{}</tspan>"#, tile.profile);
    for (text, dy) in [(&profile, 16), (&tile.lines[0], 31), (&tile.lines[1], 46), (&tile.lines[2], 61)] {
        let _ = write!(out, r#"<text class="tile-text" x="{}" y="{}">{text}</text>"#, x + 5, MEMORY_TOP_PX + dy);
    }
    let _ = write!(
        out,
        r#"<rect class="compute-used" x="{x}" y="{COMPUTE_TOP_PX}" width="{}" height="{COMPUTE_BAND_PX}" fill="{}"/>"#,
        u32::from(tile.size) * SLICE_WIDTH_PX,
        tile.swatch.1
    );
    out.push_str("</g>");
}

/// Writes one GPU's figure (its contents only: the caller wraps it in an
/// `<svg>` or a `<g>`): its dedicated instances' tiles, then its shared
/// instances'.
pub(crate) fn write_gpu(out: &mut String, gpu: &GpuAssignment, palette: &Palette, utilisation: &HashMap<&str, f64>) {
    let spec = gpu.gpu_model.spec();
    let used: u32 = gpu.layout().map(|(_, size, _)| u32::from(size)).sum();
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
    let memory_slices =
        |profile: &str, size: u8| u32::from(spec.profile_by_name(profile).map_or(size, |p| p.memory_slices));
    for instance in &gpu.instances {
        let tile = dedicated_tile(instance, memory_slices(&instance.profile, instance.size), palette, utilisation);
        write_tile(out, &tile);
    }
    for shared in &gpu.shared {
        write_tile(out, &shared_tile(shared, memory_slices(&shared.profile, shared.size)));
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
    fn a_shared_instance_is_one_grey_tile_naming_its_members_and_its_executor_s_busy_share() {
        let mut plan = two_gpu_plan();
        let member = |service: &str, rate_rps: f64| tessera_core::SharedMember {
            service: service.to_string(),
            model: "resnet50".to_string(),
            batch: 1,
            latency_ms: 10.0,
            throughput_rps: 100.0,
            capacity_rps: rate_rps,
            memory_gb: 2.0,
        };
        plan.gpus[1].shared.push(SharedInstance {
            profile: "1g.10gb".to_string(),
            size: 1,
            start: 0,
            sharing: tessera_core::Sharing::Serialized,
            members: vec![member("light<a>", 20.0), member("light-b", 10.0), member("light-c", 12.0)],
        });
        let svg = plan_svg(&plan);
        assert_eq!(svg.matches(r#"<g class="tile""#).count(), 4);
        assert!(svg.contains("5 of 7 compute slices free"), "{svg}");
        let tile =
            r#"<g class="tile" data-members="light&lt;a&gt; light-b light-c" data-profile="1g.10gb" data-start="0""#;
        assert!(svg.contains(tile), "{svg}");
        assert!(svg.contains(&format!(r#"width="64" height="{MEMORY_BAND_PX}" rx="4" fill="{}""#, SHARED_SWATCH.0)));
        // 42 req/s of 10 ms batches: the executor is 42% busy.
        assert!(svg.contains(">3 shared<") && svg.contains(">serialized<") && svg.contains(">busy 42%<"), "{svg}");
        assert!(svg.contains(
            "<title>1g.10gb at memory slice 0: shared by 3 services under the serialized discipline, 6.0 GB of \
             members, executor busy 42%: light&lt;a&gt; (resnet50, 20.0 req/s, batch 1), light-b"
        ));
    }

    #[test]
    fn services_get_distinct_colours_and_the_same_plan_the_same_bytes() {
        let plan = two_gpu_plan();
        let palette = Palette::of(&plan);
        assert_ne!(palette.fill("search"), palette.fill("chat<&>"));
        assert_eq!(plan_svg(&plan), plan_svg(&plan));
    }
}
