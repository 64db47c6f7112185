//! The request side: opening streams, writing DATA within the server's flow-control windows,
//! parking what does not fit and resuming it when the windows grow.

use super::streams::Stream;
use super::{Conn, SendError};
use crate::protocol::grpc::frame::{write_data, write_headers, write_rst_stream, ErrorCode};

/// HPACK "dynamic table size update" to 0 (RFC 7541 §6.3): prefix `001`, value 0.
const TABLE_SIZE_UPDATE_TO_ZERO: u8 = 0x20;

impl Conn {
    /// Opens the next stream (the caller checked `can_open`) and returns its id.
    pub(super) fn open(&mut self, headers: &[u8], body: &[u8], end_stream: bool) -> u32 {
        let id = self.next_stream;
        // next_stream <= 2^31-1 here, so this cannot overflow a u32.
        self.next_stream += 2;
        let headers_end_stream = end_stream && body.is_empty();
        self.write_request_headers(id, headers, headers_end_stream);
        let recv_window = i64::from(self.cfg.recv_window);
        let stream = self
            .streams
            .insert(id, self.peer_initial_window, recv_window);
        stream.local_done = end_stream;
        if !headers_end_stream {
            self.queue_body(id, body, end_stream);
        }
        id
    }

    /// More request bytes on `id`, after any still pending.
    pub(super) fn send(&mut self, id: u32, body: &[u8], end_stream: bool) -> Result<(), SendError> {
        if self.failed.is_some() {
            return Err(SendError::NotOpen(id));
        }
        match self.streams.get_mut(id) {
            Some(stream) if !stream.local_done => stream.local_done = end_stream,
            _ => return Err(SendError::NotOpen(id)),
        }
        self.queue_body(id, body, end_stream);
        Ok(())
    }

    /// Resets `id` with CANCEL and forgets it.
    pub(super) fn cancel(&mut self, id: u32) {
        if self.failed.is_none() && self.streams.get_mut(id).is_some() {
            self.release(id);
            write_rst_stream(&mut self.out, id, ErrorCode::Cancel);
        }
    }

    /// Removes `id` from the table and from the blocked queue.
    pub(super) fn release(&mut self, id: u32) {
        if self.streams.remove(id) == Some(true) {
            self.blocked.retain(|&blocked| blocked != id);
        }
    }

    /// Writes the HEADERS block, prefixed once with a table size update if the server shrank
    /// SETTINGS_HEADER_TABLE_SIZE below the default the (non-indexing) encoder assumed.
    fn write_request_headers(&mut self, id: u32, block: &[u8], end_stream: bool) {
        let max_frame = self.peer_max_frame;
        if self.table_update_due && !self.table_update_sent {
            self.header_scratch.clear();
            self.header_scratch.push(TABLE_SIZE_UPDATE_TO_ZERO);
            self.header_scratch.extend_from_slice(block);
            write_headers(
                &mut self.out,
                id,
                &self.header_scratch,
                end_stream,
                max_frame,
            );
            self.table_update_sent = true;
        } else {
            write_headers(&mut self.out, id, block, end_stream, max_frame);
        }
    }

    /// Writes what the windows admit of `body` on open stream `id` and parks the rest.
    fn queue_body(&mut self, id: u32, body: &[u8], end_stream: bool) {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(id) else {
            return;
        };
        if stream.has_pending() {
            // Keep the byte order: behind what already waits.
            stream.pending.extend_from_slice(body);
            stream.pending_end |= end_stream;
            return;
        }
        let sent = write_within_windows(
            &mut self.out,
            &mut self.send_window,
            stream,
            body,
            end_stream,
            max_frame,
        );
        if sent < body.len() {
            stream.pending.extend_from_slice(&body[sent..]);
            stream.pending_end = end_stream;
            self.blocked.push_back(id);
        }
    }

    /// Sends parked request bytes, oldest stream first, while the connection window lasts.
    pub(super) fn flush_blocked(&mut self) {
        let max_frame = self.peer_max_frame;
        for _ in 0..self.blocked.len() {
            if self.send_window <= 0 {
                break;
            }
            let Some(id) = self.blocked.pop_front() else {
                break;
            };
            let Some(stream) = self.streams.get_mut(id) else {
                continue;
            };
            let start = stream.pending_sent;
            let end_stream = stream.pending_end;
            let pending = std::mem::take(&mut stream.pending);
            let sent = write_within_windows(
                &mut self.out,
                &mut self.send_window,
                stream,
                &pending[start..],
                end_stream,
                max_frame,
            );
            stream.pending = pending;
            stream.pending_sent += sent;
            if stream.pending_sent == stream.pending.len() {
                stream.clear_pending();
            } else {
                self.blocked.push_back(id);
            }
        }
    }
}

/// Appends DATA frames for the longest prefix of `data` that both the connection window and
/// the stream's window admit (bytes), END_STREAM on the last if all of `data` went and
/// `end_stream`; returns the bytes written. An empty END_STREAM frame needs no window.
fn write_within_windows(
    out: &mut Vec<u8>,
    conn_window: &mut i64,
    stream: &mut Stream,
    data: &[u8],
    end_stream: bool,
    max_frame: u32,
) -> usize {
    let allowed = usize::try_from((*conn_window).min(stream.send_window)).unwrap_or(0);
    let take = data.len().min(allowed);
    let all = take == data.len();
    if take == 0 && !(all && end_stream) {
        return 0;
    }
    write_data(out, stream.id, &data[..take], all && end_stream, max_frame);
    // take <= allowed, which came from an i64.
    *conn_window -= take as i64;
    stream.send_window -= take as i64;
    take
}
