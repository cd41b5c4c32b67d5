//! Pictures of a request-level simulation: per service, its latency CDF
//! against its SLO (on a "nines" scale, so 90%, 99% and 99.9% are evenly
//! spaced and the tail the SLO is about is visible) and, when the
//! simulation counted it, its attainment over time.
//!
//! The DOM: each service is a `figure.service` with `data-service`; its CDF
//! an `svg.cdf` whose `line.slo` marks the latency SLO and `line.target`
//! the percentile, and whose `path.curve` is the CDF; its timeline an
//! `svg.timeline`; the summary is `table.serving` with one row per service.

use std::fmt::Write;

use tessera_core::text::escape_xml;
use tessera_serving::{CdfPoint, ServiceOutcome, ServingReport, SloVerdict};

use crate::html::styled_page;

/// One chart's size and margins, px.
const WIDTH: f64 = 360.0;
const HEIGHT: f64 = 210.0;
const LEFT: f64 = 46.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 34.0;

/// The deepest share the CDF shows: 99.99% (four nines).
pub(crate) const MAX_NINES: f64 = 4.0;

const STYLE: &str = ".charts{display:flex;flex-wrap:wrap;gap:12px}figure.service{margin:0;border:1px solid #ddd;\
border-radius:6px;padding:6px}figure.service figcaption{font-size:14px;font-weight:600;margin:2px 4px}\
svg.cdf,svg.timeline{display:block}.axis{stroke:#9ca3af;stroke-width:1}.grid{stroke:#e5e7eb;stroke-width:1}\
.tick{font-size:10px;fill:#4b5563}.curve{fill:none;stroke:#2563eb;stroke-width:2}\
.slo{stroke:#b91c1c;stroke-width:1.5;stroke-dasharray:5 3}.target{stroke:#6b7280;stroke-width:1;stroke-dasharray:3 3}\
.label{font-size:11px;fill:#b91c1c}";

/// A page with every service's charts and a summary table, titled `title`,
/// with `traffic` (the traffic model in words) under the title.
pub fn serving_report_html(report: &ServingReport, title: &str, traffic: &str) -> String {
    let mut body = String::new();
    let _ = write!(body, "<p class=\"summary\">{}</p>", escape_xml(traffic));
    if let Some(attainment) = report.attainment {
        let _ = write!(
            body,
            "<p class=\"optimality\">{:.2}% of {} measured requests within their SLO{}</p>",
            100.0 * attainment,
            report.requests_measured,
            report.worst.as_ref().map_or_else(String::new, |worst| format!(
                "; worst service {} at {:.2}%",
                escape_xml(&worst.name),
                100.0 * worst.attainment
            ))
        );
    }
    body.push_str(&summary_table(report));
    body.push_str("<div class=\"charts\">");
    for service in &report.services {
        let _ = write!(
            body,
            "<figure class=\"service\" data-service=\"{}\"><figcaption>{}</figcaption>{}{}</figure>",
            escape_xml(&service.name),
            escape_xml(&service.name),
            cdf_svg(service),
            timeline_svg(service)
        );
    }
    body.push_str("</div>");
    styled_page(title, &[], STYLE, &body)
}

/// One row per service: requests, attainment, percentiles, SLO, windows
/// met and the attainment 95% of them reach (when windows were judged),
/// met.
fn summary_table(report: &ServingReport) -> String {
    let mut table = String::from(
        "<table class=\"serving\"><tr><th>service</th><th>requests</th><th>within SLO</th><th>p50 ms</th>\
         <th>p99 ms</th><th>p99.9 ms</th><th>SLO ms</th><th>target</th><th>windows met</th>\
         <th>95% of windows reach</th><th>met</th></tr>",
    );
    for service in &report.services {
        let _ = write!(
            table,
            "<tr data-service=\"{}\"><td>{}</td><td>{}</td>",
            escape_xml(&service.name),
            escape_xml(&service.name),
            service.requests
        );
        let counted = service.windows.filter(|windows| windows.windows > 0);
        let windows =
            counted.map_or_else(|| "—".to_string(), |windows| format!("{} of {}", windows.met, windows.windows));
        let reached = counted
            .and_then(|windows| windows.p5_attainment)
            .map_or_else(|| "—".to_string(), |attainment| format!("{:.2}%", 100.0 * attainment));
        match &service.measures {
            Some(measures) => {
                let _ = write!(
                    table,
                    "<td>{:.2}%</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}%</td><td>{windows}</td>\
                     <td>{reached}</td><td class=\"{}\">{}</td></tr>",
                    100.0 * measures.attainment,
                    measures.p50_ms,
                    measures.p99_ms,
                    measures.p999_ms,
                    service.latency_slo_ms,
                    service.percentile,
                    verdict_class(measures.verdict),
                    measures.verdict.word()
                );
            }
            None => {
                let _ = write!(table, "<td colspan=\"9\" class=\"muted\">no request measured</td></tr>");
            }
        }
    }
    table.push_str("</table>");
    table
}

/// "Nines" of a share: 0.9 → 1, 0.99 → 2, capped at [`MAX_NINES`].
pub(crate) fn nines(share: f64) -> f64 {
    (-(1.0 - share).max(10f64.powf(-MAX_NINES)).log10()).clamp(0.0, MAX_NINES)
}

