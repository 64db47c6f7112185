//! `inferperf compare RUN...`: reads GenAI-Perf style summaries
//! (`profile_export_genai_perf.json`) of several runs, prints the main metrics side by
//! side and draws one grouped bar chart per metric.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use serde_json::Value;

use super::draw::BarFigure;
use super::{write_figure, PLOT_SIZE};
use crate::error::{Error, Result};

/// The summary file looked for inside a run directory.
pub const SUMMARY_FILE: &str = "profile_export_genai_perf.json";

/// Metrics compared, in display order: (summary key, chart title).
const METRICS: [(&str, &str); 6] = [
    ("time_to_first_token", "Time to first token"),
    ("inter_token_latency", "Inter token latency"),
    ("request_latency", "Request latency"),
    ("output_token_throughput", "Output token throughput"),
    ("request_throughput", "Request throughput"),
    (
        "output_token_throughput_per_user",
        "Output token throughput per user",
    ),
];

/// Statistics in the table; the charts show [`CHART_STATS`].
const TABLE_STATS: [&str; 4] = ["avg", "p50", "p90", "p99"];
const CHART_STATS: [&str; 3] = ["avg", "p50", "p99"];

#[derive(Parser, Debug)]
#[command(
    name = "inferperf compare",
    about = "Compare the summaries (profile_export_genai_perf.json) of several runs: a text table and bar charts"
)]
struct CompareArgs {
    /// Run directories (holding profile_export_genai_perf.json) or summary files.
    #[arg(required = true, value_name = "RUN")]
    runs: Vec<PathBuf>,
    /// Where the charts go (created if missing).
    #[arg(long, value_name = "DIR", default_value = "compare")]
    output_dir: PathBuf,
}

/// What to print instead of running (help, or a command-line error) and the exit code.
#[derive(Debug)]
struct ParseExit {
    text: String,
    to_stderr: bool,
    code: i32,
}

/// One metric of one run: its unit ("" when not stated) and the statistics it has.
#[derive(Clone, Debug, PartialEq)]
struct MetricStats {
    unit: String,
    stats: BTreeMap<String, f64>,
}

/// One run: its label (directory name) and its metrics by summary key.
#[derive(Clone, Debug, PartialEq)]
struct RunSummary {
    label: String,
    metrics: BTreeMap<&'static str, MetricStats>,
}

/// Entry point of `inferperf compare`; `args[0]` is "compare". Returns the exit code: 0,
/// or the `ErrorKind` code of the failure (99 for usage errors).
/// The clap definition of `inferperf compare`'s flags, for shell completions and the man page.
pub fn compare_command() -> clap::Command {
    CompareArgs::command()
}

