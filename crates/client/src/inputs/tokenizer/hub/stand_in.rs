//! A stand-in for the Hugging Face Hub's `resolve` endpoint, for tests: plain HTTP on an
//! ephemeral 127.0.0.1 port, answering as the Hub does (`X-Repo-Commit`, `X-Linked-Etag`,
//! a 302 to a second "CDN" path, a relative 307 for a renamed repository, 401 for a gated
//! one, 404 with `X-Error-Code`), and recording every request it gets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The commit every repository of the stand-in is at.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// The Hub's name (etag) for the served tokenizer.json blob.
pub const ETAG: &str = "5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee5f1c0ffee0";

/// A small WordLevel tokenizer.json: lower-cased words split on whitespace, 16 of them in
/// the vocabulary, anything else one `[UNK]`.
pub const TOKENIZER_JSON: &str = r#"{"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
    "rstrip": false, "normalized": false, "special": true}],
  "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "the": 1,
    "and": 2, "of": 3, "to": 4, "my": 5, ",": 6, ".": 7, "thy": 8, "i": 9, "in": 10,
    "that": 11, "thee": 12, "love": 13, "hello": 14, "world": 15}}}"#;

/// One request the stand-in received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
}

/// The running stand-in (the Hub and, on a second port, its "CDN"); stops when dropped.
pub struct StandIn {
    pub addr: SocketAddr,
    /// The second origin the Hub's 302 points to.
    pub cdn: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl StandIn {
    /// Serves, for any `ORG/NAME` or plain `NAME` (`gpt2`) not listed below,
    /// `tokenizer.json` at `main` or [`COMMIT`] with a 302 to the CDN port's `/cdn/blob` (the
    /// body, with the CDN's own ETag), and everything else (and everything of
    /// `ORG/no-tokenizer`) as a 404 `EntryNotFound` naming the commit. Special repositories:
    /// `gated/*` 401 `GatedRepo` without the token `hf_good`; `missing/*` 404
    /// `RepositoryNotFound`; `old/NAME` a relative 307 to `new/NAME`; `small/*` answers 200
    /// with the body directly and `ETag`; any revision other than `main` or the commit is 404
    /// `RevisionNotFound`.
    pub fn start() -> StandIn {
        let hub = TcpListener::bind("127.0.0.1:0").expect("bind stand-in");
        let cdn = TcpListener::bind("127.0.0.1:0").expect("bind stand-in CDN");
        let addr = hub.local_addr().unwrap();
        let cdn_addr = cdn.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = [hub, cdn]
            .into_iter()
            .map(|listener| {
                let (seen, stop) = (seen.clone(), stop.clone());
                std::thread::spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Ok(conn) = conn {
                            serve(conn, &seen, cdn_addr);
                        }
                    }
                })
            })
            .collect();
        StandIn {
            addr,
            cdn: cdn_addr,
            seen,
            stop,
            threads,
        }
    }

    /// `http://127.0.0.1:PORT`, for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        let _ = TcpStream::connect(self.cdn);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: TcpStream, seen: &Mutex<Vec<Seen>>, cdn: SocketAddr) {
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = text.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_string();
    let authorization = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.trim().to_string());
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        authorization: authorization.clone(),
    });
    let reply = answer(&path, authorization.as_deref(), cdn);
    let _ = conn.write_all(&reply);
}

fn reply(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn error(status: &str, code: &str) -> Vec<u8> {
    reply(
        status,
        &[("X-Error-Code", code.to_string())],
        b"{\"error\":\"no\"}",
    )
}

fn answer(path: &str, authorization: Option<&str>, cdn: SocketAddr) -> Vec<u8> {
    if path == "/cdn/blob" {
        let etag = ("ETag", "\"cdn-own-etag\"".to_string());
        return reply("200 OK", &[etag], TOKENIZER_JSON.as_bytes());
    }
    // /ORG/NAME/resolve/REV/FILE, or /NAME/resolve/REV/FILE for a name without an
    // organisation (`gpt2`), whose organisation is taken as empty.
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    let (org, name, rev, file) = match parts[..] {
        [org, name, "resolve", rev, file] => (org, name, rev, file),
        [name, "resolve", rev, file] => ("", name, rev, file),
        _ => return error("404 Not Found", "RepositoryNotFound"),
    };
    match org {
        "missing" => return error("404 Not Found", "RepositoryNotFound"),
        "gated" if authorization != Some("Bearer hf_good") => {
            return error("401 Unauthorized", "GatedRepo")
        }
        "old" => {
            let to = format!("/new/{name}/resolve/{rev}/{file}");
            return reply("307 Temporary Redirect", &[("Location", to)], b"");
        }
        _ => {}
    }
    if rev != "main" && rev != COMMIT {
        return error("404 Not Found", "RevisionNotFound");
    }
    let commit = ("X-Repo-Commit", COMMIT.to_string());
    if file != "tokenizer.json" || name == "no-tokenizer" {
        // The Hub names the commit it looked at, so a client can record the absence.
        let code = ("X-Error-Code", "EntryNotFound".to_string());
        return reply("404 Not Found", &[code, commit], b"{\"error\":\"no\"}");
    }
    if org == "small" {
        let etag = ("ETag", format!("\"{ETAG}\""));
        return reply("200 OK", &[commit, etag], TOKENIZER_JSON.as_bytes());
    }
    let linked = ("X-Linked-Etag", format!("\"{ETAG}\""));
    let to = ("Location", format!("http://{cdn}/cdn/blob"));
    reply("302 Found", &[commit, linked, to], b"")
}
