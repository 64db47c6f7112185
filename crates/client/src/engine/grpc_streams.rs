//! The gRPC pool's per-stream side: what each session event does to the request in its
//! slot (response counting, stamps, completion, failure).

use super::deadline::{mark, Waiting, Watch};
use super::pool::Sink;
use super::wire::GrpcWire;
use crate::clock::Clock;
use crate::measure::record::push_framed_response;
use crate::measure::{FailKind, RequestRecord};
use crate::protocol::grpc::session::{Event, StreamEnd};
use crate::service::reply_check::{Bad, LastGood, ReplyCheck};
use crate::service::stream_scan::scan_stream_response;
use crate::transport::rx_stamp::Arrival;

pub(super) struct Slot {
    pub(super) conn: usize,
    /// The stream carrying this slot's request (streaming: its long-lived stream); 0 = none.
    pub(super) stream: u32,
    pub(super) busy: bool,
    pub(super) rec: RequestRecord,
    /// Response bytes kept for the profile export.
    pub(super) body: Vec<u8>,
    /// Streaming: arrival of the last response with outputs (ns).
    pub(super) last_output_ns: u64,
    /// The request timeout's view of the request in flight (see `deadline.rs`).
    pub(super) watch: Watch,
    /// Unary, with a reply check: the verdict on the reply message (`None`: none came yet).
    pub(super) reply: Option<Result<(), Bad>>,
    /// The last reply that passed the reply check (see `LastGood`).
    pub(super) last_good: LastGood,
    /// When the request in flight was queued in the session (ns): tells it from a later
    /// request of the slot while its bytes wait to be written (see `grpc_pool::Unsent`).
    pub(super) queued_ns: u64,
    /// The longest the data of a stamped read that brought an event of the request in
    /// flight waited in the socket for the worker (ns).
    pub(super) read_delay_max_ns: u64,
}

impl Slot {
    pub(super) fn new(conn: usize) -> Slot {
        Slot {
            conn,
            stream: 0,
            busy: false,
            rec: RequestRecord::default(),
            body: Vec::new(),
            last_output_ns: 0,
            watch: Watch::default(),
            reply: None,
            last_good: LastGood::default(),
            queued_ns: 0,
            read_delay_max_ns: 0,
        }
    }

    /// What the request in flight waits for and a mark of its progress (its start, its
    /// response headers, its responses and kept bytes).
    pub(super) fn progress(&self) -> (u64, Waiting) {
        let rec = &self.rec;
        let begun = rec.recv_start_ns != 0 || rec.responses != 0;
        let waiting = if begun {
            Waiting::NextResponse
        } else {
            Waiting::FirstResponse
        };
        let parts = [
            rec.start_ns,
            rec.recv_start_ns,
            u64::from(rec.responses),
            self.body.len() as u64,
        ];
        (mark(parts), waiting)
    }
}

/// When the data behind a session event arrived: its read's kernel stamp, or now.
#[derive(Clone, Copy)]
pub(super) struct When<'a> {
    pub(super) clock: &'a Clock,
    pub(super) at: Option<u64>,
    /// The read behind the event, when reads are stamped: how its time was taken and how
    /// long the data waited for the worker.
    pub(super) rx: Option<Arrival>,
}

impl When<'_> {
    fn now_ns(self) -> u64 {
        self.at.unwrap_or_else(|| self.clock.now_ns())
    }

    /// Notes on a completed request's record how its end was timed, and the client's delay:
    /// the longest of its reads' (`read_delay_max_ns` before this one). The send's end is
    /// read from the clock after the write returned; a kernel stamp earlier than that says
    /// the request was out by then.
    fn mark(self, rec: &mut RequestRecord, read_delay_max_ns: u64) {
        if let Some(a) = self.rx {
            rec.rx = a.rx_time();
            let delay_ns = a.delay_ns().max(read_delay_max_ns);
            rec.rx_delay_us = crate::measure::record::delay_us(delay_ns);
            rec.send_end_ns = rec.send_end_ns.min(rec.recv_start_ns);
        }
    }
}

