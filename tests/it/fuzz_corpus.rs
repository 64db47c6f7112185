//! Runs every seed of every fuzz target on stable, so the corpora in `fuzz/corpus/<target>/`
//! stay regression tests without nightly or cargo-fuzz. A new fuzz target adds one row to
//! `TARGETS`; a corpus directory without a row fails the test.

use std::fs;
use std::path::Path;

/// The signature of every fuzz entry point.
type FuzzFn = fn(&[u8]);

/// Fuzz target name (its `fuzz/corpus/` directory) → the pub fn it fuzzes.
const TARGETS: &[(&str, FuzzFn)] = &[
    ("http1_response", inferperf::protocol::http1::fuzz_response),
    ("hpack_decode", inferperf::protocol::grpc::hpack::fuzz_hpack),
    ("h2_frames", inferperf::protocol::grpc::frame::fuzz_frames),
    (
        "grpc_message",
        inferperf::protocol::grpc::message::fuzz_grpc_messages,
    ),
    (
        "h2_session",
        inferperf::protocol::grpc::session::fuzz_session,
    ),
    (
        "stream_scan",
        inferperf::service::stream_scan::fuzz_stream_scan,
    ),
    ("input_json", inferperf::inputs::fuzz_input_json),
    ("sse", inferperf::protocol::sse::fuzz_sse),
    ("openai_payloads", inferperf::inputs::openai::fuzz_payloads),
    ("llm_responses", inferperf::llm::fuzz_llm_responses),
    ("llm_datasets", inferperf::llm::dataset::fuzz_datasets),
    (
        "prometheus",
        inferperf::protocol::prometheus::fuzz_prometheus,
    ),
    (
        "telemetry_scrape",
        inferperf::llm::telemetry::fuzz_telemetry,
    ),
    ("mpi_window", inferperf::mpi::codec::fuzz_window_message),
    (
        "reply_kserve_http",
        inferperf::service::reply_check::fuzz_kserve_http,
    ),
    (
        "reply_kserve_grpc",
        inferperf::service::reply_check::fuzz_kserve_grpc,
    ),
    ("load_config", inferperf::server::fuzz_load_config),
    ("chat_media", inferperf::server::fuzz_media),
    (
        "tcp_segments",
        inferperf::transport::packet_stamps::fuzz_packets,
    ),
];

#[test]
fn every_corpus_file_runs_clean() {
    let corpus_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut seen_targets = Vec::new();
    for dir in fs::read_dir(&corpus_root).expect("fuzz/corpus exists") {
        let dir = dir.expect("readable corpus directory").path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let Some((_, run)) = TARGETS.iter().find(|(target, _)| *target == name) else {
            panic!("fuzz/corpus/{name} has no entry in TARGETS");
        };
        let mut files = 0;
        for file in fs::read_dir(&dir).expect("readable corpus directory") {
            let path = file.expect("readable corpus entry").path();
            let data = fs::read(&path).expect("readable corpus file");
            run(&data);
            files += 1;
        }
        assert!(files > 0, "fuzz/corpus/{name} is empty");
        seen_targets.push(name);
    }
    for (target, _) in TARGETS {
        assert!(
            seen_targets.iter().any(|s| s == target),
            "no corpus for fuzz target {target}"
        );
    }
}
