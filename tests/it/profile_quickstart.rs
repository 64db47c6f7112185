//! The command lines of AIPerf's and GenAI-Perf's quick starts and tutorials, run with
//! `inferperf` in place of the program name: each argument list is the document's own,
//! only the server address changed to the in-process reference server (and, where a
//! document's run would take minutes, the one flag that sets its length, each noted).
//! Tokenizer names are resolved through the stand-in Hub (`HF_ENDPOINT`), and the binary
//! runs in a fresh directory with no `--artifact-dir`, so the result files must be where
//! the tool itself writes them: `artifacts/<model>-<service kind>-<kind>-<stimulus>/`.
//!
//! Sources: the AIPerf 0.13 README and docs/tutorials (request-rate-concurrency,
//! fixed-schedule, goodput, timeslices, sequence-distributions); the GenAI-Perf README,
//! docs/tutorial.md, docs/embeddings.md and docs/rankings.md.

use crate::common::temp_dir;
use crate::profile_load_flags::Ranker;

use std::path::{Path, PathBuf};
use std::process::Output;

use inferperf::inputs::tokenizer::hub::stand_in::StandIn;
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

/// The reference server's fake LLM serving `model` (HTTP and gRPC), keeping the bodies.
pub(crate) fn start_llm(model: &str) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        openai: OpenAiConfig {
            model: model.to_string(),
            keep_bodies: true,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// One documented command line, run in its own directory.
pub(crate) struct Run {
    pub(crate) dir: PathBuf,
    pub(crate) out: Output,
}

impl Run {
    /// Runs `argv` (the document's arguments after the program name) with `localhost:8000`
    /// and `localhost:8001` (the HTTP and gRPC defaults both tools use) replaced by the
    /// server's ports, in a fresh directory, with the stand-in Hub and an empty Hub cache.
    pub(crate) fn new(tag: &str, server: &ServerHandle, hub: &StandIn, argv: &[&str]) -> Run {
        let http = server.addr.to_string();
        let grpc = server.grpc_addr.expect("gRPC port").to_string();
        Run::with(
            tag,
            &[("localhost:8000", http), ("localhost:8001", grpc)],
            hub,
            argv,
        )
    }

    /// Runs `argv` with each `(written, actual)` address replaced.
    pub(crate) fn with(
        tag: &str,
        addresses: &[(&str, String)],
        hub: &StandIn,
        argv: &[&str],
    ) -> Run {
        let dir = temp_dir(tag);
        let args: Vec<String> = argv
            .iter()
            .map(|a| {
                addresses
                    .iter()
                    .fold(a.to_string(), |a, (from, to)| a.replace(from, to))
            })
            .collect();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args(&args)
            .current_dir(&dir)
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("TRANSFORMERS_OFFLINE")
            .env_remove("HF_TOKEN")
            .env("HF_HUB_CACHE", dir.join("hub"))
            .env("HF_ENDPOINT", hub.endpoint())
            .output()
            .expect("binary runs");
        Run { dir, out }
    }

    /// Asserts the run succeeded; its stderr otherwise.
    pub(crate) fn ok(self) -> Run {
        assert!(
            self.out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        );
        self
    }

    /// The one profile directory under `artifacts/`, which must be named `name`.
    pub(crate) fn profile_dir(&self, name: &str) -> PathBuf {
        let artifacts = self.dir.join("artifacts");
        let names: Vec<String> = std::fs::read_dir(&artifacts)
            .unwrap_or_else(|e| panic!("{}: {e}", artifacts.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [name], "folders under artifacts/");
        artifacts.join(name)
    }

    /// `request_count.avg` of a summary JSON in `dir`, after checking the file exists.
    pub(crate) fn count_in(dir: &Path, file: &str) -> u64 {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text).unwrap();
        v["request_count"]["avg"].as_f64().unwrap() as u64
    }

    /// AIPerf's files in the profile folder `name`; the measured request count.
    pub(crate) fn aiperf_files(&self, name: &str) -> u64 {
        let dir = self.profile_dir(name);
        for f in [
            "profile_export_aiperf.csv",
            "profile_export.jsonl",
            "logs/aiperf.log",
            ".aiperf_results_ready.json",
        ] {
            assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
        }
        Run::count_in(&dir, "profile_export_aiperf.json")
    }

    /// GenAI-Perf's files (named after `export`, its `--profile-export-file`) in the folder
    /// `name`; the measured request count.
    pub(crate) fn genai_perf_files(&self, name: &str, export: &str) -> u64 {
        let dir = self.profile_dir(name);
        let stem = export.trim_end_matches(".json");
        for f in [
            export.to_string(),
            format!("{stem}_genai_perf.csv"),
            "inputs.json".to_string(),
        ] {
            assert!(dir.join(&f).is_file(), "{f} missing in {}", dir.display());
        }
        Run::count_in(&dir, &format!("{stem}_genai_perf.json"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The generation request bodies the server received, parsed.
pub(crate) fn bodies(server: &ServerHandle) -> Vec<Value> {
    server
        .generation_bodies()
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect()
}

/// The Hub paths the stand-in was asked for.
pub(crate) fn hub_paths(hub: &StandIn) -> Vec<String> {
    hub.seen().into_iter().map(|s| s.path).collect()
}

// ----- AIPerf -----

/// AIPerf README, "Basic usage". No request count: inferperf's default (100) applies
/// (AIPerf's own is max(10, 2 x concurrency)); a plain model name is no Hub name, so the
/// built-in tokenizer counts and the Hub is not asked.
#[test]
fn aiperf_readme_basic() {
    let server = start_llm("your_model_name");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-basic", &server, &hub, &[
        "profile",
        "--model", "your_model_name",
        "--url", "http://localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
    ])
    .ok();
    let measured = run.aiperf_files("your_model_name-openai-chat-concurrency1");
    let got = bodies(&server);
    assert_eq!(got.len(), 100);
    assert_eq!(measured, 100);
    assert!(got
        .iter()
        .all(|b| b["model"] == "your_model_name" && b["stream"] == true));
    assert!(hub_paths(&hub).is_empty(), "{:?}", hub_paths(&hub));
}

/// AIPerf README, "Example with Custom Configuration": the ORG/NAME model is the
/// tokenizer, fetched from the (stand-in) Hub.
#[test]
fn aiperf_readme_custom_configuration() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-custom", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--url", "http://localhost:8000",
        "--endpoint-type", "chat",
        "--concurrency", "10",
        "--request-count", "100",
        "--streaming",
    ])
    .ok();
    assert_eq!(
        run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-concurrency10"),
        100
    );
    assert_eq!(bodies(&server).len(), 100);
    assert_eq!(
        hub_paths(&hub)[0],
        "/Qwen/Qwen3-0.6B/resolve/main/tokenizer.json"
    );
    assert!(run
        .dir
        .join("hub/models--Qwen--Qwen3-0.6B/refs/main")
        .is_file());
}

