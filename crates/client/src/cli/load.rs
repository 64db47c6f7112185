//! Load-mode flags: `--request-rate-range`, `--request-distribution`, `--request-intervals`,
//! `--binary-search`, `--seed`, `--max-inflight`, and the checks that tie them to
//! `--concurrency-range` and `-l`.

use std::path::Path;

use super::args::RunArgs;
use super::number::{
    parse_at_least, parse_float_within, parse_within, MAX_COUNT, MAX_LEVEL, MAX_PERCENT, MAX_RATE,
    MAX_S,
};
use crate::config::{Config, Distribution, LoadMode, RateRange};
use crate::error::{Error, Result};
use crate::inputs::lines;

/// Applies the load-mode flags; runs after the concurrency flags.
pub fn apply_load_modes(args: &RunArgs, config: &mut Config) -> Result<()> {
    let concurrency_given = args.concurrency_range.is_some()
        || args.concurrency_start.is_some()
        || args.concurrency_end.is_some()
        || args.dynamic_concurrency;
    let modes = [
        (concurrency_given, "--concurrency-range"),
        (args.request_rate_range.is_some(), "--request-rate-range"),
        (args.request_intervals.is_some(), "--request-intervals"),
        (args.fixed_schedule, "--fixed-schedule"),
        (
            args.periodic_concurrency_range.is_some(),
            "--periodic-concurrency-range",
        ),
    ];
    let chosen: Vec<&str> = modes.iter().filter(|m| m.0).map(|m| m.1).collect();
    if let [a, b, ..] = chosen[..] {
        return Err(Error::usage(format!(
            "Cannot use both {a} and {b} inference load modes."
        )));
    }
    if let Some(raw) = args.request_rate_range.as_deref() {
        config.load_mode = LoadMode::RequestRate;
        config.request_rate = parse_rate_range(raw)?;
    }
    if let Some(path) = args.request_intervals.as_deref() {
        config.load_mode = LoadMode::Intervals;
        config.request_intervals_ns = read_intervals(Path::new(path))?;
    }
    if args.fixed_schedule {
        config.load_mode = LoadMode::FixedSchedule;
    }
    if let Some(raw) = args.periodic_concurrency_range.as_deref() {
        config.load_mode = LoadMode::Periodic;
        config.periodic = parse_periodic_range(raw)?;
    }
    if let Some(raw) = args.request_period.as_deref() {
        config.request_period = parse_within("--request-period", raw, 1, MAX_COUNT)?;
    }
    if let Some(raw) = args.request_distribution.as_deref() {
        config.distribution = match raw.to_ascii_lowercase().as_str() {
            "constant" => Distribution::Constant,
            "poisson" => Distribution::Poisson,
            _ => {
                return Err(Error::usage(format!(
                    "Failed to parse --request-distribution. Unsupported type: '{raw}' (constant \
                     or poisson)."
                )))
            }
        };
    }
    config.binary_search = args.binary_search;
    config.enable_mpi = args.enable_mpi;
    config.mpi_scale_out = args.mpi_scale_out;
    if args.mpi_scale_out && !args.enable_mpi {
        return Err(Error::usage("--mpi-scale-out needs --enable-mpi"));
    }
    if let Some(raw) = args.mpi_timeout.as_deref() {
        config.mpi_timeout_s = Some(parse_within("--mpi-timeout", raw, 1, MAX_S)?);
    }
    config.seed_given = args.seed.is_some();
    config.seed = match args.seed.as_deref() {
        Some(raw) => parse_at_least("--seed", raw, 0)?,
        None => fresh_seed(),
    };
    if let Some(raw) = args.max_inflight.as_deref() {
        config.max_inflight = Some(parse_within("--max-inflight", raw, 1, MAX_LEVEL)?);
    }
    apply_sequence_flags(args, config)
}

