//! One connection: buffered reads, request assembly, answers (held back for delayed models),
//! buffered writes, and a lingering close.
//!
//! Sockets are registered once, edge-triggered, for read and write; `read_ready` remembers a
//! read edge until a read returns WouldBlock. Requests are answered as soon as they are complete
//! (pipelined ones in order); a response whose model has a delay is held in the connection's
//! queue until its deadline, and everything behind it waits too, so responses stay in order
//! without ever blocking the loop. An OpenAI event stream sits in the same queue and re-arms
//! its own deadline for each event (see `llm::stream`).
//!
//! A connection holds no buffer until its first bytes arrive, and keeps its place (see
//! `places`) in step: idle while no request is being answered and no body is arriving.
//! One deadline at a time is armed for reading: the first request (`--read-timeout` after
//! accept), the request partly there (its head, a body pause, the whole request), or the idle
//! time between requests (`--idle-timeout`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use super::delay::sample_delay;
use super::execute::Env;
use super::http::MAX_HEAD_BYTES;
use super::http::{write_error_json, write_head, BodyAt, Progress, RequestReader, CONTINUE_100};
use super::instances::Run;
use super::limits::Limits;
use super::llm::generate;
use super::llm::load::InFlight;
use super::llm::openai::{self, OaiReply};
use super::llm::stream::SseStream;
use super::places::Place;
use super::reply::InferDone;
use super::reply::{Outcome, Request, JSON};
use super::routes::route;
use super::state::Shared;
use super::stats::{InferTiming, Stats};

/// Read buffer per connection once it has sent a byte, bytes; it grows for larger requests.
pub const READ_BUF: usize = 16 * 1024;
/// Bytes of chunk framing a request may carry besides its head and body.
const MAX_CHUNK_FRAMING: usize = 1024 * 1024;
/// Stop reading from a connection while this many response bytes wait to be written or held.
const MAX_PENDING_WRITE: usize = 4 * 1024 * 1024;
/// Stop reading from a connection while this many answers are held (pipelined requests of
/// delayed models).
const MAX_HELD: usize = 256;
/// After answering and half-closing a connection the server has stopped reading from, keep
/// discarding what the peer still sends for up to this long / this many bytes, so closing with
/// unread input does not reset the connection and destroy the answer before the peer has read it.
pub const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 4 * 1024 * 1024;

/// Deadlines of held responses and lingering closes: (when, slot, connection generation).
pub type Timers = BinaryHeap<Reverse<(Instant, usize, u64)>>;

/// Stats of a delayed inference, committed when its deadline has passed.
#[derive(Debug)]
pub struct Commit {
    model: usize,
    timing: InferTiming,
    /// When the request was fully read.
    received: Instant,
    /// When the delay started (right after the response was encoded).
    delay_start: Instant,
}

/// A response waiting for its deadline (or for a delayed response ahead of it), or an
/// OpenAI event stream (`bytes` empty) whose next event is due at `ready_at`.
#[derive(Debug)]
struct Held {
    ready_at: Instant,
    bytes: Vec<u8>,
    commit: Option<Commit>,
    stream: Option<Box<SseStream>>,
    /// The OpenAI token-log entry to stamp when this answer's tokens go out.
    log_id: Option<u64>,
    /// A generation answer counts as in flight (the `/metrics` pages) until it is released
    /// or its connection goes.
    _in_flight: Option<InFlight>,
}

#[derive(Debug)]
pub struct Conn {
    pub stream: TcpStream,
    /// Distinguishes this connection from earlier ones in the same slot (for stale timers).
    pub generation: u64,
    /// Read buffer; unparsed bytes are `rbuf[rstart..rend]`.
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    reader: RequestReader,
    /// Decoded chunked body of the current request.
    decoded: Vec<u8>,
    /// Bytes ready to send; `wbuf[wpos..]` is still unsent.
    wbuf: Vec<u8>,
    wpos: usize,
    held: VecDeque<Held>,
    /// Bytes of the held answers.
    held_bytes: usize,
    /// A read edge was seen and no read has returned WouldBlock since.
    pub read_ready: bool,
    read_eof: bool,
    /// Answered, half-closed, discarding input until EOF (see [`LINGER`]); bytes discarded.
    pub lingering: Option<usize>,
    /// No more requests will be read (Connection: close or a bad request); close when flushed.
    closing: bool,
    /// When the last read that brought bytes returned.
    last_read: Instant,
    /// Complete requests wait in the read buffer until answers waiting ahead of them go out.
    backlog: bool,
    /// When the first bytes of the request being read arrived; None between requests.
    request_started: Option<Instant>,
    /// The read deadline a timer is armed for (see [`on_timer`]).
    read_deadline: Option<Instant>,
    /// When a lingering close gives up on the peer.
    linger_until: Instant,
    /// Largest raw request (head + body + chunk framing), bytes.
    max_raw: usize,
    /// How long a head may take, and a body may pause (`--read-timeout`).
    read_timeout: Duration,
    /// How long a whole request may take to arrive (`--request-read-timeout`).
    request_read_timeout: Duration,
    /// How long the connection may wait idle between requests (`--idle-timeout`).
    idle_timeout: Duration,
    /// The connection's place among the open ones.
    pub place: Place,
    /// When the connection was accepted.
    accepted: Instant,
    /// When the connection last became idle (see [`Conn::idle`]).
    idle_since: Instant,
    /// The connection was idle when its place was last told.
    was_idle: bool,
    /// A request has been read completely.
    served: bool,
}

