//! The report's first screen, the same size whatever the plan's: GPUs per
//! model and node, the services' utilisation as a histogram, and the
//! services that miss their SLO.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use tessera_core::text::{count, escape_xml};
use tessera_core::{GpuModel, Plan, ServiceReport};

/// Width of the histogram's longest bar, px.
const BAR_MAX_PX: f64 = 320.0;

/// At most this many services not met are listed (the service table marks
/// every one).
const UNMET_LISTED: usize = 50;

/// The overview of `plan`: `table.fleet`, `table.histogram` and the
/// services not met (`table.unmet`, or a line saying every service is met).
pub(crate) fn write_overview(out: &mut String, plan: &Plan, utilisation: &HashMap<&str, f64>) {
    out.push_str(r#"<section class="overview">"#);
    for write in [write_fleet, write_unmet] {
        out.push_str("<div>");
        write(out, plan);
        out.push_str("</div>");
    }
    out.push_str("<div>");
    write_histogram(out, plan, utilisation);
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
        entry.instances += gpu.instances.len();
        entry.used += gpu.instances.iter().map(|instance| u64::from(instance.size)).sum::<u64>();
        entry.total += u64::from(gpu.gpu_model.spec().compute_slices);
    }
    out.push_str(
        "<h2>GPUs by model</h2><table class=\"fleet\"><thead><tr><th>GPU model</th><th>nodes</th><th>GPUs</th>\
         <th>GPUs per node</th><th>instances</th><th>compute slices used</th><th>free</th></tr></thead><tbody>",
    );
    for (model, use_) in &models {
        let gpus: usize = use_.per_node.values().sum();
        let fewest = use_.per_node.values().min().copied().unwrap_or(0);
        let most = use_.per_node.values().max().copied().unwrap_or(0);
        let per_node = if fewest == most { most.to_string() } else { format!("{fewest}–{most}") };
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
    let most = buckets.iter().copied().max().unwrap_or(0).max(1);
    let _ = write!(
        out,
        "<h2>Services by utilisation <span class=\"muted\">· rate ÷ provisioned, {}</span></h2><table class=\"histogram\"><tbody>",
        counted(plan.services.len(), "service")
    );
    for (bucket, &services) in buckets.iter().enumerate() {
        let label = match bucket {
            0..=9 => format!("{}–{}%", bucket * 10, bucket * 10 + 10),
            10 => "over 100%".to_string(),
            _ => "nothing provisioned".to_string(),
        };
        if bucket >= 10 && services == 0 {
            continue;
        }
        let width = (services as f64 / most as f64 * BAR_MAX_PX).round();
        let _ = write!(
            out,
            r#"<tr data-bucket="{bucket}" data-services="{services}"><th>{label}</th><td><span class="bar" style="width:{width}px"></span>{}</td></tr>"#,
            grouped(services as u64)
        );
    }
    out.push_str("</tbody></table>");
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

/// `n` and `noun` as [`count`] says them, `n` grouped: `23,782 GPUs`.
pub(crate) fn counted(n: usize, noun: &str) -> String {
    count(n, noun).replacen(&n.to_string(), &grouped(n as u64), 1)
}

/// `n` with thousands separated by commas: `23,782`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
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
    fn numbers_are_grouped_in_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(23_782), "23,782");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!((counted(1, "GPU"), counted(23_782, "GPU")), ("1 GPU".to_string(), "23,782 GPUs".to_string()));
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
    fn the_histogram_counts_services_by_utilisation_tenths() {
        // search 50%, chat<&> 80%, the long name 25%.
        let html = overview(&two_gpu_plan());
        for (bucket, services) in [(2, 1), (5, 1), (8, 1), (0, 0), (9, 0)] {
            assert!(html.contains(&format!(r#"<tr data-bucket="{bucket}" data-services="{services}">"#)), "{bucket}");
        }
        assert!(!html.contains(r#"data-bucket="10""#), "no service is over 100%");
        let bars = html.matches(r#"<span class="bar""#).count();
        assert_eq!(bars, 10);
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
