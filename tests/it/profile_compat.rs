//! `inferperf profile` with the command lines of GenAI-Perf and AIPerf against the in-process
//! reference server: https, `--extra-inputs` in both forms for every endpoint type the server
//! serves (kserve included), `--api-key`, `--backend`, deterministic output lengths, and
//! exact-length prompts with a tokenizer whose decoding does not round-trip. What the server
//! received is read from a relay between client and server that keeps every byte sent.

use crate::common::pki::Pki;
use crate::common::temp_dir;
use crate::run_profile::MODEL;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inferperf::llm::{self, PointOutcome};
use inferperf::protocol::grpc::pb::inference as pb;
use inferperf::server::{self, OpenAiConfig, ServeConfig, ServerHandle, TlsFiles};
use prost::Message;
use serde_json::{json, Value};

/// A relay never lives longer than this.
const RELAY_LIFETIME: Duration = Duration::from_secs(60);

/// The bytes a client sent on one connection.
type SentLog = Arc<Mutex<Vec<u8>>>;

/// Forwards every connection to `upstream` and keeps the bytes each client sent.
struct Relay {
    addr: SocketAddr,
    sent: Arc<Mutex<Vec<SentLog>>>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let sent: Arc<Mutex<Vec<SentLog>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, halt) = (sent.clone(), stop.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + RELAY_LIFETIME;
            while !halt.load(Ordering::Relaxed) && Instant::now() < end {
                match listener.accept() {
                    Ok((client, _)) => {
                        let log = Arc::new(Mutex::new(Vec::new()));
                        kept.lock().unwrap().push(log.clone());
                        relay(client, upstream, log);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Relay { addr, sent, stop }
    }

    /// The bytes sent on each connection so far.
    fn sent(&self) -> Vec<Vec<u8>> {
        let conns = self.sent.lock().unwrap();
        conns.iter().map(|c| c.lock().unwrap().clone()).collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn relay(client: TcpStream, upstream: SocketAddr, log: SentLog) {
    client.set_nonblocking(false).unwrap();
    let server = TcpStream::connect(upstream).unwrap();
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (mut s_read, mut c_write) = (server, client);
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        while let Ok(n @ 1..) = c_read.read(&mut buf) {
            log.lock().unwrap().extend_from_slice(&buf[..n]);
            if s_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut s_read, &mut c_write);
        let _ = c_write.shutdown(Shutdown::Write);
    });
}

/// HTTP/1.1 requests in the bytes of one connection: (head, body).
fn http_requests(mut bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).to_string();
        let len = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        let body_end = (end + 4 + len).min(bytes.len());
        out.push((head, bytes[end + 4..body_end].to_vec()));
        bytes = &bytes[body_end..];
    }
    out
}

/// The JSON bodies of every POST the relay saw.
fn posted_bodies(relay: &Relay) -> Vec<(String, Value)> {
    relay
        .sent()
        .iter()
        .flat_map(|c| http_requests(c))
        .filter(|(head, _)| head.starts_with("POST "))
        .map(|(head, body)| (head, serde_json::from_slice(&body).unwrap()))
        .collect()
}

/// The `ModelInferRequest`s in the HTTP/2 DATA frames of every connection.
fn grpc_requests(relay: &Relay) -> Vec<pb::ModelInferRequest> {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut out = Vec::new();
    for conn in relay.sent() {
        let Some(mut rest) = conn.strip_prefix(PREFACE) else {
            continue;
        };
        let mut streams: HashMap<u32, Vec<u8>> = HashMap::new();
        while rest.len() >= 9 {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            let (kind, flags) = (rest[3], rest[4]);
            let id = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
            let Some(payload) = rest.get(9..9 + len) else {
                break;
            };
            if kind == 0 {
                let data = if flags & 0x8 != 0 {
                    &payload[1..payload.len() - payload[0] as usize]
                } else {
                    payload
                };
                streams.entry(id).or_default().extend_from_slice(data);
            }
            rest = &rest[9 + len..];
        }
        for data in streams.values() {
            let mut at = data.as_slice();
            while at.len() >= 5 {
                let n = u32::from_be_bytes([at[1], at[2], at[3], at[4]]) as usize;
                let Some(msg) = at.get(5..5 + n) else { break };
                if let Ok(req) = pb::ModelInferRequest::decode(msg) {
                    if req.inputs.iter().any(|i| i.name == "text_input") {
                        out.push(req);
                    }
                }
                at = &at[5 + n..];
            }
        }
    }
    out
}