impl Conn {
    /// A connection accepted at `now`, holding `place`.
    pub fn new(
        stream: TcpStream,
        generation: u64,
        limits: &Limits,
        place: Place,
        now: Instant,
    ) -> Conn {
        Conn {
            stream,
            generation,
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            reader: RequestReader::new(limits.max_request_bytes),
            decoded: Vec::new(),
            wbuf: Vec::new(),
            wpos: 0,
            held: VecDeque::new(),
            held_bytes: 0,
            read_ready: false,
            read_eof: false,
            lingering: None,
            closing: false,
            last_read: now,
            backlog: false,
            request_started: None,
            read_deadline: None,
            linger_until: now,
            max_raw: MAX_HEAD_BYTES
                .saturating_add(limits.max_request_bytes)
                .saturating_add(MAX_CHUNK_FRAMING),
            read_timeout: limits.read_timeout,
            request_read_timeout: limits.request_read_timeout,
            idle_timeout: limits.idle_timeout,
            place,
            accepted: now,
            idle_since: now,
            was_idle: true,
            served: false,
        }
    }

    fn unsent(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Few enough answers wait (to be written, or held) to answer another request.
    fn room_to_answer(&self) -> bool {
        self.unsent() + self.held_bytes < MAX_PENDING_WRITE && self.held.len() < MAX_HELD
    }

    fn can_read(&self) -> bool {
        self.read_ready && !self.read_eof && !self.closing && self.room_to_answer()
    }

    fn finished(&self) -> bool {
        (self.closing || self.read_eof) && self.unsent() == 0 && self.held.is_empty()
    }

    /// No request is being answered or its body read, and the connection may go on reading:
    /// its place may go to a new connection. A partial request head counts as idle.
    fn idle(&self) -> bool {
        self.reader.in_head()
            && !self.backlog
            && self.unsent() == 0
            && self.held.is_empty()
            && !self.closing
            && !self.read_eof
            && self.lingering.is_none()
    }

    /// Makes room for a read: drops consumed bytes, grows for a large request (to its exact
    /// size once its head announced it), or refuses.
    fn make_room(&mut self) -> Result<(), ()> {
        if self.rbuf.is_empty() {
            self.rbuf = vec![0; READ_BUF];
        }
        if self.rstart == self.rend {
            if self.rbuf.len() > 4 * READ_BUF {
                self.rbuf = vec![0; READ_BUF];
            }
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend < self.rbuf.len() {
            return Ok(());
        }
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
            return Ok(());
        }
        if self.rbuf.len() >= self.max_raw {
            return Err(());
        }
        let grown = match self.reader.request_len() {
            Some(len) if len > self.rbuf.len() => len,
            _ => self.rbuf.len() * 2,
        };
        self.rbuf.resize(grown.min(self.max_raw), 0);
        Ok(())
    }

    /// Writes until done or WouldBlock; `Err` means the connection is dead.
    fn write_out(&mut self) -> io::Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
        if self.wbuf.capacity() > MAX_PENDING_WRITE {
            self.wbuf = Vec::with_capacity(READ_BUF);
        }
        Ok(())
    }

