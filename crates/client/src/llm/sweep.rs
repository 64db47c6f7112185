//! The summary of a run over several levels (a `--concurrency`/`--request-rate` list,
//! GuideLLM's sweep, an SLA search): one row per level, printed as a table after the last
//! level and written as `sweep_summary.json` / `sweep_summary.csv` (and charts with
//! `--generate-plots`) in the artifact directory. [`SweepSummary`] is the data other
//! reports (HTML) render.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cli::LoadPoint;
use crate::error::{Error, Result};
use crate::measure::llm::LlmMetrics;

/// File names in the artifact directory.
pub const SUMMARY_JSON: &str = "sweep_summary.json";
pub const SUMMARY_CSV: &str = "sweep_summary.csv";
/// The charts' folder inside the artifact directory.
pub const PLOTS_DIR: &str = "sweep_plots";

/// One level's figures (times in ms, throughputs per second).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// `concurrency4`, `request_rate2.5` (the level's directory suffix).
    pub label: String,
    /// What the level was for: `level`, GuideLLM's `synchronous` / `throughput` /
    /// `constant`, or `probe` (SLA search).
    pub role: &'static str,
    pub concurrency: Option<u64>,
    pub request_rate: Option<f64>,
    pub requests: u64,
    pub errors: u64,
    /// Requests cancelled on purpose (`--request-cancellation-rate`).
    pub cancelled: u64,
    pub request_throughput: f64,
    pub output_token_throughput: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// With `--goodput`: good requests per second and their share of all requests.
    pub goodput: Option<f64>,
    pub goodput_fraction: Option<f64>,
    /// SLA search: the level met the goodput fraction.
    pub sla_pass: Option<bool>,
    /// The level's artifact directory.
    pub dir: PathBuf,
    /// Why the level failed (the run stopped there); `None` for a level that completed.
    pub error: Option<String>,
}

/// The answer of an SLA search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlaAnswer {
    /// `concurrency` or `request_rate`.
    pub axis: &'static str,
    pub min_goodput_fraction: f64,
    /// The largest passing level; `None` when even the lowest failed.
    pub best: Option<f64>,
}

/// Every level of the run, in the order run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SweepSummary {
    pub rows: Vec<SweepRow>,
    pub sla: Option<SlaAnswer>,
}

impl SweepRow {
    /// The row of a finished level.
    pub fn of(
        point: LoadPoint,
        role: &'static str,
        m: &LlmMetrics,
        cancelled: u64,
        dir: &Path,
    ) -> SweepRow {
        let ms = |s: &Option<crate::measure::llm::stats::Stats>, p: u32| {
            s.as_ref().and_then(|s| s.p(p)).map(|v| v / 1e6)
        };
        let (concurrency, request_rate) = match point {
            LoadPoint::Concurrency(c) => (Some(c), None),
            LoadPoint::RequestRate(r) => (None, Some(r)),
        };
        SweepRow {
            label: point.label(),
            role,
            concurrency,
            request_rate,
            requests: m.request_count,
            errors: m.error_count,
            cancelled,
            request_throughput: m.request_throughput,
            output_token_throughput: m.output_token_throughput,
            ttft_p50_ms: ms(&m.ttft, 50),
            ttft_p99_ms: ms(&m.ttft, 99),
            itl_p50_ms: ms(&m.itl, 50),
            itl_p99_ms: ms(&m.itl, 99),
            latency_p50_ms: ms(&m.request_latency, 50),
            latency_p99_ms: ms(&m.request_latency, 99),
            goodput: m.goodput.as_ref().map(|g| g.per_sec),
            goodput_fraction: m.goodput.as_ref().map(|g| g.fraction),
            sla_pass: None,
            dir: dir.to_path_buf(),
            error: None,
        }
    }

    /// The row of a level that failed before anything was measured.
    pub fn failed(point: LoadPoint, role: &'static str, error: &str, dir: &Path) -> SweepRow {
        let mut row = SweepRow::of(
            point,
            role,
            &crate::measure::llm::compute(&[], &Default::default()),
            0,
            dir,
        );
        row.error = Some(error.to_string());
        row
    }
}

