//! `--help`, `--version` and unimplemented flags: recognised, documented, rejected.

use super::tests::{error, parse};
use super::*;

#[test]
fn every_planned_flag_is_recognised_and_rejected() {
    for flag in help::PLANNED_FLAGS {
        let long = format!("--{}", flag.long);
        let mut args = vec!["-m", "m", long.as_str()];
        if flag.value_name.is_some() {
            args.push("1");
        }
        let err = error(&args);
        let expected = format!("{long} is not supported yet by inferperf (planned)");
        assert_eq!(err.msg, expected, "{args:?}");
        assert_eq!(err.exit_code(), 99);
    }
    // Negative values reach the flag instead of being taken for options.
    let err = error(&["-m", "m", "--output-shared-memory-size=-1"]);
    assert!(
        err.msg
            .contains("--output-shared-memory-size. The value must be > 0"),
        "{err}"
    );
}

#[test]
fn every_perf_analyzer_flag_is_implemented_or_planned() {
    let brief = "request-rate-range request-distribution request-intervals fixed-schedule \
        periodic-concurrency-range request-period session-concurrency binary-search \
        num-of-sequences sequence-length sequence-length-variation sequence-id-range \
        serial-sequences output-shared-memory-size streaming grpc-compression-algorithm \
        request-parameter grpc-method triton-server-directory model-repository endpoint \
        bls-composing-models model-signature-name collect-metrics metrics-url \
        metrics-interval trace-level trace-rate trace-count log-frequency enable-mpi \
        data-directory ssl-grpc-use-ssl ssl-https-verify-peer";
    let command = args::command();
    for name in brief.split_whitespace() {
        assert!(
            command.get_arguments().any(|a| a.get_long() == Some(name)),
            "{name} missing"
        );
    }
}

#[test]
fn help_mentions_every_flag_and_the_notes() {
    let Ok(Parsed::Exit {
        text,
        to_stderr,
        code,
    }) = parse(&["--help"])
    else {
        panic!("--help did not exit");
    };
    assert!(!to_stderr);
    assert_eq!(code, 0);
    let command = args::command();
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(text.contains(&format!("--{long}")), "help lacks --{long}");
        }
        if let Some(short) = arg.get_short() {
            assert!(text.contains(&format!("  -{short}")), "help lacks -{short}");
        }
    }
    for heading in [
        "General:",
        "Load:",
        "Measurement:",
        "Input:",
        "Transport:",
        "Reports:",
    ] {
        assert!(text.contains(heading), "help lacks {heading}");
    }
    for needle in [
        "1.2x",
        "--request-count",
        "event-driven",
        "--no-pin",
        "/v2/health/ready",
        "last response with outputs",
        "system CA",
        "intended send time",
    ] {
        assert!(text.contains(needle), "notes lack {needle}");
    }
    // Every implemented flag that takes a value states its default (or that it has none).
    let implemented = |arg: &&clap::Arg| arg.get_help_heading() != Some(help::PLANNED);
    for arg in command.get_arguments().filter(implemented) {
        if !arg.get_action().takes_values() {
            continue;
        }
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let no_default = ["model_name", "shape", "headers"].contains(&arg.get_id().as_str());
        assert!(
            help.contains("[default: ") || no_default,
            "{} has no default",
            arg.get_id()
        );
    }
    // -h works too, even with a model and other flags.
    assert!(matches!(
        parse(&["-m", "m", "-h"]),
        Ok(Parsed::Exit { code: 0, .. })
    ));
}

#[test]
fn version_goes_to_stderr() {
    let Ok(Parsed::Exit {
        text,
        to_stderr,
        code,
    }) = parse(&["--version"])
    else {
        panic!("--version did not exit");
    };
    assert!(to_stderr);
    assert_eq!(code, 0);
    assert_eq!(
        text,
        format!("inferperf {} (perf_analyzer-compatible)\n", crate::VERSION)
    );
}
