//! `profile`'s report flags: the HTML report and per-time-slice statistics.

/// Flags of the reports people look at (flattened into `ProfileArgs`).
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct ReportArgs {
    /// Also summarise TTFT, ITL and request latency per window of this many seconds from
    /// the first request (AIPerf's `--slice-duration`), in
    /// `<export stem>_timeslices.{json,csv}` and the HTML report.
    #[arg(long, value_name = "SECONDS", value_parser = parse_slice_duration)]
    pub slice_duration: Option<f64>,
    /// Do not write `report.html` (one self-contained page per load point, and one
    /// comparing the points of a multi-point run).
    #[arg(long)]
    pub no_html_report: bool,
    /// Add each request's HTTP trace (AIPerf's `trace_data`: send, wait, receive and
    /// connect times in ns since the epoch, bytes and socket calls) to
    /// `profile_export.jsonl`. The `http_req_*` metrics are written either way.
    #[arg(long)]
    pub export_http_trace: bool,
    /// Print AIPerf's HTTP trace timing table (blocked, DNS, connecting, sending, waiting,
    /// receiving, duration, data and chunks; k6's names) after the metrics table.
    #[arg(long)]
    pub show_trace_timing: bool,
}

impl ReportArgs {
    /// The slice length in ns, when asked for.
    pub fn slice_ns(&self) -> Option<u64> {
        self.slice_duration
            .map(|s| ((s * 1e9).round() as u64).max(1))
    }
}

/// A positive, finite number of seconds, at most a day.
fn parse_slice_duration(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!(
            "'{text}': expected a positive number of seconds, at most 86400"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_duration_is_checked() {
        assert_eq!(parse_slice_duration("0.5"), Ok(0.5));
        for bad in ["0", "-1", "nan", "inf", "x", "100000"] {
            assert!(parse_slice_duration(bad).is_err(), "{bad}");
        }
        let args = ReportArgs {
            slice_duration: Some(0.25),
            ..ReportArgs::default()
        };
        assert_eq!(args.slice_ns(), Some(250_000_000));
    }
}
