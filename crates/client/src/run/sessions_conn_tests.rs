//! Session turns on the engine's connections, against a loopback server answering scripted
//! bytes: keep-alive reuse, one stamped response per streamed event, failures that name their
//! cause, the one retry of a turn lost on a connection the server closed while idle, the idle
//! limit of a turn the server never answers, a stop in the middle of a turn, and a refused
//! connect.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::*;
use crate::inputs::openai::sessions::Turn;
use crate::measure::record::framed_responses;

/// How long the canned server waits for a request or for the client to go.
const PATIENCE: Duration = Duration::from_secs(5);

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

/// Reads the request, then closes the connection without a byte of answer.
fn hang_up() -> Answer {
    Answer {
        close: true,
        ..answer(&[])
    }
}

/// A loopback server taking one connection per entry of `conns`, answering that
/// connection's requests in order; the handle gives the number of requests it read.
fn serve(conns: Vec<Vec<Answer>>) -> (SocketAddr, JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let mut requests = 0;
        for answers in conns {
            let (mut sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(PATIENCE)).unwrap();
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

/// One conversation of `turns` turns, `delay_ms` apart.
fn conversation(turns: usize, delay_ms: u64) -> Vec<Session> {
    let turns = (0..turns)
        .map(|t| Turn {
            payload: format!("{{\"messages\":[{{\"role\":\"user\",\"content\":\"t{t}\"}}]}}")
                .into_bytes(),
            delay_ms,
        })
        .collect();
    vec![Session {
        id: "s0".into(),
        turns,
    }]
}

/// Runs `sessions` on one slot against `addr` until they ran or `stop` is set.
fn run_on(addr: SocketAddr, sessions: Vec<Session>, stop: &AtomicBool) -> Vec<TurnDone> {
    let book = Book::new(
        addr.to_string(),
        "v1/chat/completions".into(),
        Vec::new(),
        sessions,
    );
    run_book(addr, Arc::new(book), stop)
}

/// Runs `book`'s conversations on one slot against `addr`.
fn run_book(addr: SocketAddr, book: Arc<Book>, stop: &AtomicBool) -> Vec<TurnDone> {
    let spec = EngineSpec {
        addr,
        requests: Arc::new(vec![Vec::new()]),
        keep_bodies: true,
        keep_going: true,
        http_trace: false,
        rx_stamps: true,
        tx_stamps: Some(Default::default()),
        packet_stamps: None,
        fresh_connections: false,
        pin: false,
        max_workers: 1,
        clock: Clock::new(),
        tls: None,
        wire: Wire::Http1,
        sequences: None,
        slots: None,
        read_batch: None,
        request_limits: Default::default(),
        reply_check: Default::default(),
        max_response_bytes: crate::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES,
        cancel: None,
        prefill: None,
    };
    run_turns(&spec, &book, 1, stop)
        .expect("the engine starts")
        .0
}

fn run_turns_on(addr: SocketAddr, sessions: Vec<Session>) -> Vec<TurnDone> {
    run_on(addr, sessions, &AtomicBool::new(false))
}

fn json_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn reply(content: &str) -> Vec<u8> {
    let body = format!(
        "{{\"choices\":[{{\"message\":{{\"role\":\"assistant\",\"content\":\"{content}\"}}}}]}}"
    );
    json_answer("200 OK", &body)
}

/// One SSE event as one HTTP chunk.
fn chunk(event: &str) -> Vec<u8> {
    format!("{:x}\r\n{event}\r\n", event.len()).into_bytes()
}

/// The turn's error, with the other turns' errors when it has none.
fn error_of(turns: &[TurnDone], k: usize) -> String {
    let all: Vec<_> = turns.iter().map(|t| t.result.error.clone()).collect();
    turns[k]
        .result
        .error
        .clone()
        .unwrap_or_else(|| format!("no error in {all:?}"))
}

fn assert_answered(turns: &[TurnDone]) {
    for t in turns {
        assert_eq!(t.result.error, None, "{}", t.inputs);
        assert!(t.result.record.ok);
    }
}

#[test]
fn whole_answers_reuse_one_connection() {
    let body = r#"{"choices":[{"message":{"role":"assistant","content":" the of"}}]}"#;
    let ok = json_answer("200 OK", body);
    let (addr, server) = serve(vec![vec![answer(&[&ok]), answer(&[&ok])]]);
    let turns = run_turns_on(addr, conversation(2, 0));
    assert_eq!(turns.len(), 2);
    assert_answered(&turns);
    for t in &turns {
        let r = t.result.record;
        assert!(!r.sse);
        assert_eq!(t.result.body, body.as_bytes());
        assert!(r.start_ns <= r.send_end_ns && r.send_end_ns <= r.recv_start_ns);
        assert!(r.recv_start_ns <= r.end_ns);
    }
    assert!(
        turns[1].inputs.contains(" the of"),
        "the reply is in the next turn's history: {}",
        turns[1].inputs
    );
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
    let (addr, server) = serve(vec![vec![streamed, answer(&[&reply("c")])]]);
    let turns = run_turns_on(addr, conversation(2, 0));
    assert_eq!(turns.len(), 2);
    assert_answered(&turns);
    let got = &turns[0].result;
    assert!(got.record.sse);
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
    assert!(
        turns[1].inputs.contains(" a b"),
        "the reply is joined from the deltas: {}",
        turns[1].inputs
    );
    assert_eq!(server.join().unwrap(), 2);
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
            "closed the connection before the response was complete",
        ),
        (
            answer(&[&error_event]),
            "error event in the response stream",
        ),
    ];
    for (a, want) in cases {
        let (addr, server) = serve(vec![vec![a]]);
        // A failed turn ends its conversation: the second turn is never sent.
        let turns = run_turns_on(addr, conversation(2, 0));
        assert_eq!(turns.len(), 1, "{want}");
        let error = error_of(&turns, 0);
        assert!(error.contains(want), "{error} lacks {want}");
        assert!(!turns[0].result.record.ok);
        assert_eq!(server.join().unwrap(), 1, "{want}: not retried");
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
    let (addr, server) = serve(vec![vec![closing], vec![answer(&[&ok])]]);
    let turns = run_turns_on(addr, conversation(2, 20));
    assert_eq!(turns.len(), 2);
    assert_answered(&turns);
    assert_eq!(server.join().unwrap(), 2);
}

#[test]
fn a_turn_lost_on_a_reused_connection_is_sent_again_on_a_new_one() {
    // The first connection takes the second turn and closes without a byte of answer, as a
    // server does that closed an idle connection just as the turn arrived.
    let conns = vec![
        vec![answer(&[&reply("one")]), hang_up()],
        vec![answer(&[&reply("two")]), answer(&[&reply("three")])],
    ];
    let (addr, server) = serve(conns);
    let turns = run_turns_on(addr, conversation(3, 0));
    assert_eq!(turns.len(), 3, "the retry is the same turn, one record");
    assert_answered(&turns);
    assert!(turns[2].inputs.contains("two"), "{}", turns[2].inputs);
    assert_eq!(server.join().unwrap(), 4, "turn 2 reached the server twice");
}

#[test]
fn a_retried_turn_that_is_lost_again_fails() {
    // The retry's connection is a fresh one: losing the turn there fails it, no third try.
    let conns = vec![vec![answer(&[&reply("one")]), hang_up()], vec![hang_up()]];
    let (addr, server) = serve(conns);
    let turns = run_turns_on(addr, conversation(3, 0));
    assert_eq!(turns.len(), 2, "the failed turn ends the conversation");
    assert_eq!(turns[0].result.error, None);
    let error = error_of(&turns, 1);
    assert!(
        error.contains("closed the connection before the response was complete"),
        "{error}"
    );
    assert!(!turns[1].result.record.ok);
    assert_eq!(server.join().unwrap(), 3);
}

#[test]
fn a_turn_with_no_answer_byte_for_the_idle_limit_fails() {
    // The server reads the first turn and says nothing; it hangs up only after PATIENCE.
    let (addr, server) = serve(vec![vec![answer(&[]), answer(&[])]]);
    let book = Book::new(
        addr.to_string(),
        "v1/chat/completions".into(),
        Vec::new(),
        conversation(2, 0),
    )
    .with_idle_limit(Duration::from_millis(300));
    let turns = run_book(addr, Arc::new(book), &AtomicBool::new(false));
    // A failed turn ends its conversation: the second turn is never sent.
    assert_eq!(turns.len(), 1);
    assert_eq!(
        error_of(&turns, 0),
        "timed out after 0.3 s idle (--request-idle-timeout) waiting for the response head"
    );
    assert_eq!(server.join().unwrap(), 1);
}

#[test]
fn stop_abandons_a_turn_and_a_refused_connect_fails_it() {
    // The server reads the turn and answers only if the client is still there after
    // `PATIENCE`: the stop must not wait for it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (got_turn, turn_in) = mpsc::channel();
    let server = thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(PATIENCE)).unwrap();
        assert!(read_request(&mut sock));
        got_turn.send(()).unwrap();
        let mut rest = [0u8; 1];
        if sock.read(&mut rest).is_err() {
            let _ = sock.write_all(&reply("late"));
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let stopper = thread::spawn(move || {
        let _ = turn_in.recv_timeout(PATIENCE);
        flag.store(true, Ordering::SeqCst);
    });
    let turns = run_on(addr, conversation(2, 0), &stop);
    stopper.join().unwrap();
    server.join().unwrap();
    assert_eq!(turns.len(), 1);
    let error = error_of(&turns, 0);
    assert!(error.contains("interrupted"), "{error}");
    assert!(!turns[0].result.record.ok);

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let turns = run_turns_on(addr, conversation(2, 0));
    assert_eq!(turns.len(), 1);
    let error = error_of(&turns, 0);
    assert!(error.contains("refused"), "{error}");
    let rec = turns[0].result.record;
    assert!(!rec.ok && rec.start_ns > 0);
}
