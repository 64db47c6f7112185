//! How exactly `inferperf profile` times streamed tokens: the reference server (in process,
//! TTFT 50 ms, ITL 5 ms) logs when it wrote every chunk; the client's per-chunk read times
//! (from the profile export, matched by the response id) are compared with them.
//!
//! `cargo bench --bench llm_accuracy [-- CONCURRENCY...]` (default 256; environment
//! `TTFT_MS` (50), `ITL_MS` (5), `OSL` (64) output tokens; `SERVER=process` runs the server
//! as its own `inferperf serve` process and reads its log from `GET /v1/inferperf/token-log`,
//! for levels whose client and server sockets do not fit one process's descriptor limit; both
//! processes' clocks are the wall clock read once at start plus the monotonic clock) prints, per
//! concurrency: the requests, the failed ones (their kinds on stderr), the ones matched to
//! the server's log (the others named on stderr with the reason); chunk delivery delay
//! (client time − server write time) p50/p99/max; the TTFT error (the measured TTFT minus the
//! TTFT the server's own write time gives, i.e. the first chunk's delay) p99; the inter-token
//! error |client gap − server gap| p99 and max over every pair of consecutive chunks of every
//! request; the server's own lag p99 (write time − the time the chunk was due), which is not
//! the client's; and the share of chunks timed by a read shared with the next chunk of their
//! stream.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use inferperf::llm::PointOutcome;
use inferperf::measure::llm::LlmRequest;
use inferperf::server::{self, OpenAiConfig, ServeConfig};

use serde_json::Value;

/// `name` from the environment as a number, or `default`.
fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let levels: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let levels = if levels.is_empty() { vec![256] } else { levels };
    println!("concurrency  requests  errors  matched  chunks  delay_p50_us  delay_p99_us  delay_max_us  ttft_err_p99_us  itl_err_p99_us  itl_err_max_us  server_lag_p99_us  shared_reads_pct");
    for c in levels {
        measure(c);
    }
}

/// A reference server for one level: in this process, or (`SERVER=process`) as its own
/// `inferperf serve` process, so client and server sockets count against two descriptor
/// limits (10,000 streams need 20,000 descriptors in one process).
enum Server {
    InProcess(server::ServerHandle),
    Process(std::process::Child, String),
}

impl Server {
    /// Server on the last core, the client's one worker on the first: neither steals the
    /// other's CPU, as when they run on different machines.
    fn start() -> Server {
        let cores = inferperf::engine::available_cores();
        let last = cores.last().map(|c| c.id).unwrap_or(0);
        let (ttft, itl) = (knob("TTFT_MS", 50), knob("ITL_MS", 5));
        if std::env::var("SERVER").as_deref() == Ok("process") {
            return Server::spawn(last, ttft, itl);
        }
        let cfg = ServeConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            pin_cores: vec![last],
            openai: OpenAiConfig::paced(Duration::from_millis(ttft), Duration::from_millis(itl)),
            ..ServeConfig::default()
        };
        Server::InProcess(server::start(cfg).expect("reference server starts"))
    }

    fn spawn(core: usize, ttft: u64, itl: u64) -> Server {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args([
                "serve",
                "--port",
                "0",
                "--grpc-port",
                "0",
                "--duration",
                "600",
            ])
            .args(["--pin", &core.to_string()])
            .args(["--openai-ttft", &format!("{ttft}ms")])
            .args(["--openai-itl", &format!("{itl}ms")])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("inferperf serve starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .expect("serve prints its address")
            .to_string();
        Server::Process(child, addr)
    }

    fn addr(&self) -> String {
        match self {
            Server::InProcess(h) => h.addr.to_string(),
            Server::Process(_, a) => a.clone(),
        }
    }

    /// The token log (write times, due times) per request, then the server is stopped.
    fn finish(self) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
        match self {
            Server::InProcess(h) => {
                let logs = (h.token_write_times(), h.token_times());
                h.stop();
                logs
            }
            Server::Process(mut child, addr) => {
                let log = fetch_token_log(&addr);
                let _ = child.kill();
                let _ = child.wait();
                let column = |k: &str| -> Vec<Vec<u64>> {
                    serde_json::from_value(log[k].clone()).expect("token log columns")
                };
                (column("written"), column("paced"))
            }
        }
    }
}

/// `GET /v1/inferperf/token-log` from a server process.
fn fetch_token_log(addr: &str) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect for the token log");
    let req = format!(
        "GET /v1/inferperf/token-log HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    serde_json::from_slice(&raw[at + 4..]).expect("the token log is JSON")
}