fn start_llm(tls: Option<TlsFiles>) -> ServerHandle {
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        grpc_addr: Some("127.0.0.1:0".parse().unwrap()),
        openai: OpenAiConfig::paced(Duration::from_millis(1), Duration::from_millis(1)),
        tls,
        ..ServeConfig::default()
    };
    server::start(cfg).expect("reference server starts")
}

/// Runs `profile -m MODEL --artifact-dir DIR --quiet ARGS`.
fn profile(dir: &Path, args: &[&str]) -> inferperf::error::Result<(Vec<PointOutcome>, String)> {
    let mut argv: Vec<OsString> = vec!["profile".into(), "-m".into(), MODEL.into()];
    argv.extend(["--artifact-dir".into(), dir.as_os_str().to_owned()]);
    argv.push("--quiet".into());
    argv.extend(args.iter().map(OsString::from));
    let cfg = llm::cli::parse(argv)?.expect("a run, not help");
    let mut out = Vec::new();
    let outcomes = llm::run(&cfg, &mut out)?;
    Ok((outcomes, String::from_utf8(out).unwrap()))
}

#[test]
fn https_profile_reaches_the_server_and_reports_numbers() {
    let pki = Pki::new("profile-https");
    let files = TlsFiles {
        cert_chain: pki.server_cert.clone(),
        key: pki.server_key.clone(),
        client_ca: None,
    };
    let server = start_llm(Some(files));
    let dir = temp_dir("profile-https");
    let url = format!("https://{}", server.addr);
    let ca = pki.ca.display().to_string();
    let (outcomes, stdout) = profile(
        &dir,
        &[
            "-u",
            &url,
            "--ssl-https-ca-certificates-file",
            &ca,
            "--streaming",
            "--request-count",
            "6",
            "--output-tokens-mean",
            "4",
            "--tokenizer",
            "cl100k_base",
        ],
    )
    .unwrap();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 6);
    assert!(reqs.iter().all(|r| r.ok() && r.osl == 4), "{reqs:?}");
    assert_eq!(
        server.token_times().len(),
        6,
        "the server answered every request"
    );
    assert!(stdout.contains("Time To First Token (ms)"), "{stdout}");
    // kserve over https: gRPC over TLS to the server's gRPC port.
    let grpcs = format!("https://{}", server.grpc_addr.unwrap());
    let (outcomes, _) = profile(
        &dir,
        &[
            "-u",
            &grpcs,
            "--ssl-https-ca-certificates-file",
            &ca,
            "--endpoint-type",
            "kserve",
            "--streaming",
            "--request-count",
            "3",
            "--output-tokens-mean",
            "4",
            "--tokenizer",
            "cl100k_base",
        ],
    )
    .unwrap();
    assert!(outcomes[0].requests.iter().all(|r| r.ok() && r.osl == 4));
    assert_eq!(server.token_times().len(), 9);
    // A CA that did not sign the server's certificate: the handshake fails, and says so.
    let other = pki.other_ca.display().to_string();
    let err = profile(
        &dir,
        &[
            "-u",
            &url,
            "--ssl-https-ca-certificates-file",
            &other,
            "--request-count",
            "2",
        ],
    )
    .unwrap_err();
    assert!(
        err.msg.to_lowercase().contains("certificate"),
        "{}",
        err.msg
    );
    assert_eq!(server.token_times().len(), 9, "nothing more was answered");
    // A CA file that is not one: a usage error naming the flag and the file.
    let bad = pki.dir.join("bad-ca.pem");
    std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    let bad = bad.display().to_string();
    let err = profile(
        &dir,
        &["-u", &url, "--ssl-https-ca-certificates-file", &bad],
    )
    .unwrap_err();
    assert_eq!(err.exit_code(), 99);
    assert!(
        err.msg.contains("--ssl-https-ca-certificates-file") && err.msg.contains(&bad),
        "{}",
        err.msg
    );
    server.stop();
}