/// Column titles and how each row fills them.
type Column = (&'static str, fn(&SweepRow) -> String);

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.2}"))
}

fn columns(goodput: bool, sla: bool, cancelled: bool, failed: bool) -> Vec<Column> {
    let mut c: Vec<Column> = vec![
        ("Level", |r| r.label.clone()),
        ("Role", |r| r.role.to_string()),
        ("Requests", |r| r.requests.to_string()),
        ("Errors", |r| r.errors.to_string()),
        ("Req/s", |r| format!("{:.2}", r.request_throughput)),
        ("Out tok/s", |r| format!("{:.2}", r.output_token_throughput)),
        ("TTFT p50 ms", |r| opt(r.ttft_p50_ms)),
        ("TTFT p99 ms", |r| opt(r.ttft_p99_ms)),
        ("ITL p50 ms", |r| opt(r.itl_p50_ms)),
        ("ITL p99 ms", |r| opt(r.itl_p99_ms)),
        ("Lat p50 ms", |r| opt(r.latency_p50_ms)),
        ("Lat p99 ms", |r| opt(r.latency_p99_ms)),
    ];
    if cancelled {
        c.insert(4, ("Cancelled", |r| r.cancelled.to_string()));
    }
    if goodput {
        c.push(("Goodput/s", |r| opt(r.goodput)));
        c.push(("Good %", |r| opt(r.goodput_fraction.map(|f| f * 100.0))));
    }
    if failed {
        c.insert(
            2,
            ("Status", |r| {
                if r.error.is_some() { "failed" } else { "ok" }.to_string()
            }),
        );
    }
    if sla {
        c.push(("SLA", |r| match r.sla_pass {
            Some(true) => "pass".into(),
            Some(false) => "fail".into(),
            None => String::new(),
        }));
    }
    c
}

impl SweepSummary {
    fn columns(&self) -> Vec<Column> {
        let goodput = self.rows.iter().any(|r| r.goodput.is_some());
        let cancelled = self.rows.iter().any(|r| r.cancelled > 0);
        let failed = self.rows.iter().any(|r| r.error.is_some());
        columns(goodput, self.sla.is_some(), cancelled, failed)
    }

