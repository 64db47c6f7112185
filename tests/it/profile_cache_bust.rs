//! `inferperf profile --cache-bust` against the in-process reference server: the bodies the
//! server received carry AIPerf's markers where AIPerf puts them (`[rid:<12 hex>]` before or
//! after the system or first user message, `[warmup]` in warm-up requests only), a distinct
//! one per request or conversation, the same again under the same `--random-seed`.

use crate::common::temp_dir;
use crate::run_profile::profile;

use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

fn start_keeping_bodies() -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig {
            keep_bodies: true,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

fn bodies(server: &ServerHandle) -> Vec<Value> {
    server
        .generation_bodies()
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect()
}

/// The `[rid:…]` digest at the start (`prefix`) or end of `text`, checked for form.
fn rid(text: &str, prefix: bool) -> Option<String> {
    let (digest, rest) = if prefix {
        let rest = text.strip_prefix("[rid:")?;
        let (d, rest) = rest.split_once("]\n\n")?;
        (d, rest)
    } else {
        let at = text.rfind("\n\n[rid:")?;
        let d = text[at + 7..].strip_suffix(']')?;
        (d, &text[..at])
    };
    assert!(!rest.is_empty(), "the prompt is still there: {text:?}");
    assert_eq!(digest.len(), 12, "{text:?}");
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{text:?}");
    Some(digest.to_string())
}

fn content(body: &Value, i: usize) -> &str {
    body["messages"][i]["content"].as_str().unwrap()
}

const BASE: [&str; 8] = [
    "--endpoint-type",
    "chat",
    "--synthetic-input-tokens-mean",
    "20",
    "--output-tokens-mean",
    "2",
    "--num-prompts",
    "3",
];

/// Runs `args` (after [`BASE`]) and returns the bodies the server received.
fn run(args: &[&str], name: &str) -> (Vec<Value>, Vec<inferperf::llm::PointOutcome>) {
    let server = start_keeping_bodies();
    let dir = temp_dir(name);
    let all: Vec<&str> = BASE.iter().chain(args).copied().collect();
    let (outcomes, _) = profile(&server, &dir, &all).unwrap();
    (bodies(&server), outcomes)
}

#[test]
fn first_turn_prefix_gives_every_request_its_own_marker_repeatable_by_seed() {
    let args = [
        "--cache-bust",
        "first_turn_prefix",
        "--concurrency",
        "2",
        "--request-count",
        "8",
        "--random-seed",
        "11",
    ];
    let (got, outcomes) = run(&args, "cache-bust-first-prefix");
    assert_eq!(got.len(), 8);
    let mut digests: Vec<String> = got
        .iter()
        .map(|b| rid(content(b, 0), true).expect("a marker first"))
        .collect();
    // The 3 prompts repeat, their markers do not.
    let prompts: std::collections::BTreeSet<String> = got
        .iter()
        .map(|b| content(b, 0).split_once("]\n\n").unwrap().1.to_string())
        .collect();
    assert_eq!(prompts.len(), 3);
    let first = digests.clone();
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), 8, "one marker per request: {first:?}");
    // The ISL counts the marker (about 9 tokens over the 20 of the prompt).
    for r in &outcomes[0].requests {
        assert!(r.isl > 20 && r.isl < 40, "isl {}", r.isl);
    }
    // The same seed sends the same markers; another seed others.
    let (again, _) = run(&args, "cache-bust-first-prefix-again");
    let mut same: Vec<String> = again
        .iter()
        .map(|b| rid(content(b, 0), true).unwrap())
        .collect();
    same.sort();
    assert_eq!(same, digests);
    let mut other_args = args;
    other_args[7] = "12";
    let (other, _) = run(&other_args, "cache-bust-first-prefix-other");
    let others: Vec<String> = other
        .iter()
        .map(|b| rid(content(b, 0), true).unwrap())
        .collect();
    assert!(others.iter().all(|d| !digests.contains(d)), "{others:?}");
}

#[test]
fn system_suffix_marks_the_system_message_and_suffix_targets_append() {
    let args = [
        "--cache-bust",
        "system_suffix",
        "--system-prompt",
        "You are terse.",
        "--concurrency",
        "1",
        "--request-count",
        "4",
    ];
    let (got, _) = run(&args, "cache-bust-system-suffix");
    assert_eq!(got.len(), 4);
    let mut seen = Vec::new();
    for b in &got {
        assert_eq!(b["messages"][0]["role"], "system");
        let sys = content(b, 0);
        assert!(sys.starts_with("You are terse.\n\n[rid:"), "{sys:?}");
        seen.push(rid(sys, false).unwrap());
        assert!(
            !content(b, 1).contains("[rid:"),
            "the user message is left alone"
        );
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4);
    // Without a system message, system targets mark the first user message.
    let (got, _) = run(
        &["--cache-bust", "system_suffix", "--request-count", "2"],
        "cache-bust-system-fallback",
    );
    for b in &got {
        assert_eq!(b["messages"][0]["role"], "user");
        rid(content(b, 0), false).expect("a marker last in the user message");
    }
}

#[test]
fn warmup_isolation_marks_the_warm_up_requests_only() {
    let args = [
        "--cache-bust",
        "warmup_isolation_first_turn",
        "--concurrency",
        "1",
        "--warmup-request-count",
        "2",
        "--request-count",
        "3",
    ];
    let (got, _) = run(&args, "cache-bust-warmup-isolation");
    assert_eq!(got.len(), 5);
    for (i, b) in got.iter().enumerate() {
        let text = content(b, 0);
        assert_eq!(
            text.starts_with("[warmup]\n\n"),
            i < 2,
            "request {i}: {text:?}"
        );
        assert!(!text.contains("[rid:"));
    }
    // RID targets: the warm-up's markers differ from the measured requests'.
    let (got, _) = run(
        &[
            "--cache-bust",
            "first_turn_prefix",
            "--concurrency",
            "1",
            "--warmup-request-count",
            "2",
            "--request-count",
            "3",
        ],
        "cache-bust-warmup-rid",
    );
    let mut all: Vec<String> = got
        .iter()
        .map(|b| rid(content(b, 0), true).unwrap())
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 5);
}

#[test]
fn conversations_carry_their_marker_in_every_turn() {
    let args = [
        "--cache-bust",
        "first_turn_prefix",
        "--conversation-turn-mean",
        "3",
        "--concurrency",
        "2",
    ];
    // 3 conversations (--num-prompts) of 3 turns.
    let (got, _) = run(&args, "cache-bust-conversations");
    assert_eq!(got.len(), 9);
    // Every turn's first user message is its conversation's first prompt, marked.
    let mut by_marker: std::collections::BTreeMap<String, usize> = Default::default();
    for b in &got {
        let first_user = b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .unwrap();
        let d = rid(first_user["content"].as_str().unwrap(), true).unwrap();
        *by_marker.entry(d).or_default() += 1;
        let later = b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .skip(1);
        for m in later {
            assert!(!m["content"].as_str().unwrap().contains("[rid:"));
        }
    }
    assert_eq!(by_marker.values().copied().collect::<Vec<_>>(), [3, 3, 3]);
}

#[test]
fn levels_of_a_list_get_markers_of_their_own() {
    let args = [
        "--cache-bust",
        "first_turn_suffix",
        "--concurrency",
        "1,2",
        "--request-count",
        "3",
    ];
    let (got, _) = run(&args, "cache-bust-levels");
    assert_eq!(got.len(), 6);
    let mut all: Vec<String> = got
        .iter()
        .map(|b| rid(content(b, 0), false).unwrap())
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 6);
}
