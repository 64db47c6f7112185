//! What `--service-kind openai` requires of the other flags (perf_analyzer's own checks,
//! in its words with the flag named).

use super::args::RunArgs;
use super::number::{parse_within, MAX_LEVEL};
use crate::config::{Config, InputData, LoadMode, Protocol, ServiceKind};
use crate::error::{Error, Result};

/// `--session-concurrency N` (0: off): multi-turn chat, a load mode of its own, so it cannot
/// go with another load-mode flag. Runs after the other load-mode flags.
pub fn apply_sessions(args: &RunArgs, config: &mut Config) -> Result<()> {
    let Some(raw) = args.session_concurrency.as_deref() else {
        return Ok(());
    };
    config.session_concurrency = parse_within("--session-concurrency", raw, 0, MAX_LEVEL)?;
    if config.session_concurrency == 0 {
        return Ok(());
    }
    let others = [
        (
            args.concurrency_range.is_some()
                || args.concurrency_start.is_some()
                || args.concurrency_end.is_some()
                || args.dynamic_concurrency,
            "--concurrency-range",
        ),
        (args.request_rate_range.is_some(), "--request-rate-range"),
        (args.request_intervals.is_some(), "--request-intervals"),
        (args.fixed_schedule, "--fixed-schedule"),
        (
            args.periodic_concurrency_range.is_some(),
            "--periodic-concurrency-range",
        ),
    ];
    if let Some((_, other)) = others.iter().find(|(given, _)| *given) {
        return Err(Error::usage(format!(
            "Cannot use both {other} and --session-concurrency inference load modes."
        )));
    }
    Ok(())
}

/// Checks an openai run's flags; other service kinds pass.
pub fn check(config: &Config) -> Result<()> {
    if config.service_kind != ServiceKind::OpenAi {
        if config.session_concurrency > 0 {
            return Err(Error::usage(
                "--session-concurrency is for multi-turn chat with --service-kind openai.",
            ));
        }
        return Ok(());
    }
    if !matches!(config.input_data, InputData::Files(_)) {
        return Err(Error::usage(
            "Must supply --input-data for OpenAI service kind (a JSON file whose entries hold a \
             \"payload\" object).",
        ));
    }
    if config.endpoint.is_empty() {
        return Err(Error::usage(
            "Must supply --endpoint for OpenAI service kind. For example, \
             \"v1/chat/completions\".",
        ));
    }
    if config.protocol != Protocol::Http {
        return Err(Error::usage(
            "-i grpc: the OpenAI service kind speaks HTTP only (-i http).",
        ));
    }
    // perf_analyzer refuses to run without --async rather than implying it; so does inferperf, so
    // that a command line works the same with both tools.
    if !config.async_mode {
        return Err(Error::usage(
            "Only async mode is currently supported for OpenAI service-kind (add --async).",
        ));
    }
    if config.batch_size != 1 {
        return Err(Error::usage(format!(
            "-b {}: Batching is not currently supported with OpenAI service-kind.",
            config.batch_size
        )));
    }
    if config.load_mode == LoadMode::Periodic {
        return Err(Error::usage(
            "--periodic-concurrency-range is for Triton streaming models, not the OpenAI \
             service kind.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cli::tests::{error, parse};
    use crate::cli::Parsed;
    use crate::config::ServiceKind;

    const BASE: &[&str] = &[
        "-m",
        "llm",
        "--service-kind",
        "openai",
        "--endpoint",
        "/v1/chat/completions",
        "--input-data",
        // Any existing file passes the command-line check; its content is read at run time.
        concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        "--async",
    ];

    #[test]
    fn a_complete_openai_command_line() {
        let Ok(Parsed::Run(c)) = parse(BASE) else {
            panic!("not a run");
        };
        assert_eq!(c.service_kind, ServiceKind::OpenAi);
        assert_eq!(c.endpoint, "v1/chat/completions");
        assert!(c.async_mode);
        let mut with_b = BASE.to_vec();
        with_b.extend(["-b", "1"]);
        assert!(matches!(parse(&with_b), Ok(Parsed::Run(_))));
    }

    #[test]
    fn each_missing_or_conflicting_flag_is_named() {
        let without = |flag: &str, has_value: bool| -> Vec<&'static str> {
            let mut out = Vec::new();
            let mut skip = false;
            for (i, a) in BASE.iter().enumerate() {
                if skip {
                    skip = false;
                    continue;
                }
                if *a == flag {
                    skip = has_value && i + 1 < BASE.len();
                    continue;
                }
                out.push(*a);
            }
            out
        };
        let plus = |extra: &[&'static str]| -> Vec<&'static str> {
            let mut v = BASE.to_vec();
            v.extend_from_slice(extra);
            v
        };
        let rows: Vec<(Vec<&str>, &str)> = vec![
            (without("--input-data", true), "Must supply --input-data"),
            (without("--endpoint", true), "Must supply --endpoint"),
            (without("--async", false), "Only async mode"),
            (plus(&["-b", "2"]), "-b 2: Batching"),
            (plus(&["-i", "grpc"]), "-i grpc"),
            (plus(&["--sync"]), "--async and --sync"),
            (
                plus(&["--session-concurrency", "2", "--concurrency-range", "4"]),
                "Cannot use both --concurrency-range and --session-concurrency",
            ),
            (
                plus(&["--session-concurrency", "2", "--fixed-schedule"]),
                "Cannot use both --fixed-schedule and --session-concurrency",
            ),
            (
                plus(&["--session-concurrency", "-1"]),
                "--session-concurrency. The value must be >= 0",
            ),
            (
                plus(&["--session-concurrency", "x"]),
                "--session-concurrency",
            ),
        ];
        for (args, needle) in rows {
            let err = error(&args);
            assert_eq!(err.exit_code(), 99, "{args:?}");
            assert!(err.msg.contains(needle), "{args:?}: {}", err.msg);
        }
    }

    #[test]
    fn session_concurrency_is_parsed_and_needs_the_openai_kind() {
        let mut args = BASE.to_vec();
        args.extend(["--session-concurrency", "3"]);
        let Ok(Parsed::Run(c)) = parse(&args) else {
            panic!("not a run");
        };
        assert_eq!(c.session_concurrency, 3);
        let Ok(Parsed::Run(c)) = parse(BASE) else {
            panic!("not a run");
        };
        assert_eq!(c.session_concurrency, 0, "off by default");
        let mut zero = BASE.to_vec();
        zero.extend(["--session-concurrency", "0", "--concurrency-range", "2"]);
        assert!(matches!(parse(&zero), Ok(Parsed::Run(_))), "0 is off");
        let err = error(&["-m", "m", "--session-concurrency", "2"]);
        assert_eq!(err.exit_code(), 99);
        assert!(err.msg.contains("--service-kind openai"), "{}", err.msg);
    }
}
