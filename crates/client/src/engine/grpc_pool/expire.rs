//! Time-outs of the gRPC pool: a connection that moved no byte for the limit is replaced, a
//! stream that made no progress is reset; either way the requests fail as timed out.

use super::super::deadline::{timeout_message, Waiting};
use super::super::grpc_streams::{StreamCx, When};
use super::super::pool::Cx;
use super::{flush, GrpcPool};
use crate::measure::FailKind;

impl GrpcPool {
    /// Connection `i` moved no byte for the limit: its streams fail as timed out (each with
    /// what it waited for), and it is replaced.
    pub(super) fn expire_conn(
        &mut self,
        i: usize,
        connecting: bool,
        limit_ns: u64,
        cx: &mut Cx<'_>,
    ) {
        if connecting {
            let msg = timeout_message(limit_ns, Waiting::Connecting);
            self.fail_conn(i, FailKind::Timeout, msg, cx);
        }
        let now = cx.clock.now_ns();
        let streams = std::mem::take(&mut self.conns[i].streams);
        for &(_, s) in &streams {
            if self.slots[s].busy {
                self.fail_timed_out(s, now, limit_ns, cx);
            }
        }
        self.conns[i].streams = streams;
        self.conns[i].streams.clear();
        self.reconnect(i, cx);
    }

    /// Resets and fails the streams of connection `i` that made no progress for the limit.
    pub(super) fn expire_streams(&mut self, i: usize, now_ns: u64, limit_ns: u64, cx: &mut Cx<'_>) {
        let mut k = 0;
        let mut reset = false;
        while let Some(&(id, s)) = self.conns[i].streams.get(k) {
            let (progress, _) = self.slots[s].progress();
            if !self.slots[s].busy || !self.slots[s].watch.stalled(progress, now_ns, limit_ns) {
                k += 1;
                continue;
            }
            self.conns[i].session.cancel(id);
            self.conns[i].streams.swap_remove(k);
            self.slots[s].stream = 0;
            self.fail_timed_out(s, now_ns, limit_ns, cx);
            reset = true;
        }
        if reset {
            if let Err((kind, e)) = flush(&mut self.conns[i], i, cx.registry) {
                self.fail_conn(i, kind, e, cx);
            }
        }
    }

    /// Slot `s`'s request fails as timed out.
    fn fail_timed_out(&mut self, s: usize, now_ns: u64, limit_ns: u64, cx: &mut Cx<'_>) {
        let (_, waiting) = self.slots[s].progress();
        let msg = timeout_message(limit_ns, waiting);
        self.slots[s].stream = 0;
        let mut streams = StreamCx::new(
            &mut self.slots,
            &mut self.free,
            (&self.wire, &self.check),
            cx.sink,
            When {
                clock: cx.clock,
                at: Some(now_ns),
            },
        );
        streams.fail(s, now_ns, FailKind::Timeout, msg);
    }
}
