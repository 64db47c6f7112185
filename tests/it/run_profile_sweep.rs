//! `inferperf profile` over several levels against the reference server's fake LLM: the
//! sweep summary, GuideLLM's sweep, the SLA search, ramps, cancellation and prefix prompts,
//! each checked against what the server received (counts and ratios, no timings).

use crate::common::temp_dir;
use crate::run_profile::{profile, start_llm, MODEL};

use std::time::Duration;

use inferperf::inputs::tokenizer::Tokenizer;
use inferperf::server::{self, Busy, OpenAiConfig, ServeConfig, ServerHandle};
use serde_json::Value;

fn start(openai: OpenAiConfig) -> ServerHandle {
    server::start(ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        openai,
        ..ServeConfig::default()
    })
    .expect("reference server starts")
}

fn paced(ttft_ms: u64, itl_ms: u64) -> OpenAiConfig {
    OpenAiConfig::paced(
        Duration::from_millis(ttft_ms),
        Duration::from_millis(itl_ms),
    )
}

fn summary(dir: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(dir.join("sweep_summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_concurrency_list_ends_with_a_summary_table_files_and_charts() {
    let server = start_llm(20, 2, 1);
    let dir = temp_dir("profile-sweep-list");
    let args = [
        "--streaming",
        "--concurrency",
        "1,3",
        "--request-count",
        "9",
        "--output-tokens-mean",
        "6",
        "--synthetic-input-tokens-mean",
        "16",
        "--goodput",
        "time_to_first_token:60000",
        "--generate-plots",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes.len(), 2);
    assert_eq!(server.token_times().len(), 18, "9 requests per level");
    assert!(stdout.contains("Sweep summary"), "{stdout}");
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Sweep summary"))
        .collect();
    assert!(table[1].contains("TTFT p99 ms") && table[1].contains("Good %"));
    assert!(table[2].trim_start().starts_with("concurrency1"));
    assert!(table[3].trim_start().starts_with("concurrency3"));
    let s = summary(&dir);
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    // The server's own write times give each level's true inter-token latency: (last write -
    // first write) / (chunks - 1) per request, averaged over the level's 9 requests (the
    // levels run one after the other, so the log holds them in order).
    let written = server.token_write_times();
    for (level, o) in outcomes.iter().enumerate() {
        let truth: Vec<f64> = written[level * 9..(level + 1) * 9]
            .iter()
            .map(|w| (w[w.len() - 1] - w[0]) as f64 / (w.len() - 1) as f64)
            .collect();
        let truth = truth.iter().sum::<f64>() / truth.len() as f64;
        let measured = o.metrics.itl.as_ref().expect("ITL").avg;
        assert!(
            (measured - truth).abs() < 100_000.0,
            "level {level}: ITL measured {measured} ns, server {truth} ns"
        );
    }
    for (row, o) in rows.iter().zip(&outcomes) {
        assert_eq!(row["requests"], 9);
        assert_eq!(row["errors"], 0);
        assert_eq!(row["goodput_fraction"], 1.0);
        // The server paces the first token 20 ms after the request: no client sees it sooner.
        assert!(row["ttft_p50_ms"].as_f64().unwrap() >= 20.0, "{row}");
        assert!(row["ttft_p99_ms"].as_f64() >= row["ttft_p50_ms"].as_f64());
        let per_level = o.metrics.output_token_throughput;
        let written = row["output_token_throughput"].as_f64().unwrap();
        assert!(
            (written - per_level).abs() <= per_level * 1e-12,
            "{written} {per_level}"
        );
        assert_eq!(o.metrics.total_osl, 9 * 6);
    }
    assert_eq!(rows[1]["concurrency"], 3);
    let csv = std::fs::read_to_string(dir.join("sweep_summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("concurrency1,level,1,,9,0,0,"));
    // The levels' HTML page carries the same table.
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let at = page
        .find("<section id=\"sweep-summary\">")
        .expect("report.html has the sweep summary");
    assert!(page[at..].contains("TTFT p99 ms") && page[at..].contains("concurrency3"));
    for chart in [
        "ttft_by_level",
        "itl_by_level",
        "latency_by_level",
        "throughput_by_level",
    ] {
        for ext in ["svg", "png"] {
            let f = dir.join("sweep_plots").join(format!("{chart}.{ext}"));
            assert!(f.metadata().unwrap().len() > 0, "{}", f.display());
        }
    }
    server.stop();
}

#[test]
fn a_single_level_writes_no_summary() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("profile-sweep-single");
    let (outcomes, stdout) = profile(&server, &dir, &["--request-count", "3"]).unwrap();
    assert_eq!(outcomes.len(), 1);
    assert!(!stdout.contains("Sweep summary"));
    assert!(!dir.join("sweep_summary.json").exists());
    server.stop();
}

#[test]
fn guidellm_sweep_runs_synchronous_throughput_then_rates_between() {
    let server = start_llm(5, 1, 1);
    let dir = temp_dir("profile-sweep-guidellm");
    let args = [
        "--streaming",
        "--rate-type",
        "sweep",
        "--rate",
        "4",
        "--concurrency",
        "4",
        "--request-count",
        "8",
        "--output-tokens-mean",
        "4",
        "--synthetic-input-tokens-mean",
        "16",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    assert_eq!(server.token_times().len(), 32, "4 profiles of 8 requests");
    let s = summary(&dir);
    let rows = s["rows"].as_array().unwrap();
    let roles: Vec<&str> = rows.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["synchronous", "throughput", "constant", "constant"]);
    assert_eq!(rows[0]["concurrency"], 1);
    assert_eq!(rows[1]["concurrency"], 4);
    let sync = outcomes[0].metrics.request_throughput;
    let max = outcomes[1].metrics.request_throughput;
    let rates: Vec<f64> = rows[2..]
        .iter()
        .map(|r| r["request_rate"].as_f64().unwrap())
        .collect();
    // linspace(sync, max, 3) without its first value, to 0.01 request/s.
    let step = (max - sync) / 2.0;
    let round = |r: f64| (r * 100.0).round() / 100.0;
    assert_eq!(rates, vec![round(sync + step), round(sync + 2.0 * step)]);
    assert!(outcomes[2].dir.ends_with(format!(
        "{MODEL}-openai-chat-request_rate{}",
        inferperf::llm::cli::python_float(rates[0])
    )));
    server.stop();
}

#[test]
fn sla_search_finds_the_concurrency_the_server_allows() {
    // Above 3 streams at once, the first token comes 400 ms late; the limit is 150 ms.
    let server = start(OpenAiConfig {
        busy: Some(Busy {
            streams: 3,
            extra_ttft: Duration::from_millis(400),
        }),
        ..paced(5, 2)
    });
    let dir = temp_dir("profile-sweep-sla");
    let args = [
        "--streaming",
        "--sla-search",
        "concurrency",
        "--sla-range",
        "1,8",
        "--goodput",
        "time_to_first_token:150",
        "--request-count",
        "24",
        "--output-tokens-mean",
        "4",
        "--synthetic-input-tokens-mean",
        "16",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    let probed: Vec<String> = outcomes.iter().map(|o| o.point.label()).collect();
    assert_eq!(
        probed,
        [
            "concurrency1",
            "concurrency8",
            "concurrency4",
            "concurrency2",
            "concurrency3"
        ]
    );
    assert_eq!(server.token_times().len(), 5 * 24);
    let s = summary(&dir);
    assert_eq!(s["sla"]["best"], 3.0);
    assert_eq!(s["sla"]["axis"], "concurrency");
    let pass: Vec<bool> = s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sla_pass"].as_bool().unwrap())
        .collect();
    assert_eq!(pass, [true, false, false, true, true]);
    assert!(
        stdout.contains("the largest concurrency whose goodput fraction is at least 0.9 is 3"),
        "{stdout}"
    );
    server.stop();
}

#[test]
fn a_rate_ramp_is_sent_but_not_measured() {
    let server = start_llm(0, 0, 1);
    let dir = temp_dir("profile-sweep-ramp-rate");
    // 20/s over 1 s from 2/s: 2 + 18/2 = 11 ramp requests, then the 10 measured.
    let args = [
        "--request-rate",
        "20",
        "--request-rate-ramp-duration",
        "1",
        "--request-count",
        "10",
        "--output-tokens-mean",
        "2",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    assert_eq!(server.token_times().len(), 21);
    assert_eq!(outcomes[0].metrics.request_count, 10);
    server.stop();

    let server = start_llm(0, 0, 1);
    let dir = temp_dir("profile-sweep-ramp-conc");
    let args = [
        "--concurrency",
        "3",
        "--concurrency-ramp-duration",
        "0.4",
        "--request-count",
        "6",
        "--output-tokens-mean",
        "2",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    assert!(server.token_times().len() > 6, "the ramp sent requests");
    assert_eq!(outcomes[0].requests.len(), 6);
    server.stop();
}

/// The user message of each chat body the server received.
fn contents(server: &ServerHandle, at: usize) -> Vec<String> {
    server
        .generation_bodies()
        .iter()
        .map(|b| {
            let v: Value = serde_json::from_slice(b).unwrap();
            v["messages"][at]["content"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn prefix_prompts_reach_the_server_with_exact_lengths() {
    let server = start(OpenAiConfig {
        keep_bodies: true,
        ..paced(0, 0)
    });
    let dir = temp_dir("profile-sweep-prefix");
    let args = [
        "--num-prefix-prompts",
        "2",
        "--prefix-prompt-length",
        "30",
        "--synthetic-input-tokens-mean",
        "20",
        "--num-prompts",
        "4",
        "--request-count",
        "8",
        "--output-tokens-mean",
        "2",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let tok = Tokenizer::load("cl100k_base").unwrap();
    let got = contents(&server, 0);
    assert_eq!(got.len(), 8);
    let mut prefixes = std::collections::BTreeSet::new();
    for text in &got {
        assert_eq!(tok.count(text), 50, "prefix + prompt, exact");
        let ids = tok.encode(text);
        prefixes.insert(tok.decode_lossy(&ids[..30]));
    }
    assert_eq!(prefixes.len(), 2, "two shared prefixes");
    assert!(outcomes[0].requests.iter().all(|r| r.isl == 50));
    assert_eq!(outcomes[0].metrics.total_isl, 8 * 50);
    server.stop();
}

#[test]
fn a_shared_system_prompt_leads_every_chat_request() {
    let server = start(OpenAiConfig {
        keep_bodies: true,
        ..paced(0, 0)
    });
    let dir = temp_dir("profile-sweep-system");
    let args = [
        "--shared-system-prompt-length",
        "24",
        "--synthetic-input-tokens-mean",
        "10",
        "--request-count",
        "5",
        "--output-tokens-mean",
        "2",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let tok = Tokenizer::load("cl100k_base").unwrap();
    let system = contents(&server, 0);
    let user = contents(&server, 1);
    assert_eq!(system.len(), 5);
    assert!(
        system.iter().all(|s| *s == system[0]),
        "one shared system prompt"
    );
    assert_eq!(tok.count(&system[0]), 24);
    assert!(user.iter().all(|u| tok.count(u) == 10));
    assert!(server.generation_bodies().iter().all(|b| {
        let v: Value = serde_json::from_slice(b).unwrap();
        v["messages"][0]["role"] == "system" && v["messages"][1]["role"] == "user"
    }));
    assert!(outcomes[0].requests.iter().all(|r| r.isl == 34));
    server.stop();
}

#[test]
fn cancelled_requests_are_counted_apart_and_the_server_sees_them_go() {
    // 20 ms to the first token, then 8 tokens 20 ms apart: cancelled at 50 ms, mid-stream.
    let server = start(paced(20, 20));
    let dir = temp_dir("profile-sweep-cancel");
    // One worker sends the 20 prompts in order, twice: 5 of them are marked (25 %).
    let args = [
        "--streaming",
        "--concurrency",
        "2",
        "--max-workers",
        "1",
        "--num-prompts",
        "20",
        "--request-count",
        "40",
        "--output-tokens-mean",
        "8",
        "--synthetic-input-tokens-mean",
        "16",
        "--request-cancellation-rate",
        "25",
        "--request-cancellation-delay",
        "0.05",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    let o = &outcomes[0];
    assert_eq!(o.requests.len(), 40);
    assert_eq!(o.cancelled, 10);
    assert_eq!(
        o.metrics.request_count, 30,
        "cancelled ones are not in the figures"
    );
    assert_eq!(o.metrics.error_count, 0, "nor counted as errors");
    assert!(stdout.contains("Cancelled requests (on purpose, not in the figures above): 10"));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(o.dir.join("profile_export_genai_perf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["cancelled_count"]["avg"], 10);
    assert_eq!(summary["request_count"]["avg"], 30.0);
    // The server notices each closed connection when it next writes or reads.
    let waited = std::time::Instant::now();
    while server.abandoned_streams() < 10 && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(server.abandoned_streams(), 10);
    assert_eq!(server.token_times().len(), 40);
    server.stop();
}

/// A level that fails mid-sweep (here the server goes away once the first level is written)
/// ends the run with exit 99, yet the sweep summary and AIPerf's aggregates are written for
/// the levels that ran, the failed level's row marked with its error.
#[test]
fn a_failed_level_still_leaves_the_summaries_of_the_levels_that_ran() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    let server = start_llm(100, 1, 1);
    let dir = temp_dir("profile-sweep-failed-level");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", MODEL, "-u", &server.addr.to_string()])
        .args([
            "--streaming",
            "--concurrency",
            "1,2",
            "--request-count",
            "4",
        ])
        .args(["--output-tokens-mean", "4", "--tokenizer", "cl100k_base"])
        .args(["--quiet", "--artifact-dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    // The first level is written when its folder is announced; every request of the second
    // waits 100 ms for its first token, so the server is gone before any of them is answered.
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "no level ended: {text}"
        );
        text.push_str(&line);
        if line.starts_with("Results in") {
            break;
        }
    }
    server.stop();
    stdout.read_to_string(&mut text).unwrap();
    let out = crate::nothing_lost::wait_bounded(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The summary: both rows, the second marked with the error the run ended with.
    let s = summary(&dir);
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{s}");
    assert!(rows[0]["error"].is_null());
    assert_eq!(rows[0]["requests"], 4);
    assert_eq!(rows[1]["label"], "concurrency2");
    assert_eq!(
        rows[1]["requests"], 0,
        "no request of the second level was answered"
    );
    let why = rows[1]["error"].as_str().expect("the failed row says why");
    assert!(!why.is_empty() && stderr.contains(why), "{why}\n{stderr}");
    let csv = std::fs::read_to_string(dir.join("sweep_summary.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",error"));
    assert!(csv.lines().nth(1).unwrap().ends_with(','), "{csv}");
    assert!(!csv.lines().nth(2).unwrap().ends_with(','), "{csv}");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Sweep summary"))
        .collect();
    assert!(table[1].contains("Status"), "{text}");
    assert!(table[3].contains("failed"), "{text}");
    assert!(text.contains("concurrency2 failed: "), "{text}");

    // AIPerf's aggregates: the level that ran, and the failed run counted apart.
    let read = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(p)).unwrap()).unwrap()
    };
    let sweep = read("sweep_aggregate/profile_export_aiperf_sweep.json");
    assert_eq!(sweep["num_profile_runs"], 2);
    assert_eq!(sweep["num_successful_runs"], 1);
    assert_eq!(sweep["failed_runs"][0]["error"].as_str(), Some(why));
    let cells = sweep["per_combination_metrics"].as_array().unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0]["parameters"]["concurrency"], 1);
    assert_eq!(cells[0]["metrics"]["request_count"]["mean"], 4.0);
    let level = read("aggregate/concurrency_1/profile_export_aiperf_aggregate.json");
    assert_eq!(level["metrics"]["request_count_avg"]["mean"], 4.0);
    assert!(!dir.join("aggregate/concurrency_2").exists());
    assert!(dir
        .join("concurrency_1/profile_export_aiperf.json")
        .is_file());
}