#[test]
fn extra_inputs_and_api_key_reach_every_http_endpoint() {
    let server = start_llm(None);
    let relay = Relay::start(server.addr);
    let url = relay.addr.to_string();
    let dir = temp_dir("profile-extra-http");
    for kind in ["chat", "completions", "embeddings", "generate"] {
        let (outcomes, _) = profile(
            &dir,
            &[
                "-u",
                &url,
                "--endpoint-type",
                kind,
                "--request-count",
                "2",
                "--tokenizer",
                "cl100k_base",
                "--synthetic-input-tokens-mean",
                "8",
                "--extra-inputs",
                r#"{"temperature":0.7,"top_p":0.9}"#,
                "--extra-inputs",
                "stop:a:b",
                "--api-key",
                "sk-test-1",
            ],
        )
        .unwrap();
        assert!(outcomes[0].requests.iter().all(|r| r.ok()), "{kind}");
    }
    let bodies = posted_bodies(&relay);
    assert_eq!(bodies.len(), 8, "two requests per endpoint type");
    for (head, body) in &bodies {
        assert_eq!(body["temperature"], json!(0.7), "{head}");
        assert_eq!(body["top_p"], json!(0.9), "{head}");
        assert_eq!(body["stop"], json!("a:b"), "{head}");
        assert!(
            head.contains("\r\nAuthorization: Bearer sk-test-1"),
            "{head}"
        );
    }
    let paths: Vec<&str> = bodies
        .iter()
        .map(|(h, _)| h.split(' ').nth(1).unwrap())
        .collect();
    assert!(paths.contains(&"/v1/embeddings") && paths.iter().any(|p| p.contains("generate")));
    // GenAI-Perf's -b: three texts per embeddings request, all different.
    let (outcomes, _) = profile(
        &dir,
        &[
            "-u",
            &url,
            "--endpoint-type",
            "embeddings",
            "-b",
            "3",
            "--request-count",
            "2",
            "--tokenizer",
            "cl100k_base",
            "--synthetic-input-tokens-mean",
            "8",
        ],
    )
    .unwrap();
    assert!(outcomes[0].requests.iter().all(|r| r.ok()));
    let bodies = posted_bodies(&relay);
    let batched = &bodies[8..];
    assert_eq!(batched.len(), 2);
    for (_, body) in batched {
        let texts: Vec<&str> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(texts.len(), 3, "{body}");
        assert!(texts[0] != texts[1] && texts[1] != texts[2], "{texts:?}");
    }
    server.stop();
}

