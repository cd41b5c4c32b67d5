//! The picture of a simulated day (`tessera autopilot simulate --html`):
//! the GPUs each strategy held over the day against the demand, each
//! strategy's worst service hour by hour against its percentile, and the
//! day's totals side by side.
//!
//! The data comes in plain ([`DayPicture`]): the caller turns its own
//! report into series, so this crate needs nothing of the autopilot.
//!
//! The DOM: the page holds a `div.autopilot-day`; the GPUs over the day are
//! an `svg.day-gpus` with a `path.gpus` per strategy (`data-strategy`, a
//! step line) and a `path.demand` (the demand, on the right axis); the
//! hours an `svg.day-hours` with a `g.strategy` per strategy
//! (`data-strategy`) holding a `circle.hour` per hour with a measure
//! (`data-hour`, `data-attainment`); the totals a `table.day-totals` with a
//! `tr` per strategy (`data-strategy`).

use std::fmt::Write;

use tessera_core::text::{escape_xml, tick_step};

use crate::html::styled_page;
use crate::serving::{nines, share_grid, MAX_NINES};

/// The charts' size and margins, px.
const WIDTH: f64 = 960.0;
const GPUS_HEIGHT: f64 = 320.0;
const HOURS_HEIGHT: f64 = 200.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 36.0;

/// Colours of the strategies, in the order given (then again).
const COLOURS: [&str; 4] = ["#2563eb", "#6b7280", "#ea580c", "#059669"];
/// The demand's colour.
const DEMAND_COLOUR: &str = "#93c5fd";

const STYLE: &str = ".autopilot-day svg{display:block;margin:6px 0}.axis{stroke:#9ca3af;stroke-width:1}\
.grid{stroke:#e5e7eb;stroke-width:1}.tick{font-size:11px;fill:#4b5563}.target{stroke:#b91c1c;stroke-width:1;\
stroke-dasharray:4 3}path.gpus{fill:none;stroke-width:2}path.demand{stroke:none;opacity:.45}\
.day-legend{display:flex;flex-wrap:wrap;gap:6px 18px;font-size:13px;margin:4px 0}.day-legend .swatch{display:inline-block;\
width:18px;height:4px;vertical-align:3px;margin-right:6px}.autopilot-day h2{font-size:17px;margin:16px 0 4px}\
table.day-totals th,table.day-totals td{white-space:nowrap}";

/// A simulated day as series: what [`autopilot_day_html`] draws.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DayPicture {
    /// Hours simulated.
    pub hours: f64,
    /// The demand, all services together: each `(time_s, rate_rps)` holds
    /// from its time to the next.
    pub demand_rps: Vec<(f64, f64)>,
    /// The strategies compared, the first drawn on top.
    pub strategies: Vec<StrategySeries>,
    /// The strategy whose GPU-hours the others' are compared to (an index
    /// into `strategies`).
    pub reference: usize,
}

/// One strategy over the day.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StrategySeries {
    /// Its name (`autopilot`, `static peak`, …).
    pub name: String,
    /// GPUs held: each `(time_s, gpus)` holds from its time to the next.
    pub gpus: Vec<(f64, usize)>,
    /// Per hour, the share of its worst service's requests within the SLO
    /// (`None`: no request that hour).
    pub worst_by_hour: Vec<Option<f64>>,
    /// The day's totals.
    pub totals: StrategyTotals,
}

/// One strategy's totals over the day.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StrategyTotals {
    /// GPU-hours held.
    pub gpu_hours: f64,
    /// Share of all requests within their SLO.
    pub attainment: Option<f64>,
    /// The service with the lowest share, and its share.
    pub worst_service: Option<(String, f64)>,
    /// GPUs whose MIG layout changed, summed over the reconfigurations.
    pub gpus_reconfigured: usize,
    /// MPS processes started.
    pub processes_started: u64,
    /// Requests lost in transitions.
    pub requests_lost: f64,
}

/// The page of `picture`, titled `title`, with `described` (the traffic
/// and the sampling in words) under the title and `percentile` (e.g. 99)
/// marked on the hours' chart.
pub fn autopilot_day_html(picture: &DayPicture, title: &str, described: &str, percentile: f64) -> String {
    let mut body = String::from("<div class=\"autopilot-day\">");
    let _ = write!(body, "<p class=\"summary\">{}</p>", escape_xml(described));
    body.push_str(&totals_table(picture));
    body.push_str("<h2>GPUs held over the day, against the demand</h2>");
    body.push_str(&legend(picture, true));
    body.push_str(&gpus_svg(picture));
    body.push_str("<h2>The worst service's requests within its SLO, hour by hour</h2>");
    body.push_str(&legend(picture, false));
    body.push_str(&hours_svg(picture, percentile));
    body.push_str("</div>");
    styled_page(title, &[], STYLE, &body)
}

