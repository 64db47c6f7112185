//! One session thread's keep-alive HTTP/1.1 connection (plain or TLS): send a turn, read its
//! whole answer incrementally, and stamp it the way the engine does: one timestamp per read,
//! taken before any parsing, so events completed by one read share that read's time.
//!
//! A streamed answer (`text/event-stream` with a 2xx status) is decoded event by event; each
//! `data:` event becomes one framed response (see `measure::record::framed_responses`),
//! `[DONE]` an empty one, as the export expects.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::inputs::openai::sessions::{reply_of_body, reply_of_event};
use crate::measure::record::{framed_responses, push_framed_response};
use crate::measure::RequestRecord;
use crate::protocol::http1::{ParseError, Progress, ResponseHead, ResponseReader};
use crate::protocol::sse::{SseDecoder, SseEvent};
use crate::service::openai::{error_message, stream_error_message};
use crate::transport::tcp::os_message;
use crate::transport::{connect_blocking, BlockingStream, TlsClient};

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;
/// A blocked read wakes this often to look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct Dest {
    /// `host:port`.
    pub address: String,
    pub tls: Option<TlsClient>,
    /// Connect and write timeout.
    pub connect_timeout: Duration,
    /// A response that sends nothing for this long fails the turn (a server that hangs
    /// without closing the connection).
    pub idle_limit: Duration,
}

/// What one turn gave.
#[derive(Debug, Clone, Default)]
pub struct TurnResult {
    /// Times (ns since the epoch), `ok`, `sse` and `responses` set; body offsets not yet.
    pub record: RequestRecord,
    /// The export body: the whole answer, or the framed events of a streamed one.
    pub body: Vec<u8>,
    /// The assistant's text (joined from the deltas of a streamed answer).
    pub reply: String,
    /// Why the turn failed.
    pub error: Option<String>,
}

/// A failure before any answer byte on a reused connection: the server may have closed it
/// while idle, so the turn is worth one retry on a fresh connection.
struct Stale(String);

/// The connection and the buffers it reuses from turn to turn.
pub struct SessionConn {
    dest: Dest,
    stream: Option<BlockingStream>,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    reader: ResponseReader,
    sse: SseDecoder,
    /// Decoded body bytes already given to `sse`.
    fed: usize,
}

impl SessionConn {
    /// Not connected yet: the first turn connects.
    pub fn new(dest: Dest) -> Self {
        SessionConn {
            dest,
            stream: None,
            buf: Vec::new(),
            chunk: vec![0; READ_CHUNK],
            reader: ResponseReader::new(),
            sse: SseDecoder::new(),
            fed: 0,
        }
    }

    /// Sends `request` (complete HTTP bytes) and reads the whole answer. `stop` is asked
    /// while waiting: once it says yes, the turn is abandoned as failed.
    pub fn exchange(
        &mut self,
        request: &[u8],
        clock: &Clock,
        stop: &dyn Fn() -> bool,
    ) -> TurnResult {
        let reused = self.stream.is_some();
        match self.attempt(request, clock, stop) {
            Ok(done) => done,
            Err(Stale(_)) if reused => match self.attempt(request, clock, stop) {
                Ok(done) => done,
                Err(Stale(why)) => failed(clock.now_ns(), clock, why),
            },
            Err(Stale(why)) => failed(clock.now_ns(), clock, why),
        }
    }

    fn attempt(
        &mut self,
        request: &[u8],
        clock: &Clock,
        stop: &dyn Fn() -> bool,
    ) -> Result<TurnResult, Stale> {
        let start_ns = clock.now_ns();
        let mut stream = match self.stream.take() {
            Some(s) => s,
            None => {
                let d = &self.dest;
                match connect_blocking(&d.address, d.connect_timeout, "server", d.tls.as_ref()) {
                    Ok(s) => s,
                    Err(e) => return Ok(failed(start_ns, clock, e.msg)),
                }
            }
        };
        // Short read timeouts let the loop notice Ctrl-C while the server thinks.
        let _ = stream.tcp().set_read_timeout(Some(POLL));
        if let Err(e) = stream.write_all(request).and_then(|()| stream.flush()) {
            return Err(Stale(format!("sending the request: {}", os_message(&e))));
        }
        let mut rec = RequestRecord {
            start_ns,
            send_end_ns: clock.now_ns(),
            ..RequestRecord::default()
        };
        self.buf.clear();
        self.reader.reset();
        self.sse.reset();
        self.fed = 0;
        let mut framed = Vec::new();
        let mut stream_error = None;
        let mut last_byte = Instant::now();
        loop {
            let read = stream.read(&mut self.chunk);
            // One timestamp per read, before any parsing.
            let read_ns = clock.now_ns();
            let progress = match read {
                Ok(0) => self.reader.on_eof(&self.buf),
                Ok(n) => {
                    self.buf.extend_from_slice(&self.chunk[..n]);
                    last_byte = Instant::now();
                    if rec.recv_start_ns == 0 {
                        rec.recv_start_ns = read_ns;
                    }
                    self.reader.advance(&self.buf)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    match self.give_up(stop, last_byte) {
                        Some(why) => return Ok(failed(start_ns, clock, why)),
                        None => continue,
                    }
                }
                Err(e) if self.buf.is_empty() => return Err(Stale(os_message(&e))),
                Err(e) => return Ok(failed(start_ns, clock, os_message(&e))),
            };
            let head = match progress {
                Ok(p) => p,
                Err(e @ ParseError::ClosedBeforeResponse) => return Err(Stale(e.to_string())),
                Err(e) => return Ok(failed(start_ns, clock, e.to_string())),
            };
            if let Err(why) = self.feed_events(read_ns, &mut rec, &mut framed, &mut stream_error) {
                return Ok(failed(start_ns, clock, why));
            }
            if let Progress::Done(head) = head {
                let done = Done {
                    head,
                    read_ns,
                    framed,
                    stream_error,
                };
                return Ok(self.complete(stream, rec, done));
            }
        }
    }

