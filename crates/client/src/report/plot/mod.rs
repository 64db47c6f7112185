//! Charts of one LLM run (`--generate-plots`) and of several runs (`inferperf compare`).
//!
//! Every chart is written twice, as SVG (vector, for reports) and PNG (for quick viewing).
//! Text is drawn with the bundled DejaVu Sans, registered once through `ab_glyph`, so the
//! output never depends on the fonts installed on the machine.

pub mod compare;
mod data;
mod draw;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::measure::llm::record::LlmRequest;
use crate::report::write::{write_atomic, write_atomic_via};

use draw::{BoxFigure, HeatFigure, ScatterFigure};

/// Default picture size of every chart, in pixels (also the SVG's view box).
pub const PLOT_SIZE: (u32, u32) = (1000, 600);

/// Family name the bundled font is registered under; plotters' own default axis text asks
/// for "sans-serif" too, so tick labels use it without extra styling.
pub(crate) const FONT_FAMILY: &str = "sans-serif";

static FONT_BYTES: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

/// Registers the bundled font with plotters exactly once per process.
fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::generic(
            "plots: the bundled font assets/DejaVuSans.ttf is not a valid font",
        ))
    }
}

/// A chart that can be drawn on any plotters backend (SVG or bitmap).
pub(crate) trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Turns a plotters error into an `Error`; the caller adds which file it was drawing.
pub(crate) fn plot_err<E: std::fmt::Display>(e: E) -> Error {
    Error::generic(e.to_string())
}

/// Draws `fig` into `<dir>/<stem>.svg` and `<dir>/<stem>.png` of `size` pixels and
/// returns both paths.
pub(crate) fn write_figure<F: Figure>(
    fig: &F,
    dir: &Path,
    stem: &str,
    size: (u32, u32),
) -> Result<[PathBuf; 2]> {
    ensure_font()?;
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    let context =
        |path: &Path, e: Error| Error::generic(format!("writing plot {}: {e}", path.display()));

    // The SVG goes to a string first so a failed write reports the real OS error.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        fig.draw(&root).map_err(|e| context(&svg_path, e))?;
        root.present()
            .map_err(|e| context(&svg_path, plot_err(e)))?;
    }
    write_atomic("plot", &svg_path, svg.as_bytes())?;

    // The PNG encoder writes a path: a temporary one with the same extension, then renamed.
    write_atomic_via("plot", &png_path, |tmp| {
        let root = BitMapBackend::new(tmp, size).into_drawing_area();
        fig.draw(&root)
            .and_then(|_| root.present().map_err(plot_err))
            .map_err(|e| std::io::Error::other(e.msg))
    })?;
    Ok([svg_path, png_path])
}

/// Writes the run's charts (SVG + PNG each, [`PLOT_SIZE`]) into `dir`, which must exist,
/// and returns the files written. Only successful requests count; a chart without data
/// (no TTFT for embeddings, no output tokens, ...) is skipped, not an error. Models are
/// labelled `model <index>`.
pub fn write_run_plots(reqs: &[LlmRequest], dir: &Path) -> Result<Vec<PathBuf>> {
    write_run_plots_named(reqs, &[], dir, PLOT_SIZE)
}

/// [`write_run_plots`] with model names (`-m` order; index `LlmRequest::model`) and a
/// chosen picture size in pixels.
pub fn write_run_plots_named(
    reqs: &[LlmRequest],
    model_names: &[String],
    dir: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (stem, fig) in run_figures(reqs, model_names) {
        written.extend(write_figure(&fig, dir, stem, size)?);
    }
    Ok(written)
}

/// One chart of a run, drawn in memory as SVG text.
pub struct SvgPlot {
    /// The file stem the chart has under `plots/` (`time_to_first_token`).
    pub stem: &'static str,
    pub title: String,
    pub svg: String,
}

