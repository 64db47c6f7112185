//! More of AIPerf's and GenAI-Perf's tutorial command lines, run as
//! [`crate::profile_quickstart`] runs the quick starts: the document's arguments with
//! `inferperf` as the program and the in-process reference server's address (and, where a
//! document's run would take minutes, the one value that sets its length, each noted).
//! A feature that is not supported must be refused with exit 99 and one line naming the flag,
//! before any request is sent.
//!
//! Sources: the AIPerf 0.13 docs/tutorials multi-turn, time-based-benchmarking,
//! request-cancellation, trace-benchmarking, synthetic-dataset, warmup and
//! user-centric-timing; the GenAI-Perf docs/lora.md, docs/multi_turn.md, docs/goodput.md,
//! docs/embeddings.md and docs/rankings.md.

use crate::common::temp_dir;
use crate::profile_load_flags::Ranker;
use crate::profile_quickstart::{bodies, start_llm, Run};

use inferperf::inputs::tokenizer::hub::stand_in::StandIn;
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

/// The summary JSON `file` of the profile folder `name`.
fn summary(run: &Run, name: &str, file: &str) -> Value {
    let path = run.profile_dir(name).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Asserts the run was refused: exit 99, one stderr line holding each of `words`, and no
/// request at the server.
fn assert_refused(run: &Run, server: &ServerHandle, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&run.out.stderr);
    assert_eq!(run.out.status.code(), Some(99), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    for w in words {
        assert!(stderr.contains(w), "{w:?} not in {stderr}");
    }
    assert!(bodies(server).is_empty());
    assert_eq!(server.llm_counts().ended, 0);
}

/// The number of chat messages in each body the server received.
fn message_counts(server: &ServerHandle) -> Vec<usize> {
    bodies(server)
        .iter()
        .map(|b| b["messages"].as_array().map_or(0, Vec::len))
        .collect()
}

// ----- AIPerf -----

/// AIPerf docs/tutorials/multi-turn.md, "Fixed-Length Conversations": 10 conversations of
/// exactly 3 turns, 2 at a time, 30 requests; turn k carries the k-1 earlier questions and
/// their answers.
#[test]
fn aiperf_multi_turn_fixed_length() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-multi-turn", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--conversation-num", "10",
        "--conversation-turn-mean", "3",
        "--conversation-turn-stddev", "0",
        "--synthetic-input-tokens-mean", "200",
        "--output-tokens-mean", "150",
        "--concurrency", "2",
        "--random-seed", "42",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency2";
    assert_eq!(run.aiperf_files(name), 30);
    let mut counts = message_counts(&server);
    counts.sort_unstable();
    let expected: Vec<usize> = [1, 3, 5].iter().flat_map(|&n| [n; 10]).collect();
    assert_eq!(counts, expected, "10 conversations of 3 turns");
    let got = bodies(&server);
    assert!(got.iter().all(|b| b["max_tokens"] == 150));
    // A third turn holds a first turn's question (sent earlier) and an answer to it.
    let firsts: Vec<&Value> = got
        .iter()
        .filter(|b| b["messages"].as_array().unwrap().len() == 1)
        .map(|b| &b["messages"][0])
        .collect();
    for third in got
        .iter()
        .filter(|b| b["messages"].as_array().unwrap().len() == 5)
    {
        let m = third["messages"].as_array().unwrap();
        assert!(firsts.contains(&&m[0]), "{third}");
        assert_eq!(m[1]["role"], "assistant");
        assert_eq!(m[4]["role"], "user");
    }
    let s = summary(&run, name, "profile_export_aiperf.json");
    let isl = &s["input_sequence_length"];
    assert!(
        isl["max"].as_f64().unwrap() > isl["min"].as_f64().unwrap() + 300.0,
        "later turns count their history: {isl}"
    );
}

