//! Time-outs of the gRPC pool: a connection that moved no byte for the idle limit is
//! replaced, a stream that made no progress for it, or ran past the total limit, is reset;
//! either way the requests fail as timed out.

use super::super::deadline::{timeout_message, Limit, Received, Sweep, Waiting};
use super::super::grpc_streams::{StreamCx, When};
use super::super::pool::Cx;
use super::{flush, GrpcPool};
use crate::measure::FailKind;

impl GrpcPool {
    /// Connection `i` moved no byte for the idle limit: its streams fail as timed out (each
    /// with what it waited for), and it is replaced.
    pub(super) fn expire_conn(
        &mut self,
        i: usize,
        connecting: bool,
        sweep: &Sweep,
        cx: &mut Cx<'_>,
    ) {
        if connecting {
            let msg = timeout_message(sweep.idle_ns, Waiting::Connecting);
            self.fail_conn(i, FailKind::Timeout, msg, cx);
        }
        let streams = std::mem::take(&mut self.conns[i].streams);
        for &(_, s) in &streams {
            if self.slots[s].busy {
                let limit = if sweep.over_total(self.slots[s].rec.start_ns) {
                    Limit::Total
                } else {
                    Limit::Idle
                };
                self.fail_timed_out(s, sweep, limit, cx);
            }
        }
        self.conns[i].streams = streams;
        self.conns[i].streams.clear();
        self.reconnect(i, cx);
    }

    /// Resets and fails the streams of connection `i` that made no progress for the idle
    /// limit or ran past the total limit.
    pub(super) fn expire_streams(&mut self, i: usize, sweep: &Sweep, cx: &mut Cx<'_>) {
        let mut k = 0;
        let mut reset = false;
        while let Some(&(id, s)) = self.conns[i].streams.get(k) {
            let slot = &mut self.slots[s];
            let (progress, _) = slot.progress();
            let start = slot.busy.then_some(slot.rec.start_ns);
            let over = sweep.over(&mut slot.watch, progress, start);
            let (true, Some(limit)) = (slot.busy, over) else {
                k += 1;
                continue;
            };
            self.conns[i].session.cancel(id);
            self.conns[i].streams.swap_remove(k);
            self.slots[s].stream = 0;
            self.fail_timed_out(s, sweep, limit, cx);
            reset = true;
        }
        if reset {
            if let Err((kind, e)) = flush(&mut self.conns[i], i, &mut self.slots, cx) {
                self.fail_conn(i, kind, e, cx);
            }
        }
    }

    /// Slot `s`'s request fails as timed out by `limit`.
    fn fail_timed_out(&mut self, s: usize, sweep: &Sweep, limit: Limit, cx: &mut Cx<'_>) {
        let (_, waiting) = self.slots[s].progress();
        let received = if self.wire.streaming {
            Received::Responses(self.slots[s].rec.responses)
        } else {
            Received::Uncounted
        };
        let msg = sweep.message(limit, waiting, received);
        let now_ns = sweep.now_ns;
        self.slots[s].stream = 0;
        let mut streams = StreamCx::new(
            &mut self.slots,
            &mut self.free,
            (&self.wire, &self.check),
            cx.sink,
            When {
                clock: cx.clock,
                at: Some(now_ns),
                rx: None,
            },
        );
        streams.fail(s, now_ns, FailKind::Timeout, msg);
    }
}