/// AIPerf docs/tutorials/request-rate-concurrency.md, "Poisson Mode": a rate with a
/// concurrency cap; AIPerf's folder names both, the rate as a Python float.
#[test]
fn aiperf_request_rate_with_max_concurrency() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-rate", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--concurrency", "100",
        "--request-rate", "200",
        "--request-rate-mode", "poisson",
        "--random-seed", "42",
        "--request-count", "500",
        "--synthetic-input-tokens-mean", "500",
        "--output-tokens-mean", "200",
    ])
    .ok();
    let measured = run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-concurrency100-request_rate200.0");
    let got = bodies(&server);
    assert_eq!((got.len(), measured), (500, 500));
    assert!(got.iter().all(|b| b["max_tokens"] == 200));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(
            run.profile_dir("Qwen_Qwen3-0.6B-openai-chat-concurrency100-request_rate200.0")
                .join("profile_export_aiperf.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let isl = summary["input_sequence_length"]["avg"].as_f64().unwrap();
    assert_eq!(isl, 500.0, "ISL counted by the Hub tokenizer");
}

/// AIPerf docs/tutorials/fixed-schedule.md, "Running Basic Fixed Schedule": the trace's
/// ten entries are sent (over its 5 s) and the folder is `fixed_schedule`.
#[test]
fn aiperf_fixed_schedule() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    let dir = temp_dir("qs-aiperf-fixed-trace");
    let trace = dir.join("precise_schedule.jsonl");
    std::fs::write(
        &trace,
        r#"{"timestamp": 0, "input_length": 100, "hash_ids": [3001]}
{"timestamp": 500, "input_length": 200, "hash_ids": [3002]}
{"timestamp": 750, "input_length": 150, "hash_ids": [3003]}
{"timestamp": 1000, "input_length": 300, "hash_ids": [3004]}
{"timestamp": 1250, "input_length": 180, "hash_ids": [3005]}
{"timestamp": 2000, "input_length": 400, "hash_ids": [3006]}
{"timestamp": 2500, "input_length": 250, "hash_ids": [3007]}
{"timestamp": 3000, "input_length": 350, "hash_ids": [3008]}
{"timestamp": 4000, "input_length": 500, "hash_ids": [3009]}
{"timestamp": 5000, "input_length": 600, "hash_ids": [3010, 3050]}
"#,
    )
    .unwrap();
    let trace = trace.display().to_string();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-fixed", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--input-file", &trace,
        "--custom-dataset-type", "mooncake_trace",
        "--fixed-schedule",
        "--fixed-schedule-auto-offset",
    ])
    .ok();
    assert_eq!(
        run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-fixed_schedule"),
        10
    );
    assert_eq!(bodies(&server).len(), 10);
    let _ = std::fs::remove_dir_all(&dir);
}

