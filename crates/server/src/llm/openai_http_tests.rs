//! OpenAI endpoints over real sockets: stream framing, chunk and token counts, both usage
//! layouts, pacing as a client measures it, concurrency, faults, and the plain endpoints.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::test_client::{get, post_json};
use crate::{start, Delay, OpenAiConfig, ServeConfig, ServerHandle};

const MODEL: &str = "inferperf-llm";

fn oai_server(openai: OpenAiConfig) -> ServerHandle {
    start(ServeConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        openai,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

fn paced(ttft_ms: u64, itl_ms: u64, tokens_per_chunk: u32) -> OpenAiConfig {
    OpenAiConfig {
        ttft: Delay::Fixed(Duration::from_millis(ttft_ms)),
        itl: Delay::Fixed(Duration::from_millis(itl_ms)),
        tokens_per_chunk,
        ..OpenAiConfig::default()
    }
}

/// A blocking client that reads Content-Length answers and chunked SSE streams, stamping
/// each SSE event with when its last byte arrived.
struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
    /// When the last read returned.
    read_at: Instant,
}

impl Reader {
    fn connect(addr: SocketAddr) -> Reader {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Reader {
            stream,
            buf: Vec::new(),
            read_at: Instant::now(),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Instant {
        self.stream.write_all(bytes).expect("write");
        Instant::now()
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).expect("read (timeout?)");
        assert!(n > 0, "connection closed early");
        self.read_at = Instant::now();
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Takes bytes up to and including `delimiter`.
    fn take_until(&mut self, delimiter: &[u8]) -> Vec<u8> {
        loop {
            if let Some(i) = self
                .buf
                .windows(delimiter.len())
                .position(|w| w == delimiter)
            {
                return self.buf.drain(..i + delimiter.len()).collect();
            }
            self.fill();
        }
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            self.fill();
        }
        self.buf.drain(..n).collect()
    }

    /// Status and head text of the next answer.
    fn head(&mut self) -> (u16, String) {
        let head = String::from_utf8(self.take_until(b"\r\n\r\n")).unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head)
    }

    /// A whole (Content-Length) answer: status and JSON body.
    fn whole(&mut self) -> (u16, Value) {
        let (status, head) = self.head();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .expect("Content-Length")
            .parse()
            .unwrap();
        (status, serde_json::from_slice(&self.take(len)).unwrap())
    }

    /// The events of a chunked SSE body, one per HTTP chunk, up to the terminator.
    fn events(&mut self) -> Vec<(Instant, String)> {
        let mut events = Vec::new();
        loop {
            let size_line = String::from_utf8(self.take_until(b"\r\n")).unwrap();
            let size = usize::from_str_radix(size_line.trim_end(), 16).expect("chunk size");
            let data = self.take(size + 2);
            if size == 0 {
                return events;
            }
            let text = String::from_utf8(data[..size].to_vec()).unwrap();
            assert!(
                text.ends_with("\n\n"),
                "one whole SSE event per chunk: {text:?}"
            );
            events.push((self.read_at, text));
        }
    }

    /// Sends a streaming request and reads its whole stream (head checked).
    fn stream(&mut self, path: &str, body: &Value) -> (Instant, Vec<(Instant, String)>) {
        let sent = self.send(&post_json(path, &body.to_string()));
        let (status, head) = self.head();
        assert_eq!(status, 200, "{head}");
        assert!(
            head.contains("Content-Type: text/event-stream\r\n"),
            "{head}"
        );
        assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
        (sent, self.events())
    }
}

/// The JSON of `data:` events (not `[DONE]`), with their arrival times.
fn chunks(events: &[(Instant, String)]) -> Vec<(Instant, Value)> {
    events
        .iter()
        .filter_map(|(at, e)| {
            let data = e.strip_prefix("data: ")?.trim_end();
            (data != "[DONE]").then(|| (*at, serde_json::from_str(data).expect("chunk JSON")))
        })
        .collect()
}

/// The text a chunk carries (chat delta content or completion text), if any.
fn chunk_text(chunk: &Value) -> Option<&str> {
    let choice = chunk["choices"].get(0)?;
    let text = choice["text"]
        .as_str()
        .or(choice["delta"]["content"].as_str())?;
    (!text.is_empty()).then_some(text)
}

fn gen_body(
    chat: bool,
    max_tokens: u32,
    stream: bool,
    include_usage: bool,
) -> (&'static str, Value) {
    let mut body = json!({"model": MODEL, "max_tokens": max_tokens, "stream": stream,
        "stream_options": {"include_usage": include_usage}});
    if chat {
        body["messages"] = json!([{"role": "user", "content": "three word prompt"}]);
        ("/v1/chat/completions", body)
    } else {
        body["prompt"] = json!("three word prompt");
        ("/v1/completions", body)
    }
}

#[test]
fn stream_chunk_and_token_counts_in_both_usage_layouts() {
    for (tokens_per_chunk, usage_on_last) in [(1, false), (3, false), (2, true)] {
        let server = oai_server(OpenAiConfig {
            usage_on_last,
            ..paced(0, 0, tokens_per_chunk)
        });
        let mut c = Reader::connect(server.addr);
        for (chat, max_tokens) in [(true, 7), (false, 6), (true, 1)] {
            let (path, body) = gen_body(chat, max_tokens, true, true);
            let (_, events) = c.stream(path, &body);
            assert_eq!(events.last().unwrap().1, "data: [DONE]\n\n");
            let all = chunks(&events);
            let content: Vec<&Value> = all
                .iter()
                .map(|c| &c.1)
                .filter(|c| chunk_text(c).is_some())
                .collect();
            let want_chunks = max_tokens.div_ceil(tokens_per_chunk) as usize;
            assert_eq!(
                content.len(),
                want_chunks,
                "{path} {max_tokens}/{tokens_per_chunk}"
            );
            let words: usize = content
                .iter()
                .map(|c| chunk_text(c).unwrap().split_whitespace().count())
                .sum();
            assert_eq!(words, max_tokens as usize);
            if chat {
                assert_eq!(all[0].1["choices"][0]["delta"]["role"], "assistant");
            }
            let last = content.last().unwrap();
            assert_eq!(last["choices"][0]["finish_reason"], "length");
            let usage = if usage_on_last {
                &last["usage"]
            } else {
                &all.last().unwrap().1["usage"]
            };
            assert_eq!(usage["completion_tokens"], max_tokens, "{usage}");
            assert_eq!(usage["prompt_tokens"], 3);
            let usage_only = all.iter().filter(|c| c.1["choices"] == json!([])).count();
            assert_eq!(usage_only, usize::from(!usage_on_last));
            let extra = usize::from(chat) + usage_only;
            assert_eq!(all.len(), want_chunks + extra);
        }
        // Without include_usage no chunk carries usage.
        let (path, body) = gen_body(false, 4, true, false);
        let (_, events) = c.stream(path, &body);
        assert!(chunks(&events).iter().all(|c| c.1.get("usage").is_none()));
        assert_eq!(server.token_times().len(), 4);
        assert_eq!(
            server.token_times()[0].len(),
            7usize.div_ceil(tokens_per_chunk as usize)
        );
        // The same log over HTTP, for benches that run the server as its own process.
        c.send(b"GET /v1/inferperf/token-log HTTP/1.1\r\nHost: x\r\n\r\n");
        let (status, log) = c.whole();
        assert_eq!(status, 200);
        assert_eq!(log["paced"], json!(server.token_times()));
        assert_eq!(log["written"], json!(server.token_write_times()));
    }
}

#[test]
fn whole_answers_carry_usage_and_pacing() {
    let server = oai_server(paced(40, 5, 2));
    let mut c = Reader::connect(server.addr);
    for chat in [true, false] {
        let (path, body) = gen_body(chat, 5, false, false);
        let sent = c.send(&post_json(path, &body.to_string()));
        let (status, answer) = c.whole();
        // TTFT + 2 ITLs for 3 chunks.
        assert!(
            sent.elapsed() >= Duration::from_millis(50),
            "{:?}",
            sent.elapsed()
        );
        assert_eq!(status, 200, "{answer}");
        let usage = &answer["usage"];
        assert_eq!(
            (
                usage["prompt_tokens"].as_u64(),
                usage["completion_tokens"].as_u64()
            ),
            (Some(3), Some(5))
        );
        assert_eq!(usage["total_tokens"], 8);
        let choice = &answer["choices"][0];
        let text = choice["message"]["content"]
            .as_str()
            .or(choice["text"].as_str())
            .unwrap();
        assert_eq!(text.split_whitespace().count(), 5);
    }
    let times = server.token_times();
    assert_eq!(times.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1]);
}