    /// Every row's cells, in the columns' order.
    fn cells(&self, cols: &[Column]) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| cols.iter().map(|c| (c.1)(r)).collect())
            .collect()
    }

    /// The SLA search's answer as one sentence, when there was a search.
    fn sla_line(&self) -> Option<String> {
        let sla = self.sla.as_ref()?;
        Some(match sla.best {
            Some(b) => format!(
                "SLA search: the largest {} whose goodput fraction is at least {} is {b}",
                sla.axis, sla.min_goodput_fraction
            ),
            None => format!(
                "SLA search: no {} in the range reaches a goodput fraction of {}",
                sla.axis, sla.min_goodput_fraction
            ),
        })
    }

    /// The table and the SLA answer as a section of the levels' HTML page.
    pub fn html_section(&self) -> crate::report::html::Section {
        let cols = self.columns();
        let header: Vec<&str> = cols.iter().map(|c| c.0).collect();
        let mut section = crate::report::html::Section::table(
            "sweep-summary",
            "Sweep summary",
            &header,
            &self.cells(&cols),
        );
        if let Some(line) = self.sla_line() {
            let text = crate::report::html::escape(&line);
            section.html.push_str(&format!("<p>{text}</p>\n"));
        }
        section
    }

    /// The console table, with the SLA answer under it.
    pub fn table(&self) -> String {
        let cols = self.columns();
        let cells = self.cells(&cols);
        let widths: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .map(|row| row[i].len())
                    .fold(c.0.len(), usize::max)
            })
            .collect();
        let mut out = String::from("Sweep summary\n");
        let line = |out: &mut String, items: Vec<&str>| {
            let parts: Vec<String> = items
                .iter()
                .zip(&widths)
                .map(|(s, w)| format!("{s:>w$}"))
                .collect();
            let _ = writeln!(out, "{}", parts.join("  ").trim_end());
        };
        line(&mut out, cols.iter().map(|c| c.0).collect());
        for row in &cells {
            line(&mut out, row.iter().map(String::as_str).collect());
        }
        if let Some(line) = self.sla_line() {
            let _ = writeln!(out, "{line}");
        }
        for r in self.rows.iter().filter(|r| r.error.is_some()) {
            let why = crate::text::escape_control(r.error.as_deref().unwrap_or_default());
            let _ = writeln!(out, "{} failed: {why}", r.label);
        }
        out
    }

    /// `sweep_summary.json`.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// `sweep_summary.csv`: the table's columns with machine-friendly names.
    pub fn csv(&self) -> String {
        let header = "label,role,concurrency,request_rate,requests,errors,cancelled,request_throughput,output_token_throughput,ttft_p50_ms,ttft_p99_ms,itl_p50_ms,itl_p99_ms,request_latency_p50_ms,request_latency_p99_ms,goodput,goodput_fraction,sla_pass,error\n";
        let mut out = String::from(header);
        let o = |v: Option<f64>| v.map_or_else(String::new, |v| v.to_string());
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.label,
                r.role,
                r.concurrency.map_or_else(String::new, |c| c.to_string()),
                o(r.request_rate),
                r.requests,
                r.errors,
                r.cancelled,
                r.request_throughput,
                r.output_token_throughput,
                o(r.ttft_p50_ms),
                o(r.ttft_p99_ms),
                o(r.itl_p50_ms),
                o(r.itl_p99_ms),
                o(r.latency_p50_ms),
                o(r.latency_p99_ms),
                o(r.goodput),
                o(r.goodput_fraction),
                r.sla_pass.map_or_else(String::new, |p| p.to_string()),
                crate::report::llm::csv_field(r.error.as_deref().unwrap_or_default()),
            );
        }
        out
    }

    /// Writes the JSON, the CSV and (`plots`) the charts into `dir`; returns the files.
    pub fn write(&self, dir: &Path, plots: bool) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", dir.display())))?;
        let mut files = vec![dir.join(SUMMARY_JSON), dir.join(SUMMARY_CSV)];
        crate::report::write::write_atomic("", &files[0], self.json().as_bytes())?;
        crate::report::write::write_atomic("", &files[1], self.csv().as_bytes())?;
        if plots && !self.rows.is_empty() {
            files.extend(self.write_plots(&dir.join(PLOTS_DIR))?);
        }
        Ok(files)
    }

    /// Bars per level: TTFT, ITL and latency p50/p99, and the two throughputs.
    fn write_plots(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        use crate::report::plot::{write_bar_chart, BarChart};
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::generic(format!("cannot write {}: {e}", dir.display())))?;
        let groups: Vec<String> = self.rows.iter().map(|r| r.label.clone()).collect();
        let pair = |f: fn(&SweepRow) -> [Option<f64>; 2]| {
            self.rows.iter().map(|r| f(r).to_vec()).collect::<Vec<_>>()
        };
        let p = || vec!["p50".to_string(), "p99".to_string()];
        let charts = [
            (
                "ttft_by_level",
                "Time to first token by level",
                "ms",
                p(),
                pair(|r| [r.ttft_p50_ms, r.ttft_p99_ms]),
            ),
            (
                "itl_by_level",
                "Inter-token latency by level",
                "ms",
                p(),
                pair(|r| [r.itl_p50_ms, r.itl_p99_ms]),
            ),
            (
                "latency_by_level",
                "Request latency by level",
                "ms",
                p(),
                pair(|r| [r.latency_p50_ms, r.latency_p99_ms]),
            ),
            (
                "throughput_by_level",
                "Output token throughput by level",
                "tokens/s",
                vec!["output tokens/s".to_string()],
                self.rows
                    .iter()
                    .map(|r| vec![Some(r.output_token_throughput)])
                    .collect(),
            ),
        ];
        let mut files = Vec::new();
        for (stem, title, unit, series, values) in charts {
            if values.iter().flatten().all(Option::is_none) {
                continue;
            }
            let chart = BarChart {
                title: title.into(),
                y_label: unit.into(),
                groups: groups.clone(),
                series,
                values,
            };
            files.extend(write_bar_chart(&chart, dir, stem)?);
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, c: u64, ttft: f64) -> SweepRow {
        SweepRow {
            label: label.into(),
            role: "level",
            concurrency: Some(c),
            request_rate: None,
            requests: 10,
            errors: 0,
            cancelled: 0,
            request_throughput: 5.0,
            output_token_throughput: 40.0,
            ttft_p50_ms: Some(ttft),
            ttft_p99_ms: Some(ttft * 2.0),
            itl_p50_ms: None,
            itl_p99_ms: None,
            latency_p50_ms: Some(100.0),
            latency_p99_ms: Some(150.0),
            goodput: Some(4.0),
            goodput_fraction: Some(0.8),
            sla_pass: Some(c < 4),
            dir: PathBuf::from("d"),
            error: None,
        }
    }

    #[test]
    fn table_json_and_csv_hold_every_row() {
        let s = SweepSummary {
            rows: vec![row("concurrency1", 1, 10.0), row("concurrency4", 4, 30.0)],
            sla: Some(SlaAnswer {
                axis: "concurrency",
                min_goodput_fraction: 0.9,
                best: Some(1.0),
            }),
        };
        let t = s.table();
        assert!(
            t.contains("TTFT p99 ms") && t.contains("Good %") && t.contains("SLA"),
            "{t}"
        );
        assert!(
            t.lines().any(|l| l.trim_start().starts_with("concurrency4")
                && l.contains("60.00")
                && l.contains("fail")),
            "{t}"
        );
        assert!(
            t.contains("largest concurrency whose goodput fraction is at least 0.9 is 1"),
            "{t}"
        );
        assert!(
            !t.contains("Cancelled"),
            "no cancellation column without cancellations"
        );
        let v: serde_json::Value = serde_json::from_str(&s.json()).unwrap();
        assert_eq!(v["rows"][1]["ttft_p99_ms"], 60.0);
        assert_eq!(v["sla"]["best"], 1.0);
        let csv = s.csv();
        assert_eq!(csv.lines().count(), 3);
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .starts_with("concurrency4,level,4,,10,0,0,5,40,30,60,,,100,150,4,0.8,false"),
            "{csv}"
        );
    }

    #[test]
    fn a_failed_level_is_marked_in_the_table_and_the_files() {
        let failed = SweepRow::failed(
            LoadPoint::Concurrency(4),
            "level",
            "no request completed: connect failed, x",
            Path::new("d"),
        );
        assert_eq!((failed.requests, failed.ttft_p50_ms), (0, None));
        let s = SweepSummary {
            rows: vec![row("concurrency1", 1, 10.0), failed],
            sla: None,
        };
        let t = s.table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].contains("Status"), "{t}");
        assert!(
            lines[2].contains(" ok ") && lines[3].contains("failed"),
            "{t}"
        );
        assert!(t.ends_with("concurrency4 failed: no request completed: connect failed, x\n"));
        let v: serde_json::Value = serde_json::from_str(&s.json()).unwrap();
        assert!(v["rows"][0]["error"].is_null());
        assert_eq!(
            v["rows"][1]["error"],
            "no request completed: connect failed, x"
        );
        let csv = s.csv();
        assert!(csv.lines().next().unwrap().ends_with(",sla_pass,error"));
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",,\"no request completed: connect failed, x\""),
            "{csv}"
        );
        // Without a failure the table has no status column.
        assert!(!SweepSummary {
            rows: vec![row("concurrency1", 1, 10.0)],
            sla: None
        }
        .table()
        .contains("Status"));
    }
}