    /// Why to stop waiting for the answer after a read timed out: Ctrl-C, or no byte for
    /// the idle limit; `None` to keep waiting.
    fn give_up(&self, stop: &dyn Fn() -> bool, last_byte: Instant) -> Option<String> {
        if stop() {
            return Some("interrupted before the answer was complete".into());
        }
        let limit = self.dest.idle_limit;
        (last_byte.elapsed() >= limit)
            .then(|| format!("no answer byte for {} s", limit.as_secs_f64()))
    }

    /// The answer's new body bytes to the event decoder, once the head says it is a 2xx
    /// event stream; events go to `framed` stamped `read_ns`.
    fn feed_events(
        &mut self,
        read_ns: u64,
        rec: &mut RequestRecord,
        framed: &mut Vec<u8>,
        stream_error: &mut Option<String>,
    ) -> Result<(), String> {
        let streaming = self.reader.is_event_stream() && (200..300).contains(&self.reader.status());
        if !streaming {
            return Ok(());
        }
        rec.sse = true;
        let body = self.reader.body_so_far(&self.buf);
        let fresh = body.get(self.fed..).unwrap_or(&[]);
        self.fed = body.len().max(self.fed);
        let mut on = |event: SseEvent<'_>| on_event(event, read_ns, rec, framed, stream_error);
        self.sse
            .push(fresh, &mut on)
            .map_err(|e| format!("bad event stream in the answer: {e}"))
    }

    /// The answer is complete: the record, the export body, the reply and any error.
    fn complete(
        &mut self,
        stream: BlockingStream,
        mut rec: RequestRecord,
        mut done: Done,
    ) -> TurnResult {
        let status = done.head.status;
        let mut error = None;
        if rec.sse {
            let Done {
                read_ns,
                framed,
                stream_error,
                ..
            } = &mut done;
            let mut on = |e: SseEvent<'_>| on_event(e, *read_ns, &mut rec, framed, stream_error);
            if let Err(e) = self.sse.finish(&mut on) {
                error = Some(format!("bad event stream in the answer: {e}"));
            }
        }
        // Latency of a stream runs to its last event with data (`[DONE]` does not count);
        // `on_event` left that event's time in `end_ns`.
        if !rec.sse || rec.end_ns == 0 {
            rec.end_ns = done.read_ns;
        }
        let (body, reply) = if rec.sse {
            let reply: String = framed_responses(&done.framed)
                .filter_map(|(_, payload)| reply_of_event(payload))
                .collect();
            (std::mem::take(&mut done.framed), reply)
        } else {
            rec.responses = 1;
            let body = self.reader.body(&self.buf).to_vec();
            let reply = reply_of_body(&body);
            (body, reply)
        };
        if !(200..300).contains(&status) {
            error = Some(error_message(status, &body));
        } else if let Some(data) = done.stream_error {
            error = error.or(Some(stream_error_message(&data)));
        }
        if done.head.keep_alive {
            let used = done.head.consumed.min(self.buf.len());
            self.buf.drain(..used);
            self.stream = Some(stream);
        }
        rec.ok = error.is_none();
        TurnResult {
            record: rec,
            body,
            reply,
            error,
        }
    }
}

/// What the read loop hands over once the response is complete.
struct Done {
    head: ResponseHead,
    read_ns: u64,
    framed: Vec<u8>,
    stream_error: Option<String>,
}

/// One decoded event: a response of the turn, `[DONE]` (the null final response), or the
/// turn's error (kept in `framed` too, so the export shows the server's error object).
fn on_event(
    event: SseEvent<'_>,
    read_ns: u64,
    rec: &mut RequestRecord,
    framed: &mut Vec<u8>,
    stream_error: &mut Option<String>,
) {
    if event.is_error() {
        if let SseEvent::Data { data, .. } = event {
            if stream_error.is_none() {
                *stream_error = Some(String::from_utf8_lossy(data).into_owned());
            }
            push_framed_response(framed, read_ns, data);
        }
        return;
    }
    match event {
        SseEvent::Data { data, .. } => {
            if rec.responses == 0 {
                rec.recv_start_ns = read_ns;
            }
            rec.responses += 1;
            // Where the latency ends, until a later event moves it.
            rec.end_ns = read_ns;
            push_framed_response(framed, read_ns, data);
        }
        SseEvent::Done => push_framed_response(framed, read_ns, &[]),
    }
}

/// A failed turn that started at `start_ns`.
fn failed(start_ns: u64, clock: &Clock, why: String) -> TurnResult {
    let end_ns = clock.now_ns().max(start_ns);
    TurnResult {
        record: RequestRecord {
            start_ns,
            send_end_ns: start_ns,
            end_ns,
            ok: false,
            ..RequestRecord::default()
        },
        error: Some(why),
        ..TurnResult::default()
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
