//! The report's first screen, the same size whatever the plan's: GPUs per
//! model and node, the services' utilisation as a histogram, the services
//! that miss their SLO and those closest to their edge.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use tessera_core::text::{counted, escape_xml, grouped};
use tessera_core::{GpuModel, Plan, ServiceReport};

use crate::edge::write_edge;

/// Height of the histogram's tallest bar, px.
const BAR_MAX_PX: f64 = 90.0;
/// Width of one histogram column, px.
const COLUMN_PX: f64 = 46.0;
/// Height of the histogram, px: the bars, their counts and labels.
const HISTOGRAM_PX: f64 = BAR_MAX_PX + 36.0;

/// At most this many services not met are listed (the service table marks
/// every one).
const UNMET_LISTED: usize = 50;

/// The overview of `plan`: `table.fleet`, `table.histogram` and the
/// services not met (`table.unmet`, or a line saying every service is met).
pub(crate) fn write_overview(out: &mut String, plan: &Plan, utilisation: &HashMap<&str, f64>) {
    out.push_str(r#"<section class="overview">"#);
    out.push_str("<div>");
    write_fleet(out, plan);
    out.push_str("</div><div>");
    write_histogram(out, plan, utilisation);
    out.push_str("</div><div>");
    write_unmet(out, plan);
    write_edge(out, plan);
    out.push_str("</div></section>\n");
}

/// Per GPU model (in fleet order): nodes, GPUs, GPUs per node, instances
/// and compute slices used and free.
fn write_fleet(out: &mut String, plan: &Plan) {
    #[derive(Default)]
    struct Use {
        per_node: BTreeMap<u32, usize>,
        instances: usize,
        used: u64,
        total: u64,
    }
    let mut models: Vec<(GpuModel, Use)> = Vec::new();
    for gpu in &plan.gpus {
        let position = match models.iter().position(|(model, _)| *model == gpu.gpu_model) {
            Some(position) => position,
            None => {
                models.push((gpu.gpu_model, Use::default()));
                models.len() - 1
            }
        };
        let entry = &mut models[position].1;
        *entry.per_node.entry(gpu.node).or_default() += 1;
        entry.instances += gpu.layout().count();
        entry.used += gpu.layout().map(|(_, size, _)| u64::from(size)).sum::<u64>();
        entry.total += u64::from(gpu.gpu_model.spec().compute_slices);
    }
    out.push_str(
        "<h2>GPUs by model</h2><table class=\"fleet\"><thead><tr><th>GPU model</th><th>nodes</th><th>GPUs</th>\
         <th>GPUs per node</th><th>instances</th><th>compute slices used</th><th>free</th></tr></thead><tbody>",
    );
    for (model, use_) in &models {
        let gpus: usize = use_.per_node.values().sum();
        let per_node = per_node_line(&use_.per_node);
        let _ = write!(
            out,
            r#"<tr data-gpu-model="{}"><td>{}</td><td>{}</td><td>{}</td><td>{per_node}</td><td>{}</td><td>{} ({:.1}%)</td><td>{}</td></tr>"#,
            model.id(),
            escape_xml(model.spec().display_name),
            grouped(use_.per_node.len() as u64),
            grouped(gpus as u64),
            grouped(use_.instances as u64),
            grouped(use_.used),
            percent(use_.used, use_.total),
            grouped(use_.total - use_.used),
        );
    }
    if models.is_empty() {
        out.push_str(r#"<tr><td colspan="7">no GPUs</td></tr>"#);
    }
    out.push_str("</tbody></table>");
}

/// How many GPUs nodes hold, the largest count first: `8`, `8 on 2,972
/// nodes, 6 on 1`, or the range when nodes hold more than three different
/// counts.
fn per_node_line(per_node: &BTreeMap<u32, usize>) -> String {
    let mut nodes_holding: BTreeMap<usize, usize> = BTreeMap::new();
    for &gpus in per_node.values() {
        *nodes_holding.entry(gpus).or_default() += 1;
    }
    match nodes_holding.len() {
        0 => String::new(),
        1 => nodes_holding.keys().map(usize::to_string).collect(),
        2 | 3 => nodes_holding
            .iter()
            .rev()
            .enumerate()
            .map(|(at, (gpus, nodes))| {
                if at == 0 {
                    format!("{gpus} on {}", counted(*nodes, "node"))
                } else {
                    format!("{gpus} on {}", grouped(*nodes as u64))
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => {
            let (fewest, most) = (nodes_holding.keys().next(), nodes_holding.keys().next_back());
            format!("{}–{}", fewest.copied().unwrap_or(0), most.copied().unwrap_or(0))
        }
    }
}

/// The services counted by utilisation (rate ÷ provisioned) in tenths,
/// over 100% and unknown, as bars.
fn write_histogram(out: &mut String, plan: &Plan, utilisation: &HashMap<&str, f64>) {
    // Buckets 0..10 are tenths (100% falls in the last), 10 is over 100%,
    // 11 services with nothing provisioned.
    let mut buckets = [0usize; 12];
    for report in &plan.services {
        let bucket = match utilisation.get(report.service.as_str()) {
            None => 11,
            Some(&u) if u > 1.0 + 1e-9 => 10,
            Some(&u) => ((u * 10.0).floor().max(0.0) as usize).min(9),
        };
        buckets[bucket] += 1;
    }
    let shown: Vec<(usize, usize)> =
        buckets.iter().copied().enumerate().filter(|&(bucket, services)| bucket < 10 || services > 0).collect();
    let most = buckets.iter().copied().max().unwrap_or(0).max(1);
    let width = shown.len() as f64 * COLUMN_PX + 8.0;
    let _ = write!(
        out,
        "<h2>Services by utilisation <span class=\"muted\">· rate ÷ provisioned, {}</span></h2>\
         <svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{HISTOGRAM_PX}\" \
         viewBox=\"0 0 {width} {HISTOGRAM_PX}\">",
        counted(plan.services.len(), "service")
    );
    let base = HISTOGRAM_PX - 18.0;
    for (column, &(bucket, services)) in shown.iter().enumerate() {
        let (label, words) = match bucket {
            0..=9 => {
                (format!("{}–{}", bucket * 10, bucket * 10 + 10), format!("{}–{}%", bucket * 10, bucket * 10 + 10))
            }
            10 => (">100".to_string(), "over 100%".to_string()),
            _ => ("none".to_string(), "nothing provisioned".to_string()),
        };
        let height = if services == 0 { 0.0 } else { (services as f64 / most as f64 * BAR_MAX_PX).max(2.0).round() };
        let (x, centre) = (4.0 + column as f64 * COLUMN_PX, 4.0 + (column as f64 + 0.5) * COLUMN_PX);
        let _ = write!(
            out,
            r#"<g class="bucket" data-bucket="{bucket}" data-services="{services}"><title>{}: {words}</title><rect class="bar" x="{}" y="{}" width="{}" height="{height}"/><text class="count" x="{centre}" y="{}">{}</text><text class="label" x="{centre}" y="{}">{label}</text></g>"#,
            counted(services, "service"),
            x + 3.0,
            base - height,
            COLUMN_PX - 6.0,
            base - height - 3.0,
            grouped(services as u64),
            base + 13.0,
        );
    }
    out.push_str("</svg>");
}

/// The services that miss their SLO, with what they miss.
fn write_unmet(out: &mut String, plan: &Plan) {
    let unmet: Vec<&ServiceReport> = plan.services.iter().filter(|report| !report.met).collect();
    if unmet.is_empty() {
        let _ = write!(
            out,
            r#"<h2>Services not met</h2><p class="all-met">{}</p>"#,
            if plan.services.is_empty() {
                "The plan has no services.".to_string()
            } else {
                format!("None: all {} meet their SLO.", counted(plan.services.len(), "service"))
            }
        );
        return;
    }
    let _ = write!(
        out,
        "<h2>Services not met <span class=\"muted\">· {} of {}</span></h2><table class=\"unmet\"><thead><tr>\
         <th>service</th><th>model</th><th>rate (req/s)</th><th>provisioned (req/s)</th><th>worst latency (ms)</th>\
         <th>SLO (ms)</th><th>misses</th></tr></thead><tbody>",
        grouped(unmet.len() as u64),
        grouped(plan.services.len() as u64)
    );
    for report in unmet.iter().take(UNMET_LISTED) {
        let short = report.provisioned_rps < report.rate_rps;
        let slow = report.worst_latency_ms > report.latency_slo_ms;
        let misses = match (short, slow, report.percentile, report.predicted_attainment) {
            (true, true, ..) => "throughput and latency".to_string(),
            (true, false, ..) => "throughput".to_string(),
            (false, true, ..) => "latency".to_string(),
            (false, false, Some(percentile), Some(attainment)) => {
                format!("{:.2}% within the SLO, {percentile}% needed", attainment * 100.0)
            }
            (false, false, ..) => "—".to_string(),
        };
        let _ = write!(
            out,
            r#"<tr data-service="{}"><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{misses}</td></tr>"#,
            escape_xml(&report.service),
            escape_xml(&report.service),
            escape_xml(&report.model),
            report.rate_rps,
            report.provisioned_rps,
            report.worst_latency_ms,
            report.latency_slo_ms,
        );
    }
    out.push_str("</tbody></table>");
    if unmet.len() > UNMET_LISTED {
        let _ = write!(
            out,
            r#"<p class="muted">… and {} more, marked “no” in the service table.</p>"#,
            grouped((unmet.len() - UNMET_LISTED) as u64)
        );
    }
}

/// `part` of `whole` in percent (0 when `whole` is 0).
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use crate::draw::utilisation_by_service;

    fn overview(plan: &Plan) -> String {
        let mut out = String::new();
        write_overview(&mut out, plan, &utilisation_by_service(plan));
        out
    }

    #[test]
    fn the_fleet_table_counts_nodes_gpus_and_slices_per_model() {
        let html = overview(&two_gpu_plan());
        // Two nodes of one GPU; 4 + 3 + 1 of 14 compute slices used.
        assert!(
            html.contains(
                r#"<tr data-gpu-model="a100-80gb"><td>A100-80GB</td><td>2</td><td>2</td><td>1</td><td>3</td><td>8 (57.1%)</td><td>6</td></tr>"#
            ),
            "{html}"
        );
    }

    #[test]
    fn gpus_per_node_say_how_many_nodes_hold_how_many() {
        let nodes = |counts: &[usize]| counts.iter().enumerate().map(|(node, &gpus)| (node as u32, gpus)).collect();
        assert_eq!(per_node_line(&nodes(&[8, 8, 8])), "8");
        assert_eq!(per_node_line(&nodes(&[8, 8, 6])), "8 on 2 nodes, 6 on 1");
        assert_eq!(per_node_line(&nodes(&[1, 2, 3, 8])), "1–8");
    }

    #[test]
    fn the_histogram_counts_services_by_utilisation_tenths() {
        // search 50%, chat<&> 80%, the long name 25%.
        let html = overview(&two_gpu_plan());
        for (bucket, services) in [(2, 1), (5, 1), (8, 1), (0, 0), (9, 0)] {
            assert!(
                html.contains(&format!(r#"<g class="bucket" data-bucket="{bucket}" data-services="{services}">"#)),
                "{bucket}"
            );
        }
        assert!(!html.contains(r#"data-bucket="10""#), "no service is over 100%");
        assert_eq!(html.matches(r#"<rect class="bar""#).count(), 10);
        // The tallest bar is full height; a count of one is still seen.
        assert!(html.contains(&format!(r#"height="{BAR_MAX_PX}"/>"#)));
        assert!(html.contains("<title>1 service: 20–30%</title>"));
    }

    #[test]
    fn services_not_met_are_listed_with_what_they_miss() {
        let mut plan = two_gpu_plan();
        assert!(overview(&plan).contains("None: all 3 services meet their SLO."));
        plan.services[1].met = false;
        plan.services[1].worst_latency_ms = 150.0;
        let html = overview(&plan);
        assert!(html.contains("<table class=\"unmet\">") && html.contains("· 1 of 3"));
        assert!(html.contains(r#"<tr data-service="chat&lt;&amp;&gt;"><td>chat&lt;&amp;&gt;</td>"#));
        assert!(html.contains("<td>latency</td>"));
        plan.services[1].worst_latency_ms = 60.0;
        (plan.services[1].percentile, plan.services[1].predicted_attainment) = (Some(99.0), Some(0.9712));
        assert!(overview(&plan).contains("<td>97.12% within the SLO, 99% needed</td>"));
        // Many: the first fifty, and a line for the others.
        let first = plan.services[1].clone();
        plan.services =
            (0..60).map(|i| ServiceReport { service: format!("s{i}"), met: i == 3, ..first.clone() }).collect();
        let html = overview(&plan);
        assert!(html.contains("· 59 of 60"));
        assert_eq!(html.matches("<tr data-service=").count(), UNMET_LISTED);
        assert!(html.contains("… and 9 more, marked “no” in the service table."));
    }
}
