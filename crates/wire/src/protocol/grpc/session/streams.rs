//! Per-stream state and the table that finds it by id. Slots (with their pending-send buffer
//! and message reader) are recycled through a free list, and the id index is a sorted vector
//! (ids only grow, so inserts append), so steady-state calls allocate nothing.

use crate::protocol::grpc::message::MessageReader;

/// Where the response side of a stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for the response HEADERS (1xx informational headers keep it here).
    AwaitHeaders,
    /// Headers (status 200) seen; DATA and then trailers may follow.
    Body,
}

/// One open stream (both directions); removed from the table once its response ends or it
/// is cancelled.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) id: u32,
    /// The slot holds an open stream (false while on the free list).
    in_use: bool,
    pub(super) phase: Phase,
    /// The caller ended the client's side (END_STREAM sent, or owed after `pending`).
    pub(super) local_done: bool,
    /// Bytes the client may still send on this stream (negative after a SETTINGS shrink).
    pub(super) send_window: i64,
    /// Bytes the server may still send on this stream before the client's next WINDOW_UPDATE.
    pub(super) recv_remaining: i64,
    /// Request bytes the windows did not admit yet; `pending[pending_sent..]` is unsent.
    pub(super) pending: Vec<u8>,
    pub(super) pending_sent: usize,
    /// END_STREAM goes out with the last pending byte.
    pub(super) pending_end: bool,
    /// Reassembles response messages from DATA payloads.
    pub(super) reader: MessageReader,
    /// The response named a `grpc-encoding`: its messages may be flagged compressed.
    pub(super) encoded: bool,
}

impl Stream {
    /// Whether request bytes (or END_STREAM) still wait for a send window.
    pub(super) fn has_pending(&self) -> bool {
        self.pending_sent < self.pending.len() || self.pending_end
    }

    /// Forgets what was pending, keeping the buffer's capacity.
    pub(super) fn clear_pending(&mut self) {
        self.pending.clear();
        self.pending_sent = 0;
        self.pending_end = false;
    }
}

/// The open streams of one connection.
#[derive(Debug)]
pub(super) struct StreamTable {
    slots: Vec<Stream>,
    /// Indices of `slots` not in use.
    free: Vec<usize>,
    /// `(stream id, slot index)` of open streams, sorted by id.
    index: Vec<(u32, usize)>,
    /// Largest response message a stream accepts (bytes).
    max_message: usize,
}

impl StreamTable {
    pub(super) fn new(max_message: usize) -> Self {
        StreamTable {
            slots: Vec::new(),
            free: Vec::new(),
            index: Vec::new(),
            max_message,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// The lowest open stream id.
    pub(super) fn first_id(&self) -> Option<u32> {
        self.index.first().map(|&(id, _)| id)
    }

    /// The highest open stream id.
    pub(super) fn last_id(&self) -> Option<u32> {
        self.index.last().map(|&(id, _)| id)
    }

    /// Adds stream `id`, which must be above every id in the table, with windows in bytes.
    pub(super) fn insert(&mut self, id: u32, send_window: i64, recv_window: i64) -> &mut Stream {
        debug_assert!(
            self.last_id().map_or(true, |last| last < id),
            "ids must grow"
        );
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Stream {
                    id,
                    in_use: false,
                    phase: Phase::AwaitHeaders,
                    local_done: false,
                    send_window: 0,
                    recv_remaining: 0,
                    pending: Vec::new(),
                    pending_sent: 0,
                    pending_end: false,
                    reader: MessageReader::with_limit(self.max_message),
                    encoded: false,
                });
                self.slots.len() - 1
            }
        };
        self.index.push((id, slot));
        let stream = &mut self.slots[slot];
        stream.id = id;
        stream.in_use = true;
        stream.phase = Phase::AwaitHeaders;
        stream.encoded = false;
        stream.local_done = false;
        stream.send_window = send_window;
        stream.recv_remaining = recv_window;
        stream.clear_pending();
        stream.reader.reset();
        stream
    }

    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Stream> {
        let pos = self.position(id)?;
        let slot = self.index[pos].1;
        self.slots.get_mut(slot)
    }

    /// Removes stream `id`; returns whether it had request bytes pending.
    pub(super) fn remove(&mut self, id: u32) -> Option<bool> {
        let pos = self.position(id)?;
        let (_, slot) = self.index.remove(pos);
        self.free.push(slot);
        let stream = self.slots.get_mut(slot)?;
        stream.in_use = false;
        Some(stream.has_pending())
    }

    /// Every open stream, in slot order.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.slots.iter_mut().filter(|stream| stream.in_use)
    }

    fn position(&self, id: u32) -> Option<usize> {
        self.index.binary_search_by_key(&id, |&(id, _)| id).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_ids_found() {
        let mut table = StreamTable::new(1024);
        for id in [1, 3, 5] {
            table.insert(id, 100, 200).pending.extend_from_slice(b"abc");
        }
        assert_eq!(table.len(), 3);
        assert_eq!(table.remove(3), Some(true));
        assert_eq!(table.remove(3), None);
        assert!(table.get_mut(3).is_none());
        // The freed slot comes back clean for the next id.
        let stream = table.insert(7, 10, 20);
        assert_eq!(
            (stream.id, stream.send_window, stream.pending.len()),
            (7, 10, 0)
        );
        assert_eq!(table.slots.len(), 3, "no new slot while one is free");
        assert_eq!(table.get_mut(5).map(|s| s.id), Some(5));
        assert_eq!((table.first_id(), table.last_id()), (Some(1), Some(7)));
        let ids: Vec<u32> = table.iter_mut().map(|s| s.id).collect();
        assert_eq!(ids.len(), 3);
        for id in [1, 5, 7] {
            assert!(ids.contains(&id));
        }
    }
}
