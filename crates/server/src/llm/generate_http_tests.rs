//! Triton's generate extension and the LLM's model endpoints over real sockets: event and
//! token counts, framing (no `[DONE]`), pacing as the server logged it, whole answers, error
//! bodies, faults, and that the hosted models' endpoints are unchanged.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::test_client::{get, post_json};
use crate::{start, Delay, OpenAiConfig, ServeConfig, ServerHandle};

const GENERATE: &str = "/v2/models/inferperf-llm/generate";
const STREAM: &str = "/v2/models/inferperf-llm/generate_stream";

fn llm_server(ttft_ms: u64, itl_ms: u64, tokens_per_chunk: u32) -> ServerHandle {
    let ms = Duration::from_millis;
    start(ServeConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        openai: OpenAiConfig {
            ttft: Delay::Fixed(ms(ttft_ms)),
            itl: Delay::Fixed(ms(itl_ms)),
            tokens_per_chunk,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    })
    .expect("server starts")
}

/// A blocking client reading Content-Length answers and chunked event streams.
struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    fn connect(addr: SocketAddr) -> Reader {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    fn take_until(&mut self, delimiter: &[u8]) -> Vec<u8> {
        loop {
            let found = self
                .buf
                .windows(delimiter.len())
                .position(|w| w == delimiter);
            if let Some(i) = found {
                return self.buf.drain(..i + delimiter.len()).collect();
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk).expect("read (timeout?)");
            assert!(n > 0, "connection closed early");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            let mut chunk = [0u8; 16384];
            let got = self.stream.read(&mut chunk).expect("read (timeout?)");
            assert!(got > 0, "connection closed early");
            self.buf.extend_from_slice(&chunk[..got]);
        }
        self.buf.drain(..n).collect()
    }

    /// Status and head of the next answer.
    fn head(&mut self) -> (u16, String) {
        let head = String::from_utf8(self.take_until(b"\r\n\r\n")).unwrap();
        (head.split(' ').nth(1).unwrap().parse().unwrap(), head)
    }

    /// A whole answer: status, head and JSON body.
    fn whole(&mut self) -> (u16, String, Value) {
        let (status, head) = self.head();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .expect("Content-Length")
            .parse()
            .unwrap();
        let body = serde_json::from_slice(&self.take(len)).unwrap();
        (status, head, body)
    }

    /// The events of a chunked body (one per HTTP chunk) up to the terminator.
    fn events(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        loop {
            let size_line = String::from_utf8(self.take_until(b"\r\n")).unwrap();
            let size = usize::from_str_radix(size_line.trim_end(), 16).expect("chunk size");
            let data = self.take(size + 2);
            if size == 0 {
                return events;
            }
            events.push(String::from_utf8(data[..size].to_vec()).unwrap());
        }
    }

    /// Posts a generate_stream request; returns the head and the events' JSON.
    fn stream(&mut self, body: &Value) -> (String, Vec<Value>) {
        self.send(&post_json(STREAM, &body.to_string()));
        let (status, head) = self.head();
        assert_eq!(status, 200, "{head}");
        let events = self.events();
        let values = events
            .iter()
            .map(|e| {
                let data = e.strip_prefix("data: ").expect("a data event");
                assert!(data.ends_with("\n\n"), "one whole event per chunk: {e:?}");
                serde_json::from_str(data.trim_end()).expect("event JSON")
            })
            .collect();
        (head, values)
    }
}

