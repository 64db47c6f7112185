//! Sequence models end to end: the reference server's `accumulate_int32` refuses what
//! Triton's sequence batcher refuses (no id, a step without START on an id that is not
//! live), so a run without failures means the ids and flags were right; live sequences are
//! closed when a level ends; the export names each request's sequence; rate modes deal
//! sends to the sequences round robin and never let a sequence's steps overtake each other.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::*;
use inferperf::config::{ConcurrencyRange, LoadMode, Protocol, RateRange};
use inferperf::server::sequence::{SeqArrival, SeqId};
use inferperf::server::{self, Delay, ServeConfig};
use serde_json::Value;

fn seq_config(server: &inferperf::server::ServerHandle, grpc: bool) -> inferperf::config::Config {
    let mut cfg = quick_config(server, "accumulate_int32", 50);
    if grpc {
        cfg.protocol = Protocol::Grpc;
        cfg.url = server.grpc_addr.unwrap().to_string();
    }
    cfg.sequences.length = 7;
    cfg.sequences.length_given = true;
    cfg.sequences.variation_pct = 0.0;
    cfg.seed = 11;
    cfg
}

#[test]
fn concurrency_mode_sequences_over_http_and_grpc() {
    for grpc in [false, true] {
        let server = start_grpc_server(Vec::new());
        let mut cfg = seq_config(&server, grpc);
        cfg.concurrency = ConcurrencyRange {
            start: 3,
            end: 3,
            step: 1,
        };
        cfg.request_count = 210;
        let (res, text) = run(&cfg);
        assert!(res.error.is_none(), "grpc={grpc}: {:?}", res.error);
        let c = server.counters();
        let m = model_counters(&server, "accumulate_int32");
        assert_eq!(m.failures, 0, "grpc={grpc}: the server refused a request");
        // 210 requests in sequences of 7 on 3 slots (split over the workers, so a slot may
        // stop mid-sequence): at least 30 sequences, every one closed by an END.
        assert!(
            (30..=33).contains(&c.sequences_started),
            "grpc={grpc}: {c:?}"
        );
        assert_eq!(c.sequences_ended, c.sequences_started, "grpc={grpc}");
        assert_eq!(c.sequences_live, 0, "grpc={grpc}");
        let p = &res.points[0];
        let counted = p.client.sequences.map_or(0, |s| s.0);
        assert!((27..=30).contains(&counted), "grpc={grpc}: {counted}");
        assert!(
            text.contains(&format!("    Sequence count: {counted} (")),
            "{text}"
        );
        assert!(
            text.contains("Using asynchronous calls"),
            "sequence models default to async"
        );
    }
}

#[test]
fn live_sequences_are_closed_when_a_level_ends() {
    let server = start_grpc_server(Vec::new());
    let mut cfg = seq_config(&server, false);
    cfg.sequences.length = 1000;
    cfg.concurrency = ConcurrencyRange {
        start: 2,
        end: 2,
        step: 1,
    };
    cfg.request_count = 40;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    let c = server.counters();
    assert_eq!(c.sequences_started, 2);
    assert_eq!(
        c.sequences_live, 0,
        "an END request closed each live sequence"
    );
    assert_eq!(c.sequences_ended, 2);
    assert_eq!(model_counters(&server, "accumulate_int32").failures, 0);
}

/// One request of the export.
struct Exported {
    id: u64,
    /// Intended send time (open loop), else the send time.
    at: u64,
    sent: u64,
    answered: u64,
    input: i64,
    output: i64,
}

/// The export's requests of every experiment, by intended (or actual) send time.
fn export_requests(path: &std::path::Path) -> Vec<Exported> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for e in v["experiments"].as_array().unwrap() {
        for r in e["requests"].as_array().unwrap() {
            let id = r["sequence_id"]
                .as_u64()
                .unwrap_or_else(|| panic!("a request without sequence_id: {r}"));
            let sent = r["timestamp"].as_u64().unwrap();
            let at = r["intended_timestamp"].as_u64().unwrap_or(sent);
            let answered = r["response_timestamps"][0].as_u64().unwrap();
            let input = scalar(&r["request_inputs"]["INPUT"]);
            let outs = r["response_outputs"].as_array().unwrap();
            assert_eq!(outs.len(), 1, "one response per request: {r}");
            let output = scalar(&outs[0]["OUTPUT"]);
            out.push(Exported {
                id,
                at,
                sent,
                answered,
                input,
                output,
            });
        }
    }
    out.sort_by_key(|r| r.at);
    out
}

/// The client's side of the in-order rule: each request of a sequence id was sent after
/// the previous one's response arrived (so no connection can deliver them swapped).
fn assert_waited_for_previous(reqs: &[Exported], tag: &str) {
    let mut answered: HashMap<u64, u64> = HashMap::new();
    let mut by_send: Vec<&Exported> = reqs.iter().collect();
    by_send.sort_by_key(|r| r.sent);
    for r in by_send {
        if let Some(prev) = answered.insert(r.id, r.answered) {
            assert!(
                r.sent >= prev,
                "{tag}: id {} sent at {} before its previous step was answered at {prev}",
                r.id,
                r.sent
            );
        }
    }
}