/// AIPerf docs/tutorials/multi-turn.md, "Realistic User Behavior with Turn Delays": 15
/// conversations of 4 +- 1 turns. The document pauses 2000 +- 500 ms between turns (about
/// 30 s in all); here 20 +- 5 ms, the two values the test changes.
#[test]
fn aiperf_multi_turn_with_turn_delays() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-multi-turn-delays", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--conversation-num", "15",
        "--conversation-turn-mean", "4",
        "--conversation-turn-stddev", "1",
        "--conversation-turn-delay-mean", "20",
        "--conversation-turn-delay-stddev", "5",
        "--synthetic-input-tokens-mean", "180",
        "--output-tokens-mean", "120",
        "--concurrency", "3",
        "--random-seed", "42",
    ])
    .ok();
    let measured = run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-concurrency3");
    let counts = message_counts(&server);
    assert_eq!(counts.len() as u64, measured);
    assert_eq!(counts.iter().filter(|&&n| n == 1).count(), 15, "{counts:?}");
    assert!(counts.iter().all(|n| n % 2 == 1), "{counts:?}");
    // Turn counts drawn around 4: some conversations longer or shorter than others.
    let turns_of_longest = counts.iter().max().unwrap().div_ceil(2);
    assert!(
        measured > 15 * 2 && measured < 15 * 7 && turns_of_longest > 4,
        "{measured} {counts:?}"
    );
}

/// AIPerf docs/tutorials/multi-turn.md, "Request Rate with Multi-Turn Conversations": 30
/// conversations of 4 turns at a Poisson rate. Every turn takes a tick of the rate (later
/// turns of running conversations first), so the 120 turns take about 120 / rate seconds:
/// at the document's 5 per second 24 s, here 100 per second (the one value changed).
#[test]
fn aiperf_multi_turn_at_a_request_rate() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-multi-turn-rate", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--conversation-num", "30",
        "--conversation-turn-mean", "4",
        "--request-rate", "100",
        "--request-rate-mode", "poisson",
        "--synthetic-input-tokens-mean", "200",
        "--output-tokens-mean", "150",
        "--random-seed", "42",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-request_rate100.0";
    assert_eq!(run.aiperf_files(name), 120);
    let mut counts = message_counts(&server);
    counts.sort_unstable();
    let expected: Vec<usize> = [1, 3, 5, 7].iter().flat_map(|&n| [n; 30]).collect();
    assert_eq!(counts, expected, "30 conversations of 4 turns");
    assert_turns_follow_their_answers(&server);
    // No faster than the rate: 119 Poisson gaps of 10 ms on average span far more than
    // half a second (a slow machine only stretches them).
    let starts = start_times(&run, name);
    let span = starts.last().unwrap() - starts.first().unwrap();
    assert!(span > 500_000_000, "sends spanned {span} ns");
    let s = summary(&run, name, "profile_export_aiperf.json");
    let throughput = s["request_throughput"]["avg"].as_f64().unwrap();
    assert!(throughput > 0.0 && throughput < 150.0, "{throughput}");
}

/// AIPerf's `--concurrency` beside `--request-rate` with conversations: the cap on the
/// conversations under way. 8 conversations of 3 turns at 1000 per second, 2 at most: at
/// the server, no conversation starts while two others have not sent their last turn.
#[test]
fn aiperf_multi_turn_rate_capped_by_concurrency() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("mt-rate-capped", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--url", "localhost:8000",
        "--conversation-num", "8",
        "--conversation-turn-mean", "3",
        "--request-rate", "1000",
        "--concurrency", "2",
        "--output-tokens-mean", "20",
        "--random-seed", "7",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency2-request_rate1000.0";
    assert_eq!(run.aiperf_files(name), 24);
    let got = bodies(&server);
    let mut open: Vec<String> = Vec::new();
    let mut most = 0;
    for b in &got {
        let (conv, turn) = (conversation_of(b), turn_of(b));
        if turn == 1 {
            open.push(conv.clone());
        }
        most = most.max(open.len());
        if turn == 3 {
            open.retain(|c| *c != conv);
        }
    }
    assert!(most <= 2, "{most} conversations under way");
    assert!(open.is_empty(), "every conversation ended: {open:?}");
    assert_turns_follow_their_answers(&server);
}