/// The service's latency CDF (log latency across, nines up) with its SLO.
fn cdf_svg(service: &ServiceOutcome) -> String {
    let Some(measures) = &service.measures else { return String::new() };
    let points: Vec<&CdfPoint> = measures.cdf.iter().filter(|p| p.latency_ms > 0.0).collect();
    let Some(first) = points.first() else { return String::new() };
    let low_ms = first.latency_ms.min(service.latency_slo_ms) * 0.8;
    let high_ms = points.iter().map(|p| p.latency_ms).fold(service.latency_slo_ms, f64::max) * 1.25;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |ms: f64| LEFT + plot_w * (ms / low_ms).ln() / (high_ms / low_ms).ln();
    let y = |share: f64| TOP + plot_h * (1.0 - nines(share) / MAX_NINES);
    let mut svg = format!(
        "<svg class=\"cdf\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\"><title>latency CDF of {}</title>",
        escape_xml(&service.name)
    );
    share_grid(&mut svg, LEFT, WIDTH - RIGHT, y);
    for tick in latency_ticks(low_ms, high_ms) {
        let at = x(tick);
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{at:.1}\" x2=\"{at:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h,
            TOP + plot_h + 12.0,
            format_ms(tick)
        );
    }
    let _ = write!(
        svg,
        "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">latency, ms</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 4.0
    );
    let mut path = String::new();
    for (i, point) in points.iter().enumerate() {
        let _ = write!(path, "{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, x(point.latency_ms), y(point.share));
    }
    let _ = write!(svg, "<path class=\"curve\" d=\"{path}\"/>");
    let target = y(service.percentile / 100.0);
    let slo = x(service.latency_slo_ms);
    // The label sits right of the SLO line, or left of it in the plot's
    // right half, so it is never cut by the picture's edge.
    let (label_x, anchor) = if slo > LEFT + plot_w / 2.0 { (slo - 3.0, "end") } else { (slo + 3.0, "start") };
    let _ = write!(
        svg,
        "<line class=\"target\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{target:.1}\" y2=\"{target:.1}\"/>\
         <line class=\"slo\" x1=\"{slo:.1}\" x2=\"{slo:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/>\
         <text class=\"label\" x=\"{label_x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">SLO {}</text></svg>",
        WIDTH - RIGHT,
        TOP + plot_h,
        TOP + 10.0,
        format_ms(service.latency_slo_ms)
    );
    svg
}

/// Attainment per time bucket, when the simulation counted it.
fn timeline_svg(service: &ServiceOutcome) -> String {
    let buckets: Vec<(f64, f64)> =
        service.timeline.iter().filter_map(|b| b.attainment().map(|a| (b.start_s, a))).collect();
    let (Some(first), Some(last)) = (buckets.first(), buckets.last()) else { return String::new() };
    let span_s = (last.0 - first.0).max(1e-9);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |t: f64| LEFT + plot_w * (t - first.0) / span_s;
    let y = |share: f64| TOP + plot_h * (1.0 - nines(share) / MAX_NINES);
    let mut svg = format!(
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\"><title>attainment over time of {}</title>",
        escape_xml(&service.name)
    );
    share_grid(&mut svg, LEFT, WIDTH - RIGHT, y);
    let mut path = String::new();
    for (i, (t, share)) in buckets.iter().enumerate() {
        let _ = write!(path, "{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, x(*t), y(*share));
    }
    let target = y(service.percentile / 100.0);
    let _ = write!(
        svg,
        "<path class=\"curve\" d=\"{path}\"/>\
         <line class=\"target\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{target:.1}\" y2=\"{target:.1}\"/>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time, s ({:.0}–{:.0}): requests within SLO</text></svg>",
        WIDTH - RIGHT,
        LEFT + plot_w / 2.0,
        HEIGHT - 4.0,
        first.0,
        last.0
    );
    svg
}

/// The horizontal grid, from `left` to `right` px, of a chart whose
/// height is a share on the nines scale (`y` places a share), with its
/// labels left of `left`.
pub(crate) fn share_grid(svg: &mut String, left: f64, right: f64, y: impl Fn(f64) -> f64) {
    for (share, label) in [(0.0, "0%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"), (0.9999, "99.99%")] {
        let at = y(share);
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{left}\" x2=\"{right:.1}\" y1=\"{at:.1}\" y2=\"{at:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            left - 4.0,
            at + 3.0
        );
    }
}

/// Round latencies (1, 2, 5 × 10^k ms) between `low` and `high`.
fn latency_ticks(low: f64, high: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powf(low.log10().floor());
    while decade <= high {
        for step in [1.0, 2.0, 5.0] {
            let tick = decade * step;
            if tick >= low && tick <= high {
                ticks.push(tick);
            }
        }
        decade *= 10.0;
    }
    ticks
}

/// A latency for a tick label: whole ms, or seconds from 10 s on.
fn format_ms(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.2}")
    }
}

/// The table cell's class for `verdict` (the page's style colours them).
fn verdict_class(verdict: SloVerdict) -> &'static str {
    match verdict {
        SloVerdict::Met => "met",
        SloVerdict::Unclear => "unclear",
        SloVerdict::Missed => "missed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nines_scale_spaces_90_99_and_999_evenly_and_caps_the_tail() {
        assert!((nines(0.9) - 1.0).abs() < 1e-12 && (nines(0.99) - 2.0).abs() < 1e-12);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(nines(1.0), MAX_NINES);
        assert_eq!(nines(0.0), 0.0);
        assert_eq!(latency_ticks(3.0, 120.0), vec![5.0, 10.0, 20.0, 50.0, 100.0]);
        assert_eq!(format_ms(25_000.0), "25 s");
    }
}