#[test]
fn ttft_and_itl_are_at_least_the_configured_values() {
    let (ttft, itl) = (Duration::from_millis(50), Duration::from_millis(5));
    let server = oai_server(paced(50, 5, 1));
    let mut c = Reader::connect(server.addr);
    let (path, body) = gen_body(true, 8, true, false);
    let (sent, events) = c.stream(path, &body);
    let content: Vec<Instant> = chunks(&events)
        .into_iter()
        .filter(|c| chunk_text(&c.1).is_some())
        .map(|c| c.0)
        .collect();
    assert_eq!(content.len(), 8);
    assert!(content[0] - sent >= ttft, "TTFT {:?}", content[0] - sent);
    // Every event can only arrive after the server paced it: the last one after TTFT + 7 ITLs.
    assert!(
        content[7] - sent >= ttft + 7 * itl,
        "{:?}",
        content[7] - sent
    );
    // (Client-side gaps between events are not checked: a late read can bunch events.)
    // The server's own send log: 8 stamps, each gap at least one ITL.
    let log = server.token_times();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].len(), 8);
    assert!(
        log[0]
            .windows(2)
            .all(|w| w[1] - w[0] >= itl.as_nanos() as u64),
        "{:?}",
        log[0]
    );
}

#[test]
fn two_hundred_concurrent_streams_complete() {
    // Serially these would take 200 x (50 + 7 x 5) ms = 17 s.
    let server = oai_server(paced(50, 5, 1));
    let started = Instant::now();
    let mut clients: Vec<Reader> = (0..200).map(|_| Reader::connect(server.addr)).collect();
    for c in &mut clients {
        let (path, body) = gen_body(false, 8, true, true);
        c.send(&post_json(path, &body.to_string()));
    }
    for c in &mut clients {
        let (status, _) = c.head();
        assert_eq!(status, 200);
        let events = c.events();
        assert_eq!(events.last().unwrap().1, "data: [DONE]\n\n");
        let words: usize = chunks(&events)
            .iter()
            .filter_map(|c| chunk_text(&c.1))
            .map(|t| t.split_whitespace().count())
            .sum();
        assert_eq!(words, 8);
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "{took:?}");
    let log = server.token_times();
    assert_eq!(log.len(), 200);
    assert!(log.iter().all(|t| t.len() == 8));
}