/// AIPerf docs/tutorials/time-based-benchmarking.md, "Duration Testing": 3 warm-up
/// requests, then 5 at a time for the duration. The document runs 30 s; here 2 s (the one
/// value changed). The grace period waits for the requests in flight at the end.
#[test]
fn aiperf_time_based_benchmark() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-duration", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--benchmark-duration", "2",
        "--benchmark-grace-period", "15.0",
        "--synthetic-input-tokens-mean", "200",
        "--synthetic-input-tokens-stddev", "50",
        "--output-tokens-mean", "100",
        "--output-tokens-stddev", "20",
        "--concurrency", "5",
        "--warmup-request-count", "3",
        "--random-seed", "33333",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency5";
    let measured = run.aiperf_files(name);
    let ended = server.llm_counts().ended;
    assert!(measured > 5, "{measured}");
    // Every request ended at the server: the 3 warm-up ones and the measured ones (at most
    // the 5 in flight when the duration ended are left out).
    assert!(
        ended >= measured + 3 && ended <= measured + 3 + 5,
        "{ended} {measured}"
    );
    let osl: Vec<u64> = bodies(&server)
        .iter()
        .map(|b| b["max_tokens"].as_u64().unwrap())
        .collect();
    assert!(
        osl.iter().min() < osl.iter().max(),
        "OSL drawn with sd 20: {osl:?}"
    );
}

/// AIPerf docs/tutorials/request-cancellation.md, "Immediate Cancellation Testing": 30 %
/// of 60 requests cancelled as soon as they are sent; they are counted apart from the
/// measured ones.
#[test]
fn aiperf_request_cancellation() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-cancel", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--request-cancellation-rate", "30",
        "--request-cancellation-delay", "0.0",
        "--synthetic-input-tokens-mean", "500",
        "--output-tokens-mean", "100",
        "--concurrency", "15",
        "--request-count", "60",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency15";
    let measured = run.aiperf_files(name);
    let rows = std::fs::read_to_string(run.profile_dir(name).join("profile_export.jsonl")).unwrap();
    let cancelled = rows
        .lines()
        .filter(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            row["metadata"]["was_cancelled"] == true
        })
        .count() as u64;
    assert_eq!(measured + cancelled, 60, "{measured} {cancelled}");
    assert!((6..=30).contains(&cancelled), "about 30 %: {cancelled}");
}

/// AIPerf docs/tutorials/trace-benchmarking.md, "Running Basic Trace Benchmark": as many
/// measured requests as the trace has entries, after one warm-up request, each sending an
/// entry's `text_input` as written with its `output_length` as the requested output: every
/// entry goes at least once (the load workers interleave through the entries).
#[test]
fn aiperf_trace_with_text_inputs() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    let dir = temp_dir("tut-aiperf-trace-input");
    let file = dir.join("production_queries.jsonl");
    let queries = [
        ("What is the capital of France?", 20),
        ("Explain quantum computing in simple terms.", 100),
        (
            "Write a Python function to calculate fibonacci numbers.",
            150,
        ),
        ("Summarize the main causes of World War II.", 200),
        ("How do neural networks learn?", 80),
    ];
    let text: String = queries
        .iter()
        .map(|(q, n)| format!("{{\"text_input\": \"{q}\", \"output_length\": {n}}}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let file = file.display().to_string();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-trace", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--input-file", &file,
        "--custom-dataset-type", "mooncake_trace",
        "--concurrency", "2",
        "--warmup-request-count", "1",
    ])
    .ok();
    assert_eq!(
        run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-concurrency2"),
        5
    );
    let got = bodies(&server);
    assert_eq!(got.len(), 6, "one warm-up request and five measured");
    for b in &got {
        let sent = (&b["messages"][0]["content"], &b["max_tokens"]);
        assert!(
            queries.iter().any(|(q, n)| sent.0 == q && sent.1 == n),
            "{sent:?}"
        );
    }
    for (q, _) in &queries {
        assert!(
            got.iter().any(|b| b["messages"][0]["content"] == *q),
            "{q} was never sent"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// AIPerf docs/tutorials/synthetic-dataset.md, "Advanced: Prefix Synthesis": each prompt
/// is one of 10 shared 512-token prefixes (drawn at random for each prompt, as AIPerf draws
/// them) followed by 100 tokens of its own, 612 in all, counted by the stand-in Hub's tokenizer
/// (whole words, so the seam between prefix and prompt must not merge two words).
#[test]
fn aiperf_prefix_prompts() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-prefix", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--synthetic-input-tokens-mean", "100",
        "--prefix-prompt-length", "512",
        "--prefix-prompt-pool-size", "10",
        "--request-count", "10",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency1";
    assert_eq!(run.aiperf_files(name), 10);
    let s = summary(&run, name, "profile_export_aiperf.json");
    let isl = &s["input_sequence_length"];
    assert_eq!(
        (isl["min"].as_f64(), isl["max"].as_f64()),
        (Some(612.0), Some(612.0)),
        "{isl}"
    );
    let texts: std::collections::HashSet<String> = bodies(&server)
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        texts.len(),
        10,
        "each prefix followed by a prompt of its own"
    );
}