/// AIPerf docs/tutorials/goodput.md: the SLOs in one quoted argument.
#[test]
fn aiperf_goodput() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-goodput", &server, &hub, &[
        "profile",
        "-m", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--streaming",
        "--url", "localhost:8000",
        "--request-count", "20",
        "--goodput", "time_to_first_token:100 inter_token_latency:3.40",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency1";
    assert_eq!(run.aiperf_files(name), 20);
    assert_eq!(bodies(&server).len(), 20);
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(run.profile_dir(name).join("profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert!(summary["goodput"]["avg"].is_number(), "{summary}");
}

/// AIPerf docs/tutorials/timeslices.md, "Simple Time Slicing Example". The document runs
/// 60 s in 10 s slices; here 2 s in 1 s slices (the two values the test changes), and the
/// document gives no --url (the default localhost:8000 is replaced as everywhere).
#[test]
fn aiperf_time_slices() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-slices", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--benchmark-duration", "2",
        "--slice-duration", "1",
        "--url", "localhost:8000",
    ])
    .ok();
    let name = "Qwen_Qwen3-0.6B-openai-chat-concurrency1";
    let measured = run.aiperf_files(name);
    assert!(measured > 0);
    // Requests still in flight when the duration ends may be left out, never more.
    let ended = server.llm_counts().ended;
    assert!(
        ended >= measured && ended <= measured + 1,
        "{ended} {measured}"
    );
    let dir = run.profile_dir(name);
    for f in [
        "profile_export_aiperf_timeslices.json",
        "profile_export_aiperf_timeslices.csv",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
}

/// AIPerf docs/tutorials/sequence-distributions.md, "Chatbot Workload Simulation": each
/// prompt's ISL and OSL come from one of three classes, weighted 70/20/10. With no request
/// count, inferperf's default 100 requests cycle through its 100 prompts once.
#[test]
fn aiperf_sequence_distribution() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-seqdist", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--endpoint-type", "chat",
        "--endpoint", "/v1/chat/completions",
        "--streaming",
        "--url", "localhost:8000",
        "--sequence-distribution", "64|10,32|8:70;256|40,128|20:20;1024|100,512|50:10",
    ])
    .ok();
    assert_eq!(
        run.aiperf_files("Qwen_Qwen3-0.6B-openai-chat-concurrency1"),
        100
    );
    // Classes told apart by the requested output length (means 32, 128, 512; 8 to 50 sd).
    let mut classes = [0usize; 3];
    for b in bodies(&server) {
        let osl = b["max_tokens"]
            .as_u64()
            .expect("every request asks for an OSL");
        classes[match osl {
            0..=80 => 0,
            81..=300 => 1,
            _ => 2,
        }] += 1;
    }
    assert_eq!(classes.iter().sum::<usize>(), 100);
    assert!(
        classes[0] > classes[1] && classes[1] > classes[2] && classes[2] > 0,
        "{classes:?}"
    );
}

/// AIPerf docs/tutorials/arrival-patterns.md, "Stress Testing with Bursty Traffic": gamma
/// arrivals of shape 0.3 at 100 requests/s. The document runs 120 s; here 2 s (the one value
/// changed), about 200 requests.
#[test]
fn aiperf_bursty_arrivals() {
    let server = start_llm("your-model");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-gamma", &server, &hub, &[
        "profile",
        "--model", "your-model",
        "--url", "localhost:8000",
        "--endpoint-type", "chat",
        "--streaming",
        "--request-rate", "100",
        "--arrival-pattern", "gamma",
        "--arrival-smoothness", "0.3",
        "--benchmark-duration", "2",
    ])
    .ok();
    let measured = run.aiperf_files("your-model-openai-chat-request_rate100.0");
    let sent = server.llm_counts().ended;
    assert!(measured > 0 && sent >= measured, "{sent} {measured}");
    let dir = run.profile_dir("your-model-openai-chat-request_rate100.0");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    let phase = &summary["input_config"]["phases"][0];
    assert_eq!(phase["type"], "gamma", "{phase}");
}