/// The colour of the strategy at `index`.
fn colour(index: usize) -> &'static str {
    COLOURS[index % COLOURS.len()]
}

/// The line style of the strategy at `index`: the first solid, the others
/// dashed apart.
fn dashes(index: usize) -> &'static str {
    match index {
        0 => "",
        1 => " stroke-dasharray=\"8 4\"",
        _ => " stroke-dasharray=\"3 3\"",
    }
}

/// The strategies' colours, and the demand's when `demand`.
fn legend(picture: &DayPicture, demand: bool) -> String {
    let mut html = String::from("<div class=\"day-legend\">");
    for (index, strategy) in picture.strategies.iter().enumerate() {
        let _ = write!(
            html,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            colour(index),
            escape_xml(&strategy.name)
        );
    }
    if demand {
        let _ = write!(
            html,
            "<span><span class=\"swatch\" style=\"background:{DEMAND_COLOUR};height:10px;vertical-align:0\"></span>\
             demand, req/s (right axis)</span>"
        );
    }
    html.push_str("</div>");
    html
}

/// The totals, a row per strategy.
fn totals_table(picture: &DayPicture) -> String {
    let mut table = String::from("<table class=\"day-totals\"><tr><th>strategy</th><th>GPU-hours</th>");
    let reference = picture.strategies.get(picture.reference);
    let _ = write!(
        table,
        "<th>vs {}</th><th>within SLO</th><th>worst service</th><th>GPUs reconfigured</th>\
         <th>processes started</th><th>requests lost</th></tr>",
        reference.map_or_else(|| "-".to_string(), |strategy| escape_xml(&strategy.name))
    );
    let base = reference.map(|s| s.totals.gpu_hours);
    for strategy in &picture.strategies {
        let totals = &strategy.totals;
        let versus = match base {
            Some(base) if base > 0.0 => format!("{:+.1}%", 100.0 * (totals.gpu_hours / base - 1.0)),
            _ => "-".to_string(),
        };
        let worst = totals
            .worst_service
            .as_ref()
            .map_or_else(|| "-".to_string(), |(name, share)| format!("{} {:.2}%", escape_xml(name), 100.0 * share));
        let _ = write!(
            table,
            "<tr data-strategy=\"{}\"><td>{}</td><td>{:.1}</td><td>{versus}</td><td>{}</td><td>{worst}</td>\
             <td>{}</td><td>{}</td><td>{:.0}</td></tr>",
            escape_xml(&strategy.name),
            escape_xml(&strategy.name),
            totals.gpu_hours,
            totals.attainment.map_or_else(|| "-".to_string(), |share| format!("{:.2}%", 100.0 * share)),
            totals.gpus_reconfigured,
            totals.processes_started,
            totals.requests_lost
        );
    }
    table.push_str("</table>");
    table
}

/// A tick label: whole numbers grouped by thousands as `k`.
fn tick_label(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{}k", value / 1000.0)
    } else {
        format!("{value}")
    }
}

/// The hours axis along the bottom of a chart `height` px high.
fn hours_axis(svg: &mut String, hours: f64, height: f64, x: &dyn Fn(f64) -> f64) {
    let every = if hours > 12.0 { 2.0 } else { 1.0 };
    let mut hour = 0.0;
    while hour <= hours + 1e-9 {
        let at = x(hour * 3600.0);
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{at:.1}\" x2=\"{at:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{hour}</text>",
            height - BOTTOM,
            height - BOTTOM + 14.0
        );
        hour += every;
    }
    let _ = write!(
        svg,
        "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">hour of the day</text>",
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        height - 4.0
    );
}

