//! What `--service-kind openai` requires of the other flags (perf_analyzer's own checks,
//! spec §1.11 and §7.1, in its words with the flag named).

use crate::config::{Config, InputData, LoadMode, Protocol, ServiceKind};
use crate::error::{Error, Result};

/// Checks an openai run's flags; other service kinds pass.
pub fn check(config: &Config) -> Result<()> {
    if config.service_kind != ServiceKind::OpenAi {
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
    // perf_analyzer refuses to run without --async rather than implying it; so do we, so
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
        ];
        for (args, needle) in rows {
            let err = error(&args);
            assert_eq!(err.exit_code(), 99, "{args:?}");
            assert!(err.msg.contains(needle), "{args:?}: {}", err.msg);
        }
    }
}