/// A mix that cannot be read: exit 99, one line naming the flag and what is wrong, and no
/// request sent.
#[test]
fn a_bad_sequence_distribution_is_one_usage_line() {
    let server = start_llm("Qwen/Qwen3-0.6B");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-aiperf-seqdist-bad", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen3-0.6B",
        "--url", "localhost:8000",
        "--sequence-distribution", "128,64;256,128:1",
    ]);
    assert_eq!(run.out.status.code(), Some(99));
    let stderr = String::from_utf8_lossy(&run.out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--sequence-distribution") && stderr.contains("no ':WEIGHT'"),
        "{stderr}"
    );
    assert!(bodies(&server).is_empty());
}

// ----- GenAI-Perf -----

/// GenAI-Perf README quick start: Triton with the TensorRT-LLM backend over gRPC. The
/// document gives no -u (GenAI-Perf's default localhost:8001 is this server's gRPC
/// port); GenAI-Perf stops on stability, inferperf after its default 100 requests.
#[test]
fn genai_perf_readme_quick_start() {
    let server = start_llm("gpt2");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-gap-readme", &server, &hub, &[
        "profile", "-m", "gpt2", "--service-kind", "triton", "--backend", "tensorrtllm",
        "--streaming",
        "-u", "localhost:8001",
    ])
    .ok();
    let measured = run.genai_perf_files(
        "gpt2-triton-tensorrtllm-concurrency1",
        "profile_export.json",
    );
    assert_eq!(measured, 100);
    assert_eq!(server.llm_counts().ended, 100);
}

/// GenAI-Perf docs/tutorial.md, "Profile GPT-2 running on Triton + vLLM" (and -u as
/// above): 10 warm-up requests, then 50 measured.
#[test]
fn genai_perf_tutorial_triton_vllm() {
    let server = start_llm("gpt2");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-gap-vllm", &server, &hub, &[
        "profile",
        "-m", "gpt2",
        "--service-kind", "triton",
        "--backend", "vllm",
        "--synthetic-input-tokens-mean", "200",
        "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", "100",
        "--output-tokens-stddev", "0",
        "--output-tokens-mean-deterministic",
        "--streaming",
        "--request-count", "50",
        "--warmup-request-count", "10",
        "-u", "localhost:8001",
    ])
    .ok();
    assert_eq!(
        run.genai_perf_files("gpt2-triton-vllm-concurrency1", "profile_export.json"),
        50
    );
    assert_eq!(server.llm_counts().ended, 60);
}

/// GenAI-Perf docs/tutorial.md, "Profile Zephyr-7B-Beta running on OpenAI Chat" (with the
/// server's URL added): the ORG/NAME model is the tokenizer, from the stand-in Hub.
#[test]
fn genai_perf_tutorial_openai_chat() {
    let server = start_llm("HuggingFaceH4/zephyr-7b-beta");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-gap-chat", &server, &hub, &[
        "profile",
        "-m", "HuggingFaceH4/zephyr-7b-beta",
        "--service-kind", "openai",
        "--endpoint-type", "chat",
        "--synthetic-input-tokens-mean", "200",
        "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", "100",
        "--output-tokens-stddev", "0",
        "--streaming",
        "--request-count", "50",
        "--warmup-request-count", "10",
        "-u", "localhost:8000",
    ])
    .ok();
    assert_eq!(
        run.genai_perf_files(
            "HuggingFaceH4_zephyr-7b-beta-openai-chat-concurrency1",
            "profile_export.json"
        ),
        50
    );
    let got = bodies(&server);
    assert_eq!(got.len(), 60);
    assert!(got.iter().all(|b| b["max_tokens"] == 100));
    assert_eq!(
        hub_paths(&hub)[0],
        "/HuggingFaceH4/zephyr-7b-beta/resolve/main/tokenizer.json"
    );
}

