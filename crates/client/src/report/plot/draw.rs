//! The chart kinds: box plot, scatter, heat map and grouped bars. Each is plain data plus
//! a `Figure::draw` that works on any plotters backend.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::{quantile, Group, HeatGrid};
use super::{plot_err, Figure, FONT_FAMILY};
use crate::error::Result;

const BOX_FILL: RGBColor = RGBColor(158, 202, 225);
const INK: RGBColor = RGBColor(31, 80, 140);
const P99_MARK: RGBColor = RGBColor(200, 30, 30);
/// Bar colours, one per statistic (avg, p50, p99, ...).
const BAR_COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Text and mark sizes follow the picture height; these are the pixel sizes at 600 px.
struct Scale(f64);

impl Scale {
    fn of<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>) -> Self {
        Scale(f64::from(root.dim_in_pixel().1) / 600.0)
    }
    fn px(&self, at_600: f64) -> u32 {
        (at_600 * self.0).round().max(1.0) as u32
    }
    fn font(&self, at_600: f64) -> TextStyle<'static> {
        TextStyle::from((FONT_FAMILY, at_600 * self.0))
    }
    fn root_fill<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)
    }
}

/// Tick text of a token-count axis: whole numbers without decimals ("200", not "200.0").
fn count_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Upper end of a value axis starting at 0: the largest value plus `headroom` (a
/// fraction), and 1.0 when everything is 0 so the range is never empty.
fn axis_top(max: f64, headroom: f64) -> f64 {
    if max > 0.0 && max.is_finite() {
        max * (1.0 + headroom)
    } else {
        1.0
    }
}

/// A value axis over the data, `lo..hi`, with a tenth of the span as margin each side
/// (a box chart's boxes fill the picture instead of sitting in a sliver at the top), not
/// below 0 for data that is not negative. A single value gets a margin of 5 % of itself
/// (at least 0.5) so it sits mid-axis.
pub(crate) fn data_axis(lo: f64, hi: f64) -> std::ops::Range<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi < lo {
        return 0.0..1.0;
    }
    let margin = if hi > lo {
        (hi - lo) * 0.1
    } else {
        (hi.abs() * 0.05).max(0.5)
    };
    let bottom = lo - margin;
    let bottom = if lo >= 0.0 { bottom.max(0.0) } else { bottom };
    bottom..hi + margin
}

/// A heat map axis of `bins` integer bins of `width` from `lo`: one tick in the middle of
/// each bin (thinned to at most [`MAX_BIN_LABELS`]), labelled with the bin's value (`100`)
/// or its range (`100-104`), so a single value is one labelled cell at that value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bins {
    pub lo: u64,
    pub width: u64,
    pub bins: usize,
}

/// Most bin labels on a heat map axis.
const MAX_BIN_LABELS: usize = 10;

impl Bins {
    fn end(&self) -> f64 {
        (self.lo + self.width * self.bins as u64) as f64
    }

    /// The label of the bin holding `v`.
    pub(crate) fn label(&self, v: f64) -> String {
        let i = ((v - self.lo as f64) / self.width.max(1) as f64)
            .floor()
            .max(0.0) as u64;
        let first = self.lo + i * self.width;
        if self.width <= 1 {
            first.to_string()
        } else {
            format!("{first}-{}", first + self.width - 1)
        }
    }
}

impl Ranged for Bins {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = (self.end() - self.lo as f64).max(1.0);
        let fraction = (value - self.lo as f64) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * fraction).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        let every = self.bins.div_ceil(MAX_BIN_LABELS).max(1);
        (0..self.bins)
            .step_by(every)
            .map(|i| self.lo as f64 + (i as f64 + 0.5) * self.width as f64)
            .collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo as f64..self.end()
    }
}

/// An x axis of `n` equal slots, one per group of a box or bar chart, with a tick (and
/// its label) in the middle of each slot: slot `i` spans `[i, i + 1)`.
#[derive(Clone, Copy, Debug)]
struct Slots(usize);