/// `--num-of-sequences`, `--sequence-length[-variation]`, `--sequence-id-range`,
/// `--serial-sequences`.
fn apply_sequence_flags(args: &RunArgs, config: &mut Config) -> Result<()> {
    let seq = &mut config.sequences;
    if let Some(raw) = args.num_of_sequences.as_deref() {
        seq.num_sequences = parse_within("--num-of-sequences", raw, 1, MAX_LEVEL)?;
    }
    if let Some(raw) = args.sequence_length.as_deref() {
        let length: i64 = parse_at_least("--sequence-length", raw, i64::MIN)?;
        if length > MAX_COUNT as i64 {
            return Err(Error::usage(format!(
                "Failed to parse --sequence-length. The value must be <= {MAX_COUNT} (got '{raw}')."
            )));
        }
        if length <= 0 {
            eprintln!("Warning: --sequence-length {length} is not above 0; using 20.");
        } else {
            seq.length = length as u64;
            seq.length_given = true;
        }
    }
    if let Some(raw) = args.sequence_length_variation.as_deref() {
        seq.variation_pct =
            parse_float_within("--sequence-length-variation", raw, 0.0, MAX_PERCENT)?;
    }
    if let Some(raw) = args.sequence_id_range.as_deref() {
        let (start, range) = parse_id_range(raw)?;
        seq.id_start = start;
        seq.id_range = range;
    }
    seq.serial = args.serial_sequences;
    config.sync_given = args.sync;
    Ok(())
}

/// The largest sequence id `--sequence-id-range` accepts (2^63 - 1).
const MAX_SEQUENCE_ID: u64 = i64::MAX as u64;

/// `start[:end]`: the first id and, with an end, how many ids (`end - start`).
pub fn parse_id_range(raw: &str) -> Result<(u64, Option<u64>)> {
    let bad = |why: &str| {
        Error::usage(format!(
            "Failed to parse --sequence-id-range. {why} (got '{raw}')."
        ))
    };
    // Ids stay below 2^63, so an id plus any count of sequences never wraps.
    let number = |text: &str| {
        let id = text
            .trim()
            .parse::<u64>()
            .map_err(|_| bad("Expected start[:end] with whole numbers"))?;
        if id > MAX_SEQUENCE_ID {
            return Err(bad(&format!("Ids must be <= {MAX_SEQUENCE_ID}")));
        }
        Ok(id)
    };
    match raw.split_once(':') {
        None => Ok((number(raw)?, None)),
        Some((start, "")) => Ok((number(start)?, None)),
        Some((start, end)) => {
            let (start, end) = (number(start)?, number(end)?);
            if end <= start {
                return Err(bad("The end must be above the start"));
            }
            Ok((start, Some(end - start)))
        }
    }
}

/// A seed from the clock and the process id, different on every run.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ (u64::from(std::process::id()) << 32)).max(1)
}

/// `start[:end[:step]]` of floats; start > 0, end 0 = no limit, step > 0.
pub fn parse_rate_range(raw: &str) -> Result<RateRange> {
    let bad = |why: &str| {
        Error::usage(format!(
            "Failed to parse --request-rate-range. {why} (got '{raw}')."
        ))
    };
    let parts: Vec<&str> = raw.split(':').collect();
    if parts.len() > 3 || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(bad("Expected start[:end[:step]]"));
    }
    let mut v = [0.0f64; 3];
    for (slot, part) in v.iter_mut().zip(&parts) {
        *slot = part
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| bad("The values must be non-negative numbers"))?;
        if *slot > MAX_RATE {
            return Err(bad(&format!("The values must be <= {MAX_RATE} requests/s")));
        }
    }
    let start = v[0];
    let end = if parts.len() >= 2 { v[1] } else { start };
    let step = if parts.len() == 3 { v[2] } else { 1.0 };
    if start <= 0.0 {
        return Err(bad("The start must be above 0"));
    }
    if step <= 0.0 {
        return Err(bad("The step must be above 0"));
    }
    if end != 0.0 && end < start {
        return Err(bad("The end must not be below the start"));
    }
    Ok(RateRange { start, end, step })
}

