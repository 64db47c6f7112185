//! The session against real servers on 127.0.0.1 (port 0): an `h2` server on tokio, and a
//! scripted raw-socket server for GOAWAY and a close in the middle of a response. A small
//! non-blocking loop over `std::net::TcpStream` drives the session, bounded in time.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::fuzz::Owned;
use super::tests::{data, msg, ok_response, settings, status_200};
use super::*;
use crate::protocol::grpc::request::request_headers;

/// Bound on every wait in these tests.
const DEADLINE: Duration = Duration::from_secs(20);

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i + seed) % 251) as u8).collect()
}

/// Handlers running now and the most that ever ran at once.
#[derive(Default)]
struct Load {
    active: AtomicUsize,
    peak: AtomicUsize,
}

/// Answers by the method name at the end of the path: `Echo` returns the request bytes
/// after reading them all, `Slow` waits 50 ms first, `Stream` echoes each chunk as it comes,
/// `Reset` resets the stream.
async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    load: Arc<Load>,
) -> Result<(), h2::Error> {
    let now = load.active.fetch_add(1, Ordering::SeqCst) + 1;
    load.peak.fetch_max(now, Ordering::SeqCst);
    let method = request
        .uri()
        .path()
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_string();
    let mut body = request.into_body();
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let result = async {
        if method == "Reset" {
            respond.send_reset(h2::Reason::INTERNAL_ERROR);
            return Ok(());
        }
        let mut send = respond.send_response(head, false)?;
        let mut got = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            body.flow_control().release_capacity(chunk.len())?;
            if method == "Stream" {
                send.send_data(chunk, false)?;
            } else {
                got.extend_from_slice(&chunk);
            }
        }
        if method == "Slow" {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !got.is_empty() {
            send.send_data(Bytes::from(got), false)?;
        }
        send.send_trailers(trailers)
    }
    .await;
    load.active.fetch_sub(1, Ordering::SeqCst);
    result
}

/// An `h2` server for one connection, with MAX_CONCURRENT_STREAMS `max_streams`.
fn h2_server(max_streams: u32) -> (String, Arc<Load>, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let load = Arc::new(Load::default());
    let server_load = Arc::clone(&load);
    let handle = thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let accept = tokio::time::timeout(DEADLINE, listener.accept());
            let Ok(Ok((socket, _))) = accept.await else {
                return;
            };
            socket.set_nodelay(true).unwrap();
            let mut conn = h2::server::Builder::new()
                .max_concurrent_streams(max_streams)
                .handshake(socket)
                .await
                .unwrap();
            while let Some(Ok((request, respond))) = conn.accept().await {
                tokio::spawn(answer(request, respond, Arc::clone(&server_load)));
            }
        });
    });
    (addr, load, handle)
}

/// A session over a non-blocking socket, with every event it reported.
struct Client {
    socket: TcpStream,
    s: Session,
    events: Vec<Owned>,
    eof: bool,
    authority: String,
}

impl Client {
    fn connect(addr: &str, cfg: SessionConfig) -> Client {
        let socket = TcpStream::connect(addr).unwrap();
        socket.set_nodelay(true).unwrap();
        socket.set_nonblocking(true).unwrap();
        Client {
            socket,
            s: Session::new(cfg),
            events: Vec::new(),
            eof: false,
            authority: addr.to_string(),
        }
    }

    fn call(&mut self, method: &str, body: &[u8], end_stream: bool) -> u32 {
        let block = request_headers(&self.authority, method, &[]);
        self.s.open(&block, body, end_stream).unwrap()
    }

    /// Writes and reads what the socket takes and has; true if anything moved.
    fn io(&mut self) -> bool {
        let mut moved = false;
        while !self.eof && !self.s.output().is_empty() {
            match self.socket.write(self.s.output()) {
                Ok(n) => {
                    self.s.written(n);
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => self.end(),
            }
        }
        while !self.eof {
            let events = &mut self.events;
            match self.socket.read(self.s.input_space()) {
                Ok(0) => self.end(),
                Ok(n) => {
                    moved = true;
                    let push = &mut |e: Event<'_>| events.push(Owned::from_event(e));
                    if let Err(e) = self.s.received(n, push) {
                        events.push(Owned::Failed(e));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => self.end(),
            }
        }
        moved
    }

    fn end(&mut self) {
        self.eof = true;
        let events = &mut self.events;
        self.s.eof(&mut |e| events.push(Owned::from_event(e)));
    }

    /// Runs I/O until `done` holds, panicking after `DEADLINE`.
    fn run_until(&mut self, mut done: impl FnMut(&mut Client) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(
                start.elapsed() < DEADLINE,
                "timed out; events {:?}",
                self.events
            );
            if !self.io() {
                thread::sleep(Duration::from_micros(200));
            }
        }
    }

    fn closed(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Owned::Closed(..)))
            .count()
    }

    /// The messages of `stream`, concatenated, and how it ended.
    fn result_of(&self, stream: u32) -> (Vec<u8>, Option<StreamEnd>) {
        let mut bytes = Vec::new();
        let mut end = None;
        for event in &self.events {
            match event {
                Owned::Message(s, _, data) if *s == stream => bytes.extend_from_slice(data),
                Owned::Closed(s, e) if *s == stream => end = Some(e.clone()),
                _ => {}
            }
        }
        (bytes, end)
    }
}