impl Ranged for Slots {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = value / self.0.max(1) as f64;
        limit.0 + (f64::from(limit.1 - limit.0) * fraction).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Only bold ticks (the slot centres); no light mesh lines between groups.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            (0..self.0).map(|i| i as f64 + 0.5).collect()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.0 as f64
    }
}

type Chart<'a, DB, X> = ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>;

/// White background, title, label areas and a numeric y axis over `y`.
fn base_chart<'a, DB: DrawingBackend, X: Ranged<ValueType = f64>>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: X,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, DB, X>> {
    let s = Scale::of(root);
    root.fill(&WHITE).map_err(plot_err)?;
    ChartBuilder::on(root)
        .caption(title, s.font(22.0))
        .margin(s.px(12.0))
        .x_label_area_size(s.px(55.0))
        .y_label_area_size(s.px(80.0))
        .build_cartesian_2d(x, y)
        .map_err(plot_err)
}

/// One box per group: box p25-p75, dark bar at p50, whiskers min-max, red bar at p99.
pub(crate) struct BoxFigure {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<Group>,
}

impl Figure for BoxFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let s = Scale::of(root);
        let n = self.groups.len();
        let max = self
            .groups
            .iter()
            .filter_map(|g| g.values.last())
            .fold(f64::NEG_INFINITY, |a: f64, &b| a.max(b));
        let min = self
            .groups
            .iter()
            .filter_map(|g| g.values.first())
            .fold(f64::INFINITY, |a: f64, &b| a.min(b));
        let x = Slots(n);
        let mut chart = base_chart(root, &self.title, x, data_axis(min, max))?;
        let label_of = |v: &f64| {
            let i = v.floor().max(0.0) as usize;
            self.groups
                .get(i)
                .map(|g| format!("{} (n={})", g.label, g.values.len()))
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&label_of)
            .x_desc("box p25-p75, dark bar p50, whiskers min-max, red bar p99")
            .y_desc(self.y_label.as_str())
            .axis_desc_style(s.font(16.0))
            .label_style(s.font(14.0))
            .draw()
            .map_err(plot_err)?;
        for (i, g) in self.groups.iter().enumerate() {
            draw_box(&mut chart, &s, i as f64, &g.values)?;
        }
        Ok(())
    }
}

/// Draws the box of ascending `v` (not empty) in the slot starting at x = `left`.
fn draw_box<DB: DrawingBackend, X: Ranged<ValueType = f64>>(
    chart: &mut Chart<'_, DB, X>,
    s: &Scale,
    left: f64,
    v: &[f64],
) -> Result<()> {
    let (lo, hi) = (v[0], v[v.len() - 1]);
    let (q1, med, q3, p99) = (
        quantile(v, 0.25),
        quantile(v, 0.5),
        quantile(v, 0.75),
        quantile(v, 0.99),
    );
    let mid = left + 0.5;
    let thin = INK.stroke_width(s.px(1.5));
    let thick = INK.stroke_width(s.px(3.0));
    chart
        .draw_series([Rectangle::new(
            [(left + 0.3, q3), (left + 0.7, q1)],
            BOX_FILL.filled(),
        )])
        .map_err(plot_err)?;
    let lines = [
        (
            vec![
                (left + 0.3, q3),
                (left + 0.7, q3),
                (left + 0.7, q1),
                (left + 0.3, q1),
                (left + 0.3, q3),
            ],
            thin,
        ),
        (vec![(mid, q3), (mid, hi)], thin),
        (vec![(mid, q1), (mid, lo)], thin),
        (vec![(left + 0.4, hi), (left + 0.6, hi)], thin),
        (vec![(left + 0.4, lo), (left + 0.6, lo)], thin),
        (vec![(left + 0.3, med), (left + 0.7, med)], thick),
        (
            vec![(left + 0.3, p99), (left + 0.7, p99)],
            P99_MARK.stroke_width(s.px(2.0)),
        ),
    ];
    chart
        .draw_series(
            lines
                .into_iter()
                .map(|(pts, style)| PathElement::new(pts, style)),
        )
        .map_err(plot_err)?;
    let at_right = Pos::new(HPos::Left, VPos::Center);
    let notes = [
        (
            format!("p50 {med:.2}"),
            med,
            s.font(13.0).color(&INK).pos(at_right),
        ),
        (
            format!("p99 {p99:.2}"),
            p99,
            s.font(13.0).color(&P99_MARK).pos(at_right),
        ),
    ];
    chart
        .draw_series(
            notes
                .into_iter()
                .map(|(text, y, style)| Text::new(text, (left + 0.72, y), style)),
        )
        .map_err(plot_err)?;
    Ok(())
}

