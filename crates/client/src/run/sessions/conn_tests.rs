use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::{self, JoinHandle};

use super::*;
use crate::measure::record::framed_responses;

/// What the canned server does with one request: write these pieces, pausing `gap` between
/// them; `close` afterwards ends the connection.
struct Answer {
    pieces: Vec<Vec<u8>>,
    gap: Duration,
    close: bool,
}

fn answer(pieces: &[&[u8]]) -> Answer {
    Answer {
        pieces: pieces.iter().map(|p| p.to_vec()).collect(),
        gap: Duration::ZERO,
        close: false,
    }
}

/// A loopback server taking one connection per entry of `conns`, answering that
/// connection's requests in order; the handle gives the number of requests it read.
fn serve(conns: Vec<Vec<Answer>>) -> (String, JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let mut requests = 0;
        for answers in conns {
            let (mut sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            for a in answers {
                if !read_request(&mut sock) {
                    break;
                }
                requests += 1;
                for (i, piece) in a.pieces.iter().enumerate() {
                    if i > 0 {
                        thread::sleep(a.gap);
                    }
                    let _ = sock.write_all(piece);
                }
                if a.close {
                    break;
                }
            }
        }
        requests
    });
    (address, handle)
}

/// Reads one request (head and `Content-Length` body); false at EOF.
fn read_request(sock: &mut TcpStream) -> bool {
    let mut data = Vec::new();
    let mut byte = [0u8; 1];
    while !data.ends_with(b"\r\n\r\n") {
        match sock.read(&mut byte) {
            Ok(1) => data.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&data).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body).is_ok()
}

fn conn(address: &str) -> SessionConn {
    SessionConn::new(Dest {
        address: address.to_string(),
        tls: None,
        connect_timeout: Duration::from_secs(2),
        idle_limit: Duration::from_secs(5),
    })
}

const REQUEST: &[u8] =
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}";

fn never() -> bool {
    false
}

fn json_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One SSE event as one HTTP chunk.
fn chunk(event: &str) -> Vec<u8> {
    format!("{:x}\r\n{event}\r\n", event.len()).into_bytes()
}

#[test]
fn whole_answers_reuse_one_connection() {
    let body = r#"{"choices":[{"message":{"role":"assistant","content":" the of"}}]}"#;
    let ok = json_answer("200 OK", body);
    let (address, server) = serve(vec![vec![answer(&[&ok]), answer(&[&ok])]]);
    let clock = Clock::new();
    let mut c = conn(&address);
    for _ in 0..2 {
        let got = c.exchange(REQUEST, &clock, &never);
        assert_eq!(got.error, None);
        assert!(got.record.ok && !got.record.sse);
        assert_eq!(got.record.responses, 1);
        assert_eq!(got.reply, " the of");
        assert_eq!(got.body, body.as_bytes());
        let r = got.record;
        assert!(r.start_ns <= r.send_end_ns && r.send_end_ns <= r.recv_start_ns);
        assert!(r.recv_start_ns <= r.end_ns);
    }
    assert_eq!(
        server.join().unwrap(),
        2,
        "both turns on the one connection"
    );
}

#[test]
fn streamed_answer_gives_one_stamped_response_per_event() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                 Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    let e1 = chunk("data: {\"choices\":[{\"delta\":{\"content\":\" a\"}}]}\n\n");
    let e2 = chunk("data: {\"choices\":[{\"delta\":{\"content\":\" b\"}}]}\n\n");
    let end = [chunk("data: [DONE]\n\n"), b"0\r\n\r\n".to_vec()].concat();
    let streamed = Answer {
        pieces: vec![[head, e1].concat(), e2, end],
        gap: Duration::from_millis(30),
        close: false,
    };
    let (address, server) = serve(vec![vec![streamed]]);
    let clock = Clock::new();
    let got = conn(&address).exchange(REQUEST, &clock, &never);
    assert_eq!(got.error, None);
    assert!(got.record.ok && got.record.sse);
    assert_eq!(got.reply, " a b");
    let events: Vec<(u64, Vec<u8>)> = framed_responses(&got.body)
        .map(|(t, p)| (t, p.to_vec()))
        .collect();
    assert_eq!(events.len(), 3, "two events and the null [DONE]");
    assert!(events[2].1.is_empty());
    // The pieces were 30 ms apart; each event carries its own read's time.
    assert!(events[1].0 >= events[0].0 + 20_000_000, "{events:?}");
    assert!(events[2].0 >= events[1].0 + 20_000_000, "{events:?}");
    assert_eq!(got.record.responses, 2);
    assert_eq!(got.record.recv_start_ns, events[0].0);
    assert_eq!(
        got.record.end_ns, events[1].0,
        "latency ends at the last data event"
    );
    server.join().unwrap();
}

#[test]
fn failures_name_the_cause() {
    let not_found = json_answer("404 Not Found", r#"{"error":{"message":"no model"}}"#);
    let truncated = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"cho".to_vec();
    let event = "event: error\ndata: {\"message\":\"overload\"}\n\n";
    let error_event = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{event}",
        event.len()
    )
    .into_bytes();
    let cases: Vec<(Answer, &str)> = vec![
        (answer(&[&not_found]), "HTTP 404: no model"),
        (
            Answer {
                close: true,
                ..answer(&[&truncated])
            },
            "in the middle of a response",
        ),
        (
            answer(&[&error_event]),
            "error event in the response stream",
        ),
    ];
    for (a, want) in cases {
        let (address, server) = serve(vec![vec![a]]);
        let got = conn(&address).exchange(REQUEST, &Clock::new(), &never);
        let error = got.error.unwrap_or_default();
        assert!(error.contains(want), "{error} lacks {want}");
        assert!(!got.record.ok);
        server.join().unwrap();
    }
}

#[test]
fn a_connection_closed_while_idle_is_retried_once() {
    let ok = json_answer("200 OK", r#"{"choices":[{"text":"x"}]}"#);
    let closing = Answer {
        close: true,
        ..answer(&[&ok])
    };
    // The first connection ends after one answer although the answer said keep-alive.
    let (address, server) = serve(vec![vec![closing], vec![answer(&[&ok])]]);
    let clock = Clock::new();
    let mut c = conn(&address);
    assert_eq!(c.exchange(REQUEST, &clock, &never).error, None);
    thread::sleep(Duration::from_millis(20));
    let second = c.exchange(REQUEST, &clock, &never);
    assert_eq!(second.error, None);
    assert_eq!(second.reply, "x");
    assert_eq!(server.join().unwrap(), 2);
}

#[test]
fn stop_abandons_a_turn_and_a_refused_connect_fails_it() {
    let silent = Answer {
        pieces: vec![Vec::new(), Vec::new()],
        gap: Duration::from_millis(400),
        close: true,
    };
    let (address, server) = serve(vec![vec![silent]]);
    let started = Instant::now();
    let stop = || started.elapsed() > Duration::from_millis(150);
    let got = conn(&address).exchange(REQUEST, &Clock::new(), &stop);
    assert!(got.error.unwrap().contains("interrupted"));
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "did not wait for the server"
    );
    server.join().unwrap();

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap().to_string();
    drop(closed);
    let got = conn(&address).exchange(REQUEST, &Clock::new(), &never);
    let error = got.error.unwrap();
    assert!(error.contains("cannot connect to server"), "{error}");
    assert!(!got.record.ok && got.record.start_ns > 0);
}