/// A step line through `points` (each value holding to the next point,
/// the last to `end_s`), placed by `x` and `y`.
fn step_path(points: &[(f64, f64)], end_s: f64, x: &dyn Fn(f64) -> f64, y: &dyn Fn(f64) -> f64) -> String {
    let mut path = String::new();
    for (index, &(time_s, value)) in points.iter().enumerate() {
        let next_s = points.get(index + 1).map_or(end_s, |next| next.0);
        let (from, to, at) = (x(time_s), x(next_s.min(end_s)), y(value));
        if index == 0 {
            let _ = write!(path, "M{from:.1},{at:.1}");
        } else {
            let _ = write!(path, " V{at:.1}");
        }
        let _ = write!(path, " H{to:.1}");
    }
    path
}

/// The GPUs each strategy held (left axis) and the demand (right axis).
fn gpus_svg(picture: &DayPicture) -> String {
    let end_s = picture.hours * 3600.0;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, GPUS_HEIGHT - TOP - BOTTOM);
    let most_gpus = picture.strategies.iter().flat_map(|s| &s.gpus).map(|&(_, gpus)| gpus).max().unwrap_or(0);
    let gpu_step = tick_step(most_gpus.max(1) as f64 * 1.1);
    let gpu_top = ((most_gpus.max(1) as f64 * 1.1) / gpu_step).ceil() * gpu_step;
    let most_rps = picture.demand_rps.iter().map(|&(_, rate)| rate).fold(0.0, f64::max);
    let rps_step = tick_step(most_rps.max(1e-9) * 1.1);
    let rps_top = ((most_rps.max(1e-9) * 1.1) / rps_step).ceil() * rps_step;
    let x = |time_s: f64| LEFT + plot_w * (time_s / end_s.max(1e-9)).clamp(0.0, 1.0);
    let y_gpus = |gpus: f64| TOP + plot_h * (1.0 - gpus / gpu_top);
    let y_rps = |rate: f64| TOP + plot_h * (1.0 - rate / rps_top);
    let mut svg = format!(
        "<svg class=\"day-gpus\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{GPUS_HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {GPUS_HEIGHT}\" role=\"img\"><title>GPUs held over the day, against the demand</title>"
    );
    let mut tick = 0.0;
    while tick <= gpu_top + 1e-9 {
        let at = y_gpus(tick);
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{at:.1}\" y2=\"{at:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + plot_w,
            LEFT - 4.0,
            at + 4.0,
            tick_label(tick)
        );
        tick += gpu_step;
    }
    let mut tick = 0.0;
    while tick <= rps_top + 1e-9 {
        let _ = write!(
            svg,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"start\">{}</text>",
            LEFT + plot_w + 4.0,
            y_rps(tick) + 4.0,
            tick_label(tick)
        );
        tick += rps_step;
    }
    hours_axis(&mut svg, picture.hours, GPUS_HEIGHT, &x);
    let _ = write!(
        svg,
        "<text class=\"tick\" transform=\"translate(12 {mid:.1}) rotate(-90)\" text-anchor=\"middle\">GPUs held</text>\
         <text class=\"tick\" transform=\"translate({right:.1} {mid:.1}) rotate(90)\" text-anchor=\"middle\">demand, req/s</text>",
        mid = TOP + plot_h / 2.0,
        right = WIDTH - 10.0
    );
    if !picture.demand_rps.is_empty() {
        let line = step_path(&picture.demand_rps, end_s, &x, &y_rps);
        let base = y_rps(0.0);
        let _ = write!(
            svg,
            "<path class=\"demand\" fill=\"{DEMAND_COLOUR}\" d=\"M{:.1},{base:.1} {} V{base:.1} Z\"/>",
            x(picture.demand_rps[0].0),
            line.replacen('M', "L", 1)
        );
    }
    // The first strategy last, on top.
    for (index, strategy) in picture.strategies.iter().enumerate().rev() {
        let points: Vec<(f64, f64)> = strategy.gpus.iter().map(|&(time_s, gpus)| (time_s, gpus as f64)).collect();
        if points.is_empty() {
            continue;
        }
        let _ = write!(
            svg,
            "<path class=\"gpus\" data-strategy=\"{}\" stroke=\"{}\"{} d=\"{}\"/>",
            escape_xml(&strategy.name),
            colour(index),
            dashes(index),
            step_path(&points, end_s, &x, &y_gpus)
        );
    }
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{bottom:.1}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{bottom:.1}\" y2=\"{bottom:.1}\"/></svg>",
        LEFT + plot_w,
        bottom = TOP + plot_h
    );
    svg
}

