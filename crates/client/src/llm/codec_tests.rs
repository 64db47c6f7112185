//! `profile` reaches an endpoint through the registry alone: the test-only `example` kind
//! (one kind file and its line in the `registry!` list) is run by `--endpoint-type example`
//! against a small in-test HTTP server, which sees the bodies the kind's codec encodes and
//! answers in the kind's own reply shape, which only the kind's decoder reads.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::cli::parse;
use crate::run::kinds::reply::{decode_openai, Reply};

/// Each request the server received: its request line and its JSON body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// The example server's answer to every POST: four words in the example's own `words`
/// list, and a `text_output` of one word that the default (OpenAI-style) decoder would read
/// instead.
const REPLY: &[u8] = br#"{"words":["one","two","three","four"],"text_output":"five"}"#;

/// An HTTP/1.1 server answering every POST with [`REPLY`].
fn text_server() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Seen = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || serve(conn, &record));
        }
    });
    (addr, seen)
}

fn serve(conn: TcpStream, seen: &Seen) {
    let mut out = conn.try_clone().unwrap();
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        seen.lock()
            .unwrap()
            .push((line.trim_end().to_string(), body));
        let reply = REPLY;
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(reply).is_err() {
            return;
        }
    }
}

#[test]
fn the_example_endpoint_runs_from_its_registry_line() {
    let (addr, seen) = text_server();
    let dir = std::env::temp_dir().join(format!("inferperf-codec-example-{}", std::process::id()));
    let argv = [
        "profile",
        "-m",
        "m1",
        "--endpoint-type",
        "example",
        "-u",
        &addr,
        "--request-count",
        "3",
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "5",
        "--extra-inputs",
        "temperature:0",
        "--tokenizer",
        "cl100k_base",
        "--quiet",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ];
    let cfg = parse(argv.iter().map(Into::into).collect())
        .unwrap()
        .unwrap();
    assert_eq!(cfg.endpoint_type.name(), "example");
    let outcomes = super::run(&cfg, &mut Vec::new()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (line, body) in seen.iter() {
        assert_eq!(line, "POST /v1/example/m1 HTTP/1.1");
        let text = body["text"].as_str().unwrap();
        assert!(!text.is_empty(), "{body}");
        assert_eq!(
            *body,
            json!({"model": "m1", "text": text, "max_tokens": 5, "temperature": 0})
        );
    }
    let requests = &outcomes[0].requests;
    assert_eq!(requests.len(), 3);
    for r in requests {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.osl, 4, "the reply's four words, counted");
        assert_eq!(r.chunks.len(), 1, "one chunk: the whole reply");
        assert_eq!(
            r.chunks[0].arrival_ns, r.end_ns,
            "read when the reply completed"
        );
        assert_eq!(r.chunks[0].tokens, 4);
    }
    // The default decoder reads the other member of the same reply: the counts above came
    // from the example kind's own decoder.
    let default = decode_openai(&Reply {
        sse: false,
        ok: true,
        end_ns: 1,
        body: REPLY,
    });
    assert_eq!(default.text(), "five");
}
