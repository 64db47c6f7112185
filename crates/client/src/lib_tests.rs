//! The layer order of the crate doc holds: no module imports a top-level module of a layer
//! above its own, and modules of one layer import each other in no circle, apart from the
//! exceptions listed here (which must still exist, so the lists only shrink). The checker is
//! `inferperf_wire::layers`, shared with the wire crate's and the server's own checks.

use std::fs;
use std::path::Path;

use inferperf_wire::layers::{check, layers};

/// Imports that go up the layer order today: (file under `src/`, top-level module it uses).
const KNOWN_UPWARD: &[(&str, &str)] = &[
    // `profile` flags share perf_analyzer's number bounds and metrics-URL rule.
    ("llm/cli/checks.rs", "cli"),
    ("llm/load_args.rs", "cli"),
    ("llm/sweep_args.rs", "cli"),
    ("llm/telemetry/mod.rs", "cli"),
    // The registry's test parses perf_analyzer's flags: every kind is reached through them.
    ("run/kinds/registry_tests.rs", "cli"),
    // The C API stub's answers are checked with the Triton HTTP parsers.
    ("protocol/capi/stub_tests.rs", "service"),
];

/// Modules of one layer that import each other today.
const KNOWN_CIRCLES: &[&str] = &[];

fn src_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_import_goes_up_the_layer_order() {
    check(src_dir(), KNOWN_UPWARD, KNOWN_CIRCLES);
}

#[test]
fn layers_parse_the_lib_doc_in_order() {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert_eq!(layers[0], ["cli"]);
    assert_eq!(layers[1], ["run", "llm", "mpi"]);
    assert!(layers.last().unwrap().contains(&"error".to_string()));
}