/// `start:end:step` of `--periodic-concurrency-range`: start and end required, step > 0,
/// start <= end, and the range a whole number of steps.
pub fn parse_periodic_range(raw: &str) -> Result<crate::config::ConcurrencyRange> {
    let bad = |why: &str| {
        Error::usage(format!(
            "Failed to parse --periodic-concurrency-range. {why} (got '{raw}')."
        ))
    };
    let parts: Vec<u64> = raw
        .split(':')
        .map(|p| p.trim().parse::<u64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad("Expected start:end[:step] with whole numbers"))?;
    let (start, end, step) = match parts[..] {
        [start, end] => (start, end, 1),
        [start, end, step] => (start, end, step),
        _ => return Err(bad("Both the start and the end are required")),
    };
    if start == 0 || step == 0 {
        return Err(bad("The start and the step must be above 0"));
    }
    if parts.iter().any(|&v| v > MAX_LEVEL) {
        return Err(bad(&format!("The values must be <= {MAX_LEVEL}")));
    }
    if start > end {
        return Err(bad("The start must not be above the end"));
    }
    if (end - start) % step != 0 {
        return Err(bad("The range must be a whole number of steps"));
    }
    Ok(crate::config::ConcurrencyRange { start, end, step })
}

/// The longest line of a `--request-intervals` file (one number and spaces).
const MAX_INTERVAL_LINE: usize = 4 << 10;
/// The largest interval, in µs (an hour): far above any gap between two requests of one
/// run, and the sum of the largest file of them fits in nanoseconds.
const MAX_INTERVAL_US: u64 = 3_600_000_000;
/// The most intervals a file may hold; the schedule repeats them once per worker.
const MAX_INTERVALS: usize = 1 << 20;

