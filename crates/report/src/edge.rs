//! The services closest to their edge: those with the least tolerance
//! (the largest uniform slowdown of their batches they bear and still meet
//! their SLO), against the margin the plan was made under. An operator
//! sees at a glance which services a GPU a little slower than its profile
//! would break first.

use std::fmt::Write;

use tessera_core::plan::tolerance_text;
use tessera_core::text::{counted, escape_xml};
use tessera_core::{Plan, ServiceReport};

/// At most this many services are listed, least tolerant first.
pub(crate) const EDGE_LISTED: usize = 5;

/// The section: nothing when no service of `plan` records a tolerance
/// (plans under the `queueing` or `parva` rule, or other arrival models),
/// else a line on the margin and how many services bear less, and a
/// `table.edge` of the least tolerant.
pub(crate) fn write_edge(out: &mut String, plan: &Plan) {
    let mut tolerant: Vec<(&ServiceReport, f64)> =
        plan.services.iter().filter_map(|report| report.tolerance.map(|tolerance| (report, tolerance))).collect();
    if tolerant.is_empty() {
        return;
    }
    tolerant.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.service.cmp(&b.0.service)));
    let margin = plan.margin.unwrap_or(0.0);
    let below = tolerant.iter().filter(|(report, _)| report.bears(margin) == Some(false)).count();
    let _ = write!(
        out,
        "<h2>Closest to the edge</h2><p class=\"edge-summary\">{}</p><table class=\"edge\"><thead><tr>\
         <th>service</th><th>model</th><th>tolerance</th><th>busiest load</th></tr></thead><tbody>",
        summary(plan.margin, below, tolerant.len())
    );
    for (report, tolerance) in tolerant.iter().take(EDGE_LISTED) {
        let name = escape_xml(&report.service);
        let class = if report.bears(margin) == Some(false) { "missed" } else { "met" };
        let load = report.busiest_load.map_or_else(|| "—".to_string(), |load| format!("{:.1}%", 100.0 * load));
        let _ = write!(
            out,
            r#"<tr data-service="{name}"><td>{name}</td><td>{}</td><td class="{class}">{}</td><td>{load}</td></tr>"#,
            escape_xml(&report.model),
            tolerance_text(*tolerance),
        );
    }
    out.push_str("</tbody></table>");
}

/// What the margin promises and how many of `of` services bear less.
fn summary(margin: Option<f64>, below: usize, of: usize) -> String {
    let promise = match margin {
        Some(margin) if margin > 0.0 => {
            format!("Planned to bear batches {:.1}% slower than profiled.", 100.0 * margin)
        }
        Some(_) => "Planned on the knife edge: margin 0, batches exactly as fast as profiled.".to_string(),
        None => "The plan records no margin.".to_string(),
    };
    let bearing = if below == 0 {
        "Every service bears it.".to_string()
    } else {
        format!("{} of {of} bear less.", counted(below, "service"))
    };
    format!(
        "{promise} {bearing} Tolerance: the largest slowdown of its batches a service bears and still meets its SLO."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;

    fn with_tolerances(tolerances: &[Option<f64>], margin: Option<f64>) -> Plan {
        let mut plan = two_gpu_plan();
        let first = plan.services[0].clone();
        plan.services = tolerances
            .iter()
            .enumerate()
            .map(|(i, &tolerance)| ServiceReport {
                service: format!("s{i}"),
                tolerance,
                busiest_load: tolerance.map(|_| 0.9),
                ..first.clone()
            })
            .collect();
        plan.margin = margin;
        plan
    }

    fn edge(plan: &Plan) -> String {
        let mut out = String::new();
        write_edge(&mut out, plan);
        out
    }

    #[test]
    fn the_least_tolerant_come_first_and_those_below_the_margin_are_marked() {
        // 5.96% is within the search's precision of the margin: it bears it.
        let tolerances = [Some(0.2), Some(0.031), None, Some(0.0596), Some(-0.01), Some(0.5), Some(0.09), Some(0.3)];
        let html = edge(&with_tolerances(&tolerances, Some(0.06)));
        let order: Vec<&str> = html
            .match_indices("<tr data-service=\"")
            .map(|(at, _)| html[at + 18..].split('"').next().unwrap())
            .collect();
        assert_eq!(order, ["s4", "s1", "s3", "s6", "s0"], "{html}");
        assert!(html.contains("batches 6.0% slower"), "{html}");
        assert!(html.contains("2 services of 7 bear less."), "{html}");
        assert!(html.contains(r#"<td class="missed">-1.0%</td>"#) && html.contains(r#"<td class="met">+6.0%</td>"#));
        assert!(html.contains("<td>90.0%</td>"), "{html}");
    }

    #[test]
    fn a_plan_without_tolerances_has_no_section_and_margin_zero_says_knife_edge() {
        assert_eq!(edge(&with_tolerances(&[None, None], Some(0.06))), "");
        let html = edge(&with_tolerances(&[Some(0.001)], Some(0.0)));
        assert!(html.contains("knife edge") && html.contains("Every service bears it."), "{html}");
    }
}
