//! The service table: one row per service in plan order, in blocks of
//! [`ROWS_PER_BLOCK`] rows, each block its own fixed-layout table in a
//! `div.service-block` that the browser lays out only when it scrolls into
//! view (CSS `content-visibility: auto`). All rows are in the document — a
//! browser's find-in-page and a page with scripts off see every one — but
//! an 11,000-row table costs a screenful of layout, not two seconds.

use std::collections::HashMap;
use std::fmt::Write;

use tessera_core::text::escape_xml;
use tessera_core::{Plan, ServiceReport};

use tessera_core::plan::tolerance_text;

/// Rows in one block of the table.
pub(crate) const ROWS_PER_BLOCK: usize = 250;

/// The columns: header and width (percent of the table).
/// Each is at least as wide as its header's longest word at a laptop's
/// width (checked in Chromium by the server's browser tests).
const COLUMNS: [(&str, u32); 11] = [
    ("service", 16),
    ("model", 11),
    ("rate (req/s)", 8),
    ("provisioned (req/s)", 10),
    ("utilisation", 9),
    ("worst latency (ms)", 9),
    ("SLO (ms)", 7),
    ("predicted within SLO", 8),
    ("tolerance", 8),
    ("segments", 9),
    ("met", 5),
];

/// The table's style: fixed layout, so every block has the same columns.
pub(crate) const SERVICES_STYLE: &str = "table.services{table-layout:fixed;width:100%;max-width:1280px;margin:0}\
table.services td{overflow-wrap:anywhere}div.service-block{content-visibility:auto;\
contain-intrinsic-size:auto 6500px}.searching div.service-block{content-visibility:visible}";

/// The section: a heading, the search box the script shows (hidden
/// without it), and the table's blocks.
pub(crate) fn write_service_table(out: &mut String, plan: &Plan, utilisation: &HashMap<&str, f64>) {
    out.push_str(
        "<section class=\"service-list\"><h2>Services</h2><p class=\"search\" hidden><label>Find services by name or \
         model <input type=\"search\" autocomplete=\"off\"></label> <span class=\"found\"></span></p>",
    );
    let mut columns = String::from("<colgroup>");
    for (_, width) in COLUMNS {
        let _ = write!(columns, r#"<col style="width:{width}%">"#);
    }
    columns.push_str("</colgroup>");
    let blocks = plan.services.chunks(ROWS_PER_BLOCK);
    for (number, block) in blocks.enumerate() {
        let _ = write!(out, r#"<div class="service-block"><table class="services">{columns}"#);
        if number == 0 {
            out.push_str("<thead><tr>");
            for (header, _) in COLUMNS {
                let _ = write!(out, "<th>{header}</th>");
            }
            out.push_str("</tr></thead>");
        }
        out.push_str("<tbody>");
        for report in block {
            let util =
                utilisation.get(report.service.as_str()).map_or("—".to_string(), |u| format!("{:.0}%", u * 100.0));
            let name = escape_xml(&report.service);
            let predicted = predicted_cell(report);
            let tolerance = report.tolerance.map_or_else(|| "—".to_string(), tolerance_text);
            let _ = write!(
                out,
                r#"<tr data-service="{name}"><td>{name}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{util}</td><td>{:.2}</td><td>{:.2}</td><td>{predicted}</td><td>{tolerance}</td><td>{}</td><td class="{}">{}</td></tr>"#,
                escape_xml(&report.model),
                report.rate_rps,
                report.provisioned_rps,
                report.worst_latency_ms,
                report.latency_slo_ms,
                report.segments,
                if report.met { "met" } else { "missed" },
                if report.met { "yes" } else { "no" }
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>\n");
}

/// The share of requests predicted within the SLO, against the
/// percentile asked (`99.31% of 99%`); `—` under a rule that predicts none.
fn predicted_cell(report: &ServiceReport) -> String {
    match (report.predicted_attainment, report.percentile) {
        (Some(attainment), Some(percentile)) => format!("{:.2}% of {percentile}%", 100.0 * attainment),
        (Some(attainment), None) => format!("{:.2}%", 100.0 * attainment),
        (None, _) => "—".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use crate::draw::utilisation_by_service;

    #[test]
    fn the_rows_come_in_blocks_of_one_layout_with_one_header() {
        let mut plan = two_gpu_plan();
        let first = plan.services[0].clone();
        plan.services = (0..2 * ROWS_PER_BLOCK + 1)
            .map(|i| tessera_core::ServiceReport { service: format!("s{i}"), ..first.clone() })
            .collect();
        let mut out = String::new();
        write_service_table(&mut out, &plan, &utilisation_by_service(&plan));
        assert_eq!(out.matches(r#"<div class="service-block"><table class="services"><colgroup>"#).count(), 3);
        assert_eq!(out.matches("<thead>").count(), 1);
        assert_eq!(out.matches("<tr data-service=").count(), 2 * ROWS_PER_BLOCK + 1);
        let order: Vec<usize> = out
            .match_indices("<tr data-service=\"s")
            .map(|(at, _)| out[at + 19..].split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(order, (0..2 * ROWS_PER_BLOCK + 1).collect::<Vec<_>>(), "plan order");
        assert_eq!(COLUMNS.iter().map(|(_, width)| width).sum::<u32>(), 100);
    }
}