/// A one-element tensor as the export writes it: the number, or a one-number array.
fn scalar(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v[0].as_i64())
        .unwrap_or_else(|| panic!("not a one-element INT32 tensor: {v}"))
}

/// Checks the server's log of one sequence model: nothing refused, and each id's steps in
/// order (START first, no START inside a sequence, only START after END). Returns the log.
fn assert_in_order(server: &server::ServerHandle, tag: &str) -> Vec<SeqArrival> {
    let log = server.sequence_arrivals("accumulate_int32");
    assert!(
        !log.is_empty(),
        "{tag}: the server logged no sequence request"
    );
    let mut live: HashSet<SeqId> = HashSet::new();
    for (i, a) in log.iter().enumerate() {
        assert!(a.ok, "{tag}: arrival {i} refused: {a:?}");
        let id = a.id.clone().expect("every request carries an id");
        assert_eq!(a.start, !live.contains(&id), "{tag}: arrival {i} {a:?}");
        if a.end {
            live.remove(&id);
        } else {
            live.insert(id);
        }
    }
    assert_eq!(
        server.sequences_restarted(),
        0,
        "{tag}: an id was reused while live"
    );
    log
}

#[test]
fn export_names_the_sequence_the_server_summed_over_http_grpc_and_streams() {
    for (grpc, streaming) in [(false, false), (true, false), (true, true)] {
        let tag = format!("grpc={grpc} streaming={streaming}");
        let server = start_grpc_server(Vec::new());
        let mut cfg = seq_config(&server, grpc);
        cfg.streaming = streaming;
        cfg.concurrency = ConcurrencyRange {
            start: 3,
            end: 3,
            step: 1,
        };
        let dir = temp_dir(&format!("seq-export-{grpc}-{streaming}"));
        cfg.profile_export_file = Some(dir.join("out.json"));
        let (res, _) = run(&cfg);
        assert!(res.error.is_none(), "{tag}: {:?}", res.error);
        let log = assert_in_order(&server, &tag);
        let reqs = export_requests(&dir.join("out.json"));
        assert!(reqs.len() >= 50, "{tag}: {} requests", reqs.len());
        // Every exported id is one the server received, at most as often.
        let mut received: HashMap<u64, usize> = HashMap::new();
        for a in &log {
            if let Some(SeqId::Number(n)) = a.id {
                *received.entry(n).or_default() += 1;
            }
        }
        let mut exported: HashMap<u64, usize> = HashMap::new();
        for r in &reqs {
            *exported.entry(r.id).or_default() += 1;
        }
        for (id, n) in &exported {
            let got = received.get(id).copied().unwrap_or(0);
            assert!(
                *n <= got,
                "{tag}: id {id} exported {n} times, received {got}"
            );
        }
        // The outputs are the server's running sums of the id the export names: after an
        // id's first exported request, each output is the previous one plus the input
        // (wrapping INT32), or the input alone where a new sequence started on the id.
        let mut last: HashMap<u64, i64> = HashMap::new();
        let (mut chained, mut total) = (0, 0);
        for &Exported {
            id, input, output, ..
        } in &reqs
        {
            if let Some(prev) = last.insert(id, output) {
                total += 1;
                let sum = (prev + input) as i32 as i64;
                assert!(
                    output == sum || output == input,
                    "{tag}: id {id}: {prev} + {input} gave {output}"
                );
                chained += usize::from(output == sum);
            }
        }
        assert!(
            chained * 2 > total,
            "{tag}: {chained} of {total} steps chained"
        );
    }
}

/// A sequence run in request-rate mode on `server` with `sequences` sequences.
fn rate_config(
    server: &server::ServerHandle,
    grpc: bool,
    rate: f64,
    sequences: u64,
) -> inferperf::config::Config {
    let mut cfg = seq_config(server, grpc);
    cfg.load_mode = LoadMode::RequestRate;
    cfg.request_rate = RateRange {
        start: rate,
        end: rate,
        step: 1.0,
    };
    cfg.sequences.num_sequences = sequences;
    cfg
}

/// Sorted by intended send time, the export's requests go to the sequences round robin:
/// request i + n is the next step of request i's sequence, or (where that sequence ended at
/// i) the first of a fresh id. Returns how many requests were checked.
fn assert_round_robin(reqs: &[Exported], n: usize, tag: &str) -> usize {
    let ids: Vec<u64> = reqs.iter().map(|r| r.id).collect();
    for i in 0..ids.len().saturating_sub(n) {
        let (now, then) = (ids[i], ids[i + n]);
        if now == then {
            continue;
        }
        assert!(
            !ids[i + 1..].contains(&now) && !ids[..i + n].contains(&then),
            "{tag}: request {i} (id {now}) is not followed {n} sends later by its sequence: \
             {:?}",
            &ids[i..(i + 2 * n).min(ids.len())]
        );
    }
    ids.len()
}

