//! `inferperf profile` with a Hugging Face Hub tokenizer name, the binary run with the Hub
//! environment variables pointing at an in-process stand-in of the Hub's resolve endpoint
//! and a temporary cache: the first run downloads into the cache in huggingface_hub's layout,
//! later runs and offline runs use the cache without a request, a gated repository opens
//! with the token `hf auth login` saved, a file the Hub says is absent is asked for once,
//! and a name that cannot be had exits 99 with one line.

use crate::common::temp_dir;

use std::path::Path;
use std::process::{Command, Output};

use inferperf::inputs::tokenizer::hub::stand_in::{StandIn, COMMIT, ETAG};
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};

/// The reference server's fake LLM, serving `model`, keeping the request bodies.
fn start_llm(model: &str) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai: OpenAiConfig {
            model: model.to_string(),
            keep_bodies: true,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// `inferperf profile -m MODEL -u SERVER --quiet --artifact-dir DIR/artifacts` with the Hub
/// settings apart from the machine's: the cache `DIR/hub`, the Hub at `hub`, online, and no
/// token (neither the variables nor a login file).
fn hub_profile(server: &str, model: &str, dir: &Path, hub: &StandIn) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_inferperf"));
    cmd.args([
        "profile",
        "-m",
        model,
        "-u",
        server,
        "--quiet",
        "--artifact-dir",
    ])
    .arg(dir.join("artifacts"))
    .env_remove("HF_HUB_OFFLINE")
    .env_remove("TRANSFORMERS_OFFLINE")
    .env_remove("HF_TOKEN")
    .env_remove("HUGGING_FACE_HUB_TOKEN")
    .env("HF_TOKEN_PATH", dir.join("no-token"))
    .env("HF_HUB_CACHE", dir.join("hub"))
    .env("HF_ENDPOINT", hub.endpoint());
    cmd
}

/// Four short requests of `model` against `server`, with the extra Hub settings `env`.
fn profile(server: &str, model: &str, dir: &Path, hub: &StandIn, env: &[(&str, &str)]) -> Output {
    let mut cmd = hub_profile(server, model, dir, hub);
    cmd.args([
        "--request-count",
        "4",
        "--synthetic-input-tokens-mean",
        "12",
    ])
    .args(["--output-tokens-mean", "3"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

/// Every file under `dir` whose text contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                files_containing(&p, needle)
            } else {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                usize::from(text.contains(needle))
            }
        })
        .sum()
}