/// AIPerf docs/tutorials/warmup.md, "Minimal Warmup": 20 warm-up requests, then 500
/// measured, 50 at a time.
#[test]
fn aiperf_minimal_warmup() {
    let server = start_llm("Qwen/Qwen2.5-7B-Instruct");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-warmup", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen2.5-7B-Instruct",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--concurrency", "50",
        "--warmup-request-count", "20",
        "--request-count", "500",
    ])
    .ok();
    assert_eq!(
        run.aiperf_files("Qwen_Qwen2.5-7B-Instruct-openai-chat-concurrency50"),
        500
    );
    assert_eq!(server.llm_counts().ended, 520);
}

/// AIPerf docs/tutorials/warmup.md, "Different Concurrency" and "Duration-Based Warmup":
/// warm-up is a count of requests at the run's own load, so the warm-up load and duration
/// flags are refused, each named.
#[test]
fn aiperf_warmup_load_flags_are_refused() {
    let server = start_llm("your-model");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-warmup-concurrency", &server, &hub, &[
        "profile",
        "--model", "your-model",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--concurrency", "100",
        "--warmup-concurrency", "20",
        "--warmup-request-count", "50",
        "--request-count", "500",
    ]);
    assert_refused(&run, &server, &["--warmup-concurrency", "not supported"]);
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-warmup-duration", &server, &hub, &[
        "profile",
        "--model", "your-model",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--warmup-duration", "30",
    ]);
    assert_refused(
        &run,
        &server,
        &["--warmup-duration", "--warmup-request-count"],
    );
}

/// AIPerf docs/tutorials/user-centric-timing.md, "Quick Start", whole: as
/// [`aiperf_user_centric_rate`] (30 per second for 3 s), with the per-user context prompt at
/// 200 tokens instead of 20,000 (the document's would make 20 million tokens of prompts for
/// its 1,000 entries). Every request carries, after the system message, its conversation's
/// own context message of exactly that length; no two conversations share one, and the
/// first turn's ISL counts it.
#[test]
fn aiperf_user_centric_rate_with_user_context() {
    let server = start_llm("your-model");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-user-centric-context", &server, &hub, &[
        "profile",
        "--model", "your-model",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--user-centric-rate", "30",
        "--num-users", "15",
        "--session-turns-mean", "20",
        "--shared-system-prompt-length", "1000",
        "--user-context-prompt-length", "200",
        "--synthetic-input-tokens-mean", "26",
        "--osl", "100",
        "--num-dataset-entries", "1000",
        "--benchmark-duration", "3",
    ])
    .ok();
    let name = "your-model-openai-chat-request_rate30.0";
    let measured = run.aiperf_files(name);
    let got = bodies(&server);
    assert_eq!(measured, got.len() as u64);
    assert!(measured > 15, "{measured}");
    // No --tokenizer: prompts are counted with the default encoding.
    let tok = inferperf::inputs::tokenizer::Tokenizer::load("o200k_base").unwrap();
    let mut contexts: Vec<(String, String)> = Vec::new();
    for b in &got {
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[0]["role"], "system", "{b}");
        assert_eq!(m[1]["role"], "user", "{b}");
        assert_eq!(m[2]["role"], "user", "{b}");
        let context = m[1]["content"].as_str().unwrap().to_string();
        let first_turn = m[2]["content"].to_string();
        match contexts.iter().find(|(_, t)| *t == first_turn) {
            Some((c, _)) => assert_eq!(*c, context, "one conversation, one context"),
            None => {
                assert!(
                    contexts.iter().all(|(c, _)| *c != context),
                    "context shared"
                );
                contexts.push((context, first_turn));
            }
        }
    }
    assert!(contexts.len() > 15, "{} conversations", contexts.len());
    for (c, _) in &contexts {
        assert_eq!(tok.count(c), 200);
    }
    assert_turns_follow_their_answers(&server);
}