#[test]
fn kserve_gets_extra_inputs_and_deterministic_lengths_as_tensors() {
    let server = start_llm(None);
    let relay = Relay::start(server.grpc_addr.unwrap());
    let url = relay.addr.to_string();
    let dir = temp_dir("profile-extra-kserve");
    let common = [
        "-u",
        &url,
        "--endpoint-type",
        "kserve",
        "--streaming",
        "--request-count",
        "3",
        "--tokenizer",
        "cl100k_base",
        "--output-tokens-mean",
        "5",
        "--output-tokens-mean-deterministic",
        "--extra-inputs",
        r#"{"temperature":0.25,"top_k":4}"#,
        "--extra-inputs",
        "beam_width:1",
    ];
    let (outcomes, _) = profile(&dir, &common).unwrap();
    assert!(outcomes[0].requests.iter().all(|r| r.ok() && r.osl == 5));
    let reqs = grpc_requests(&relay);
    assert_eq!(reqs.len(), 3);
    for req in &reqs {
        let get = |name: &str| {
            let i = req
                .inputs
                .iter()
                .position(|t| t.name == name)
                .unwrap_or_else(|| {
                    panic!(
                        "{name} missing from {:?}",
                        req.inputs.iter().map(|t| &t.name).collect::<Vec<_>>()
                    )
                });
            (
                req.inputs[i].datatype.clone(),
                req.raw_input_contents[i].clone(),
            )
        };
        assert_eq!(
            get("max_tokens"),
            ("INT32".into(), 5i32.to_le_bytes().to_vec())
        );
        assert_eq!(
            get("min_length"),
            ("INT32".into(), 5i32.to_le_bytes().to_vec())
        );
        assert_eq!(
            get("temperature"),
            ("FP32".into(), 0.25f32.to_le_bytes().to_vec())
        );
        assert_eq!(get("top_k"), ("INT32".into(), 4i32.to_le_bytes().to_vec()));
        assert_eq!(
            get("beam_width"),
            ("INT32".into(), 1i32.to_le_bytes().to_vec())
        );
        assert_eq!(get("exclude_input_in_output"), ("BOOL".into(), vec![1]));
    }
    // vLLM's backend: the lengths travel in `sampling_parameters`.
    let mut vllm: Vec<&str> = common.to_vec();
    vllm.extend(["--backend", "vllm"]);
    let before = grpc_requests(&relay).len();
    let _ = profile(&dir, &vllm).unwrap();
    let reqs = grpc_requests(&relay);
    assert_eq!(reqs.len(), before + 3);
    let vllm_reqs: Vec<_> = reqs
        .iter()
        .filter(|r| r.inputs.iter().any(|t| t.name == "sampling_parameters"))
        .collect();
    assert_eq!(vllm_reqs.len(), 3);
    for req in vllm_reqs {
        let i = req
            .inputs
            .iter()
            .position(|t| t.name == "sampling_parameters")
            .unwrap();
        let params: Value = serde_json::from_slice(&req.raw_input_contents[i][4..]).unwrap();
        assert_eq!(params, json!({"max_tokens": "5", "min_tokens": "5"}));
        assert!(!req
            .inputs
            .iter()
            .any(|t| t.name == "max_tokens" || t.name == "min_length"));
        assert!(req.inputs.iter().any(|t| t.name == "temperature"));
    }
    server.stop();
}

/// A tokenizer.json with the property of the GuideLLM mock server's own: whitespace is a
/// token of its own that the vocabulary lacks, and with no decoder ids decode joined by
/// spaces, so decoding never gives back a text of the same length.
fn write_lossy_tokenizer(dir: &Path) -> String {
    let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
        "strip_accents": null, "lowercase": true},
      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]|\\s+"},
        "behavior": "Isolated", "invert": false},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[PAD]": 0, "[UNK]": 1,
        "the": 2, "and": 3, "of": 4, "to": 5, "my": 6, "thy": 7, "thee": 8, "love": 9,
        ",": 10, ".": 11, "[": 12, "]": 13, "i": 14, "in": 15, "that": 16}}}"#;
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, json).unwrap();
    path.display().to_string()
}

#[test]
fn exact_prompt_lengths_with_a_lossy_tokenizer() {
    let server = start_llm(None);
    let relay = Relay::start(server.addr);
    let url = relay.addr.to_string();
    let dir = temp_dir("profile-lossy-tokenizer");
    let tokenizer = write_lossy_tokenizer(&dir);
    let tk = inferperf::inputs::tokenizer::Tokenizer::load(&tokenizer).unwrap();
    for (isl, seed) in [("64", "0"), ("13", "5"), ("300", "9")] {
        let (outcomes, _) = profile(
            &dir,
            &[
                "-u",
                &url,
                "--tokenizer",
                &tokenizer,
                "--synthetic-input-tokens-mean",
                isl,
                "--num-prompts",
                "12",
                "--request-count",
                "12",
                "--random-seed",
                seed,
                "--output-tokens-mean",
                "2",
                "--concurrency",
                "4",
            ],
        )
        .unwrap();
        let want: u64 = isl.parse().unwrap();
        assert!(
            outcomes[0].requests.iter().all(|r| r.isl == want),
            "isl {isl}"
        );
    }
    let bodies = posted_bodies(&relay);
    assert_eq!(bodies.len(), 36);
    let mut lengths: Vec<usize> = bodies
        .iter()
        .map(|(_, b)| tk.count(b["messages"][0]["content"].as_str().unwrap()))
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    assert_eq!(
        lengths,
        [13, 64, 300],
        "what the server received, counted again"
    );
    server.stop();
}
