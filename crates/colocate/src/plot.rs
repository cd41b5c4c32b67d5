//! The learning curve as a self-contained SVG: score against measured
//! colocations, one line for random measurements and one for suggested
//! ones, with axes, a legend and each point's value as its tooltip. Text
//! uses the generic `monospace` font family only.

use std::fmt::Write;

use crate::suggest::CurvePoint;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 55.0;

/// Renders `points` as an SVG document (a string starting with `<svg` and
/// ending with `</svg>`) with one `<polyline` per strategy and one
/// `<circle` per point and strategy.
pub fn learning_curve_svg(points: &[CurvePoint], title: &str) -> String {
    let max_x = points.iter().map(|p| p.measured).max().unwrap_or(1).max(1) as f64;
    let lowest = points.iter().flat_map(|p| [p.random, p.suggested]).fold(1.0f64, f64::min);
    // The score axis from a multiple of 0.05 below the lowest point to 1.
    let min_y = ((lowest * 20.0).floor() / 20.0).clamp(0.0, 0.95);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |measured: f64| LEFT + plot_w * measured / max_x;
    let y = |score: f64| TOP + plot_h * (1.0 - (score - min_y) / (1.0 - min_y));

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="monospace" font-size="12">"#
    );
    let _ = writeln!(svg, r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>"##);
    let _ = writeln!(svg, r#"<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{}</text>"#, xml_text(title));
    // Score grid lines every 0.05.
    let mut step = 0;
    while min_y + 0.05 * f64::from(step) <= 1.0 + 1e-9 {
        let score = min_y + 0.05 * f64::from(step);
        let line_y = y(score);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{line_y:.1}" x2="{}" y2="{line_y:.1}" stroke="#e4e4e4"/>"##,
            WIDTH - RIGHT
        );
        let _ =
            writeln!(svg, r#"<text x="{}" y="{:.1}" text-anchor="end">{score:.2}</text>"#, LEFT - 6.0, line_y + 4.0);
        step += 1;
    }
    // Measurement ticks.
    let tick = [5.0, 10.0, 20.0, 25.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
        .into_iter()
        .find(|t| max_x / t <= 10.0)
        .unwrap_or(max_x);
    let axis_y = TOP + plot_h;
    let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#000"/>"##, WIDTH - RIGHT);
    let _ = writeln!(svg, r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{axis_y}" stroke="#000"/>"##);
    let mut measured = 0.0;
    while measured <= max_x + 1e-9 {
        let tx = x(measured);
        let _ =
            writeln!(svg, r##"<line x1="{tx:.1}" y1="{axis_y}" x2="{tx:.1}" y2="{}" stroke="#000"/>"##, axis_y + 5.0);
        let _ = writeln!(svg, r#"<text x="{tx:.1}" y="{}" text-anchor="middle">{measured}</text>"#, axis_y + 18.0);
        measured += tick;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">measured colocations</text>"#,
        LEFT + plot_w / 2.0,
        axis_y + 38.0
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">fraction of the best choice</text>"#,
        TOP + plot_h / 2.0
    );
    let lines = [
        Line { name: "random measurements", colour: "#888", dash: "6 4", score: |p| p.random },
        Line { name: "suggested measurements", colour: "#1f6fd1", dash: "none", score: |p| p.suggested },
    ];
    for (index, Line { name, colour, dash, score }) in lines.iter().enumerate() {
        let path: Vec<String> =
            points.iter().map(|p| format!("{:.1},{:.1}", x(p.measured as f64), y(score(p)))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            path.join(" ")
        );
        for p in points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}"><title>{name}: {} measured, {:.4}</title></circle>"#,
                x(p.measured as f64),
                y(score(p)),
                p.measured,
                score(p)
            );
        }
        let legend_y = axis_y - 16.0 - 18.0 * index as f64;
        let legend_x = WIDTH - RIGHT - 230.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{legend_x}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            legend_x + 24.0
        );
        let _ = writeln!(svg, r#"<text x="{}" y="{}">{name}</text>"#, legend_x + 30.0, legend_y + 4.0);
    }
    svg.push_str("</svg>");
    svg
}

/// One strategy's line: its legend, colour, dash pattern and score.
struct Line {
    name: &'static str,
    colour: &'static str,
    dash: &'static str,
    score: fn(&CurvePoint) -> f64,
}

/// `text` with the three characters XML content cannot hold escaped.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_curves_with_a_point_each() {
        let points = [
            CurvePoint { measured: 10, random: 0.86, suggested: 0.86 },
            CurvePoint { measured: 40, random: 0.94, suggested: 0.98 },
            CurvePoint { measured: 181, random: 1.0, suggested: 1.0 },
        ];
        let svg = learning_curve_svg(&points, "KACE's pairs <V100> & more");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("KACE's pairs &lt;V100&gt; &amp; more"));
        assert!(svg.contains("suggested measurements: 40 measured, 0.9800"));
        // The score axis starts at 0.85, below the lowest point.
        assert!(svg.contains(">0.85</text>") && !svg.contains(">0.80</text>"), "{svg}");
        assert!(svg.contains(r#"font-family="monospace""#));
    }
}
