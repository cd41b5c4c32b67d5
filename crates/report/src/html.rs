//! The HTML report: one self-contained document (inline CSS, SVG, data and
//! script; nothing fetched), and the pieces pages build from.

use std::fmt::Write;

use tessera_core::text::{counted, escape_xml, grouped};
use tessera_core::Plan;

use crate::draw::{utilisation_by_service, SVG_STYLE};
use crate::gpu_pages::{write_data_and_script, write_gpu_pages};
use crate::overview::write_overview;
use crate::palette::Palette;
use crate::services::{write_service_table, SERVICES_STYLE};

/// The page style: readable on a laptop, GPUs in a grid that wraps (many
/// GPUs make the page scroll; tiles never shrink).
const PAGE_STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#1a1a1a;background:#fff}\
header{background:#1f2937;color:#f9fafb;padding:10px 20px}header h1{font-size:20px;margin:0}\
header nav a{color:#cbd5e1;margin-right:14px;font-size:14px}main{padding:12px 20px}\
.summary{font-size:15px;margin:6px 0}.optimality{font-size:15px;margin:6px 0;font-weight:600}\
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin:10px 0;font-size:13px}\
.legend span.chip{display:inline-block;width:14px;height:14px;border:1px solid #555;border-radius:3px;\
vertical-align:-2px;margin-right:5px}section.node h2{font-size:16px;margin:14px 0 4px}\
.gpus{display:flex;flex-wrap:wrap;gap:8px}svg.gpu{background:#fff;border:1px solid #ddd;border-radius:6px;\
flex:none}table{border-collapse:collapse;font-size:14px;margin:8px 0}th,td{border-bottom:1px solid #e5e7eb;\
padding:4px 10px;text-align:right}th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}\
td.met{color:#15803d;font-weight:600}td.missed{color:#b91c1c;font-weight:700}td.unclear{color:#b45309;font-weight:600}.notes{font-size:13px;color:#555}\
.muted{color:#6b7280}.overview{display:flex;flex-wrap:wrap;gap:0 40px;align-items:flex-start}\
.overview h2,section.gpu-pages>h2,section.service-list>h2{font-size:17px;\
margin:16px 0 4px}svg.histogram .bar{fill:#60a5fa}svg.histogram text{font-size:11px;text-anchor:middle;fill:#374151}\
svg.histogram .label{fill:#6b7280}.plan-report [hidden]{display:none !important}\
.pager{font-size:14px;display:flex;flex-wrap:wrap;gap:6px;align-items:center}.pager .controls{display:inline-flex;\
gap:4px;align-items:center}.pager button{font-size:14px;min-width:30px}.pager input{width:64px}\
.search input{font-size:14px;width:320px;padding:3px 6px}.search .found{font-size:13px;color:#555}";

/// A whole HTML document: `title`, the links of `nav` (`(href, text)`),
/// and `body` (HTML) in its main part.
pub fn page(title: &str, nav: &[(&str, &str)], body: &str) -> String {
    styled_page(title, nav, "", body)
}

/// [`page`] with `extra_style` (CSS) after the page's own.
pub(crate) fn styled_page(title: &str, nav: &[(&str, &str)], extra_style: &str, body: &str) -> String {
    let mut links = String::new();
    for (href, text) in nav {
        let _ = write!(links, r#"<a href="{}">{}</a>"#, escape_xml(href), escape_xml(text));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title>\
         <style>{PAGE_STYLE}{SVG_STYLE}{SERVICES_STYLE}{extra_style}</style></head>\n<body><header><h1>{}</h1><nav>{links}</nav></header>\
         <main>\n{body}</main></body></html>\n",
        escape_xml(title),
        escape_xml(title)
    )
}

/// The plan's optimality line: its objective's value against the lower
/// bound, and whether it is proven optimal.
fn optimality_line(plan: &Plan) -> String {
    match &plan.optimality {
        Some(o) if o.proven_optimal => format!(
            "{}: {} — lower bound {}, proven optimal",
            escape_xml(&o.objective),
            number(o.value),
            number(o.lower_bound)
        ),
        Some(o) => format!(
            "{}: {} — lower bound {}, gap {:.1}%, not proven optimal",
            escape_xml(&o.objective),
            number(o.value),
            number(o.lower_bound),
            o.gap * 100.0
        ),
        None => format!("no optimality bound recorded (strategy {})", escape_xml(&plan.strategy)),
    }
}

/// A number as a person reads it: whole numbers without decimals (and
/// thousands grouped), others with two.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && (0.0..1e15).contains(&value) {
        grouped(value as u64)
    } else {
        format!("{value:.2}")
    }
}

/// The report of `plan` as an HTML fragment (a `div.plan-report`): the
/// summary and optimality lines, the notes, the overview (GPUs by model,
/// services by utilisation, services not met), the GPUs a page at a time
/// with a legend of the page's services, the searchable service table, and
/// the data and script that page and search (see [`GPUS_PER_PAGE`]).
///
/// [`GPUS_PER_PAGE`]: crate::GPUS_PER_PAGE
pub fn plan_section(plan: &Plan) -> String {
    let palette = Palette::of(plan);
    let utilisation = utilisation_by_service(plan);
    let met = plan.services.iter().filter(|report| report.met).count();
    let mut out = String::from(r#"<div class="plan-report">"#);
    let _ = write!(
        out,
        r#"<p class="summary">{} · strategy {} · latency rule {} · total cost {} · {}{}</p>"#,
        counted(plan.gpu_count, "GPU"),
        escape_xml(&plan.strategy),
        escape_xml(&plan.latency_rule),
        number(plan.total_cost),
        counted(plan.services.len(), "service"),
        match met {
            _ if plan.services.is_empty() => String::new(),
            met if met == plan.services.len() => ", all met".to_string(),
            met => format!(", {met} of {} met", plan.services.len()),
        }
    );
    let _ = write!(out, r#"<p class="optimality">{}</p>"#, optimality_line(plan));
    if !plan.notes.is_empty() {
        out.push_str(r#"<ul class="notes">"#);
        for note in &plan.notes {
            let _ = write!(out, "<li>{}</li>", escape_xml(note));
        }
        out.push_str("</ul>");
    }
    out.push('\n');
    write_overview(&mut out, plan, &utilisation);
    write_gpu_pages(&mut out, plan, &palette, &utilisation);
    write_service_table(&mut out, plan, &utilisation);
    write_data_and_script(&mut out, plan, &palette, &utilisation);
    out.push_str("</div>\n");
    out
}

/// The whole report of `plan` as one self-contained HTML document titled
/// `title`.
pub fn plan_report_html(plan: &Plan, title: &str) -> String {
    page(title, &[], &plan_section(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use tessera_core::Optimality;

    /// The page without its data and script (whose text holds markup too).
    fn markup(html: &str) -> &str {
        &html[..html.find(r#"<script type="application/json""#).expect("the data is there")]
    }

    #[test]
    fn the_report_is_one_document_with_nothing_fetched() {
        let html = plan_report_html(&two_gpu_plan(), "demo <plan>");
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
        assert!(html.contains("<title>demo &lt;plan&gt;</title>"));
        for fetch in ["<link", "src=", "@import", "url(", "fetch(", "XMLHttpRequest", "import(", "<iframe", "<img"] {
            assert!(!html.contains(fetch), "{fetch}");
        }
        assert_eq!(html.matches("<script").count(), 2, "the data and the script, inline");
    }

    #[test]
    fn nodes_group_their_gpus_and_the_table_has_a_row_per_service() {
        let html = plan_report_html(&two_gpu_plan(), "plan");
        let html = markup(&html);
        assert_eq!(html.matches(r#"<section class="node""#).count(), 2);
        assert_eq!(html.matches(r#"<svg class="gpu""#).count(), 2);
        assert_eq!(html.matches("<tr data-service=").count(), 3);
        assert!(html.contains(
            r#"<td>search</td><td>bert-base</td><td>50.00</td><td>100.00</td><td>50%</td><td>60.00</td><td>100.00</td><td>—</td><td>—</td><td>1</td><td class="met">yes</td>"#
        ));
        assert!(html.contains("2 GPUs · strategy optimal") && html.contains("3 services, all met"));
        assert!(html.contains("<h2>Node 0 <span"));
        let mut named = two_gpu_plan();
        named.node_names = vec!["gpu-a".to_string(), "gpu-<b>".to_string()];
        let html = plan_report_html(&named, "plan");
        assert!(html.contains(r#""node_names":["gpu-a","gpu-\u003cb>"]"#));
        assert!(html.contains("<h2>Node 0 (gpu-a) <span") && html.contains("<h2>Node 1 (gpu-&lt;b&gt;) <span"));
    }

    #[test]
    fn the_optimality_line_says_value_bound_and_proof() {
        let mut plan = two_gpu_plan();
        assert!(optimality_line(&plan).contains("no optimality bound recorded"));
        plan.optimality = Some(Optimality {
            objective: "gpus".to_string(),
            value: 2.0,
            lower_bound: 2.0,
            proven_optimal: true,
            gap: 0.0,
        });
        assert_eq!(optimality_line(&plan), "gpus: 2 — lower bound 2, proven optimal");
        plan.optimality = Some(Optimality {
            objective: "cost".to_string(),
            value: 3.5,
            lower_bound: 3.0,
            proven_optimal: false,
            gap: 0.5 / 3.0,
        });
        assert_eq!(optimality_line(&plan), "cost: 3.50 — lower bound 3, gap 16.7%, not proven optimal");
    }
}