/// AIPerf docs/tutorials/user-centric-timing.md, "Quick Start" without the per-user context
/// prompt: 15 users of 20-turn conversations sharing a rate, each user's turns 15 / rate
/// apart. The document's 1 per second (15 s gaps) for 100 s is here 30 per second (0.5 s
/// gaps) for 3 s. The run starts in a steady state: the first users have only the turns
/// left of conversations under way, and one whose turns are done is replaced by a new one.
#[test]
fn aiperf_user_centric_rate() {
    let server = start_llm("your-model");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-aiperf-user-centric", &server, &hub, &[
        "profile",
        "--model", "your-model",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--user-centric-rate", "30",
        "--num-users", "15",
        "--session-turns-mean", "20",
        "--shared-system-prompt-length", "1000",
        "--synthetic-input-tokens-mean", "26",
        "--osl", "100",
        "--num-dataset-entries", "1000",
        "--benchmark-duration", "3",
    ])
    .ok();
    let name = "your-model-openai-chat-request_rate30.0";
    let measured = run.aiperf_files(name);
    let got = bodies(&server);
    assert_eq!(measured, got.len() as u64);
    // At most the rate's worth over the run, plus each user's first turn.
    assert!(measured > 15 && measured <= 30 * 3 + 15, "{measured}");
    // The shared system prompt opens every conversation, once (later turns carry it).
    for b in &got {
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[0]["role"], "system", "{b}");
        assert_eq!(m.iter().filter(|x| x["role"] == "system").count(), 1, "{b}");
    }
    assert_turns_follow_their_answers(&server);
    // Order of arrival of each conversation's turns.
    let mut seen: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, b) in got.iter().enumerate() {
        let conv = conversation_of(b);
        match seen.iter_mut().find(|(c, _)| *c == conv) {
            Some((_, at)) => at.push(i),
            None => seen.push((conv, vec![i])),
        }
    }
    // The 15 users, and at least the replacement of the first to finish (a user with 2
    // turns left, done 1 s in).
    assert!(
        seen.len() > 15 && seen.len() < 30,
        "{} conversations",
        seen.len()
    );
    // A user waits a whole gap between turns, while the others send theirs: between two
    // turns of one user the server gets about 14 others.
    let mut between: Vec<usize> = seen
        .iter()
        .flat_map(|(_, at)| at.windows(2).map(|w| w[1] - w[0] - 1).collect::<Vec<_>>())
        .collect();
    assert!(between.len() >= 15, "{between:?}");
    between.sort_unstable();
    let median = between[between.len() / 2];
    assert!(
        median >= 7,
        "median of other requests between a user's turns: {median}"
    );
}

/// A conversation's key: the content of its first user message.
fn conversation_of(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let first = messages.iter().find(|m| m["role"] == "user").unwrap();
    first["content"].to_string()
}

/// Which turn of its conversation a body is: one more than the answers it carries.
fn turn_of(body: &Value) -> usize {
    let messages = body["messages"].as_array().unwrap();
    1 + messages.iter().filter(|m| m["role"] == "assistant").count()
}

/// Each later turn went after the turn before it was answered: its messages start with
/// that turn's, received earlier, and the answer to it.
fn assert_turns_follow_their_answers(server: &ServerHandle) {
    let got = bodies(server);
    for (i, b) in got.iter().enumerate() {
        let m = b["messages"].as_array().unwrap();
        if turn_of(b) == 1 {
            continue;
        }
        let before = &m[..m.len() - 2];
        assert_eq!(m[m.len() - 2]["role"], "assistant", "{b}");
        assert!(
            got[..i]
                .iter()
                .any(|e| e["messages"].as_array().unwrap()[..] == *before),
            "turn {i} has no earlier turn: {b}"
        );
    }
}

/// Request start times (ns) of a profile's records (`profile_export.jsonl`), ascending.
fn start_times(run: &Run, name: &str) -> Vec<u64> {
    let path = run.profile_dir(name).join("profile_export.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut starts: Vec<u64> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["metadata"]["request_start_ns"].as_u64().unwrap()
        })
        .collect();
    starts.sort_unstable();
    starts
}

// ----- GenAI-Perf -----

