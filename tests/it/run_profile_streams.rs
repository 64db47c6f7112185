//! How `inferperf profile` times streamed tokens, against the in-process reference server's
//! fake LLM: KServe gRPC streams, reads gathered by `--read-batch-us` that still carry each
//! token's arrival time, and the report's count of chunks timed by a shared read.

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm, MODEL};

use std::ffi::OsString;
use std::path::Path;

use inferperf::llm::{self, PointOutcome};
use inferperf::server::ServerHandle;

/// Runs `profile --endpoint-type kserve --streaming` against the server's gRPC port.
fn profile_kserve(server: &ServerHandle, dir: &Path, args: &[&str]) -> Vec<PointOutcome> {
    let grpc = server.grpc_addr.unwrap().to_string();
    let mut argv: Vec<OsString> = ["profile", "-m", MODEL, "--endpoint-type", "kserve"]
        .iter()
        .map(OsString::from)
        .collect();
    argv.extend(["-u".into(), grpc.into()]);
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    let common = ["--streaming", "--quiet", "--tokenizer", "cl100k_base"];
    argv.extend(common.iter().chain(args).map(OsString::from));
    let cfg = llm::cli::parse(argv).unwrap().unwrap();
    llm::run(&cfg, &mut Vec::new()).unwrap()
}

#[test]
fn triton_grpc_kserve_streams() {
    let server = start_llm(3, 1, 2);
    let dir = temp_dir("profile-kserve");
    let rest = [
        "--concurrency",
        "3",
        "--request-count",
        "9",
        "--output-tokens-mean",
        "5",
    ];
    let outcomes = profile_kserve(&server, &dir, &rest);
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 9);
    for r in reqs {
        assert!(r.ok(), "{:?}", r.error);
        // 5 tokens at 2 per chunk: 3 responses with text, then the empty final one.
        let tokens: Vec<u64> = r.chunks.iter().map(|c| c.tokens).collect();
        assert_eq!((r.osl, tokens), (5, vec![2, 2, 1]));
    }
    assert!(outcomes[0]
        .dir
        .ends_with("inferperf-llm-triton-tensorrtllm-concurrency3"));
    assert_eq!(server.token_times().len(), 9);
    server.stop();
}

/// One stream, three requests of 8 tokens, one worker reading at most every 30 ms.
const GATHERED: [&str; 10] = [
    "--concurrency",
    "1",
    "--request-count",
    "3",
    "--output-tokens-mean",
    "8",
    "--max-workers",
    "1",
    "--read-batch-us",
    "30000",
];

/// Reads gathered 30 ms apart while tokens arrive every 20 ms: every token's time must still
/// be when the server sent it (kernel receive stamps), not when the worker got to it, which
/// is up to 10 ms later.
#[test]
fn gathered_reads_keep_the_arrival_times() {
    in_one_of_three_runs(|| {
        let server = start_llm(20, 20, 1);
        let dir = temp_dir("profile-gathered");
        let args: Vec<&str> = ["--streaming"].iter().chain(&GATHERED).copied().collect();
        let (outcomes, _) = profile(&server, &dir, &args).unwrap();
        arrivals_match_sends(server, &outcomes[0])
    });
}

/// The same over gRPC (`ModelStreamInfer`): the HTTP/2 session's reads are stamped too.
#[test]
fn gathered_grpc_reads_keep_the_arrival_times() {
    in_one_of_three_runs(|| {
        let server = start_llm(20, 20, 1);
        let dir = temp_dir("profile-gathered-grpc");
        let outcomes = profile_kserve(&server, &dir, &GATHERED);
        arrivals_match_sends(server, &outcomes[0])
    });
}

/// Passes when one of three runs of `run` meets its bound; fails with all three misses. The
/// in-process server logs a token's send time just before it writes it, so a server thread
/// that the machine's other work holds up between the two makes one token look late; a
/// client that timed chunks by their reads would miss in every run.
fn in_one_of_three_runs(mut run: impl FnMut() -> Result<(), String>) {
    let mut misses = Vec::new();
    for _ in 0..3 {
        match run() {
            Ok(()) => return,
            Err(e) => misses.push(e),
        }
    }
    panic!("missed in three runs: {misses:#?}");
}

/// Three requests, one at a time: every chunk's arrival is within 4 ms of the server's send
/// (the reads are 30 ms apart, so a read-time stamp would be up to 10 ms late); stops the
/// server.
/// A chunk that shared its read with the next one (same time: the kernel gives one stamp per
/// read) carries that one's time; on a loaded machine a late read can take two, so such chunks
/// are left out, up to a third of them.
fn arrivals_match_sends(server: ServerHandle, point: &PointOutcome) -> Result<(), String> {
    let sent = server.token_times();
    server.stop();
    let reqs = &point.requests;
    assert_eq!((reqs.len(), sent.len()), (3, 3));
    let (mut worst, mut compared) = (0i64, 0);
    // One stream at a time: the server's log order is the requests' order.
    for (r, s) in reqs.iter().zip(&sent) {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.chunks.len(), s.len());
        for (i, (c, at)) in r.chunks.iter().zip(s).enumerate() {
            if r.chunks
                .get(i + 1)
                .is_some_and(|n| n.arrival_ns == c.arrival_ns)
            {
                continue;
            }
            compared += 1;
            worst = worst.max((c.arrival_ns as i64 - *at as i64).abs());
        }
    }
    if compared < 16 {
        return Err(format!(
            "only {compared} of 24 chunks had a read of their own"
        ));
    }
    if worst >= 4_000_000 {
        return Err(format!("a token was timed {worst} ns away from its send"));
    }
    Ok(())
}

/// The share of chunks the report says were timed by a read shared with the next chunk.
fn shared_read_share(server: &ServerHandle, name: &str) -> (u64, u64) {
    let dir = temp_dir(name);
    let args = [
        "--streaming",
        "--request-count",
        "3",
        "--output-tokens-mean",
        "16",
        "--read-batch-us",
        "0",
        // Timed per read: with the packet socket, chunks keep their own segments' times.
        "--no-packet-stamps",
    ];
    let (outcomes, stdout) = profile(server, &dir, &args).unwrap();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Chunks timed by a shared read: "))
        .unwrap_or_else(|| panic!("no shared-read line in:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (shared, total) = (words[6].parse().unwrap(), words[8].parse().unwrap());
    let chunks: usize = outcomes[0].requests.iter().map(|r| r.chunks.len()).sum();
    assert_eq!(total, chunks as u64, "{line}");
    (shared, total)
}

/// Chunks written back to back reach the client in shared reads and the report says so;
/// chunks 20 ms apart are each timed by a read of their own.
#[test]
fn the_report_counts_chunks_timed_by_a_shared_read() {
    let burst = start_llm(5, 0, 1);
    let (shared, total) = shared_read_share(&burst, "profile-shared-burst");
    burst.stop();
    assert!(
        shared * 2 > total,
        "back-to-back chunks: {shared} of {total} shared"
    );
    let paced = start_llm(5, 20, 1);
    let (shared, total) = shared_read_share(&paced, "profile-shared-paced");
    paced.stop();
    assert!(
        shared * 4 < total,
        "chunks 20 ms apart: {shared} of {total} shared"
    );
}
