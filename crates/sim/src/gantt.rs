//! A Gantt chart of a simulation as a self-contained SVG: one lane per
//! engine (compute, H2D, D2H), one rectangle per busy interval coloured by
//! a stable hash of its client's name (its label, `client#operation` or
//! `client/buffer`, is the rectangle's tooltip), a time axis in
//! milliseconds, a legend of the clients' colours, the title and the
//! makespan. Text uses the generic `monospace` font family only.

use std::fmt::Write;
use tessera_core::text::{escape_xml, tick_step};

use crate::result::{EngineKind, SimResult};

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const LANE: f64 = 34.0;
const BAR: f64 = 24.0;
const LANES: [(EngineKind, &str); 3] =
    [(EngineKind::Compute, "compute"), (EngineKind::H2d, "H2D"), (EngineKind::D2h, "D2H")];
/// Height of one row of the legend.
const LEGEND_ROW: f64 = 18.0;
/// Width of one entry of the legend (a swatch and a name).
const LEGEND_ENTRY: f64 = 150.0;
/// Clients named in the legend; beyond, it says how many more.
const LEGEND_MAX: usize = 40;

/// Renders `result` as an SVG document (a string starting with `<svg` and
/// ending with `</svg>`), with exactly one `<rect` per interval.
pub fn gantt_svg(result: &SimResult, title: &str) -> String {
    let end_ns = result.intervals.iter().map(|i| i.end_ns).max().unwrap_or(0).max(result.makespan_ns).max(1);
    let plot = WIDTH - LEFT - RIGHT;
    let x = |ns: u64| LEFT + plot * ns as f64 / end_ns as f64;
    let axis_y = TOP + LANE * LANES.len() as f64 + 6.0;
    let mut clients: Vec<&str> = Vec::new();
    for interval in &result.intervals {
        let name = client(&interval.label);
        if !clients.contains(&name) {
            clients.push(name);
        }
    }
    let per_row = ((WIDTH - LEFT - RIGHT) / LEGEND_ENTRY).floor().max(1.0) as usize;
    let shown = clients.len().min(LEGEND_MAX);
    let legend_rows = shown.div_ceil(per_row) + usize::from(clients.len() > shown);
    let legend_y = axis_y + 44.0;
    let height = legend_y + LEGEND_ROW * legend_rows as f64;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#, escape_xml(title));
    let _ =
        writeln!(svg, r#"<text x="{LEFT}" y="38">makespan {} ms</text>"#, format_ms(result.makespan_ns as f64 / 1e6));

    for (lane, (engine, name)) in LANES.iter().enumerate() {
        let top = TOP + LANE * lane as f64;
        let mid = top + LANE / 2.0;
        let _ = writeln!(svg, r#"<text x="{}" y="{}" text-anchor="end">{name}</text>"#, LEFT - 8.0, mid + 4.0);
        let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{mid}" x2="{}" y2="{mid}" stroke="#ddd"/>"##, WIDTH - RIGHT);
        for interval in result.intervals.iter().filter(|i| i.engine == *engine) {
            let x0 = x(interval.start_ns);
            let w = (x(interval.end_ns) - x0).max(0.5);
            let _ = writeln!(
                svg,
                r##"<rect x="{x0:.2}" y="{:.2}" width="{w:.2}" height="{BAR}" fill="{}" stroke="#333" stroke-width="0.3"><title>{} ({} – {} ms)</title></rect>"##,
                top + (LANE - BAR) / 2.0,
                colour(client(&interval.label)),
                escape_xml(&interval.label),
                format_ms(interval.start_ns as f64 / 1e6),
                format_ms(interval.end_ns as f64 / 1e6),
            );
        }
    }

    let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#000"/>"##, WIDTH - RIGHT);
    let end_ms = end_ns as f64 / 1e6;
    let step = tick_step(end_ms);
    let mut k = 0u64;
    while (k as f64) * step <= end_ms * (1.0 + 1e-9) {
        let ms = k as f64 * step;
        let tx = LEFT + plot * ms / end_ms;
        let _ =
            writeln!(svg, r##"<line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}" stroke="#000"/>"##, axis_y + 5.0);
        let _ =
            writeln!(svg, r#"<text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"#, axis_y + 18.0, format_ms(ms));
        k += 1;
    }
    let _ = writeln!(svg, r#"<text x="{}" y="{}" text-anchor="end">ms</text>"#, WIDTH - RIGHT, axis_y + 30.0 - 2.0);
    let _ = writeln!(svg, r#"<g class="legend">"#);
    for (i, name) in clients.iter().take(shown).enumerate() {
        let (row, column) = (i / per_row, i % per_row);
        let (lx, ly) = (LEFT + LEGEND_ENTRY * column as f64, legend_y + LEGEND_ROW * row as f64);
        let _ = writeln!(
            svg,
            r##"<rect class="swatch" x="{lx}" y="{}" width="12" height="12" fill="{}" stroke="#333" stroke-width="0.3"/><text x="{}" y="{}">{}</text>"##,
            ly - 10.0,
            colour(name),
            lx + 16.0,
            ly,
            escape_xml(name)
        );
    }
    if clients.len() > shown {
        let ly = legend_y + LEGEND_ROW * (legend_rows - 1) as f64;
        let _ = writeln!(svg, r#"<text x="{LEFT}" y="{ly}">and {} more clients</text>"#, clients.len() - shown);
    }
    svg.push_str("</g>\n</svg>");
    svg
}

/// Milliseconds with up to three decimals, trailing zeros dropped.
fn format_ms(ms: f64) -> String {
    let text = format!("{ms:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The client of an interval's label: before the last `#` of
/// `client#operation`, else before the first `/` of `client/buffer`.
fn client(label: &str) -> &str {
    match label.rsplit_once('#') {
        Some((client, _)) => client,
        None => label.split_once('/').map_or(label, |(client, _)| client),
    }
}

/// A fill colour fixed by a name (FNV-1a hash → hue).
fn colour(label: &str) -> String {
    let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("hsl({}, 65%, {}%)", hash % 360, 55 + (hash >> 32) % 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Interval;

    fn interval(engine: EngineKind, start_ns: u64, end_ns: u64, label: &str) -> Interval {
        Interval { engine, start_ns, end_ns, label: label.to_string(), bytes: 0 }
    }

    #[test]
    fn draws_one_rect_per_interval_and_escapes() {
        let result = SimResult {
            makespan_ns: 7_500_000,
            intervals: vec![
                interval(EngineKind::H2d, 0, 2_000_000, "a<b>&c/w"),
                interval(EngineKind::Compute, 2_000_000, 5_000_000, "a<b>&c#0"),
                interval(EngineKind::D2h, 5_000_000, 7_500_000, "a<b>&c/w"),
                interval(EngineKind::Compute, 5_000_000, 6_000_000, "x#1"),
            ],
            ..SimResult::default()
        };
        let svg = gantt_svg(&result, "run <1> & \"2\"");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        // Four intervals and a legend swatch per client (two clients).
        assert_eq!(svg.matches("<rect").count() - svg.matches(r#"class="swatch""#).count(), 4);
        assert_eq!(svg.matches(r#"class="swatch""#).count(), 2);
        // A client's compute and copies share its colour, named in the legend.
        let fill = colour("a<b>&c");
        assert_eq!(svg.matches(&format!(r#"fill="{fill}""#)).count(), 4, "three intervals and the swatch");
        assert!(svg.contains(">a&lt;b&gt;&amp;c</text>") && svg.contains(">x</text>"), "{svg}");
        assert!(svg.contains("a&lt;b&gt;&amp;c#0") && !svg.contains("a<b>"));
        assert!(svg.contains("run &lt;1&gt; &amp; &quot;2&quot;"));
        assert!(svg.contains("makespan 7.5 ms"));
        assert!(svg.contains(r#"font-family="monospace""#));
        // Same label, same colour; ticks at 0, 2, 4, 6 ms.
        assert_eq!(colour("a<b>&c/w"), colour("a<b>&c/w"));
        for tick in [">0<", ">2<", ">4<", ">6<"] {
            assert!(svg.contains(tick), "{tick}");
        }
        // Balanced tags (each element is closed).
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert_eq!(svg.matches("<title").count(), svg.matches("</title>").count());
    }

    #[test]
    fn renders_an_empty_result() {
        let svg = gantt_svg(&SimResult::default(), "empty");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<rect").count(), 0);
    }

    #[test]
    fn a_legend_of_many_clients_says_how_many_it_leaves_out() {
        let intervals = (0..45).map(|i| interval(EngineKind::Compute, i, i + 1, &format!("client-{i}#0"))).collect();
        let svg = gantt_svg(&SimResult { makespan_ns: 50, intervals, ..SimResult::default() }, "many");
        assert_eq!(svg.matches(r#"class="swatch""#).count(), LEGEND_MAX);
        assert!(svg.contains("and 5 more clients"), "{svg}");
        assert_eq!(client("a/b#3"), "a/b");
        assert_eq!(client("a/w/x"), "a");
    }

    #[test]
    fn formats_milliseconds_briefly() {
        assert_eq!(format_ms(2.0), "2");
        assert_eq!(format_ms(0.0125), "0.013");
    }
}
