//! A hand-written SVG: cumulative distributions of handoff latency, one curve per
//! implementation, on a logarithmic time axis.

use std::fmt::Write;

use crate::stats::percentile;

/// One curve: a label, a colour and its samples (µs, any order).
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub colour: &'static str,
    pub samples_us: Vec<f64>,
}

const W: f64 = 760.0;
const H: f64 = 470.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 90.0;
const BOTTOM: f64 = 60.0;

/// The plot, with a dashed vertical line at `marker` (µs, labelled) when given.
pub fn cdf(title: &str, series: &[Series], marker: Option<(f64, &str)>) -> String {
    let sorted: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            let mut v: Vec<f64> = s.samples_us.iter().copied().filter(|x| *x > 0.0).collect();
            v.sort_by(f64::total_cmp);
            v
        })
        .collect();
    let all: Vec<f64> = {
        let mut all: Vec<f64> = sorted.iter().flatten().copied().collect();
        all.extend(marker.map(|m| m.0));
        all.sort_by(f64::total_cmp);
        all
    };
    let lo = all.first().copied().unwrap_or(10.0).max(1.0);
    let hi = all.last().copied().unwrap_or(1000.0).max(lo * 10.0);
    let (lo_exp, hi_exp) = (lo.log10().floor(), hi.log10().ceil());
    let x =
        |us: f64| LEFT + (us.max(1e-9).log10() - lo_exp) / (hi_exp - lo_exp) * (W - LEFT - RIGHT);
    let y = |q: f64| TOP + (1.0 - q) * (H - TOP - BOTTOM);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // Grid and axes.
    for q in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        let yy = y(q);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{q}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            yy + 4.0
        );
    }
    let mut e = lo_exp;
    while e <= hi_exp {
        for m in [1.0, 2.0, 5.0] {
            let us = m * 10f64.powf(e);
            if us < 10f64.powf(lo_exp) || us > 10f64.powf(hi_exp) {
                continue;
            }
            let xx = x(us);
            let _ = writeln!(
                svg,
                r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="{}"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                H - BOTTOM,
                if m == 1.0 { "#bbb" } else { "#eee" },
                H - BOTTOM + 16.0,
                format_us(us)
            );
        }
        e += 1.0;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">handoff latency (log scale): waiter's acquire returned − holder's unlock sent</text>"#,
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">fraction of handoffs ≤ x</text>"#,
        TOP + (H - TOP - BOTTOM) / 2.0,
        TOP + (H - TOP - BOTTOM) / 2.0
    );
    if let Some((us, label)) = marker {
        let xx = x(us);
        let _ = writeln!(
            svg,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" fill="#555">{}</text>"##,
            H - BOTTOM,
            xx + 4.0,
            H - BOTTOM - 8.0,
            escape(label)
        );
    }
    // Curves and legend.
    for (i, (s, v)) in series.iter().zip(&sorted).enumerate() {
        if v.is_empty() {
            continue;
        }
        let step = (v.len() / 600).max(1);
        let mut points = String::new();
        let mut prev_q = 0.0;
        for (k, us) in v.iter().enumerate() {
            let q = (k + 1) as f64 / v.len() as f64;
            if k % step == 0 || k + 1 == v.len() {
                let _ = write!(
                    points,
                    "{:.1},{:.1} {:.1},{:.1} ",
                    x(*us),
                    y(prev_q),
                    x(*us),
                    y(q)
                );
                prev_q = q;
            }
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.colour,
            points.trim_end()
        );
        let ly = 44.0 + 20.0 * i as f64;
        let p50 = percentile(v, 50.0).unwrap_or(0.0);
        let p99 = percentile(v, 99.0).unwrap_or(0.0);
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{} — n={}, p50 {}, p99 {}</text>"#,
            LEFT + 20.0,
            LEFT + 50.0,
            s.colour,
            LEFT + 56.0,
            ly + 4.0,
            escape(&s.label),
            v.len(),
            format_us(p50),
            format_us(p99)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// `850 µs`, `1.2 ms`, `35 ms`.
pub fn format_us(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0} ms", us / 1000.0)
    } else if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_curves() {
        let series = [
            Series {
                label: "a".into(),
                colour: "#c33",
                samples_us: vec![100.0, 200.0, 300.0],
            },
            Series {
                label: "b <x>".into(),
                colour: "#36c",
                samples_us: vec![],
            },
        ];
        let svg = cdf("t", &series, Some((250.0, "target")));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("p50 200 µs"));
        assert_eq!(format_us(1500.0), "1.5 ms");
    }
}