/// Points (x, y), both axes from 0; x is a token count or position (whole numbers).
pub(crate) struct ScatterFigure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub points: Vec<(f64, f64)>,
}

impl Figure for ScatterFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let s = Scale::of(root);
        let max_x = self.points.iter().fold(0.0, |a: f64, p| a.max(p.0));
        let max_y = self.points.iter().fold(0.0, |a: f64, p| a.max(p.1));
        let x: RangedCoordf64 = (0f64..axis_top(max_x, 0.05)).into();
        let mut chart = base_chart(root, &self.title, x, 0.0..axis_top(max_y, 0.1))?;
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .x_label_formatter(&count_label)
            .y_desc(self.y_label.as_str())
            .axis_desc_style(s.font(16.0))
            .label_style(s.font(14.0))
            .draw()
            .map_err(plot_err)?;
        let dot = BAR_COLORS[0].mix(0.5).filled();
        let radius = s.px(3.0);
        chart
            .draw_series(self.points.iter().map(|&p| Circle::new(p, radius, dot)))
            .map_err(plot_err)?;
        Ok(())
    }
}

/// 2-D binned counts: darker cells hold more requests; counts are written in the cells
/// when they are large enough to hold the text.
pub(crate) struct HeatFigure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub grid: HeatGrid,
}

impl Figure for HeatFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let s = Scale::of(root);
        let g = &self.grid;
        let x = Bins {
            lo: g.x_lo,
            width: g.x_width,
            bins: g.x_bins(),
        };
        let y = Bins {
            lo: g.y_lo,
            width: g.y_width,
            bins: g.y_bins(),
        };
        s.root_fill(root)?;
        let mut chart = ChartBuilder::on(root)
            .caption(self.title.as_str(), s.font(22.0))
            .margin(s.px(12.0))
            .x_label_area_size(s.px(55.0))
            .y_label_area_size(s.px(80.0))
            .build_cartesian_2d(x, y)
            .map_err(plot_err)?;
        let x_label = |v: &f64| x.label(*v);
        let y_label = |v: &f64| y.label(*v);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .axis_desc_style(s.font(16.0))
            .label_style(s.font(14.0))
            .draw()
            .map_err(plot_err)?;
        let (area_w, area_h) = chart.plotting_area().dim_in_pixel();
        let cell_w = f64::from(area_w) / g.x_bins() as f64;
        let cell_h = f64::from(area_h) / g.y_bins() as f64;
        let show_counts = cell_w >= 26.0 && cell_h >= 14.0;
        let max = g.max_count().max(1) as f64;
        for (xi, column) in g.counts.iter().enumerate() {
            for (yi, &count) in column.iter().enumerate().filter(|(_, &c)| c > 0) {
                let x0 = (g.x_lo + g.x_width * xi as u64) as f64;
                let y0 = (g.y_lo + g.y_width * yi as u64) as f64;
                let (x1, y1) = (x0 + g.x_width as f64, y0 + g.y_width as f64);
                let shade = count as f64 / max;
                chart
                    .draw_series([Rectangle::new(
                        [(x0, y1), (x1, y0)],
                        heat_color(shade).filled(),
                    )])
                    .map_err(plot_err)?;
                if show_counts {
                    let ink = if shade > 0.5 { WHITE } else { BLACK };
                    let font_px = (cell_h * 0.6).min(14.0 * s.0);
                    let style = TextStyle::from((FONT_FAMILY, font_px))
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    let center = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
                    chart
                        .draw_series([Text::new(count.to_string(), center, style)])
                        .map_err(plot_err)?;
                }
            }
        }
        Ok(())
    }
}

