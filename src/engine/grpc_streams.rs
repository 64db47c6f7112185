//! The gRPC pool's per-stream side: what each session event does to the request in its
//! slot (response counting, stamps, completion, failure).

use super::pool::Sink;
use super::wire::GrpcWire;
use crate::clock::Clock;
use crate::measure::record::push_framed_response;
use crate::measure::RequestRecord;
use crate::protocol::grpc::session::{Event, StreamEnd};
use crate::service::stream_scan::scan_stream_response;

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
        }
    }
}

/// When the data behind a session event arrived: its read's kernel stamp, or now.
#[derive(Clone, Copy)]
pub(super) struct When<'a> {
    pub(super) clock: &'a Clock,
    pub(super) at: Option<u64>,
}

impl When<'_> {
    fn now_ns(self) -> u64 {
        self.at.unwrap_or_else(|| self.clock.now_ns())
    }
}

/// One session event: stamps, response counting, completion.
pub(super) fn on_stream_event(
    ev: Event<'_>,
    streams: &mut Vec<(u32, usize)>,
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: When<'_>,
) {
    let id = match &ev {
        Event::Headers { stream }
        | Event::Message { stream, .. }
        | Event::Closed { stream, .. } => *stream,
    };
    let Some(pos) = streams.iter().position(|&(sid, _)| sid == id) else {
        return;
    };
    let s = streams[pos].1;
    match ev {
        Event::Headers { .. } => {
            if !wire.streaming && slots[s].rec.recv_start_ns == 0 {
                slots[s].rec.recv_start_ns = clock.now_ns();
            }
        }
        Event::Message { data, .. } => {
            if wire.streaming {
                on_stream_response(s, data, slots, free, wire, sink, clock);
            } else if sink.keep_bodies {
                slots[s].body.clear();
                slots[s].body.extend_from_slice(data);
            }
        }
        Event::Closed { end, .. } => {
            streams.swap_remove(pos);
            on_closed(s, &end, slots, free, wire, sink, clock);
        }
    }
}

/// A streaming response: counts it, and completes the request at its final response.
fn on_stream_response(
    s: usize,
    data: &[u8],
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: When<'_>,
) {
    let slot = &mut slots[s];
    if !slot.busy {
        return;
    }
    let now = clock.now_ns();
    let resp = match scan_stream_response(data) {
        Ok(r) => r,
        Err(e) => return fail_slot(slot, free, s, sink, now, e.to_string()),
    };
    if let Some(err) = resp.error {
        let msg = String::from_utf8_lossy(err).into_owned();
        return fail_slot(slot, free, s, sink, now, msg);
    }
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
    if resp.final_flag.unwrap_or(!wire.decoupled) {
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
        slot.busy = false;
        sink.finish(slot.rec, &slot.body);
        free.push(s);
    }
}

fn fail_slot(
    slot: &mut Slot,
    free: &mut Vec<usize>,
    s: usize,
    sink: &mut Sink,
    now: u64,
    msg: String,
) {
    slot.rec.end_ns = now.max(slot.rec.start_ns);
    slot.rec.ok = false;
    slot.busy = false;
    sink.finish(slot.rec, &[]);
    sink.fail(msg);
    free.push(s);
}

/// A stream ended: a unary call completes; a streaming slot loses its stream.
pub(super) fn on_closed(
    s: usize,
    end: &StreamEnd,
    slots: &mut [Slot],
    free: &mut Vec<usize>,
    wire: &GrpcWire,
    sink: &mut Sink,
    clock: When<'_>,
) {
    let slot = &mut slots[s];
    slot.stream = 0;
    if !slot.busy {
        return;
    }
    let now = clock.now_ns();
    if *end == StreamEnd::Refused {
        // The server never processed it (GOAWAY): no record; the slot sends again later.
        slot.busy = false;
        sink.abandon(&slot.rec);
        free.push(s);
        return;
    }
    if wire.streaming || !end.is_ok() {
        let why = if end.is_ok() {
            "the stream ended before the request's final response".to_string()
        } else {
            end.to_string()
        };
        return fail_slot(slot, free, s, sink, now, why);
    }
    slot.rec.end_ns = now;
    if slot.rec.recv_start_ns == 0 {
        slot.rec.recv_start_ns = now;
    }
    slot.rec.ok = true;
    slot.rec.responses = 1;
    slot.busy = false;
    sink.finish_in_slot(slot.rec, &slot.body, s);
    free.push(s);
}