#[test]
fn rate_mode_deals_round_robin_in_order_over_http_and_grpc() {
    // 5 sequences over 2 workers: lanes 0, 2, 4 on one, 1, 3 on the other.
    for (grpc, sequences, serial) in [(false, 4, false), (true, 5, true)] {
        let tag = format!("grpc={grpc} sequences={sequences}");
        let server = start_grpc_server(Vec::new());
        // 100 sends/s: 10 ms between sends of the two workers, so a loaded machine's
        // scheduling delays rarely swap two of them on the way to the server.
        let mut cfg = rate_config(&server, grpc, 100.0, sequences);
        cfg.sequences.serial = serial;
        cfg.max_threads = Some(2);
        cfg.request_count = 120;
        let dir = temp_dir(&format!("seq-rr-{grpc}"));
        cfg.profile_export_file = Some(dir.join("out.json"));
        let (res, _) = run(&cfg);
        assert!(res.error.is_none(), "{tag}: {:?}", res.error);
        let log = assert_in_order(&server, &tag);
        assert_eq!(server.counters().sequences_live, 0, "{tag}");
        let reqs = export_requests(&dir.join("out.json"));
        let checked = assert_round_robin(&reqs, sequences as usize, &tag);
        assert_waited_for_previous(&reqs, &tag);
        assert!(checked >= 100, "{tag}: {checked} requests exported");
        // The server saw the same deal, up to sends of different sequences swapping on the
        // way (separate connections): most arrivals of a sequence come n arrivals after its
        // previous one. A gap of n +- 1 is taken as following: one swap of two neighbouring
        // arrivals, which a busy machine makes now and then, moves the gaps it touches by one.
        let n = sequences as usize;
        let (follows, judged) = round_robin_follows(&log, n);
        assert!(
            follows * 10 >= judged * 9,
            "{tag}: {follows} of {judged} arrivals followed round robin"
        );
    }
}

/// Of the arrivals with a later step of their sequence in the log: how many see that step
/// n +- 1 arrivals later, and how many were judged.
fn round_robin_follows(log: &[SeqArrival], n: usize) -> (usize, usize) {
    let mut next_of: HashMap<&SeqId, usize> = HashMap::new();
    let (mut follows, mut judged) = (0, 0);
    for i in (0..log.len()).rev() {
        let Some(id) = log[i].id.as_ref() else {
            continue;
        };
        if let Some(&j) = next_of.get(id).filter(|_| !log[i].end) {
            judged += 1;
            if (j - i).abs_diff(n) <= 1 {
                follows += 1;
            }
        }
        next_of.insert(id, i);
    }
    (follows, judged)
}

#[test]
fn above_capacity_steps_wait_for_their_sequence_and_none_is_refused() {
    // One execution at a time, 3 ms each (about 330/s) against 3,000 sends/s: the sends
    // fall behind the schedule, and a sequence's next step still waits for its answer.
    for grpc in [false, true] {
        let tag = format!("grpc={grpc}");
        let server = server::start(ServeConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
            delays: vec![(
                "accumulate_int32".into(),
                Delay::Fixed(Duration::from_millis(3)),
            )],
            serial: vec!["accumulate_int32".into()],
            ..ServeConfig::default()
        })
        .unwrap();
        let mut cfg = rate_config(&server, grpc, 3000.0, 4);
        cfg.max_threads = Some(2);
        cfg.request_count = 120;
        let dir = temp_dir(&format!("seq-over-{grpc}"));
        cfg.profile_export_file = Some(dir.join("out.json"));
        let (res, _) = run(&cfg);
        assert!(res.error.is_none(), "{tag}: {:?}", res.error);
        assert_eq!(
            model_counters(&server, "accumulate_int32").failures,
            0,
            "{tag}"
        );
        let log = assert_in_order(&server, &tag);
        assert!(log.len() >= 120, "{tag}: {} arrivals", log.len());
        assert_eq!(server.counters().sequences_live, 0, "{tag}");
        let reqs = export_requests(&dir.join("out.json"));
        assert_round_robin(&reqs, 4, &tag);
        assert_waited_for_previous(&reqs, &tag);
    }
}

#[test]
fn id_range_too_small_is_a_usage_error() {
    let server = start_server();
    let mut cfg = seq_config(&server, false);
    cfg.concurrency = ConcurrencyRange {
        start: 4,
        end: 4,
        step: 1,
    };
    cfg.sequences.id_range = Some(2);
    let mut out = Vec::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The check runs when the level's engine starts: the sweep keeps it as the run's error.
    let err = match inferperf::run::run(&cfg, &mut out, stop) {
        Err(e) => e,
        Ok(res) => res.error.expect("refused"),
    };
    assert!(err.msg.contains("--sequence-id-range"), "{}", err.msg);
    assert_eq!(err.exit_code(), 99);
}