/// GenAI-Perf docs/lora.md (with the server's URL): three LoRA adapters of one base model,
/// chosen round robin; the server answers each adapter name (as vLLM's --lora-modules).
/// The tokenizer named is a Hub name, from the stand-in Hub.
#[test]
fn genai_perf_lora_adapters_round_robin() {
    let server = server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig {
            model: "model_name".into(),
            adapters: ["lora_adapter1", "lora_adapter2", "lora_adapter3"]
                .map(String::from)
                .to_vec(),
            keep_bodies: true,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    })
    .expect("reference server starts");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::with("tut-gap-lora", &[("localhost:8000", server.addr.to_string())], &hub, &[
        "profile",
        "-m", "lora_adapter1", "lora_adapter2", "lora_adapter3",
        "--tokenizer", "model_name",
        "--model-selection-strategy", "round_robin",
        "-u", "localhost:8000",
    ])
    .ok();
    let measured = run.genai_perf_files(
        "lora_adapter1_multi-openai-chat-concurrency1",
        "profile_export.json",
    );
    assert_eq!(measured, 100);
    let models: Vec<String> = bodies(&server)
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(models.len(), 100);
    for (i, m) in models.iter().enumerate() {
        assert_eq!(m, &format!("lora_adapter{}", i % 3 + 1), "request {i}");
    }
    assert_eq!(
        crate::profile_quickstart::hub_paths(&hub)[0],
        "/model_name/resolve/main/tokenizer.json"
    );
}

/// GenAI-Perf docs/multi_turn.md, "Approach 1: Benchmark with Synthetic Data" (with the
/// server's URL): 10 sessions of 2 turns, 5 at a time, 1 s between turns (here 10 ms, the
/// one value changed), each prompt after one of 3 shared prefixes of 15 tokens.
#[test]
fn genai_perf_multi_turn_sessions() {
    let server = start_llm("TinyLlama/TinyLlama-1.1B-Chat-v1.0");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-gap-multi-turn", &server, &hub, &[
        "profile",
        "-m", "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "--endpoint-type", "chat",
        "--num-sessions", "10",
        "--session-concurrency", "5",
        "--session-turns-mean", "2",
        "--session-turns-stddev", "0",
        "--session-turn-delay-mean", "10",
        "--session-turn-delay-stddev", "5",
        "--synthetic-input-tokens-mean", "50",
        "--output-tokens-mean", "50",
        "--num-prefix-prompts", "3",
        "--prefix-prompt-length", "15",
        "-u", "localhost:8000",
    ])
    .ok();
    // GenAI-Perf's --session-concurrency is the number of conversations in flight.
    let measured = run.genai_perf_files(
        "TinyLlama_TinyLlama-1.1B-Chat-v1.0-openai-chat-concurrency5",
        "profile_export.json",
    );
    assert_eq!(measured, 20);
    let mut counts = message_counts(&server);
    counts.sort_unstable();
    let expected: Vec<usize> = [1, 3].iter().flat_map(|&n| [n; 10]).collect();
    assert_eq!(counts, expected);
}

/// GenAI-Perf docs/goodput.md, "LLM Examples" (with the server's URL): 10 requests, and
/// the goodput of the two SLOs in the summary.
#[test]
fn genai_perf_goodput() {
    let server = start_llm("HuggingFaceH4/zephyr-7b-beta");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-gap-goodput", &server, &hub, &[
        "profile",
        "-m", "HuggingFaceH4/zephyr-7b-beta",
        "--endpoint-type", "chat",
        "--streaming",
        "--request-count", "10",
        "--goodput", "time_to_first_token:75", "inter_token_latency:19.75",
        "-u", "localhost:8000",
    ])
    .ok();
    let name = "HuggingFaceH4_zephyr-7b-beta-openai-chat-concurrency1";
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 10);
    assert_eq!(bodies(&server).len(), 10);
    let s = summary(&run, name, "profile_export_genai_perf.json");
    let goodput = s["request_goodput"]["avg"]
        .as_f64()
        .expect("request_goodput");
    let throughput = s["request_throughput"]["avg"].as_f64().unwrap();
    assert!(goodput > 0.0 && goodput <= throughput, "{s}");
}

