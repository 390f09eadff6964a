//! SVG plots of the experiment (plotters, SVG backend only: no system
//! fonts needed): lines of means with 95 % CI error bars, one or more
//! panels in a grid.

use crate::error::BagError;
use crate::stats::Summary;
use plotters::prelude::*;
use std::path::Path;

/// One line: a name and its points (x, summary of y).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, Summary)>,
}

/// One chart.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// x on a log10 axis (ticks labelled with the plain value).
    pub log_x: bool,
    pub series: Vec<Series>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

fn plot_err(path: &Path) -> impl Fn(String) -> BagError + '_ {
    move |msg| BagError::Plot {
        path: path.to_path_buf(),
        msg,
    }
}

/// Draws `panels` into the SVG file `path`, `cols` to a row.
pub fn svg(path: &Path, title: &str, panels: &[Panel], cols: usize) -> Result<(), BagError> {
    let err = plot_err(path);
    let cols = cols.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(cols).max(1);
    let (w, h) = (560 * cols as u32, 30 + 410 * rows as u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| err(e.to_string()))?;
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(panel, area).map_err(&err)?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

fn draw_panel(
    p: &Panel,
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
) -> Result<(), String> {
    let tx = |x: f64| if p.log_x { x.max(1e-9).log10() } else { x };
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0f64);
    for (x, s) in pts {
        x0 = x0.min(tx(*x));
        x1 = x1.max(tx(*x));
        y1 = y1.max(s.hi());
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    let pad = ((x1 - x0) * 0.05).max(0.05);
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y1)
        .map_err(|e| e.to_string())?;
    let log_x = p.log_x;
    let decimals = if y1 >= 50.0 {
        0
    } else if y1 >= 5.0 {
        1
    } else {
        2
    };
    let fmt_x = move |v: &f64| {
        if log_x {
            let n = 10f64.powf(*v);
            if n >= 1e6 {
                format!("{:.0}M", n / 1e6)
            } else if n >= 1e3 {
                format!("{:.0}k", n / 1e3)
            } else {
                format!("{n:.0}")
            }
        } else {
            format!("{v:.0}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|v: &f64| format!("{v:.*}", decimals))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in p.series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let line: Vec<(f64, f64)> = s.points.iter().map(|(x, y)| (tx(*x), y.mean)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(
                line.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, c.filled())),
            )
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(s.points.iter().map(|(x, y)| {
                ErrorBar::new_vertical(
                    tx(*x),
                    y.lo().max(0.0),
                    y.mean,
                    y.hi(),
                    c.stroke_width(1),
                    8,
                )
            }))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}