#[test]
fn a_hub_model_name_is_the_tokenizer_downloaded_once_then_cached() {
    let server = start_llm("org/model");
    let hub = StandIn::start();
    let dir = temp_dir("profile-hub");
    let addr = server.addr.to_string();
    // No --tokenizer: the ORG/NAME model name is the tokenizer, as in AIPerf.
    let o = profile(&addr, "org/model", &dir, &hub, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let repo = dir.join("hub/models--org--model");
    let link = repo.join("snapshots").join(COMMIT).join("tokenizer.json");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../../blobs").join(ETAG)
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    assert_eq!(hub.seen().len(), 2, "{:?}", hub.seen());
    assert!(
        files_containing(&dir.join("artifacts"), "\"org/model\"") > 0,
        "the artifacts record the tokenizer"
    );
    // Again: from the cache, no request.
    let o = profile(&addr, "org/model", &dir, &hub, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(hub.seen().len(), 2);
    // Offline with the cache: works, no request.
    let offline = [("HF_HUB_OFFLINE", "1")];
    let o = profile(&addr, "org/model", &dir, &hub, &offline);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Offline, not cached: one line naming the model, the cache folder and why; no request.
    let o = profile(&addr, "org/other", &dir, &hub, &offline);
    assert_eq!(o.status.code(), Some(99));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("org/other"), "{stderr}");
    assert!(stderr.contains("models--org--other"), "{stderr}");
    assert!(stderr.contains("HF_HUB_OFFLINE"), "{stderr}");
    assert_eq!(hub.seen().len(), 2);
    // A gated repository: 401, and the line says to set HF_TOKEN.
    let o = profile(&addr, "gated/model", &dir, &hub, &[]);
    assert_eq!(o.status.code(), Some(99));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("HF_TOKEN"), "{stderr}");
    assert_eq!(hub.seen()[2].authorization, None);
    // Logged in (`hf auth login` wrote HF_HOME/token): the saved token opens it.
    let home = dir.join("hf-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("token"), "hf_good\n").unwrap();
    let o = hub_profile(&addr, "org/model", &dir, &hub)
        .args(["--request-count", "1", "--tokenizer", "gated/model"])
        .env("HF_HOME", &home)
        .env("HF_TOKEN_PATH", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = hub.seen();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(seen[3].authorization.as_deref(), Some("Bearer hf_good"));
    assert_eq!(seen[4].authorization, None, "no token to the CDN host");
    // A repository without tokenizer.json: asked once, then known absent from the cache.
    for _ in 0..2 {
        let o = profile(&addr, "org/no-tokenizer", &dir, &hub, &[]);
        assert_eq!(o.status.code(), Some(99));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("EntryNotFound"), "{stderr}");
    }
    assert_eq!(hub.seen().len(), 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokenizer_flag_with_revision_and_trust_remote_code() {
    let server = start_llm("served-name");
    let hub = StandIn::start();
    let dir = temp_dir("profile-hub-rev");
    let o = hub_profile(&server.addr.to_string(), "served-name", &dir, &hub)
        .args(["--request-count", "2"])
        .args(["--tokenizer", "small/tok", "--tokenizer-revision", COMMIT])
        .arg("--tokenizer-trust-remote-code")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = hub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        format!("/small/tok/resolve/{COMMIT}/tokenizer.json")
    );
    // A commit revision writes no ref.
    assert!(!dir.join("hub/models--small--tok/refs").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mooncake trace counted with a tokenizer.json (the Hub tokenizer, a WordLevel one whose
/// decoding is lossy): every prompt the server receives has exactly `input_length` tokens by
/// that tokenizer, short entries (under one 512-token block) included, with no `[UNK]` text,
/// and entries sharing leading hash ids share a prefix.
#[test]
fn a_mooncake_trace_with_a_tokenizer_json_has_exact_lengths() {
    let server = start_llm("org/model");
    let hub = StandIn::start();
    let dir = temp_dir("profile-hub-mooncake");
    let lengths: [(u64, &str); 5] = [
        (9, "[1]"),
        (300, "[1]"),
        (700, "[1, 2]"),
        (1100, "[1, 2, 3]"),
        (40, "[]"),
    ];
    let trace: String = lengths
        .iter()
        .map(|(n, ids)| {
            format!("{{\"input_length\": {n}, \"output_length\": 2, \"hash_ids\": {ids}}}\n")
        })
        .collect();
    let file = dir.join("trace.jsonl");
    std::fs::write(&file, trace).unwrap();
    let o = hub_profile(&server.addr.to_string(), "org/model", &dir, &hub)
        .args(["--request-count", "5", "--input-file"])
        .arg(&file)
        .args(["--custom-dataset-type", "mooncake_trace"])
        .args(["--dataset-sampling-strategy", "sequential"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let tok = inferperf::inputs::tokenizer::Tokenizer::load(
        &dir.join("hub/models--org--model/snapshots")
            .join(COMMIT)
            .join("tokenizer.json")
            .display()
            .to_string(),
    )
    .unwrap();
    let prompts: Vec<String> = server
        .generation_bodies()
        .iter()
        .map(|b| {
            let v: serde_json::Value = serde_json::from_slice(b).unwrap();
            v["messages"][0]["content"].as_str().unwrap().to_string()
        })
        .collect();
    let mut counts: Vec<usize> = prompts.iter().map(|p| tok.count(p)).collect();
    counts.sort_unstable();
    assert_eq!(counts, [9, 40, 300, 700, 1100]);
    assert!(prompts.iter().all(|p| !p.contains("[UNK]")));
    let by_len = |n: usize| prompts.iter().find(|p| tok.count(p) == n).unwrap();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // 9 and 300 are the start of block 1; 700 and 1100 share blocks 1 and 2 (688 tokens).
    assert!(common(by_len(9), by_len(300)) + 32 >= by_len(9).len());
    assert!(common(by_len(700), by_len(1100)) > common(by_len(300), by_len(700)));
    assert!(common(by_len(300), by_len(700)) + 32 >= by_len(300).len());
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