/// Light blue (`shade` 0) to dark blue (`shade` 1).
fn heat_color(shade: f64) -> RGBColor {
    let mix = |light: u8, dark: u8| {
        (f64::from(light) + (f64::from(dark) - f64::from(light)) * shade).round() as u8
    };
    RGBColor(mix(222, 8), mix(235, 48), mix(247, 107))
}

/// Bars grouped by run: one bar per statistic in each group, with a legend and the value
/// above each bar. `values[run][stat]`; a missing value leaves a gap.
pub(crate) struct BarFigure {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub values: Vec<Vec<Option<f64>>>,
}

impl Figure for BarFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let s = Scale::of(root);
        let n = self.groups.len();
        let max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .fold(0.0, |a: f64, &b| a.max(b));
        let x = Slots(n);
        let mut chart = base_chart(root, &self.title, x, 0.0..axis_top(max, 0.3))?;
        let label_of = |v: &f64| {
            self.groups
                .get(v.floor().max(0.0) as usize)
                .cloned()
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&label_of)
            .x_desc("run")
            .y_desc(self.y_label.as_str())
            .axis_desc_style(s.font(16.0))
            .label_style(s.font(14.0))
            .draw()
            .map_err(plot_err)?;
        // Each group spans 0.8 of its slot, split evenly between the statistics.
        let width = 0.8 / self.series.len().max(1) as f64;
        for (k, name) in self.series.iter().enumerate() {
            let color = BAR_COLORS[k % BAR_COLORS.len()];
            let bars: Vec<(f64, f64)> = (0..n)
                .filter_map(|i| {
                    self.values[i]
                        .get(k)
                        .copied()
                        .flatten()
                        .map(|v| (i as f64 + 0.1 + width * k as f64, v))
                })
                .collect();
            chart
                .draw_series(
                    bars.iter().map(|&(x0, v)| {
                        Rectangle::new([(x0, v), (x0 + width, 0.0)], color.filled())
                    }),
                )
                .map_err(plot_err)?
                .label(name.as_str())
                .legend(move |(px, py)| {
                    Rectangle::new([(px, py - 5), (px + 12, py + 5)], color.filled())
                });
            let above = s.font(12.0).pos(Pos::new(HPos::Center, VPos::Bottom));
            chart
                .draw_series(bars.iter().map(|&(x0, v)| {
                    Text::new(format!("{v:.2}"), (x0 + width / 2.0, v), above.clone())
                }))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(s.font(14.0))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_axis_is_never_empty() {
        let cases = [
            (10.0, 0.1, 11.0),
            (0.0, 0.1, 1.0),
            (f64::NAN, 0.1, 1.0),
            (2.0, 0.5, 3.0),
        ];
        for (max, headroom, want) in cases {
            assert!(
                (axis_top(max, headroom) - want).abs() < 1e-9,
                "{max} {headroom}"
            );
        }
    }

    #[test]
    fn count_axis_labels_drop_zero_decimals() {
        let cases = [(200.0, "200"), (0.0, "0"), (2.5, "2.5"), (1e-12, "0")];
        for (v, want) in cases {
            assert_eq!(count_label(&v), want);
        }
    }

    #[test]
    fn heat_colors_run_light_to_dark() {
        assert_eq!(heat_color(0.0), RGBColor(222, 235, 247));
        assert_eq!(heat_color(1.0), RGBColor(8, 48, 107));
        let RGBColor(r, _, _) = heat_color(0.5);
        assert_eq!(r, 115);
    }
}