#[test]
fn error_event_ends_the_stream_and_the_connection_stays_usable() {
    let server = oai_server(paced(0, 0, 2));
    let mut c = Reader::connect(server.addr);
    let (path, mut body) = gen_body(true, 6, true, true);
    body["inferperf_fault"] = json!("error_event");
    let (_, events) = c.stream(path, &body);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(chunk_text(&chunks(&events)[1].1).is_some());
    let error = events[2]
        .1
        .strip_prefix("event: error\ndata: ")
        .expect("an error event");
    let error: Value = serde_json::from_str(error.trim_end()).unwrap();
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("injected"));
    c.send(&get("/v1/models"));
    assert_eq!(c.whole().0, 200);
}

#[test]
fn stall_pauses_mid_stream() {
    let server = oai_server(paced(0, 0, 1));
    let mut c = Reader::connect(server.addr);
    let (path, mut body) = gen_body(false, 4, true, false);
    body["stall_ms"] = json!(150);
    let (sent, events) = c.stream(path, &body);
    let at: Vec<Instant> = chunks(&events).iter().map(|c| c.0).collect();
    assert_eq!(at.len(), 4);
    // The stall sits before the third chunk.
    assert!(
        at[2] - sent >= Duration::from_millis(150),
        "{:?}",
        at[2] - sent
    );
    let log = &server.token_times()[0];
    assert!(log[2] - log[1] >= 150_000_000, "{log:?}");
    assert!(log[1] - log[0] < 100_000_000, "{log:?}");
}

#[test]
fn models_embeddings_errors_and_pipelining() {
    let server = oai_server(OpenAiConfig {
        model: "tiny".into(),
        ..OpenAiConfig::default()
    });
    let mut c = Reader::connect(server.addr);
    c.send(&get("/v1/models"));
    let (status, models) = c.whole();
    assert_eq!(
        (status, models["data"][0]["id"].as_str()),
        (200, Some("tiny"))
    );
    let body = json!({"model": "tiny", "input": ["a b c", "d"]}).to_string();
    c.send(&post_json("/v1/embeddings", &body));
    let (status, emb) = c.whole();
    assert_eq!(status, 200, "{emb}");
    let data = emb["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert!(data
        .iter()
        .all(|d| d["embedding"].as_array().unwrap().len() == 8));
    assert_eq!(emb["usage"]["prompt_tokens"], 4);
    for (path, body, status) in [
        ("/v1/chat/completions", "{not json", 400),
        ("/v1/completions", r#"{"model":"other","prompt":"x"}"#, 404),
        ("/v1/embeddings", r#"{"model":"tiny"}"#, 400),
    ] {
        c.send(&post_json(path, body));
        let (got, answer) = c.whole();
        assert_eq!(got, status, "{path}: {answer}");
        assert!(answer["error"]["message"].is_string(), "{answer}");
        assert!(answer["error"]["type"].is_string(), "{answer}");
    }
    // A stream and a request pipelined behind it are answered in order.
    let stream = json!({"model": "tiny", "prompt": "p", "max_tokens": 3, "stream": true});
    let mut burst = post_json("/v1/completions", &stream.to_string());
    burst.extend_from_slice(&get("/v1/models"));
    c.send(&burst);
    assert_eq!(c.head().0, 200);
    assert_eq!(c.events().len(), 4);
    assert_eq!(c.whole().0, 200);
    assert_eq!(server.counters().http_requests, 7);
}