/// What a session event acts on: the pool's slots and free list, the run's sink, and when
/// the event's data arrived.
pub(super) struct StreamCx<'a> {
    slots: &'a mut [Slot],
    free: &'a mut Vec<usize>,
    wire: &'a GrpcWire,
    check: &'a ReplyCheck,
    sink: &'a mut Sink,
    when: When<'a>,
    /// Why the connection went down, for its streams that end `Disconnected`.
    cause: Option<(FailKind, &'a str)>,
}

impl<'a> StreamCx<'a> {
    pub(super) fn new(
        slots: &'a mut [Slot],
        free: &'a mut Vec<usize>,
        (wire, check): (&'a GrpcWire, &'a ReplyCheck),
        sink: &'a mut Sink,
        when: When<'a>,
    ) -> StreamCx<'a> {
        StreamCx {
            slots,
            free,
            wire,
            check,
            sink,
            when,
            cause: None,
        }
    }

    /// Streams that end because the connection went down fail with this kind and message.
    pub(super) fn with_cause(mut self, kind: FailKind, msg: &'a str) -> StreamCx<'a> {
        self.cause = Some((kind, msg));
        self
    }

    /// One session event on a connection with `streams` in flight: stamps, response
    /// counting, completion.
    pub(super) fn event(&mut self, ev: Event<'_>, streams: &mut Vec<(u32, usize)>) {
        let id = match &ev {
            Event::Headers { stream }
            | Event::Message { stream, .. }
            | Event::Closed { stream, .. } => *stream,
        };
        let Some(pos) = streams.iter().position(|&(sid, _)| sid == id) else {
            return;
        };
        let s = streams[pos].1;
        if let Some(a) = self.when.rx {
            let slot = &mut self.slots[s];
            slot.read_delay_max_ns = slot.read_delay_max_ns.max(a.delay_ns());
        }
        match ev {
            Event::Headers { .. } => {
                let rec = &mut self.slots[s].rec;
                if !self.wire.streaming && rec.recv_start_ns == 0 {
                    rec.recv_start_ns = self.when.now_ns();
                }
            }
            Event::Message {
                data, compressed, ..
            } => {
                if self.wire.streaming {
                    return self.response(s, data);
                }
                if !self.check.is_none() {
                    // A compressed reply is not decoded on the hot path: it is taken as is.
                    let check = self.check;
                    let verdict = if compressed {
                        Ok(())
                    } else {
                        let good = &mut self.slots[s].last_good;
                        good.verify(data, None, |m, _| check.grpc(m))
                    };
                    self.slots[s].reply = Some(verdict);
                }
                if self.sink.keep_bodies {
                    self.slots[s].body.clear();
                    self.slots[s].body.extend_from_slice(data);
                }
            }
            Event::Closed { end, .. } => {
                streams.swap_remove(pos);
                self.closed(s, &end);
            }
        }
    }

    /// A streaming response: counts it, and completes the request at its final response.
    fn response(&mut self, s: usize, data: &[u8]) {
        if !self.slots[s].busy {
            return;
        }
        let now = self.when.now_ns();
        let check = self.check;
        let verdict = if check.is_none() {
            Ok(())
        } else {
            let good = &mut self.slots[s].last_good;
            good.verify(data, None, |m, _| check.grpc_stream(m))
        };
        if let Err(bad) = verdict {
            return self.fail(s, now, bad.kind, bad.msg);
        }
        let resp = match scan_stream_response(data) {
            Ok(r) => r,
            Err(e) => return self.fail(s, now, FailKind::NotProtobuf, e.to_string()),
        };
        if let Some(err) = resp.error {
            let msg = String::from_utf8_lossy(err).into_owned();
            return self.fail(s, now, FailKind::Status, msg);
        }
        let (slot, sink) = (&mut self.slots[s], &mut *self.sink);
        if sink.keep_bodies {
            push_framed_response(&mut slot.body, now, data);
        }
        if resp.has_outputs {
            if slot.rec.responses == 0 {
                slot.rec.recv_start_ns = now;
            }
            slot.rec.responses += 1;
            slot.last_output_ns = now;
            sink.response(slot.rec.responses);
        }
        if resp.final_flag.unwrap_or(!self.wire.decoupled) {
            // Latency runs to the last response with outputs; a request answered only by the
            // empty final response ends there.
            slot.rec.end_ns = if slot.rec.responses > 0 {
                slot.last_output_ns
            } else {
                now
            };
            if slot.rec.recv_start_ns == 0 {
                slot.rec.recv_start_ns = slot.rec.end_ns;
            }
            slot.rec.ok = true;
            self.when.mark(&mut slot.rec, slot.read_delay_max_ns);
            slot.busy = false;
            slot.watch.reset();
            sink.finish(slot.rec, &slot.body);
            self.free.push(s);
        }
    }

    /// The request in slot `s` failed at `now` with `msg`.
    pub(super) fn fail(&mut self, s: usize, now: u64, kind: FailKind, msg: String) {
        let slot = &mut self.slots[s];
        slot.rec.end_ns = now.max(slot.rec.start_ns);
        slot.rec.ok = false;
        slot.rec.fail = kind;
        slot.busy = false;
        slot.watch.reset();
        self.sink.finish(slot.rec, &[]);
        self.sink.fail(kind, msg);
        self.free.push(s);
    }

    /// A stream ended: a unary call completes; a streaming slot loses its stream.
    fn closed(&mut self, s: usize, end: &StreamEnd) {
        let slot = &mut self.slots[s];
        slot.stream = 0;
        if !slot.busy {
            return;
        }
        let now = self.when.now_ns();
        if *end == StreamEnd::Refused {
            // The server never processed it (GOAWAY): no record; the slot sends again later.
            slot.busy = false;
            self.sink.abandon(&slot.rec);
            self.free.push(s);
            return;
        }
        if self.wire.streaming || !end.is_ok() {
            // The exports' error `code`: the call's grpc-status, or the HTTP status of a
            // reply that was not gRPC.
            self.slots[s].rec.status = match end {
                StreamEnd::Grpc { code, .. } => u16::try_from(*code).unwrap_or(u16::MAX),
                StreamEnd::Http(status) => *status,
                _ => 0,
            };
            let (kind, why) = match (end, self.cause) {
                (StreamEnd::Ok, _) => (
                    FailKind::Closed,
                    "the stream ended before the request's final response".to_string(),
                ),
                (StreamEnd::Disconnected, Some((kind, why))) => (kind, why.to_string()),
                (end, _) => (end.kind(), end.to_string()),
            };
            return self.fail(s, now, kind, why);
        }
        if let Some(bad) = self.refused_reply(s) {
            return self.fail(s, now, bad.kind, bad.msg);
        }
        let slot = &mut self.slots[s];
        slot.rec.end_ns = now;
        if slot.rec.recv_start_ns == 0 {
            slot.rec.recv_start_ns = now;
        }
        slot.rec.ok = true;
        slot.rec.responses = 1;
        self.when.mark(&mut slot.rec, slot.read_delay_max_ns);
        slot.busy = false;
        slot.watch.reset();
        self.sink.finish_in_slot(slot.rec, &slot.body, s);
        self.free.push(s);
    }

    /// Unary, with a reply check: why the call's reply is refused (a refused message, or
    /// none at all before an OK status).
    fn refused_reply(&mut self, s: usize) -> Option<Bad> {
        if self.check.is_none() {
            return None;
        }
        match self.slots[s].reply.take() {
            Some(verdict) => verdict.err(),
            None => Some(Bad::new(
                FailKind::NotProtobuf,
                "reply has no message (grpc-status 0 without a response)",
            )),
        }
    }
}