    /// Moves every held response whose time has come (from the front) into the write buffer;
    /// a stream at the front writes its due events and, unfinished, re-arms its deadline in
    /// `timers` (this connection being in `slot`) and keeps everything behind it waiting.
    pub fn release_held(
        &mut self,
        now: Instant,
        shared: &Shared,
        timers: &mut Timers,
        slot: usize,
    ) {
        while let Some(front) = self.held.front_mut() {
            if front.ready_at > now {
                break;
            }
            if let Some(stream) = front.stream.as_mut() {
                let (chunks, done) = stream.emit_due(now, &mut self.wbuf);
                if let Some(id) = front.log_id {
                    // The moment the chunks were paced for (`now`), so logged gaps are the
                    // gaps the pacing kept, not shifted by how long this loop turn took.
                    // Also when this connection's turn came: the write follows at once.
                    let at = shared.clock.at_ns(now);
                    let written = shared.clock.now_ns();
                    let log = &shared.openai.log;
                    (0..chunks).for_each(|_| log.record_paced(id, at, written));
                }
                if !done {
                    front.ready_at = stream.next_at();
                    timers.push(Reverse((front.ready_at, slot, self.generation)));
                    break;
                }
                if let Some(done) = self.held.pop_front() {
                    self.held_bytes -= done.bytes.len();
                }
                continue;
            }
            let Some(held) = self.held.pop_front() else {
                break;
            };
            self.held_bytes -= held.bytes.len();
            if let Some(c) = held.commit {
                commit(&shared.stats, &c, now);
            }
            if let Some(id) = held.log_id {
                shared.openai.log.record(id, shared.clock.now_ns());
            }
            self.wbuf.extend_from_slice(&held.bytes);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Records a delayed inference, counting the time it was held as compute.
fn commit(stats: &Stats, c: &Commit, now: Instant) {
    let mut timing = c.timing;
    timing.infer_ns += nanos(now.saturating_duration_since(c.delay_start));
    timing.success_ns = nanos(now.saturating_duration_since(c.received));
    stats.record_success(c.model, &timing);
}

/// Worker-wide state a request handler needs, apart from the connection itself.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    /// Response body scratch, reused for every request.
    pub body: &'a mut Vec<u8>,
    pub timers: &'a mut Timers,
    pub rng: &'a mut u64,
    /// Per model: when the thread's instance of a serial model is free again.
    pub busy_until: &'a mut [Instant],
    /// The connection's slot in the worker (for its timers).
    pub slot: usize,
}

/// Writes a framed response (produced by `write`) straight out, or holds it behind earlier
/// held responses, or until its deadline.
fn emit(
    conn: &mut Conn,
    timers: &mut Timers,
    slot: usize,
    deadline: Option<(Instant, Commit)>,
    write: impl FnOnce(&mut Vec<u8>),
) {
    let (ready_at, commit) = match deadline {
        None if conn.held.is_empty() => return write(&mut conn.wbuf),
        None => (Instant::now(), None),
        Some((ready_at, commit)) => {
            timers.push(Reverse((ready_at, slot, conn.generation)));
            (ready_at, Some(commit))
        }
    };
    let mut bytes = Vec::new();
    write(&mut bytes);
    conn.held_bytes += bytes.len();
    conn.held.push_back(Held {
        ready_at,
        bytes,
        commit,
        stream: None,
        log_id: None,
        _in_flight: None,
    });
}

/// Queues a paced OpenAI answer (whole bytes or a stream) with a deadline at `ready_at`.
fn hold(
    conn: &mut Conn,
    ctx: &mut Ctx,
    ready_at: Instant,
    held: (Vec<u8>, Option<Box<SseStream>>),
    log_id: u64,
) {
    ctx.timers
        .push(Reverse((ready_at, ctx.slot, conn.generation)));
    conn.held_bytes += held.0.len();
    conn.held.push_back(Held {
        ready_at,
        bytes: held.0,
        commit: None,
        stream: held.1,
        log_id: Some(log_id),
        _in_flight: Some(ctx.shared.openai.load.enter()),
    });
}

/// Sends an LLM answer (OpenAI or Triton generate): a whole body now or at its generation deadline, or a stream's
/// head now and its events as they fall due.
fn answer_openai(conn: &mut Conn, ctx: &mut Ctx, reply: OaiReply, close: bool) {
    ctx.shared.stats.count_http_request();
    conn.closing |= close;
    match reply {
        OaiReply::Whole {
            status,
            ready_at,
            log_id,
        } => {
            let mut bytes = Vec::with_capacity(ctx.body.len() + 128);
            write_head(&mut bytes, status, JSON, ctx.body.len(), None, close);
            bytes.extend_from_slice(ctx.body);
            match (ready_at, log_id) {
                (Some(at), Some(id)) => hold(conn, ctx, at, (bytes, None), id),
                _ => emit(conn, ctx.timers, ctx.slot, None, |out| {
                    out.extend_from_slice(&bytes)
                }),
            }
        }
        OaiReply::Stream { stream, log_id } => {
            let content_type = stream.content_type();
            emit(conn, ctx.timers, ctx.slot, None, |out| {
                write_stream_head(out, content_type, close)
            });
            let at = stream.next_at();
            hold(conn, ctx, at, (Vec::new(), Some(stream)), log_id);
        }
    }
}

/// The head of an event-stream answer (`content_type`) in chunked framing.
fn write_stream_head(out: &mut Vec<u8>, content_type: &str, close: bool) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nCache-Control: no-cache\r\n");
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
}

/// Frames and emits the reply to one complete request.
fn answer(conn: &mut Conn, ctx: &mut Ctx, head: &super::http::Head, body: BodyAt) {
    let started = Instant::now();
    let request_bytes = &conn.rbuf[conn.rstart..conn.rend];
    let path = std::str::from_utf8(&request_bytes[head.path.0..head.path.1]).unwrap_or("");
    let body = match body {
        BodyAt::Buffer(from, to) => &request_bytes[from..to],
        BodyAt::Decoded => conn.decoded.as_slice(),
    };
    let req = Request {
        method: head.method,
        path,
        inference_header_len: head.inference_header_len,
        body,
    };
    ctx.body.clear();
    let close = !head.keep_alive;
    let llm = &ctx.shared.openai;
    let llm_reply = openai::route(&req, llm, ctx.rng, ctx.body)
        .or_else(|| generate::route(&req, llm, ctx.rng, ctx.body));
    if let Some(reply) = llm_reply {
        return answer_openai(conn, ctx, reply, close);
    }
    let mut env = Env {
        shared: ctx.shared,
        rng: ctx.rng,
    };
    let reply = route(&req, &mut env, ctx.body);
    let ready = Instant::now();
    let stats = &ctx.shared.stats;
    stats.count_http_request();
    let received = conn.last_read;
    let mut deadline = None;
    match reply.outcome {
        Outcome::Plain => {}
        Outcome::InferFailed { model } => {
            ctx.shared.log_arrival(model, received);
            stats.record_failure(model, nanos(ready.saturating_duration_since(received)))
        }
        Outcome::Inferred { model, done } => {
            ctx.shared.log_arrival(model, received);
            let times = (received, started, ready);
            deadline = record_inference(ctx, model, &done, times);
        }
    }
    let body = &*ctx.body;
    emit(conn, ctx.timers, ctx.slot, deadline, |out| {
        let (status, ctype, ihl) = (reply.status, reply.content_type, reply.inference_header_len);
        write_head(out, status, ctype, body.len(), ihl, close);
        out.extend_from_slice(body);
    });
    if close {
        conn.closing = true;
    }
}

/// Counts a successful inference (`times`: request received, routing started, reply ready).
/// Without a compute delay it is recorded now; with one, the returned deadline and commit
/// hold the reply (and the record) until the delay has passed.
fn record_inference(
    ctx: &mut Ctx,
    model: usize,
    done: &InferDone,
    (received, started, ready): (Instant, Instant, Instant),
) -> Option<(Instant, Commit)> {
    let mut timing = InferTiming {
        batch_size: done.batch_size,
        input_bytes: done.input_bytes,
        queue_ns: nanos(started.saturating_duration_since(received)),
        input_ns: done.input_ns,
        infer_ns: done.infer_ns,
        output_ns: done.output_ns,
        success_ns: nanos(ready.saturating_duration_since(received)),
        batched: false,
    };
    // An ensemble's response also waits for its composing models' delays.
    let own = ctx.shared.delays[model].as_ref();
    let wait = own.map_or(Duration::ZERO, |d| sample_delay(d, ctx.rng)) + done.composing_delay;
    // The loaded instances and batcher, else one execution at a time for a serial model.
    let run = ctx
        .shared
        .repo
        .reserve(model, ready, done.batch_size, wait)
        .unwrap_or_else(|| {
            let busy = ctx.shared.serial[model].then(|| &mut ctx.busy_until[model]);
            Run::serial(busy, ready, wait)
        });
    if run.end <= ready {
        ctx.shared.stats.record_success(model, &timing);
        return None;
    }
    timing.queue_ns += nanos(run.start - ready);
    timing.batched = run.batched;
    let c = Commit {
        model,
        timing,
        received,
        delay_start: run.start,
    };
    Some((run.end, c))
}

/// Answers every complete request in the read buffer, in order, while there is room for
/// their answers (see [`Conn::room_to_answer`]); the rest wait as the backlog.
fn process(conn: &mut Conn, ctx: &mut Ctx) {
    conn.backlog = false;
    while !conn.closing {
        if !conn.room_to_answer() {
            conn.backlog = conn.rstart < conn.rend;
            return;
        }
        let buf = &conn.rbuf[conn.rstart..conn.rend];
        match conn.reader.advance(buf, &mut conn.decoded) {
            Ok(Progress::NeedMore { send_continue }) => {
                if send_continue {
                    emit(conn, ctx.timers, ctx.slot, None, |out| {
                        out.extend_from_slice(CONTINUE_100)
                    });
                }
                return;
            }
            Ok(Progress::Done {
                head,
                consumed,
                body,
            }) => {
                answer(conn, ctx, &head, body);
                conn.rstart += consumed;
                conn.request_started = None;
                conn.served = true;
                // Idle again from now on, even if the answer went out at once.
                conn.was_idle = false;
                if conn.rstart == conn.rend && conn.decoded.capacity() > 4 * READ_BUF {
                    // A large chunked body's buffer is not kept by an idle connection.
                    conn.decoded = Vec::new();
                }
            }
            Err(e) => return refuse(conn, ctx, e.status, &e.msg),
        }
    }
}

/// Answers a request the server will not process and stops reading from the connection.
fn refuse(conn: &mut Conn, ctx: &mut Ctx, status: u16, msg: &str) {
    let mut body = Vec::new();
    write_error_json(&mut body, msg);
    ctx.shared.stats.count_http_request();
    emit(conn, ctx.timers, ctx.slot, None, |out| {
        write_head(out, status, JSON, body.len(), None, true);
        out.extend_from_slice(&body);
    });
    conn.closing = true;
    conn.rstart = conn.rend;
    conn.request_started = None;
}

/// Reads and answers until the socket has nothing more (or backpressure), writing as it goes.
/// Returns false when the connection must be closed now.
pub fn pump(conn: &mut Conn, ctx: &mut Ctx) -> bool {
    if conn.lingering.is_some() {
        return discard_input(conn);
    }
    if conn.place.evicted() {
        return false;
    }
    if conn.backlog && conn.room_to_answer() {
        process(conn, ctx);
    }
    loop {
        while conn.can_read() {
            if conn.make_room().is_err() {
                refuse(conn, ctx, 413, "request exceeds the size limit");
                break;
            }
            match conn.stream.read(&mut conn.rbuf[conn.rend..]) {
                Ok(0) => conn.read_eof = true,
                Ok(n) => {
                    conn.rend += n;
                    conn.last_read = Instant::now();
                    process(conn, ctx);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.read_ready = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if conn.write_out().is_err() {
            return false;
        }
        if !conn.can_read() {
            break;
        }
    }
    if !sync_place(conn) {
        return false;
    }
    arm_read_timer(conn, ctx);
    if !conn.finished() {
        return true;
    }
    if conn.read_eof {
        return false;
    }
    // Reading has stopped (Connection: close or a refused request): half-close and linger.
    let _ = conn.stream.shutdown(Shutdown::Write);
    conn.lingering = Some(0);
    conn.read_ready = true;
    let deadline = Instant::now() + LINGER;
    conn.linger_until = deadline;
    ctx.timers
        .push(Reverse((deadline, ctx.slot, conn.generation)));
    discard_input(conn)
}

/// Tells the connection's place whether it is idle now; false when the place has gone to
/// another connection (close it).
fn sync_place(conn: &mut Conn) -> bool {
    let idle = conn.idle();
    if idle && !conn.was_idle {
        conn.idle_since = Instant::now();
    }
    conn.was_idle = idle;
    if idle {
        conn.place.idle(conn.idle_since, conn.served)
    } else {
        conn.place.busy()
    }
}

/// When the request being read times out: [`Conn::request_read_timeout`] after its first byte,
/// and sooner its head [`Conn::read_timeout`] after its first byte, its body that long after
/// the last byte.
fn read_due(conn: &Conn, started: Instant) -> Instant {
    let from = if conn.reader.in_head() {
        started
    } else {
        conn.last_read
    };
    (from + conn.read_timeout).min(started + conn.request_read_timeout)
}

/// Why the request being read (its first byte at `started`) is refused at `now`, if it is late.
fn lateness(conn: &Conn, started: Instant, now: Instant) -> Option<String> {
    if started + conn.request_read_timeout <= now {
        return Some(format!(
            "request not complete {:?} after its first byte (--request-read-timeout)",
            conn.request_read_timeout
        ));
    }
    if read_due(conn, started) > now {
        return None;
    }
    Some(if conn.reader.in_head() {
        format!(
            "request head not complete {:?} after its first byte",
            conn.read_timeout
        )
    } else {
        format!("request body paused for more than {:?}", conn.read_timeout)
    })
}

/// When an idle connection with nothing partly read is closed: [`Conn::read_timeout`] after
/// accept until its first request, then [`Conn::idle_timeout`] after it last became idle.
fn idle_due(conn: &Conn) -> Instant {
    if conn.served {
        conn.idle_since + conn.idle_timeout
    } else {
        conn.accepted + conn.read_timeout
    }
}

/// Arms the read timer for the request partly there, or for the idle connection, unless one
/// is armed for that time or sooner already. Nothing is armed while answers are pending.
fn arm_read_timer(conn: &mut Conn, ctx: &mut Ctx) {
    if conn.closing || conn.read_eof {
        conn.request_started = None;
        return;
    }
    let partial = conn.rstart < conn.rend || !conn.reader.in_head();
    let due = if partial {
        let started = *conn.request_started.get_or_insert(conn.last_read);
        read_due(conn, started)
    } else {
        conn.request_started = None;
        if !conn.idle() {
            return;
        }
        idle_due(conn)
    };
    arm_at(conn, ctx, due);
}

fn arm_at(conn: &mut Conn, ctx: &mut Ctx, due: Instant) {
    if conn.read_deadline.map_or(true, |armed| due < armed) {
        conn.read_deadline = Some(due);
        ctx.timers.push(Reverse((due, ctx.slot, conn.generation)));
    }
}

/// A timer of the connection fired: a request that has not arrived in time is refused with
/// 408 (the connection closes after it), an idle connection whose time is up is closed, and
/// held answers whose time has come are released. Returns false when the connection must be
/// closed now (idle too long, or its lingering close is over).
pub fn on_timer(conn: &mut Conn, ctx: &mut Ctx, now: Instant) -> bool {
    if conn.lingering.is_some() {
        return now < conn.linger_until;
    }
    if conn.read_deadline.is_some_and(|d| d <= now) {
        conn.read_deadline = None;
        if !check_read(conn, ctx, now) {
            return false;
        }
    }
    conn.release_held(now, ctx.shared, ctx.timers, ctx.slot);
    true
}

/// The read deadline has passed: refuses a late request, or says the idle connection must
/// close (false), or arms the timer again.
fn check_read(conn: &mut Conn, ctx: &mut Ctx, now: Instant) -> bool {
    if conn.closing || conn.read_eof {
        return true;
    }
    let Some(started) = conn.request_started else {
        if conn.idle() && idle_due(conn) <= now {
            return false;
        }
        arm_read_timer(conn, ctx);
        return true;
    };
    if conn.unsent() > 0 || !conn.held.is_empty() {
        // While the server itself holds answers back it does not read: not the client's
        // delay. The request's time starts again.
        conn.request_started = Some(now);
        arm_at(conn, ctx, now + conn.read_timeout);
        return true;
    }
    match lateness(conn, started, now) {
        Some(msg) => refuse(conn, ctx, 408, &msg),
        None => arm_read_timer(conn, ctx),
    }
    true
}

/// Reads and drops input while lingering; false once the peer is done or sent too much.
fn discard_input(conn: &mut Conn) -> bool {
    if conn.rbuf.is_empty() {
        conn.rbuf = vec![0; READ_BUF];
    }
    loop {
        match conn.stream.read(&mut conn.rbuf) {
            Ok(0) => return false,
            Ok(n) => {
                let total = conn.lingering.unwrap_or(0) + n;
                if total > LINGER_BYTES {
                    return false;
                }
                conn.lingering = Some(total);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Counts the inferences behind still-held responses when a connection goes away: they ran.
pub fn abandon(conn: &mut Conn, stats: &Stats) {
    let now = Instant::now();
    for held in conn.held.drain(..) {
        if let Some(c) = held.commit {
            commit(stats, &c, now);
        }
    }
}

#[cfg(test)]
#[path = "conn_idle_tests.rs"]
mod idle_tests;
#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