#[test]
fn hundred_concurrent_streams_on_one_connection() {
    let (addr, load, server) = h2_server(200);
    let mut client = Client::connect(&addr, SessionConfig::default());
    client.run_until(|c| c.s.peer_settings_received());
    let ids: Vec<u32> = (0..100)
        .map(|i| client.call("Slow", &msg(format!("call {i}").as_bytes()), true))
        .collect();
    assert_eq!(client.s.open_streams(), 100);
    client.run_until(|c| c.closed() == 100);
    for (i, id) in ids.iter().enumerate() {
        let (bytes, end) = client.result_of(*id);
        assert_eq!(bytes, format!("call {i}").as_bytes());
        assert_eq!(end, Some(StreamEnd::Ok));
    }
    assert_eq!(load.peak.load(Ordering::SeqCst), 100, "all 100 overlapped");
    assert_eq!(client.s.open_streams(), 0);
    drop(client);
    server.join().unwrap();
}

#[test]
fn one_mib_bodies_flow_both_ways_with_small_windows() {
    let (addr, _load, server) = h2_server(100);
    let cfg = SessionConfig {
        recv_window: 65_535,
        max_message: 2 << 20,
    };
    let mut client = Client::connect(&addr, cfg);
    let bodies: Vec<Vec<u8>> = (0..3).map(|seed| pattern(1 << 20, seed)).collect();
    let ids: Vec<u32> = bodies
        .iter()
        .map(|b| client.call("Echo", &msg(b), true))
        .collect();
    client.run_until(|c| c.closed() == 3);
    for (id, body) in ids.iter().zip(&bodies) {
        let (bytes, end) = client.result_of(*id);
        assert_eq!(end, Some(StreamEnd::Ok));
        assert!(bytes == *body, "stream {id}: echoed bytes differ");
    }
    drop(client);
    server.join().unwrap();
}

#[test]
fn server_limit_of_four_streams_is_respected() {
    let (addr, load, server) = h2_server(4);
    let mut client = Client::connect(&addr, SessionConfig::default());
    client.run_until(|c| c.s.peer_settings_received());
    let mut started = 0;
    let mut peak = 0;
    client.run_until(|c| {
        while started < 20 && c.s.can_open() {
            c.call("Slow", &msg(b"x"), true);
            started += 1;
        }
        peak = peak.max(c.s.open_streams());
        c.closed() == 20
    });
    assert_eq!(peak, 4);
    assert_eq!(load.peak.load(Ordering::SeqCst), 4);
    assert!(client
        .events
        .iter()
        .all(|e| !matches!(e, Owned::Closed(_, end) if !end.is_ok())));
    drop(client);
    server.join().unwrap();
}

#[test]
fn bidirectional_stream_exchanges_several_messages() {
    let (addr, _load, server) = h2_server(100);
    let mut client = Client::connect(&addr, SessionConfig::default());
    let id = client.call("Stream", &msg(b"m0"), false);
    for i in 1..4 {
        client.run_until(|c| c.result_of(id).0.len() == 2 * i);
        client
            .s
            .send(id, &msg(format!("m{i}").as_bytes()), false)
            .unwrap();
    }
    client.s.finish(id).unwrap();
    client.run_until(|c| c.closed() == 1);
    assert_eq!(
        client.result_of(id),
        (b"m0m1m2m3".to_vec(), Some(StreamEnd::Ok))
    );
    let messages = client
        .events
        .iter()
        .filter(|e| matches!(e, Owned::Message(..)))
        .count();
    assert_eq!(messages, 4);
    drop(client);
    server.join().unwrap();
}

#[test]
fn server_reset_is_reported_and_the_connection_lives_on() {
    let (addr, _load, server) = h2_server(100);
    let mut client = Client::connect(&addr, SessionConfig::default());
    let reset = client.call("Reset", &msg(b""), true);
    let echo = client.call("Echo", &msg(b"after"), true);
    client.run_until(|c| c.closed() == 2);
    let code = ErrorCode::InternalError;
    assert_eq!(client.result_of(reset).1, Some(StreamEnd::Reset(code)));
    assert_eq!(
        client.result_of(echo),
        (b"after".to_vec(), Some(StreamEnd::Ok))
    );
    drop(client);
    server.join().unwrap();
}

/// Sends `reply` once the client's first bytes arrive, then closes (FIN first, so the
/// client reads everything) and drains what the client still sends.
fn scripted_server(reply: Vec<u8>) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut first = [0u8; 1024];
        let _ = socket.read(&mut first);
        let _ = socket.write_all(&reply);
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = socket.read_to_end(&mut sink);
    });
    (addr, handle)
}

#[test]
fn goaway_and_a_close_mid_response_end_every_stream() {
    let mut goaway = Vec::new();
    crate::protocol::grpc::frame::write_goaway(&mut goaway, 3, ErrorCode::NoError, b"");
    let reply = [
        settings(&[]),
        goaway,
        ok_response(3, b"three"),
        status_200(1),
        data(1, &msg(b"cut short")[..7], false),
    ]
    .concat();
    let (addr, server) = scripted_server(reply);
    let mut client = Client::connect(&addr, SessionConfig::default());
    let ids: Vec<u32> = (0..3)
        .map(|_| client.call("Echo", &msg(b"q"), true))
        .collect();
    assert_eq!(ids, [1, 3, 5]);
    client.run_until(|c| c.eof);
    assert_eq!(client.result_of(5).1, Some(StreamEnd::Refused));
    assert_eq!(
        client.result_of(3),
        (b"three".to_vec(), Some(StreamEnd::Ok))
    );
    assert_eq!(client.result_of(1).1, Some(StreamEnd::Disconnected));
    assert_eq!(client.closed(), 3);
    assert!(client.s.going_away() && !client.s.can_open());
    drop(client);
    server.join().unwrap();
}