/// Each strategy's worst service per hour on the nines scale, with the
/// percentile marked.
fn hours_svg(picture: &DayPicture, percentile: f64) -> String {
    let end_s = picture.hours * 3600.0;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HOURS_HEIGHT - TOP - BOTTOM);
    let x = |time_s: f64| LEFT + plot_w * (time_s / end_s.max(1e-9)).clamp(0.0, 1.0);
    let y = |share: f64| TOP + plot_h * (1.0 - nines(share) / MAX_NINES);
    let mut svg = format!(
        "<svg class=\"day-hours\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HOURS_HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HOURS_HEIGHT}\" role=\"img\"><title>the worst service's requests within its SLO, \
         hour by hour</title>"
    );
    share_grid(&mut svg, LEFT, LEFT + plot_w, y);
    hours_axis(&mut svg, picture.hours, HOURS_HEIGHT, &x);
    let target = y(percentile / 100.0);
    let _ = write!(
        svg,
        "<line class=\"target\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{target:.1}\" y2=\"{target:.1}\"/>",
        LEFT + plot_w
    );
    for (index, strategy) in picture.strategies.iter().enumerate().rev() {
        let _ = write!(svg, "<g class=\"strategy\" data-strategy=\"{}\">", escape_xml(&strategy.name));
        let mut path = String::new();
        for (hour, share) in strategy.worst_by_hour.iter().enumerate() {
            let Some(share) = share else { continue };
            let middle_s = ((hour as f64 + 0.5) * 3600.0).min(end_s);
            let (at_x, at_y) = (x(middle_s), y(*share));
            let _ = write!(path, "{}{at_x:.1},{at_y:.1}", if path.is_empty() { "M" } else { " L" });
            let _ = write!(
                svg,
                "<circle class=\"hour\" data-hour=\"{hour}\" data-attainment=\"{share:.6}\" cx=\"{at_x:.1}\" \
                 cy=\"{at_y:.1}\" r=\"3\" fill=\"{}\"><title>{} hour {hour}: {:.3}%</title></circle>",
                colour(index),
                escape_xml(&strategy.name),
                100.0 * share
            );
        }
        let _ = write!(
            svg,
            "<path fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} d=\"{path}\"/></g>",
            colour(index),
            dashes(index)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture() -> DayPicture {
        let series = |name: &str, gpus: Vec<(f64, usize)>, worst: f64| StrategySeries {
            name: name.to_string(),
            gpus,
            worst_by_hour: vec![Some(worst), None, Some(0.995)],
            totals: StrategyTotals { gpu_hours: 10.0, attainment: Some(0.999), ..StrategyTotals::default() },
        };
        DayPicture {
            hours: 3.0,
            demand_rps: vec![(0.0, 100.0), (3600.0, 300.0), (7200.0, 150.0)],
            strategies: vec![
                series("autopilot", vec![(0.0, 2), (4000.0, 5), (8000.0, 3)], 0.9991),
                series("static <peak>", vec![(0.0, 6)], 0.9999),
            ],
            reference: 1,
        }
    }

    #[test]
    fn the_page_draws_a_step_line_per_strategy_the_demand_and_the_hours() {
        let html = autopilot_day_html(&picture(), "a day", "traffic & sampling", 99.0);
        // Self-contained: nothing fetched, no script.
        assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("src=") && !html.contains("<script"));
        assert_eq!(html.matches("<path class=\"gpus\"").count(), 2);
        assert!(html.contains("data-strategy=\"static &lt;peak&gt;\"") && html.contains("traffic &amp; sampling"));
        assert_eq!(html.matches("<path class=\"demand\"").count(), 1);
        // Two hours with a measure per strategy; the hour without none.
        assert_eq!(html.matches("<circle class=\"hour\"").count(), 4);
        assert!(!html.contains("data-hour=\"1\""));
        assert_eq!(html.matches("<tr data-strategy=").count(), 2);
        // The autopilot's line steps up at 4000 s and down at 8000 s, to the day's end.
        let x = |time_s: f64| LEFT + (WIDTH - LEFT - RIGHT) * time_s / 10_800.0;
        let line = html.split("<path class=\"gpus\" data-strategy=\"autopilot\"").nth(1).unwrap_or_default();
        assert!(line.contains(&format!("H{:.1}", x(4000.0))) && line.contains(&format!("H{:.1}", x(10_800.0))));
    }

    #[test]
    fn tick_labels_group_thousands() {
        assert_eq!(tick_label(200_000.0), "200k");
        assert_eq!(tick_label(40.0), "40");
    }
}