/// `--request-intervals`: one integer gap in µs per line (blank lines skipped), as ns. The
/// file is read line by line; a line, a value and the count of values are bounded.
pub fn read_intervals(path: &Path) -> Result<Vec<u64>> {
    let name = path.display();
    let fail = |msg: String| Error::usage(format!("Failed to parse --request-intervals. {msg}"));
    let mut lines = lines::open(path, MAX_INTERVAL_LINE)
        .map_err(|e| fail(format!("Cannot read '{name}': {e}")))?;
    let mut gaps = Vec::new();
    loop {
        let (n, line) = match lines.next_line() {
            Ok(Some(next)) => next,
            Ok(None) => break,
            Err((n, msg)) => return Err(fail(format!("{name} line {n}: {msg}."))),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if gaps.len() == MAX_INTERVALS {
            return Err(fail(format!(
                "{name} line {n}: the file holds more than {MAX_INTERVALS} intervals."
            )));
        }
        gaps.push(interval_ns(line).map_err(|why| fail(format!("{name} line {n}: {why}.")))?);
    }
    if gaps.is_empty() || gaps.iter().all(|&g| g == 0) {
        return Err(fail(format!("{name} has no interval above 0.")));
    }
    Ok(gaps)
}

/// One line's interval, µs to ns, at most [`MAX_INTERVAL_US`].
fn interval_ns(line: &str) -> std::result::Result<u64, String> {
    let quoted = lines::excerpt(line);
    let us: u64 = line
        .parse()
        .map_err(|_| format!("'{quoted}' is not a whole number of microseconds"))?;
    if us > MAX_INTERVAL_US {
        return Err(format!(
            "'{quoted}' is above {MAX_INTERVAL_US} microseconds (an hour)"
        ));
    }
    Ok(us * 1000)
}

/// perf_analyzer's cross-flag checks for the open-loop modes and binary search (after every flag is
/// applied, since they involve `-l`).
pub fn check(config: &Config) -> Result<()> {
    let open_loop = config.load_mode != LoadMode::Concurrency;
    if config.load_mode == LoadMode::Periodic {
        if !config.streaming {
            return Err(Error::usage(
                "--periodic-concurrency-range needs --streaming (gRPC streams).",
            ));
        }
        if config.profile_export_file.is_none() {
            return Err(Error::usage(
                "--periodic-concurrency-range needs --profile-export-file: its results are \
                 only written there.",
            ));
        }
    }
    if config.load_mode == LoadMode::FixedSchedule {
        if !matches!(config.input_data, crate::config::InputData::Files(_)) {
            return Err(Error::usage(
                "--fixed-schedule needs --input-data with a JSON file whose entries have a \
                 timestamp (ms).",
            ));
        }
        if config.request_count > 0 {
            return Err(Error::usage(
                "--request-count can not be used with --fixed-schedule (every entry is sent \
                 once).",
            ));
        }
    }
    if config.max_inflight.is_some() && !open_loop {
        return Err(Error::usage(
            "--max-inflight caps open-loop modes (--request-rate-range, --request-intervals); \
             in concurrency mode the concurrency is the cap.",
        ));
    }
    if config.load_mode == LoadMode::RequestRate {
        let r = config.request_rate;
        if r.end == 0.0 && config.latency_threshold_ms == 0 {
            return Err(Error::usage(
                "--request-rate-range with end 0 (no limit) requires --latency-threshold (-l) > 0.",
            ));
        }
    }
    if config.binary_search {
        let (start, end) = match config.load_mode {
            LoadMode::Concurrency => (
                config.concurrency.start as f64,
                config.concurrency.end as f64,
            ),
            LoadMode::RequestRate => (config.request_rate.start, config.request_rate.end),
            LoadMode::Intervals | LoadMode::FixedSchedule | LoadMode::Periodic => {
                return Err(Error::usage(
                    "--binary-search needs --concurrency-range or --request-rate-range.",
                ))
            }
        };
        if end == 0.0 || end < start || config.latency_threshold_ms == 0 {
            return Err(Error::usage(
                "--binary-search needs a range with an end above 0 and not below its start, and \
                 --latency-threshold (-l) > 0.",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_ranges() {
        let ok = [
            ("100", (100.0, 100.0, 1.0)),
            ("10:50:10", (10.0, 50.0, 10.0)),
            ("0.5:2.5:0.5", (0.5, 2.5, 0.5)),
            ("100:0", (100.0, 0.0, 1.0)),
        ];
        for (raw, (start, end, step)) in ok {
            assert_eq!(
                parse_rate_range(raw).unwrap(),
                RateRange { start, end, step },
                "{raw}"
            );
        }
        for (raw, needle) in [
            ("0", "start"),
            ("10:5", "end"),
            ("10:20:0", "step"),
            ("x", "numbers"),
            ("-5", "numbers"),
            ("1:2:3:4", "start[:end[:step]]"),
            ("1::2", "start[:end[:step]]"),
            ("1e30", "<= 10000000"),
            ("1:2:10000001", "<= 10000000"),
        ] {
            let err = parse_rate_range(raw).unwrap_err();
            assert!(err.msg.contains(needle), "{raw}: {}", err.msg);
            assert!(err.msg.contains("--request-rate-range"), "{raw}");
        }
    }

    #[test]
    fn periodic_ranges() {
        let r = parse_periodic_range("2:10:4").unwrap();
        assert_eq!((r.start, r.end, r.step), (2, 10, 4));
        assert_eq!(parse_periodic_range("1:3").unwrap().step, 1);
        for (raw, needle) in [
            ("5", "start and the end"),
            ("0:4:2", "above 0"),
            ("1:4:0", "above 0"),
            ("6:2:2", "not be above"),
            ("1:4:2", "whole number of steps"),
            ("a:b", "whole numbers"),
            ("1:1000001:1", "<= 1000000"),
        ] {
            let err = parse_periodic_range(raw).unwrap_err();
            assert!(err.msg.contains(needle), "{raw}: {}", err.msg);
        }
    }

    #[test]
    fn sequence_id_ranges() {
        assert_eq!(parse_id_range("5").unwrap(), (5, None));
        assert_eq!(parse_id_range("1:").unwrap(), (1, None));
        assert_eq!(parse_id_range("10:18").unwrap(), (10, Some(8)));
        let top = i64::MAX as u64;
        assert_eq!(parse_id_range(&format!("{top}")).unwrap(), (top, None));
        let over = format!("{}", top + 1);
        let wide = format!("1:{over}");
        for raw in ["x", "5:5", "9:3", "1:y", &over, &wide] {
            let err = parse_id_range(raw).unwrap_err();
            assert!(
                err.msg.contains("--sequence-id-range"),
                "{raw}: {}",
                err.msg
            );
        }
    }

    #[test]
    fn interval_files() {
        let dir = std::env::temp_dir().join(format!("inferperf-intervals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.txt");
        std::fs::write(&good, "100000\n\n200000\r\n500000\n").unwrap();
        assert_eq!(
            read_intervals(&good).unwrap(),
            vec![100_000_000, 200_000_000, 500_000_000]
        );
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, "100\n2.5\n").unwrap();
        let err = read_intervals(&bad).unwrap_err();
        assert!(
            err.msg.contains("line 2") && err.msg.contains("bad.txt"),
            "{}",
            err.msg
        );
        let zeros = dir.join("zeros.txt");
        std::fs::write(&zeros, "0\n0\n").unwrap();
        assert!(read_intervals(&zeros).unwrap_err().msg.contains("above 0"));
        let missing = read_intervals(&dir.join("none.txt")).unwrap_err();
        assert!(missing.msg.contains("none.txt"), "{}", missing.msg);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Writes `bytes` as `name` in a fresh directory and reads it as an intervals file.
    fn intervals_of(name: &str, bytes: &[u8]) -> (String, Result<Vec<u64>>) {
        let dir =
            std::env::temp_dir().join(format!("inferperf-intervals-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let got = read_intervals(&path);
        let _ = std::fs::remove_dir_all(&dir);
        (path.display().to_string(), got)
    }

    #[test]
    fn interval_files_are_bounded_and_quoted_short() {
        let top = format!("{MAX_INTERVAL_US}\n");
        let (_, got) = intervals_of("top.txt", top.as_bytes());
        assert_eq!(got.unwrap(), vec![MAX_INTERVAL_US * 1000]);
        let mut long = b"100\n".to_vec();
        long.extend(vec![b'7'; MAX_INTERVAL_LINE + 1]);
        let mut bad_long = b"100\n".to_vec();
        bad_long.extend(vec![b'x'; 1000]);
        let rows: [(&str, Vec<u8>, &str); 5] = [
            (
                "over.txt",
                b"100\n18446744073709551615\n".to_vec(),
                "line 2: '18446744073709551615' is above 3600000000 microseconds (an hour).",
            ),
            (
                "long.txt",
                long,
                "line 2: the line is longer than 4 KiB (the bound on one line).",
            ),
            (
                "nuls.txt",
                vec![0; 1 << 20],
                "line 1: the line is longer than 4 KiB (the bound on one line).",
            ),
            (
                "bad.txt",
                bad_long,
                &format!("line 2: '{}...' is not a whole number", "x".repeat(80)),
            ),
            (
                "many.txt",
                b"1\n".repeat(MAX_INTERVALS + 1),
                "line 1048577: the file holds more than 1048576 intervals.",
            ),
        ];
        for (name, bytes, needle) in rows {
            let (path, got) = intervals_of(name, &bytes);
            let msg = got.unwrap_err().msg;
            let want = format!("Failed to parse --request-intervals. {path} {needle}");
            assert!(msg.starts_with(&want), "{name}: {msg}");
            assert!(msg.len() < want.len() + 40, "{name}: {msg}");
        }
    }
}
