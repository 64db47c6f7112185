use super::*;
use std::ffi::OsString;

/// `inferperf profile ARGS`, parsed: the usage error's text, or None when it parsed.
fn parse_error(args: &[&str]) -> Option<String> {
    let argv: Vec<OsString> = std::iter::once("profile")
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect();
    match crate::llm::cli::parse(argv) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn every_aiperf_flag_works_or_is_refused_with_a_reason() {
    let flags = flags();
    assert!(flags.len() > 250, "{}", flags.len());
    let unknown: Vec<&str> = flags
        .iter()
        .filter(|f| status(f) == Status::Unknown)
        .map(|f| f.names[0])
        .collect();
    assert!(
        unknown.is_empty(),
        "AIPerf flags neither accepted nor refused: {unknown:?}"
    );
}

/// The table's statuses are what the parser does: a refused flag stops the run with exit 99
/// and the table's reason; a flag that works is never "unexpected".
#[test]
fn the_statuses_are_the_parsers_behaviour() {
    for flag in flags() {
        match status(&flag) {
            Status::Refused(why) => {
                let name = flag.names[0];
                let err =
                    parse_error(&["-m", "m", name, "1"]).unwrap_or_else(|| panic!("{name} parsed"));
                assert!(err.contains(name) && err.contains(&why), "{name}: {err}");
            }
            Status::Works { known, .. } => {
                for name in known {
                    let err = parse_error(&["-m", "m", name]).unwrap_or_default();
                    assert!(!err.contains("unexpected argument"), "{name}: {err}");
                }
            }
            Status::Unknown => {}
        }
    }
    let concurrency = Flag {
        group: "Load Generator",
        names: vec!["--concurrency"],
    };
    assert!(matches!(status(&concurrency), Status::Works { .. }));
}

#[test]
fn aiperfs_spellings_reach_the_same_settings() {
    let parse = |args: &[&str]| {
        let argv: Vec<OsString> = ["profile", "-m", "m"]
            .iter()
            .chain(args)
            .map(OsString::from)
            .collect();
        crate::llm::cli::parse(argv).unwrap().unwrap()
    };
    let a = parse(&[
        "--prompt-input-tokens-mean",
        "77",
        "--prompt-output-tokens-mean",
        "9",
        "--prompt-prefix-pool-size",
        "2",
        "--prefix-prompt-length",
        "5",
        "--use-legacy-max-tokens",
    ]);
    assert_eq!(a.args.synthetic_input_tokens_mean, 77);
    assert_eq!(a.args.output_tokens_mean, Some(9));
    assert_eq!(a.args.sweep.num_prefix_prompts, 2);
}

/// `docs/aiperf-flags.md` is the output of `--help-aiperf-flags`.
#[test]
fn the_docs_page_is_the_generated_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/aiperf-flags.md");
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == page(),
        "docs/aiperf-flags.md is stale: regenerate it with \
         `cargo run -- profile --help-aiperf-flags > docs/aiperf-flags.md`"
    );
}

#[test]
fn help_lines_are_one_sentence() {
    assert_eq!(first_sentence("Send a. B c.\nD"), "Send a.");
    assert_eq!(first_sentence("One\nline"), "One line");
    assert_eq!(
        first_sentence("A path (e.g. v1). More."),
        "A path (e.g. v1)."
    );
    assert_eq!(
        reason("profile: --scenario is not supported: no scenarios"),
        "no scenarios"
    );
}