fn words(events: &[Value]) -> usize {
    events
        .iter()
        .map(|e| {
            e["text_output"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
        })
        .sum()
}

#[test]
fn stream_sends_one_event_per_chunk_without_done() {
    for tokens_per_chunk in [1, 3] {
        let server = llm_server(0, 0, tokens_per_chunk);
        let mut c = Reader::connect(server.addr);
        for max_tokens in [1, 7, 9] {
            let body = json!({"text_input": "a b c", "max_tokens": max_tokens, "stream": true,
                "temperature": 0.1});
            let (head, events) = c.stream(&body);
            assert!(
                head.contains("Content-Type: text/event-stream; charset=utf-8\r\n"),
                "{head}"
            );
            assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
            let want = (max_tokens as u32).div_ceil(tokens_per_chunk) as usize;
            assert_eq!(events.len(), want, "{max_tokens}/{tokens_per_chunk}");
            assert_eq!(words(&events), max_tokens);
            for e in &events {
                let mut keys: Vec<&String> = e.as_object().unwrap().keys().collect();
                keys.sort();
                assert_eq!(keys, ["model_name", "model_version", "text_output"]);
                assert_eq!(
                    (e["model_name"].as_str(), e["model_version"].as_str()),
                    (Some("inferperf-llm"), Some("1"))
                );
            }
        }
        let counts: Vec<usize> = server.token_times().iter().map(Vec::len).collect();
        let want: Vec<usize> = [1u32, 7, 9]
            .iter()
            .map(|n| n.div_ceil(tokens_per_chunk) as usize)
            .collect();
        assert_eq!(counts, want);
    }
}

#[test]
fn stream_is_paced_like_the_openai_stream() {
    let (ttft_ms, itl_ms) = (30u64, 4u64);
    let server = llm_server(ttft_ms, itl_ms, 2);
    let mut c = Reader::connect(server.addr);
    let (_, events) = c.stream(&json!({"text_input": "x", "parameters": {"max_tokens": 8}}));
    assert_eq!(events.len(), 4);
    // The same request through /v1/completions: the same number of paced chunks.
    let oai = json!({"model": "inferperf-llm", "prompt": "x", "max_tokens": 8, "stream": true});
    c.send(&post_json("/v1/completions", &oai.to_string()));
    assert_eq!(c.head().0, 200);
    assert_eq!(c.events().len(), 4 + 1, "4 chunks and [DONE]");
    let log = server.token_times();
    assert_eq!(log.len(), 2);
    assert_eq!((log[0].len(), log[1].len()), (4, 4));
    let itl_ns = itl_ms * 1_000_000;
    for times in &log {
        assert!(times.windows(2).all(|w| w[1] - w[0] >= itl_ns), "{times:?}");
    }
}

#[test]
fn whole_generate_answers_once_after_the_generation_time() {
    let server = llm_server(20, 5, 1);
    let mut c = Reader::connect(server.addr);
    let started = std::time::Instant::now();
    let body = json!({"text_input": "one two", "max_tokens": 3, "stream": true});
    c.send(&post_json(GENERATE, &body.to_string()));
    let (status, head, answer) = c.whole();
    // TTFT + 2 ITLs: the server cannot answer earlier.
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Type: application/json\r\n"),
        "{head}"
    );
    assert_eq!(
        answer,
        json!({"model_name": "inferperf-llm", "model_version": "1",
            "text_output": " the of and"})
    );
    c.send(&post_json(
        "/v2/models/inferperf-llm/versions/1/generate",
        r#"{"text_input":"x"}"#,
    ));
    let (status, _, answer) = c.whole();
    assert_eq!(status, 200);
    assert_eq!(words(&[answer]), 16, "the OpenAI default length");
    let counts: Vec<usize> = server.token_times().iter().map(Vec::len).collect();
    assert_eq!(counts, vec![1, 1]);
}

#[test]
fn bad_requests_get_triton_error_bodies() {
    let server = llm_server(0, 0, 1);
    let mut c = Reader::connect(server.addr);
    let cases: [(&str, &str, u16, &str); 6] = [
        (GENERATE, "{not json", 400, "not valid JSON"),
        (
            STREAM,
            r#"{"max_tokens":2}"#,
            400,
            "'text_input' is required",
        ),
        (
            GENERATE,
            r#"{"text_input":"a","max_tokens":-1}"#,
            400,
            "'max_tokens'",
        ),
        (
            "/v2/models/other/generate",
            r#"{"text_input":"a"}"#,
            404,
            "'other' is not found",
        ),
        (
            "/v2/models/simple/generate_stream",
            r#"{"text_input":"a"}"#,
            400,
            "generate",
        ),
        (
            "/v2/models/inferperf-llm/versions/3/generate",
            r#"{"text_input":"a"}"#,
            404,
            "version 3",
        ),
    ];
    for (path, body, status, needle) in cases {
        c.send(&post_json(path, body));
        let (got, head, answer) = c.whole();
        assert_eq!(got, status, "{path}: {answer}");
        assert!(
            head.contains("Content-Type: application/json\r\n"),
            "{head}"
        );
        let error = answer["error"].as_str().expect("a string error");
        assert!(error.contains(needle), "{path}: {error}");
    }
    assert!(server.token_times().is_empty(), "no generation started");
    // The connection is still usable, and a stream with the error fault ends with the
    // error object after its first chunk.
    let body = json!({"text_input": "a", "max_tokens": 5, "inferperf_fault": "error_event"});
    let (_, events) = c.stream(&body);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(words(&events[..1]), 1);
    assert!(events[1]["error"].as_str().unwrap().contains("injected"));
}

#[test]
fn llm_model_endpoints_and_unchanged_statistics() {
    let server = llm_server(0, 0, 1);
    let mut c = Reader::connect(server.addr);
    c.send(&get("/v2/models/inferperf-llm"));
    let (status, _, metadata) = c.whole();
    assert_eq!(status, 200);
    assert_eq!(metadata["name"], "inferperf-llm");
    let inputs: Vec<&str> = metadata["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["text_input", "max_tokens", "stream"]);
    c.send(&get("/v2/models/inferperf-llm/versions/1/config"));
    let (status, _, config) = c.whole();
    assert_eq!(status, 200);
    assert_eq!(config["model_transaction_policy"]["decoupled"], true);
    c.send(&get("/v2/models/inferperf-llm/ready"));
    let (status, head) = c.head();
    assert_eq!(status, 200);
    assert!(head.contains("Content-Length: 0\r\n"), "{head}");
    c.send(&post_json("/v2/models/inferperf-llm/infer", "{}"));
    let (status, _, refusal) = c.whole();
    assert_eq!(status, 400);
    assert!(refusal["error"].as_str().unwrap().contains("decoupled"));
    c.send(&get("/v2/models/stats"));
    let (status, _, stats) = c.whole();
    assert_eq!(status, 200);
    assert_eq!(stats["model_stats"].as_array().unwrap().len(), 7);
}