/// The run's charts (those [`write_run_plots_named`] writes) as SVG text, for pages that
/// hold them inline.
pub fn run_plot_svgs(
    reqs: &[LlmRequest],
    model_names: &[String],
    size: (u32, u32),
) -> Result<Vec<SvgPlot>> {
    ensure_font()?;
    let mut out = Vec::new();
    for (stem, fig) in run_figures(reqs, model_names) {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            fig.draw(&root)?;
            root.present().map_err(plot_err)?;
        }
        out.push(SvgPlot {
            stem,
            title: fig.title().to_string(),
            svg,
        });
    }
    Ok(out)
}

/// Any of the run's charts.
enum RunFigure {
    Box(BoxFigure),
    Scatter(ScatterFigure),
    Heat(HeatFigure),
}

impl RunFigure {
    fn title(&self) -> &str {
        match self {
            RunFigure::Box(f) => &f.title,
            RunFigure::Scatter(f) => &f.title,
            RunFigure::Heat(f) => &f.title,
        }
    }
}

impl Figure for RunFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        match self {
            RunFigure::Box(f) => f.draw(root),
            RunFigure::Scatter(f) => f.draw(root),
            RunFigure::Heat(f) => f.draw(root),
        }
    }
}

/// The run's charts with their file stems. Only successful requests count; a chart without
/// data (no TTFT for embeddings, no output tokens, ...) is left out.
fn run_figures(reqs: &[LlmRequest], model_names: &[String]) -> Vec<(&'static str, RunFigure)> {
    let ok: Vec<&LlmRequest> = reqs.iter().filter(|r| r.ok()).collect();
    let mut figs = Vec::new();

    let ttft = data::by_model(&ok, model_names, data::ttft_ms);
    if !ttft.is_empty() {
        let fig = BoxFigure {
            title: "Time to first token".into(),
            y_label: "Time to first token (ms)".into(),
            groups: ttft,
        };
        figs.push(("time_to_first_token", RunFigure::Box(fig)));
    }

    let latency = data::by_model(&ok, model_names, |r| Some(data::latency_ms(r)));
    if !latency.is_empty() {
        let fig = BoxFigure {
            title: "Request latency".into(),
            y_label: "Request latency (ms)".into(),
            groups: latency,
        };
        figs.push(("request_latency", RunFigure::Box(fig)));
    }

    let ttft_isl = data::ttft_vs_isl(&ok);
    if !ttft_isl.is_empty() {
        let fig = ScatterFigure {
            title: "Time to first token vs input sequence length".into(),
            x_label: "Input sequence length (tokens)".into(),
            y_label: "Time to first token (ms)".into(),
            points: ttft_isl,
        };
        figs.push(("ttft_vs_input_sequence_length", RunFigure::Scatter(fig)));
    }

    let gaps = data::token_gaps(&ok);
    if !gaps.is_empty() {
        let fig = ScatterFigure {
            title: "Token-to-token latency vs output token position".into(),
            x_label: "Output token position".into(),
            y_label: "Token-to-token latency (ms)".into(),
            points: gaps,
        };
        let stem = "token_to_token_latency_vs_output_position";
        figs.push((stem, RunFigure::Scatter(fig)));
    }

    if let Some(grid) = data::isl_osl_grid(&ok) {
        let fig = HeatFigure {
            title: "Input vs output sequence length (requests per cell)".into(),
            x_label: "Input sequence length (tokens)".into(),
            y_label: "Output sequence length (tokens)".into(),
            grid,
        };
        figs.push(("input_vs_output_sequence_length", RunFigure::Heat(fig)));
    }
    figs
}

/// Bars grouped by level (a sweep's summary): one bar per series in each group.
/// `values[group][series]`; a missing value leaves a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub values: Vec<Vec<Option<f64>>>,
}

/// Draws `chart` into `<dir>/<stem>.svg` and `.png` ([`PLOT_SIZE`]).
pub fn write_bar_chart(chart: &BarChart, dir: &Path, stem: &str) -> Result<[PathBuf; 2]> {
    let fig = draw::BarFigure {
        title: chart.title.clone(),
        y_label: chart.y_label.clone(),
        groups: chart.groups.clone(),
        series: chart.series.clone(),
        values: chart.values.clone(),
    };
    write_figure(&fig, dir, stem, PLOT_SIZE)
}

#[cfg(test)]
#[path = "plot_tests.rs"]
mod tests;