/// GenAI-Perf docs/tutorial.md, "Profile GPT-2 running on OpenAI Completions" (with the
/// server's URL and, to count tokens as GenAI-Perf would with GPT-2's own tokenizer,
/// `--tokenizer gpt2`: a Hub name without an organisation).
#[test]
fn genai_perf_tutorial_openai_completions() {
    let server = start_llm("gpt2");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("qs-gap-completions", &server, &hub, &[
        "profile",
        "-m", "gpt2",
        "--service-kind", "openai",
        "--endpoint-type", "completions",
        "--synthetic-input-tokens-mean", "200",
        "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", "100",
        "--output-tokens-stddev", "0",
        "--request-count", "50",
        "--warmup-request-count", "10",
        "-u", "localhost:8000",
        "--tokenizer", "gpt2",
    ])
    .ok();
    assert_eq!(
        run.genai_perf_files(
            "gpt2-openai-completions-concurrency1",
            "profile_export.json"
        ),
        50
    );
    let got = bodies(&server);
    assert_eq!(got.len(), 60);
    assert!(got.iter().all(|b| b["prompt"].is_string()));
    assert_eq!(hub_paths(&hub)[0], "/gpt2/resolve/main/tokenizer.json");
    assert!(run.dir.join("hub/models--gpt2/refs/main").is_file());
}

/// GenAI-Perf docs/embeddings.md, "Profile Using Custom Inputs" (with the server's URL):
/// four texts, two per request.
#[test]
fn genai_perf_embeddings_from_a_file() {
    let server = start_llm("intfloat/e5-mistral-7b-instruct");
    let hub = StandIn::start();
    let dir = temp_dir("qs-gap-embeddings-input");
    let file = dir.join("embeddings.jsonl");
    std::fs::write(
        &file,
        r#"{"text": "What was the first car ever driven?"}
{"text": "Who served as the 5th President of the United States of America?"}
{"text": "Is the Sydney Opera House located in Australia?"}
{"text": "In what state did they film Shrek 2?"}
"#,
    )
    .unwrap();
    let file = file.display().to_string();
    #[rustfmt::skip]
    let run = Run::new("qs-gap-embeddings", &server, &hub, &[
        "profile",
        "-m", "intfloat/e5-mistral-7b-instruct",
        "--service-kind", "openai",
        "--endpoint-type", "embeddings",
        "--batch-size-text", "2",
        "--input-file", &file,
        "-u", "localhost:8000",
    ])
    .ok();
    let measured = run.genai_perf_files(
        "intfloat_e5-mistral-7b-instruct-openai-embeddings-concurrency1",
        "profile_export.json",
    );
    assert_eq!(measured, 100);
    let _ = std::fs::remove_dir_all(&dir);
}

/// GenAI-Perf docs/rankings.md, "Profile Using Custom Inputs": a folder of queries and
/// passages sent to a Text Embeddings Inference re-ranker (a stand-in on the address the
/// document's `-u localhost:8080` names). Four queries, one passage each per request.
#[test]
fn genai_perf_rankings_from_a_folder() {
    let ranker = Ranker::start(0);
    let hub = StandIn::start();
    let dir = temp_dir("qs-gap-rankings-input");
    let folder = dir.join("rankings_jsonl");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("queries.jsonl"),
        r#"{"text": "What was the first car ever driven?"}
{"text": "Who served as the 5th President of the United States of America?"}
{"text": "Is the Sydney Opera House located in Australia?"}
{"text": "In what state did they film Shrek 2?"}
"#,
    )
    .unwrap();
    std::fs::write(
        folder.join("passages.jsonl"),
        r#"{"text": "Eric Anderson (born January 18, 1968) is an American sociologist and sexologist."}
{"text": "Kevin Loader is a British film and television producer."}
{"text": "Francisco Antonio Zea Juan Francisco Antonio Hilari was a Colombian journalist, botanist, diplomat, politician, and statesman who served as the 1st Vice President of Colombia."}
{"text": "Daddys Home 2 Principal photography on the film began in Massachusetts in March 2017 and it was released in the United States by Paramount Pictures on November 10, 2017. Although the film received unfavorable reviews, it has grossed over $180 million worldwide on a $69 million budget."}
"#,
    )
    .unwrap();
    let input = format!("{}/", folder.display());
    #[rustfmt::skip]
    let run = Run::with("qs-gap-rankings", &[("localhost:8080", ranker.addr.to_string())], &hub, &[
        "profile",
        "-m", "BAAI/bge-reranker-base",
        "--service-kind", "openai",
        "--endpoint-type", "rankings",
        "--endpoint", "rerank",
        "--input-file", &input,
        "-u", "localhost:8080",
        "--extra-inputs", "rankings:tei",
    ])
    .ok();
    let measured = run.genai_perf_files(
        "BAAI_bge-reranker-base-openai-rankings-concurrency1",
        "profile_export.json",
    );
    let got = ranker.bodies();
    assert_eq!((got.len() as u64, measured), (100, 100));
    assert!(
        got.iter()
            .all(|b| b["query"].is_string() && b["texts"].as_array().is_some_and(|t| t.len() == 1)),
        "{:?}",
        got.first()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
