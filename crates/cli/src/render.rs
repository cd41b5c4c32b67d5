//! Rendering plans for people (table), machines (JSON, CSV) and ParvaGPU
//! (its deployment map); the file formats are tessera-store's.

use std::collections::HashMap;

use anyhow::Result;
use tessera_core::text::{count, number, percent};
use tessera_core::{Plan, SharedInstance};

use crate::args::Format;
use crate::table::TextTable;

/// The plan in the requested format.
pub fn render_plan(plan: &Plan, format: Format) -> Result<Vec<u8>> {
    Ok(match format {
        Format::Table => plan_table(plan).into_bytes(),
        Format::Json => tessera_store::plan_json(plan),
        Format::Csv => {
            let mut csv = Vec::new();
            tessera_store::write_plan_csv(&mut csv, plan)?;
            csv
        }
        Format::ParvagpuCsv => {
            let mut csv = Vec::new();
            tessera_store::write_deployment_csv(&mut csv, plan)?;
            csv
        }
    })
}

/// The plan for people: a header, each GPU as a row of tiles in memory-slice
/// order (`[3g photo-tagging b4×3]`), and each service's segments,
/// provisioned vs demanded throughput, and worst latency vs SLO.
fn plan_table(plan: &Plan) -> String {
    let fleet: Vec<String> = plan
        .fleet
        .iter()
        .filter(|f| f.gpus > 0 || plan.fleet.len() > 1)
        .map(|f| match f.limit {
            Some(limit) => format!("{} × {} (of {limit})", f.gpus, f.gpu_model),
            None => format!("{} × {}", f.gpus, f.gpu_model),
        })
        .collect();
    let proven_under = match (&plan.traffic, plan.margin) {
        (Some(traffic), Some(margin)) => {
            format!(", {} arrivals, margin {}", traffic.arrivals, percent(margin))
        }
        (Some(traffic), None) => format!(", {} arrivals", traffic.arrivals),
        _ => String::new(),
    };
    let mut out = format!(
        "{} ({}), {} used\nstrategy {}, latency rule {}{proven_under}\n",
        count(plan.gpu_count, "GPU"),
        fleet.join(" + "),
        count(plan.compute_slices_used(), "compute slice"),
        plan.strategy,
        plan.latency_rule
    );
    if plan.fleet.len() > 1 {
        out.push_str(&format!("total cost {:.2}\n", plan.total_cost));
    }
    if let Some(o) = &plan.optimality {
        let verdict =
            if o.proven_optimal { "proven optimal".to_string() } else { format!("gap {:.2}%", 100.0 * o.gap) };
        let digits = if o.objective == "gpus" { 0 } else { 2 };
        out.push_str(&format!("lower bound on {}: {:.digits$}: {verdict}\n", o.objective, o.lower_bound));
    }
    for note in &plan.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push('\n');
    let mut gpus = TextTable::new(&["node", "gpu", "model", "layout"]);
    for gpu in &plan.gpus {
        let mut tiles: Vec<(u8, String)> = gpu
            .instances
            .iter()
            .map(|i| (i.start, format!("[{}g {} b{}×{}]", i.size, i.service, i.batch, i.procs)))
            .collect();
        tiles.extend(
            gpu.shared.iter().map(|i| (i.start, format!("[{}g {} shared by {}]", i.size, i.sharing, i.members.len()))),
        );
        tiles.sort_by_key(|(start, _)| *start);
        let tiles: Vec<String> = tiles.into_iter().map(|(_, tile)| tile).collect();
        gpus.row_of_pieces(vec![
            vec![gpu.node.to_string()],
            vec![gpu.index.to_string()],
            vec![gpu.gpu_model.to_string()],
            tiles,
        ]);
    }
    out.push_str(&gpus.render());
    out.push('\n');
    let mut services =
        TextTable::new(&["service", "model", "req/s", "provided", "slo ms", "worst ms", "met", "segments"]);
    let shared_of: HashMap<&str, &SharedInstance> = plan
        .shared_instances()
        .flat_map(|(_, shared)| shared.members.iter().map(move |member| (member.service.as_str(), shared)))
        .collect();
    for service in &plan.services {
        services.row_of_pieces(vec![
            vec![service.service.clone()],
            vec![service.model.clone()],
            vec![compact(service.rate_rps)],
            vec![number(service.provisioned_rps, 1)],
            vec![compact(service.latency_slo_ms)],
            vec![number(service.worst_latency_ms, 1)],
            vec![if service.met { "yes" } else { "NO" }.to_string()],
            segment_summary(plan, &shared_of, &service.service),
        ]);
    }
    out.push_str(&services.render());
    out
}

/// A service's segments grouped by configuration, as pieces of
/// `2×3g b16×3 + 1×1g b8×1`; a member of a shared instance as
/// `1g serialized with 4`.
fn segment_summary(plan: &Plan, shared_of: &HashMap<&str, &SharedInstance>, service: &str) -> Vec<String> {
    if let Some(shared) = shared_of.get(service) {
        return vec![format!("{}g {} with {}", shared.size, shared.sharing, shared.members.len() - 1)];
    }
    let mut groups: Vec<((u8, u32, u32), usize)> = Vec::new();
    for instance in plan.gpus.iter().flat_map(|g| &g.instances).filter(|i| i.service == service) {
        let key = (instance.size, instance.batch, instance.procs);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => groups.push((key, 1)),
        }
    }
    groups.sort_by_key(|(key, _)| std::cmp::Reverse(*key));
    groups
        .iter()
        .enumerate()
        .map(|(k, ((size, batch, procs), n))| {
            let plus = if k == 0 { "" } else { " + " };
            format!("{plus}{n}×{size}g b{batch}×{procs}")
        })
        .collect()
}

/// `x` as the input gave it (`843`, `83.5`), or scientific from a billion.
fn compact(x: f64) -> String {
    match x.abs() < 1e9 {
        true => format!("{x}"),
        false => number(x, 0),
    }
}
