//! The report's GPUs, a page at a time: the first [`GPUS_PER_PAGE`] GPUs
//! drawn in the document (so they read with scripts off), every GPU as
//! compact data (`script.plan-data`, JSON), and a small inline script
//! (`report.js`) that draws any other page from that data — the same
//! markup, byte for byte, as the first page's — pages through them and
//! filters them, with the service table, by a search.
//!
//! A page that drew every GPU grew by about 4 KB per GPU (94 MB and a
//! 47 s render for the 11,000-service reference plan); the data takes
//! tens of bytes per GPU.

use std::collections::HashMap;
use std::fmt::Write;

use tessera_core::text::{count, escape_xml, grouped};
use tessera_core::{GpuAssignment, GpuSpec, Plan};

use crate::draw::{geometry_json, gpu_width_px, shared_text, write_gpu, GPU_HEIGHT_PX, SHARED_SWATCH};
use crate::palette::Palette;

/// GPUs on one page.
pub const GPUS_PER_PAGE: usize = 48;

/// The script that pages, draws and searches.
const SCRIPT: &str = include_str!("report.js");

/// The GPUs section of `plan`'s report: the pager line, the legend of the
/// first page's services and the first page.
pub(crate) fn write_gpu_pages(out: &mut String, plan: &Plan, palette: &Palette, utilisation: &HashMap<&str, f64>) {
    let first: Vec<&GpuAssignment> = plan.gpus.iter().take(GPUS_PER_PAGE).collect();
    let _ = write!(
        out,
        r#"<section class="gpu-pages" data-per-page="{GPUS_PER_PAGE}" data-gpus="{}"><h2>GPUs</h2><p class="pager"><span class="shown">{}</span>"#,
        plan.gpus.len(),
        shown_line(first.len(), plan.gpus.len())
    );
    if plan.gpus.len() > first.len() {
        out.push_str(
            "<noscript> — scripts are off, so only the first page is drawn; \
             <code>tessera report --format svg</code> draws every GPU</noscript>",
        );
    }
    out.push_str("</p>");
    let node_gpus = gpus_per_node(plan);
    write_legend(out, &first, palette);
    out.push_str(r#"<div class="gpu-page">"#);
    write_page(out, &first, plan, &node_gpus, palette, utilisation);
    out.push_str("</div></section>\n");
}

/// "GPUs 1–48 of 23,782", or "2 GPUs" when one page holds them all.
fn shown_line(shown: usize, total: usize) -> String {
    if shown == total {
        count(total, "GPU")
    } else {
        format!("GPUs 1–{shown} of {}", grouped(total as u64))
    }
}

/// How many GPUs each node has in the plan.
fn gpus_per_node(plan: &Plan) -> HashMap<u32, usize> {
    let mut nodes = HashMap::new();
    for gpu in &plan.gpus {
        *nodes.entry(gpu.node).or_insert(0) += 1;
    }
    nodes
}

/// The legend of the services on `gpus`, in the order they first appear,
/// then a chip for shared instances where `gpus` have any.
fn write_legend(out: &mut String, gpus: &[&GpuAssignment], palette: &Palette) {
    out.push_str(r#"<div class="legend">"#);
    let mut seen = std::collections::HashSet::new();
    for instance in gpus.iter().flat_map(|gpu| &gpu.instances) {
        if seen.insert(instance.service.as_str()) {
            let name = escape_xml(&instance.service);
            let _ = write!(
                out,
                r#"<span data-service="{name}"><span class="chip" style="background:{}"></span>{name}</span>"#,
                palette.fill(&instance.service)
            );
        }
    }
    if gpus.iter().any(|gpu| !gpu.shared.is_empty()) {
        let _ = write!(
            out,
            r#"<span class="shared"><span class="chip" style="background:{}"></span>{SHARED_LEGEND}</span>"#,
            SHARED_SWATCH.0
        );
    }
    out.push_str("</div>");
}

/// The legend's words for shared instances.
const SHARED_LEGEND: &str = "shared by several services (members in the tooltip)";

/// `gpus` (consecutive in plan order) grouped by node, each node headed by
/// its number, its name and its GPU count in the plan.
fn write_page(
    out: &mut String,
    gpus: &[&GpuAssignment],
    plan: &Plan,
    node_gpus: &HashMap<u32, usize>,
    palette: &Palette,
    utilisation: &HashMap<&str, f64>,
) {
    let mut at = 0;
    while at < gpus.len() {
        let node = gpus[at].node;
        let name =
            plan.node_names.get(node as usize).map_or_else(String::new, |name| format!(" ({})", escape_xml(name)));
        let _ = write!(
            out,
            r#"<section class="node" data-node="{node}"><h2>Node {node}{name} <span class="muted">· {}</span></h2><div class="gpus">"#,
            count(node_gpus.get(&node).copied().unwrap_or(0), "GPU")
        );
        while at < gpus.len() && gpus[at].node == node {
            let gpu = gpus[at];
            let width = gpu_width_px(gpu.gpu_model.spec().memory_slices);
            let _ = write!(
                out,
                r#"<svg class="gpu" data-node="{}" data-gpu="{}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{GPU_HEIGHT_PX}" viewBox="0 0 {width} {GPU_HEIGHT_PX}">"#,
                gpu.node, gpu.index
            );
            write_gpu(out, gpu, palette, utilisation);
            out.push_str("</svg>");
            at += 1;
        }
        out.push_str("</div></section>");
    }
}

/// Everything the script needs to draw any page, as JSON in a
/// `script.plan-data`, then the script. Every table is indexed by
/// position: `names` (every service and model name once), `services`
/// `[name, swatch, utilisation % as text or null]` (the plan's service
/// list, then services found only in instances), `configs` `[service,
/// model name, profile, batch, procs, throughput, latency]` (each distinct
/// instance configuration), `shared` `[profile, members, then the label,
/// the executor's busy share and the members as the tile says them]` (each
/// shared instance), `gpus` `[node, index, GPU model, then configuration
/// and start slice of each instance]`, a shared instance's configuration
/// written `-1 - k` for `shared[k]`; `shared_swatch` and `shared_legend`
/// as [`SHARED_SWATCH`] and the legend say them.
pub(crate) fn write_data_and_script(
    out: &mut String,
    plan: &Plan,
    palette: &Palette,
    utilisation: &HashMap<&str, f64>,
) {
    let mut tables = Tables::default();
    for report in &plan.services {
        tables.service(&report.service);
    }
    let mut gpus = String::from("[");
    let mut shared: Vec<String> = Vec::new();
    for (position, gpu) in plan.gpus.iter().enumerate() {
        let spec = gpu.gpu_model.spec();
        let model = tables.gpu_models.index(&format!(
            "[{},{},{}]",
            json_string(spec.display_name),
            spec.memory_slices,
            spec.compute_slices
        ));
        let _ = write!(gpus, "{}[{},{},{model}", if position > 0 { "," } else { "" }, gpu.node, gpu.index);
        for instance in &gpu.instances {
            let profile = tables.profile(spec, &instance.profile, instance.size);
            let service = tables.service(&instance.service);
            let model = tables.names.index(&instance.model);
            let config = tables.configs.index(&format!(
                "[{service},{model},{profile},{},{},\"{:.1}\",\"{:.1}\"]",
                instance.batch, instance.procs, instance.throughput_rps, instance.latency_ms
            ));
            let _ = write!(gpus, ",{config},{}", instance.start);
        }
        for shared_instance in &gpu.shared {
            let profile = tables.profile(spec, &shared_instance.profile, shared_instance.size);
            let members: Vec<String> =
                shared_instance.members.iter().map(|m| tables.service(&m.service).to_string()).collect();
            let (label, busy, title) = shared_text(shared_instance);
            shared.push(format!(
                "[{profile},[{}],{},{},{},{}]",
                members.join(","),
                json_string(&label),
                json_string(shared_instance.sharing.name()),
                json_string(&busy),
                json_string(&title)
            ));
            let _ = write!(gpus, ",{},{}", -(shared.len() as i64), shared_instance.start);
        }
        gpus.push(']');
    }
    gpus.push(']');
    let services: Vec<String> = tables
        .services
        .items
        .iter()
        .map(|name| {
            let util = utilisation.get(name.as_str()).map_or("null".to_string(), |u| format!("\"{:.0}\"", u * 100.0));
            format!("[{},{},{util}]", tables.names.positions[name], palette.index(name))
        })
        .collect();
    let swatches: Vec<String> =
        palette.swatches().iter().map(|swatch| format!("[\"{}\",\"{}\"]", swatch.fill, swatch.strong)).collect();
    let node_names: Vec<String> = plan.node_names.iter().map(|name| json_string(name)).collect();
    let _ = write!(
        out,
        "<script type=\"application/json\" class=\"plan-data\">{{\"per_page\":{GPUS_PER_PAGE},\"geometry\":{},\"node_names\":[{}],\
         \"swatches\":[{}],\"gpu_models\":[{}],\"profiles\":[{}],\"names\":[{}],\"services\":[{}],\"configs\":[{}],\
         \"shared\":[{}],\"shared_swatch\":[\"{}\",\"{}\"],\"shared_legend\":{},\"gpus\":{gpus}}}</script>\n\
         <script>{SCRIPT}</script>\n",
        geometry_json(),
        node_names.join(","),
        swatches.join(","),
        tables.gpu_models.items.join(","),
        tables.profiles.items.join(","),
        tables.names.items.iter().map(|name| json_string(name)).collect::<Vec<_>>().join(","),
        services.join(","),
        tables.configs.items.join(","),
        shared.join(","),
        SHARED_SWATCH.0,
        SHARED_SWATCH.1,
        json_string(SHARED_LEGEND),
    );
}

/// The data's lookup tables, each a list of distinct items by first use.
#[derive(Default)]
struct Tables {
    services: Table,
    gpu_models: Table,
    profiles: Table,
    names: Table,
    configs: Table,
}

impl Tables {
    /// The position of service `name` (its name added to `names` too).
    fn service(&mut self, name: &str) -> usize {
        self.names.index(name);
        self.services.index(name)
    }

    /// The position of MIG profile `name` of `size` compute slices on a
    /// GPU of `spec`: `[name, size, memory slices]`.
    fn profile(&mut self, spec: &GpuSpec, name: &str, size: u8) -> usize {
        let memory_slices = spec.profile_by_name(name).map_or(size, |profile| profile.memory_slices);
        self.profiles.index(&format!("[{},{size},{memory_slices}]", json_string(name)))
    }
}

/// Distinct items, each with its position.
#[derive(Default)]
struct Table {
    items: Vec<String>,
    positions: HashMap<String, usize>,
}

impl Table {
    /// The position of `item`, added at the end when new.
    fn index(&mut self, item: &str) -> usize {
        if let Some(&position) = self.positions.get(item) {
            return position;
        }
        self.items.push(item.to_string());
        self.positions.insert(item.to_string(), self.items.len() - 1);
        self.items.len() - 1
    }
}

/// `text` as a JSON string that is also safe inside a `<script>` element
/// (`<` escaped, so no `</script>` can end it).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use crate::draw::utilisation_by_service;

    #[test]
    fn json_strings_are_escaped_and_cannot_close_the_script() {
        assert_eq!(json_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(json_string("</script>\n"), r#""\u003c/script>\u000a""#);
        assert_eq!(json_string("×"), "\"×\"");
    }

    #[test]
    fn the_data_lists_every_gpu_with_its_instances_by_configuration() {
        let plan = two_gpu_plan();
        let palette = Palette::of(&plan);
        let mut out = String::new();
        write_data_and_script(&mut out, &plan, &palette, &utilisation_by_service(&plan));
        let data = &out[out.find('{').unwrap()..out.find("</script>").unwrap()];
        // Services in plan order (utilisation 50%, 80%, 25%), three
        // configurations, two GPUs on one model.
        assert!(
            data.contains(r#""names":["search","chat\u003c&>","a-service-with-a-long-name","bert-base"]"#),
            "{data}"
        );
        assert!(
            data.contains(&format!(
                r#""services":[[0,{},"50"],[1,{},"80"],"#,
                palette.index("search"),
                palette.index("chat<&>")
            )),
            "{data}"
        );
        assert!(data.contains(r#""gpu_models":[["A100-80GB",8,7]]"#), "{data}");
        assert!(data.contains(r#""profiles":[["4g.40gb",4,4],["3g.40gb",3,4],["1g.10gb",1,1]]"#), "{data}");
        assert!(
            data.contains(
                r#""configs":[[0,3,0,8,2,"100.0","20.0"],[1,3,1,8,2,"100.0","20.0"],[2,3,2,8,2,"100.0","20.0"]]"#
            ),
            "{data}"
        );
        assert!(data.contains(r#""gpus":[[0,0,0,0,0,1,4],[1,0,0,2,6]]"#), "{data}");
        assert!(out.contains("<script>") && !data.contains('<'));
    }
}