/// GenAI-Perf docs/embeddings.md, "Profile Using Synthetic Inputs" and the `--extra-inputs`
/// example (with the server's URL): two synthetic texts per request, and the extra field in
/// every body.
#[test]
fn genai_perf_embeddings_synthetic_and_extra_inputs() {
    let server = start_llm("intfloat/e5-mistral-7b-instruct");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-gap-embeddings", &server, &hub, &[
        "profile",
        "-m", "intfloat/e5-mistral-7b-instruct",
        "--endpoint-type", "embeddings",
        "--batch-size-text", "2",
        "-u", "localhost:8000",
    ])
    .ok();
    let name = "intfloat_e5-mistral-7b-instruct-openai-embeddings-concurrency1";
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 100);
    drop(run);
    let server = start_llm("intfloat/e5-mistral-7b-instruct");
    #[rustfmt::skip]
    let run = Run::new("tut-gap-embeddings-extra", &server, &hub, &[
        "profile",
        "-m", "intfloat/e5-mistral-7b-instruct",
        "--endpoint-type", "embeddings",
        "--extra-inputs", "user:sample_user",
        "-u", "localhost:8000",
    ])
    .ok();
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 100);
    let inputs = std::fs::read_to_string(run.profile_dir(name).join("inputs.json")).unwrap();
    let inputs: Value = serde_json::from_str(&inputs).unwrap();
    let payloads: Vec<&Value> = inputs["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["payload"].as_array().unwrap())
        .collect();
    assert!(!payloads.is_empty(), "{inputs}");
    assert!(
        payloads.iter().all(|p| p["user"] == "sample_user"),
        "{inputs}"
    );
}

/// GenAI-Perf docs/rankings.md, "Profile Using Synthetic Inputs": GenAI-Perf's generated
/// `synthetic:queries,passages` files: each request is one synthetic query of 100 tokens
/// and `--batch-size-text` (2) synthetic passages of their own, in the TEI body
/// (`rankings:tei`), the 100 entries of the default --num-dataset-entries. The re-ranker is
/// the Text Embeddings Inference stand-in that the rankings folder quick start uses.
#[test]
fn genai_perf_rankings_synthetic_files() {
    let ranker = Ranker::start(0);
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::with("tut-gap-rankings-synthetic", &[("localhost:8000", ranker.addr.to_string())], &hub, &[
        "profile",
        "-m", "BAAI/bge-reranker-base",
        "--endpoint-type", "rankings",
        "--endpoint", "rerank",
        "--input-file", "synthetic:queries,passages",
        "-u", "localhost:8000",
        "--extra-inputs", "rankings:tei",
        "--synthetic-input-tokens-mean", "100",
        "--batch-size-text", "2",
    ])
    .ok();
    let name = "BAAI_bge-reranker-base-openai-rankings-concurrency1";
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 100);
    let got = ranker.bodies();
    assert_eq!(got.len(), 100);
    let mut texts = std::collections::HashSet::new();
    let mut rows: Vec<[String; 3]> = Vec::new();
    for b in &got {
        let query = b["query"].as_str().unwrap_or_else(|| panic!("{b}"));
        let passages = b["texts"].as_array().unwrap_or_else(|| panic!("{b}"));
        assert_eq!(passages.len(), 2, "{b}");
        assert!(
            b.get("rankings").is_none() && b.get("passages").is_none(),
            "{b}"
        );
        let row = [
            query.to_string(),
            passages[0].as_str().unwrap().to_string(),
            passages[1].as_str().unwrap().to_string(),
        ];
        assert!(
            row[0] != row[1] && row[0] != row[2] && row[1] != row[2],
            "{b}"
        );
        texts.extend(row.iter().cloned());
        rows.push(row);
    }
    // Drawn windows of one corpus may repeat now and then; 300 draws are nearly all apart,
    // and a request's passages are its own, not a window sliding over one list.
    assert!(texts.len() > 270, "{} distinct texts of 300", texts.len());
    let slid = rows.windows(2).filter(|w| w[0][2] == w[1][1]).count();
    assert!(
        slid < 5,
        "{slid} requests share a passage with the one before"
    );
    let s = summary(&run, name, "profile_export_genai_perf.json");
    let isl = s["input_sequence_length"]["avg"].as_f64().unwrap();
    assert!(isl > 250.0, "the query and both passages count: {isl}");
}

