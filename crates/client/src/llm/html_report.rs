//! Writes `report.html` for a `profile` point (into its artifact directory) and, for a run of
//! several points, the comparison page (into the artifact directory itself).

use std::path::Path;

use serde_json::Value;

use super::cli::ProfileConfig;
use crate::error::Result;
use crate::measure::llm::{LlmMetrics, LlmRequest};
use crate::report::html::{self, Level, LevelsPage, RunPage, Section};
use crate::report::llm::ReportOptions;
use crate::report::plot::{run_plot_svgs, PLOT_SIZE};
use crate::report::write::write_atomic;

/// The page's file name in each directory.
pub const REPORT_HTML: &str = "report.html";

/// What one point's page is made of.
pub struct PointReport<'a> {
    pub label: &'a str,
    pub requests: &'a [LlmRequest],
    pub metrics: &'a LlmMetrics,
    pub opts: &'a ReportOptions,
    /// The summary JSON's `input_config`.
    pub config: &'a Value,
    /// Sections other parts of the run add (sweep summary, telemetry).
    pub sections: &'a [Section],
}

/// Writes `<dir>/report.html` for one point.
pub fn write_point(cfg: &ProfileConfig, dir: &Path, p: &PointReport<'_>) -> Result<()> {
    let plots = run_plot_svgs(p.requests, &cfg.models, PLOT_SIZE)?;
    let title = format!("inferperf profile: {}", p.label);
    let text = html::run_page(&RunPage {
        title: &title,
        metrics: p.metrics,
        opts: p.opts,
        config: p.config,
        plots: &plots,
        sections: p.sections,
    });
    write_atomic("HTML report", &dir.join(REPORT_HTML), text.as_bytes())
}

/// One finished point for the comparison page: its label, directory and metrics.
pub struct PointSummary {
    pub label: String,
    pub dir: std::path::PathBuf,
    pub metrics: LlmMetrics,
}

/// Writes `<artifact dir>/report.html` comparing the points (nothing for fewer than two).
pub fn write_levels(
    cfg: &ProfileConfig,
    points: &[PointSummary],
    opts: &ReportOptions,
    config: &Value,
    sections: &[Section],
) -> Result<()> {
    if points.len() < 2 {
        return Ok(());
    }
    let levels: Vec<Level<'_>> = points
        .iter()
        .map(|p| {
            // Each point's directory sits in the artifact directory: a relative link.
            let name = p
                .dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            Level {
                label: p.label.clone(),
                href: format!("{name}/{REPORT_HTML}"),
                metrics: &p.metrics,
            }
        })
        .collect();
    let text = html::levels_page(&LevelsPage {
        title: "inferperf profile: load levels",
        levels: &levels,
        opts,
        config,
        sections,
    });
    let path = cfg.args.artifact_dir.join(REPORT_HTML);
    write_atomic("HTML report", &path, text.as_bytes())
}