/// Runs one profile at `concurrency` streams against a fresh server and prints one line.
fn measure(concurrency: u64) {
    let server = Server::start();
    let dir = std::env::temp_dir().join(format!("inferperf-accuracy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = profile(&server.addr(), concurrency, &dir);
    let failed = failed_requests(concurrency, &outcome.requests);
    let (shared, chunks) = inferperf::llm::shared_reads(&outcome.requests);
    // The client is judged against when each chunk was handed to the socket; how late that
    // was against the chunk's due time is the server's own lag, printed apart.
    let (sent, paced) = server.finish();
    let mut server_lag: Vec<i64> = sent
        .iter()
        .zip(&paced)
        .flat_map(|(w, p)| w.iter().zip(p).map(|(w, p)| *w as i64 - *p as i64))
        .collect();
    let export_path = outcome.dir.join("profile_export.json");
    let export: Value =
        serde_json::from_str(&std::fs::read_to_string(export_path).unwrap()).unwrap();
    let mut problems = Vec::new();
    let received = content_reads(&export, &mut problems);
    let ([mut delay, mut ttft_err, mut itl_err], matched) =
        compare(&received, &sent, &mut problems);
    // Requests the bench could not compare, and why (at most five named).
    for p in problems.iter().take(5) {
        eprintln!("{concurrency} streams: {p}");
    }
    if problems.len() > 5 {
        eprintln!(
            "{concurrency} streams: {} more not compared",
            problems.len() - 5
        );
    }
    println!(
        "{concurrency:>11}  {:>8}  {:>6}  {:>7}  {:>6}  {:>12.1}  {:>12.1}  {:>12.1}  {:>15.1}  {:>14.1}  {:>14.1}  {:>17.1}  {:>16.1}",
        outcome.requests.len(),
        failed,
        matched,
        delay.len(),
        pct(&mut delay, 50.0),
        pct(&mut delay, 99.0),
        pct(&mut delay, 100.0),
        pct(&mut ttft_err, 99.0),
        pct(&mut itl_err, 99.0),
        pct(&mut itl_err, 100.0),
        pct(&mut server_lag, 99.0),
        shared as f64 * 100.0 / chunks.max(1) as f64,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `inferperf profile` with one load worker, 4 requests per stream (at most 4,000, but at
/// least one per stream).
fn profile(addr: &str, concurrency: u64, dir: &Path) -> PointOutcome {
    let requests = (concurrency * 4).min(4000).max(concurrency);
    let args: Vec<OsString> = [
        "profile",
        "-m",
        "inferperf-llm",
        "-u",
        addr,
        "--streaming",
        "--quiet",
        "--concurrency",
        &concurrency.to_string(),
        "--request-count",
        &requests.to_string(),
        "--output-tokens-mean",
        &knob("OSL", 64).to_string(),
        "--synthetic-input-tokens-mean",
        "128",
        "--max-workers",
        "1",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let cfg = inferperf::llm::cli::parse(args).unwrap().unwrap();
    let mut sink = Vec::new();
    let mut outcome = inferperf::llm::run(&cfg, &mut sink).expect("profile runs");
    outcome.remove(0)
}

/// Failed requests have no complete token log to compare: counts them and says on stderr
/// what they were.
fn failed_requests(concurrency: u64, requests: &[LlmRequest]) -> usize {
    let mut failed: HashMap<String, (usize, String)> = HashMap::new();
    for e in requests.iter().filter_map(|r| r.error.as_ref()) {
        let entry = failed
            .entry(e.kind.clone())
            .or_insert((0, e.message.clone()));
        entry.0 += 1;
    }
    for (kind, (count, example)) in &failed {
        eprintln!("{concurrency} streams: {count} requests failed with {kind} (e.g. {example})");
    }
    failed.values().map(|(n, _)| n).sum()
}

/// Per request whose chunk count matches the server's log: every chunk's delay (client
/// time − server write time), the TTFT error, and every chunk gap's error, in ns; and how many
/// requests that was. Why any other request was left out goes to `problems`.
fn compare(
    received: &HashMap<u64, Vec<u64>>,
    sent: &[Vec<u64>],
    problems: &mut Vec<String>,
) -> ([Vec<i64>; 3], usize) {
    let (mut delay, mut ttft_err, mut itl_err) = (Vec::new(), Vec::new(), Vec::new());
    for (id, reads) in received {
        let Some(server_times) = sent.get(*id as usize) else {
            problems.push(format!("response id {id} is not in the server's log"));
            continue;
        };
        if server_times.len() != reads.len() || reads.len() < 2 {
            problems.push(format!(
                "response id {id}: {} content chunks read, {} written",
                reads.len(),
                server_times.len()
            ));
            continue;
        }
        for (r, s) in reads.iter().zip(server_times) {
            delay.push(*r as i64 - *s as i64);
        }
        // Measured TTFT (reads[0] - start) minus the server's (server_times[0] - start).
        ttft_err.push(reads[0] as i64 - server_times[0] as i64);
        // Every inter-chunk gap against the server's gap between the same two writes, so a
        // late chunk in the middle of a stream counts as much as a late first or last one.
        for (r, s) in reads.windows(2).zip(server_times.windows(2)) {
            itl_err.push(((r[1] as i64 - r[0] as i64) - (s[1] as i64 - s[0] as i64)).abs());
        }
    }
    let matched = ttft_err.len();
    ([delay, ttft_err, itl_err], matched)
}

/// Per response id (`chatcmpl-<log id>`): the read times of its content-bearing events.
fn content_reads(export: &Value, problems: &mut Vec<String>) -> HashMap<u64, Vec<u64>> {
    let mut out = HashMap::new();
    let requests = export["experiments"][0]["requests"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (k, r) in requests.iter().enumerate() {
        let stamps = r["response_timestamps"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let outputs = r["response_outputs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut id = None;
        let mut reads = Vec::new();
        for (t, o) in stamps.iter().zip(&outputs) {
            let text = o["response"].as_str().unwrap_or("");
            let Ok(event) = serde_json::from_str::<Value>(text.trim_start_matches("data: ")) else {
                continue;
            };
            id = id.or_else(|| {
                event["id"]
                    .as_str()
                    .and_then(|s| s.rsplit('-').next())
                    .and_then(|n| n.parse::<u64>().ok())
            });
            let content = event
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str);
            if content.is_some_and(|c| !c.is_empty()) {
                reads.push(t.as_u64().unwrap_or(0));
            }
        }
        match id {
            None => problems.push(format!(
                "export request {k}: no response id in its {} events",
                stamps.len()
            )),
            Some(id) => {
                if out.insert(id, reads).is_some() {
                    problems.push(format!("response id {id} appears twice in the export"));
                }
            }
        }
    }
    out
}

/// The p-th percentile (nearest rank) in µs of ns values; 100 is the maximum.
fn pct(v: &mut [i64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1] as f64 / 1000.0
}