pub fn compare_main(args: Vec<OsString>) -> i32 {
    let cli = match parse_args(args) {
        Ok(cli) => cli,
        Err(exit) => {
            if exit.to_stderr {
                eprint!("{}", exit.text);
            } else {
                print!("{}", exit.text);
            }
            return exit.code;
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run_compare(&cli.runs, &cli.output_dir, &mut out) {
        Ok(_) => 0,
        Err(e) => {
            let _ = out.flush();
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn parse_args(args: Vec<OsString>) -> std::result::Result<CompareArgs, ParseExit> {
    CompareArgs::try_parse_from(args).map_err(|e| {
        let to_stderr = e.use_stderr();
        ParseExit {
            text: e.render().to_string(),
            to_stderr,
            // A bad command line is a usage error; --help and --version are not errors.
            code: if to_stderr {
                Error::usage("").exit_code()
            } else {
                0
            },
        }
    })
}

/// Reads every run, prints the table to `out`, writes the charts (SVG + PNG per metric)
/// into `out_dir` and returns the chart files.
pub fn run_compare(
    inputs: &[PathBuf],
    out_dir: &Path,
    out: &mut dyn Write,
) -> Result<Vec<PathBuf>> {
    if inputs.is_empty() {
        return Err(Error::usage(
            "compare: give at least one run directory or summary file",
        ));
    }
    let mut runs: Vec<RunSummary> = Vec::with_capacity(inputs.len());
    for input in inputs {
        let mut run = load_run(input)?;
        run.label = unique_label(&run.label, &runs);
        runs.push(run);
    }
    out.write_all(table(&runs).as_bytes())?;
    std::fs::create_dir_all(out_dir).map_err(|e| {
        Error::generic(format!("compare: cannot create {}: {e}", out_dir.display()))
    })?;
    let mut written = Vec::new();
    for (key, title) in METRICS {
        if let Some(fig) = bar_figure(&runs, key, title) {
            written.extend(write_figure(&fig, out_dir, key, PLOT_SIZE)?);
        }
    }
    writeln!(
        out,
        "\nWrote {} chart files to {}",
        written.len(),
        out_dir.display()
    )?;
    Ok(written)
}

/// Reads one run (a directory holding [`SUMMARY_FILE`], or the file itself).
fn load_run(input: &Path) -> Result<RunSummary> {
    let file = if input.is_dir() {
        input.join(SUMMARY_FILE)
    } else {
        input.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| Error::usage(format!("compare: cannot read {}: {e}", file.display())))?;
    let metrics = parse_summary(&text)
        .map_err(|why| Error::usage(format!("compare: {}: {why}", file.display())))?;
    Ok(RunSummary {
        label: run_label(input, &file),
        metrics,
    })
}

/// The known metrics of a summary; the error says why the text is not a usable summary.
fn parse_summary(text: &str) -> std::result::Result<BTreeMap<&'static str, MetricStats>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let Some(top) = doc.as_object() else {
        return Err("not a JSON object".into());
    };
    let mut metrics = BTreeMap::new();
    for (key, _) in METRICS {
        let Some(obj) = top.get(key).and_then(Value::as_object) else {
            continue;
        };
        let stats: BTreeMap<String, f64> = TABLE_STATS
            .iter()
            .filter_map(|&s| {
                obj.get(s)
                    .and_then(Value::as_f64)
                    .map(|v| (s.to_string(), v))
            })
            .collect();
        if stats.is_empty() {
            continue;
        }
        let unit = obj
            .get("unit")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        metrics.insert(key, MetricStats { unit, stats });
    }
    if metrics.is_empty() {
        let known: Vec<&str> = METRICS.iter().map(|m| m.0).collect();
        return Err(format!(
            "no known metric (expected one of {})",
            known.join(", ")
        ));
    }
    Ok(metrics)
}

/// The run's name: the directory given, or the directory holding the file given (the
/// file's stem when that directory has no name, e.g. "/").
fn run_label(input: &Path, file: &Path) -> String {
    let dir = if input.is_dir() {
        Some(input)
    } else {
        file.parent()
    };
    dir.and_then(dir_name)
        .or_else(|| file.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| file.display().to_string())
}

/// The last component of `dir`; "", "." and ".." endings are resolved first.
fn dir_name(dir: &Path) -> Option<String> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let name = match dir.file_name() {
        Some(n) => n.to_os_string(),
        None => std::fs::canonicalize(dir).ok()?.file_name()?.to_os_string(),
    };
    Some(name.to_string_lossy().into_owned())
}

/// `label`, or `label#2`, `label#3`, ... when earlier runs already use it.
fn unique_label(label: &str, earlier: &[RunSummary]) -> String {
    let taken = |l: &str| earlier.iter().any(|r| r.label == l);
    if !taken(label) {
        return label.to_string();
    }
    (2..)
        .map(|n| format!("{label}#{n}"))
        .find(|l| !taken(l))
        .unwrap_or_default()
}

/// The unit of `key` as the runs state it ("ms", or "ms/s" when runs disagree).
fn unit_of(runs: &[RunSummary], key: &str) -> String {
    let mut units: Vec<&str> = Vec::new();
    for u in runs
        .iter()
        .filter_map(|r| r.metrics.get(key))
        .map(|m| m.unit.as_str())
    {
        if !u.is_empty() && !units.contains(&u) {
            units.push(u);
        }
    }
    units.join("/")
}

/// The side-by-side text table: one row per metric and statistic, one column per run;
/// "-" where a run lacks the value.
fn table(runs: &[RunSummary]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["Metric".to_string(), "Stat".to_string()];
    header.extend(runs.iter().map(|r| r.label.clone()));
    rows.push(header);
    for (key, _) in METRICS {
        if !runs.iter().any(|r| r.metrics.contains_key(key)) {
            continue;
        }
        let unit = unit_of(runs, key);
        let name = if unit.is_empty() {
            key.to_string()
        } else {
            format!("{key} ({unit})")
        };
        for stat in TABLE_STATS {
            let values: Vec<Option<f64>> = runs.iter().map(|r| stat_of(r, key, stat)).collect();
            if values.iter().all(Option::is_none) {
                continue;
            }
            let mut row = vec![name.clone(), stat.to_string()];
            row.extend(
                values
                    .iter()
                    .map(|v| v.map_or("-".to_string(), |v| format!("{v:.2}"))),
            );
            rows.push(row);
        }
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for row in &rows {
        let mut cells = Vec::with_capacity(columns);
        for (c, cell) in row.iter().enumerate() {
            // Names left-aligned, numbers right-aligned so decimals line up.
            cells.push(if c < 2 {
                format!("{cell:<w$}", w = widths[c])
            } else {
                format!("{cell:>w$}", w = widths[c])
            });
        }
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

fn stat_of(run: &RunSummary, key: &str, stat: &str) -> Option<f64> {
    run.metrics.get(key)?.stats.get(stat).copied()
}

/// The chart of one metric, or `None` when no run has it.
fn bar_figure(runs: &[RunSummary], key: &str, title: &str) -> Option<BarFigure> {
    if !runs.iter().any(|r| r.metrics.contains_key(key)) {
        return None;
    }
    let stats: Vec<&str> = CHART_STATS
        .into_iter()
        .filter(|s| runs.iter().any(|r| stat_of(r, key, s).is_some()))
        .collect();
    let unit = unit_of(runs, key);
    Some(BarFigure {
        title: title.to_string(),
        y_label: if unit.is_empty() {
            title.to_string()
        } else {
            format!("{title} ({unit})")
        },
        groups: runs.iter().map(|r| r.label.clone()).collect(),
        series: stats.iter().map(|s| s.to_string()).collect(),
        values: runs
            .iter()
            .map(|r| stats.iter().map(|s| stat_of(r, key, s)).collect())
            .collect(),
    })
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