/// GenAI-Perf's `synthetic:NAMES` on another endpoint: --num-dataset-entries prompts for
/// each name; and names without `queries` and `passages` are refused for rankings.
#[test]
fn genai_perf_synthetic_files_make_prompts_per_name() {
    let server = start_llm("TinyLlama/TinyLlama-1.1B-Chat-v1.0");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("tut-gap-synthetic-names", &server, &hub, &[
        "profile",
        "-m", "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "--endpoint-type", "chat",
        "--input-file", "synthetic:first,second",
        "--num-dataset-entries", "3",
        "--request-count", "6",
        "--synthetic-input-tokens-mean", "20",
        "-u", "localhost:8000",
    ])
    .ok();
    let name = "TinyLlama_TinyLlama-1.1B-Chat-v1.0-openai-chat-concurrency1";
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 6);
    let texts: std::collections::HashSet<String> = bodies(&server)
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts.len(), 6, "three prompts for each of the two names");
    drop(run);
    let server = start_llm("BAAI/bge-reranker-base");
    #[rustfmt::skip]
    let run = Run::new("tut-gap-synthetic-names-bad", &server, &hub, &[
        "profile",
        "-m", "BAAI/bge-reranker-base",
        "--endpoint-type", "rankings",
        "--input-file", "synthetic:queries",
        "-u", "localhost:8000",
    ]);
    assert_refused(
        &run,
        &server,
        &["--input-file synthetic:queries", "passages"],
    );
}

/// GenAI-Perf docs/multi_turn.md, "Approach 2: Benchmark with a Custom Dataset": the
/// document's payload file (two sessions of three and two turns), two sessions at a time,
/// delays halved. Turn k carries the k-1 earlier questions and their answers, each asks
/// for its `output_length`, and a later turn waits the delay written on the turn before.
#[test]
fn genai_perf_multi_turn_payload_file() {
    let server = start_llm("TinyLlama/TinyLlama-1.1B-Chat-v1.0");
    let hub = StandIn::start();
    let dir = temp_dir("tut-gap-multi-turn-payload-input");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("inputs.jsonl");
    std::fs::write(
        &file,
        r#"{"session_id": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6", "delay": 1000, "input_length": 50, "output_length": 10}
{"session_id": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6", "delay": 2000, "input_length": 50, "output_length": 10}
{"session_id": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6", "input_length": 100, "output_length": 10}
{"session_id": "113059749145936325402354257176981405696", "delay": 1000, "input_length": 25, "output_length": 20}
{"session_id": "113059749145936325402354257176981405696", "input_length": 20, "output_length": 20}"#,
    )
    .unwrap();
    let payload = format!("payload:{}", file.display());
    #[rustfmt::skip]
    let run = Run::new("tut-gap-multi-turn-payload", &server, &hub, &[
        "profile",
        "-m", "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "--endpoint-type", "chat",
        "--input-file", &payload,
        "--session-concurrency", "2",
        "--session-delay-ratio", "0.5",
        "-u", "localhost:8000",
    ])
    .ok();
    let name = "TinyLlama_TinyLlama-1.1B-Chat-v1.0-openai-chat-concurrency2";
    assert_eq!(run.genai_perf_files(name, "profile_export.json"), 5);
    let got = bodies(&server);
    let mut shape: Vec<(usize, u64)> = got
        .iter()
        .map(|b| {
            (
                b["messages"].as_array().map_or(0, Vec::len),
                b["max_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    shape.sort_unstable();
    assert_eq!(shape, [(1, 10), (1, 20), (3, 10), (3, 20), (5, 10)]);
    // The three-turn session: its turns went at least 500 ms and 1000 ms apart.
    let starts = server.generation_starts();
    let first: Vec<u64> = got
        .iter()
        .zip(&starts)
        .filter(|(b, _)| b["max_tokens"] == 10)
        .map(|(_, &t)| t)
        .collect();
    assert_eq!(first.len(), 3);
    assert!(first[1] - first[0] >= 500_000_000, "{first:?}");
    assert!(first[2] - first[1] >= 1_000_000_000, "{first:?}");
    let s = summary(&run, name, "profile_export_genai_perf.json");
    let isl = &s["input_sequence_length"];
    assert_eq!(isl["min"].as_f64(), Some(25.0), "{isl}");
    let _ = std::fs::remove_dir_all(&dir);
}
