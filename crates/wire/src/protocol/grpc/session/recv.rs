//! The receive side: one parsed frame at a time, against the connection and stream state
//! (RFC 9113 §5.1 stream states, §6.9 flow control, §8.1 responses; gRPC over HTTP/2 for
//! headers, messages and trailers).

use super::headers::{decode_head, trailers_end, Head};
use super::streams::Phase;
use super::{
    Conn, ConnError, Event, StreamEnd, MAX_CONTINUATIONS, MAX_CONTROL_IN_ROW, MAX_EMPTY_FRAMES,
    MAX_HEADER_BLOCK, MAX_PENDING_ACKS,
};
use crate::protocol::grpc::frame::{
    write_ping_ack, write_rst_stream, write_settings_ack, write_window_update, ErrorCode, Frame,
    SettingsIter, DEFAULT_MAX_FRAME_SIZE, MAX_WINDOW_SIZE, SETTINGS_HEADER_TABLE_SIZE,
    SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE,
};
use crate::protocol::grpc::hpack::{HpackError, DEFAULT_HEADER_TABLE_SIZE};
use crate::protocol::grpc::message::GrpcFramingError;

type On<'e> = &'e mut dyn FnMut(Event<'_>);

fn conn_error(code: ErrorCode, msg: &str) -> ConnError {
    ConnError {
        code,
        msg: msg.to_string(),
    }
}

/// Fails on a flood of frames that each need an acknowledgement (`kind`: PING or SETTINGS):
/// `in_row` since the last response frame, `pending` acknowledgements unwritten.
fn check_flood(kind: &str, in_row: usize, pending: usize) -> Result<(), ConnError> {
    if in_row > MAX_CONTROL_IN_ROW {
        return Err(ConnError::limit(format!(
            "server sent more than {MAX_CONTROL_IN_ROW} {kind} frames in a row without a \
             response ({kind} flood)"
        )));
    }
    if pending > MAX_PENDING_ACKS {
        return Err(ConnError::limit(format!(
            "server sent more than {MAX_PENDING_ACKS} {kind} frames faster than their \
             acknowledgements could be sent ({kind} flood)"
        )));
    }
    Ok(())
}

/// HEADERS plus CONTINUATION frames beyond [`MAX_HEADER_BLOCK`].
fn block_too_large() -> ConnError {
    ConnError::limit(format!(
        "server sent a header block (HEADERS and CONTINUATION frames) larger than \
         {MAX_HEADER_BLOCK} bytes"
    ))
}

fn protocol_error(msg: &str) -> Result<(), ConnError> {
    Err(conn_error(ErrorCode::ProtocolError, msg))
}

impl Conn {
    /// Applies one frame; `flow_len` is its payload length with padding (what flow control
    /// counts, bytes).
    pub(super) fn on_frame(
        &mut self,
        frame: Frame<'_>,
        flow_len: usize,
        on: On<'_>,
    ) -> Result<(), ConnError> {
        self.check_order(&frame)?;
        match frame {
            Frame::Data {
                stream,
                end_stream,
                data,
            } => self.on_data(stream, end_stream, data, flow_len, on),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => self.on_headers(stream, end_stream, end_headers, block, on),
            Frame::Continuation {
                stream,
                end_headers,
                block,
            } => self.on_continuation(stream, end_headers, block, on),
            Frame::RstStream { stream, error_code } => self.on_rst_stream(stream, error_code, on),
            Frame::Settings { ack: false, params } => self.on_settings(params),
            Frame::Ping { ack: false, data } => self.on_ping(data),
            Frame::GoAway {
                last_stream,
                error_code,
                debug,
            } => {
                let text = String::from_utf8_lossy(debug).into_owned();
                self.goaway_reason = Some((error_code, text));
                self.on_goaway(last_stream, on);
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment, on)
            }
            Frame::PushPromise { .. } => protocol_error("PUSH_PROMISE although push is disabled"),
            Frame::Settings { ack: true, .. }
            | Frame::Ping { ack: true, .. }
            | Frame::Priority { .. }
            | Frame::Unknown { .. } => Ok(()),
        }
    }

    /// Checks where a frame arrives: the server's preface starts with SETTINGS (a GOAWAY before
    /// it is let through), and nothing comes between a header block's CONTINUATION frames.
    fn check_order(&mut self, frame: &Frame<'_>) -> Result<(), ConnError> {
        if !self.peer_settings_seen {
            match frame {
                Frame::Settings { ack: false, .. } => self.peer_settings_seen = true,
                // A server turning the client away may say why before its SETTINGS; the reason is
                // worth more to the user than "bad preface".
                Frame::GoAway { .. } => {}
                _ => return protocol_error("server preface does not start with SETTINGS"),
            }
        }
        if self.block_stream != 0 && !matches!(frame, Frame::Continuation { .. }) {
            return protocol_error("frame interleaved with a header block's CONTINUATION frames");
        }
        Ok(())
    }

    /// RST_STREAM: an open stream ends as reset with the server's error code.
    fn on_rst_stream(
        &mut self,
        stream: u32,
        error_code: ErrorCode,
        on: On<'_>,
    ) -> Result<(), ConnError> {
        self.check_not_idle(stream, "RST_STREAM")?;
        if self.streams.get_mut(stream).is_some() {
            self.release(stream);
            on(Event::Closed {
                stream,
                end: StreamEnd::Reset(error_code),
            });
        }
        Ok(())
    }

    /// SETTINGS (not an ack): applied and acknowledged, unless they come as a flood.
    fn on_settings(&mut self, params: SettingsIter<'_>) -> Result<(), ConnError> {
        self.settings_in_row += 1;
        self.pending_settings_acks += 1;
        check_flood("SETTINGS", self.settings_in_row, self.pending_settings_acks)?;
        self.apply_settings(params)?;
        write_settings_ack(&mut self.out);
        self.flush_blocked();
        Ok(())
    }

    /// PING (not an ack): acknowledged, unless they come as a flood.
    fn on_ping(&mut self, data: [u8; 8]) -> Result<(), ConnError> {
        self.pings_in_row += 1;
        self.pending_ping_acks += 1;
        check_flood("PING", self.pings_in_row, self.pending_ping_acks)?;
        write_ping_ack(&mut self.out, data);
        Ok(())
    }

    /// Counts a frame that carried nothing (`empty`) or resets the count; past
    /// [`MAX_EMPTY_FRAMES`] in a row the connection fails as a flood.
    fn count_empty(&mut self, empty: bool) -> Result<(), ConnError> {
        if !empty {
            self.progress();
            return Ok(());
        }
        self.empty_frames += 1;
        if self.empty_frames > MAX_EMPTY_FRAMES {
            return Err(ConnError::limit(format!(
                "server sent more than {MAX_EMPTY_FRAMES} empty DATA or CONTINUATION frames \
                 in a row"
            )));
        }
        Ok(())
    }

    /// A frame that carries a response (bytes of DATA or a header block): the flood counts
    /// start again.
    fn progress(&mut self) {
        self.empty_frames = 0;
        self.pings_in_row = 0;
        self.settings_in_row = 0;
    }

    /// A stream error the frame parser found (the frame is skipped): the stream, if open, is
    /// reset; errors on streams that are closed or idle need no answer.
    pub(super) fn on_stream_error(&mut self, id: u32, code: ErrorCode, msg: &str, on: On<'_>) {
        if self.streams.get_mut(id).is_some() {
            self.reset_stream(id, code, msg, on);
        }
    }

    /// Idle streams (never opened by the client; servers cannot open any with push off) may not
    /// carry this frame type (RFC 9113 §5.1).
    fn check_not_idle(&self, id: u32, kind: &str) -> Result<(), ConnError> {
        if id % 2 == 0 || id >= self.next_stream {
            let msg = format!("{kind} on stream {id}, which we never opened");
            return Err(ConnError {
                code: ErrorCode::ProtocolError,
                msg,
            });
        }
        Ok(())
    }

    fn on_data(
        &mut self,
        id: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: usize,
        on: On<'_>,
    ) -> Result<(), ConnError> {
        self.check_not_idle(id, "DATA")?;
        self.count_empty(data.is_empty() && !end_stream)?;
        // flow_len < 2^24, so the conversion is exact.
        let flow = flow_len as i64;
        self.recv_remaining -= flow;
        if self.recv_remaining < 0 {
            let msg = "server overran the connection flow-control window";
            return Err(conn_error(ErrorCode::FlowControlError, msg));
        }
        let window = i64::from(self.cfg.recv_window);
        if self.recv_remaining < window / 2 {
            // window - remaining <= window <= 2^31-1.
            write_window_update(&mut self.out, 0, (window - self.recv_remaining) as u32);
            self.recv_remaining = window;
        }
        // Frames for a stream already closed still count for the connection, nothing else.
        let Some(stream) = self.streams.get_mut(id) else {
            return Ok(());
        };
        if stream.phase != Phase::Body {
            self.reset_stream(id, ErrorCode::ProtocolError, "DATA before headers", on);
            return Ok(());
        }
        stream.recv_remaining -= flow;
        if stream.recv_remaining < 0 {
            let msg = "server overran the stream flow-control window";
            self.reset_stream(id, ErrorCode::FlowControlError, msg, on);
            return Ok(());
        }
        if let Err(e) = deliver_messages(id, &mut stream.reader, stream.encoded, data, on) {
            if let GrpcFramingError::TooLong { len, limit } = e {
                let msg = format!(
                    "gRPC message length {len} exceeds the response size limit ({limit} bytes; \
                     raise it with --max-response-bytes)"
                );
                write_rst_stream(&mut self.out, id, ErrorCode::Cancel);
                self.release(id);
                on(Event::Closed {
                    stream: id,
                    end: StreamEnd::Limit(msg),
                });
                return Ok(());
            }
            // Not an HTTP/2 error: the gRPC call is abandoned the way gRPC clients do it.
            self.reset_stream(id, ErrorCode::Cancel, &e.to_string(), on);
            return Ok(());
        }
        if end_stream {
            let end = match stream.reader.finish() {
                Err(e) => StreamEnd::Protocol(e.to_string()),
                Ok(()) => StreamEnd::Protocol("response ended without trailers".to_string()),
            };
            self.end_stream(id, end, on);
        } else if stream.recv_remaining < window / 2 {
            let raise = (window - stream.recv_remaining) as u32;
            stream.recv_remaining = window;
            write_window_update(&mut self.out, id, raise);
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        id: u32,
        end_stream: bool,
        end_headers: bool,
        block: &[u8],
        on: On<'_>,
    ) -> Result<(), ConnError> {
        self.check_not_idle(id, "HEADERS")?;
        if end_headers {
            return self.finish_block(id, block, end_stream, on);
        }
        if block.len() > MAX_HEADER_BLOCK {
            return Err(block_too_large());
        }
        self.continuations = 0;
        self.block.clear();
        self.block.extend_from_slice(block);
        self.block_stream = id;
        self.block_end_stream = end_stream;
        Ok(())
    }

    fn on_continuation(
        &mut self,
        id: u32,
        end_headers: bool,
        fragment: &[u8],
        on: On<'_>,
    ) -> Result<(), ConnError> {
        if self.block_stream == 0 {
            return protocol_error("CONTINUATION without a HEADERS frame");
        }
        if id != self.block_stream {
            return protocol_error("CONTINUATION on another stream than its HEADERS");
        }
        if self.block.len() + fragment.len() > MAX_HEADER_BLOCK {
            return Err(block_too_large());
        }
        self.continuations += 1;
        if self.continuations > MAX_CONTINUATIONS {
            return Err(ConnError::limit(format!(
                "server sent a header block in more than {MAX_CONTINUATIONS} CONTINUATION frames"
            )));
        }
        self.count_empty(fragment.is_empty() && !end_headers)?;
        self.block.extend_from_slice(fragment);
        if !end_headers {
            return Ok(());
        }
        self.block_stream = 0;
        let block = std::mem::take(&mut self.block);
        let result = self.finish_block(id, &block, self.block_end_stream, on);
        self.block = block;
        result
    }

    /// Decodes a complete header block (always: HPACK is connection state) and applies it to
    /// stream `id` if that is still open.
    fn finish_block(
        &mut self,
        id: u32,
        block: &[u8],
        end_stream: bool,
        on: On<'_>,
    ) -> Result<(), ConnError> {
        self.progress();
        let head =
            decode_head(&mut self.hpack, block, &mut self.grpc_message).map_err(|e| match e {
                HpackError::HeaderListTooLarge { .. } | HpackError::TooManyTableSizeUpdates => {
                    ConnError::limit(format!("server sent a header block over a limit: {e}"))
                }
                _ => conn_error(ErrorCode::CompressionError, &e.to_string()),
            })?;
        let Some(stream) = self.streams.get_mut(id) else {
            return Ok(());
        };
        if stream.phase == Phase::Body {
            let end = match stream.reader.finish() {
                Err(e) => StreamEnd::Protocol(e.to_string()),
                Ok(()) => trailers_end(&head, &self.grpc_message),
            };
            if end_stream {
                self.end_stream(id, end, on);
            } else {
                let msg = "trailers without END_STREAM";
                self.reset_stream(id, ErrorCode::ProtocolError, msg, on);
            }
            return Ok(());
        }
        self.on_response_head(id, &head, end_stream, on);
        Ok(())
    }

    /// The first header block of stream `id`'s response.
    fn on_response_head(&mut self, id: u32, head: &Head, end_stream: bool, on: On<'_>) {
        let status = match head.status {
            Some(Ok(status)) => status,
            Some(Err(())) => {
                let msg = ":status is not a 3-digit number";
                return self.reset_stream(id, ErrorCode::ProtocolError, msg, on);
            }
            None => {
                let msg = "response headers without :status";
                return self.reset_stream(id, ErrorCode::ProtocolError, msg, on);
            }
        };
        match status {
            // Informational: the final response follows (it may not end the stream).
            100..=199 if !end_stream => {}
            100..=199 => {
                let msg = "informational response with END_STREAM";
                self.reset_stream(id, ErrorCode::ProtocolError, msg, on);
            }
            200 => {
                if let Some(why) = head.content_type.problem(end_stream) {
                    return if end_stream {
                        self.end_stream(id, StreamEnd::Protocol(why), on)
                    } else {
                        self.reset_stream(id, ErrorCode::Cancel, &why, on)
                    };
                }
                on(Event::Headers { stream: id });
                if end_stream {
                    let end = trailers_end(head, &self.grpc_message);
                    self.end_stream(id, end, on);
                } else if let Some(stream) = self.streams.get_mut(id) {
                    stream.phase = Phase::Body;
                    stream.encoded = head.encoded;
                }
            }
            other => {
                if !end_stream {
                    // The rest of this response will not be read.
                    write_rst_stream(&mut self.out, id, ErrorCode::Cancel);
                }
                self.end_stream(id, StreamEnd::Http(other), on);
            }
        }
    }

    /// The server finished stream `id`; the client's side is reset if it is still sending (gRPC
    /// ends the call with the server's status).
    fn end_stream(&mut self, id: u32, end: StreamEnd, on: On<'_>) {
        let Some(stream) = self.streams.get_mut(id) else {
            return;
        };
        let still_sending = !stream.local_done || stream.has_pending();
        self.release(id);
        if still_sending {
            write_rst_stream(&mut self.out, id, ErrorCode::Cancel);
        }
        on(Event::Closed { stream: id, end });
    }

    /// Resets stream `id` because of the server's error and reports it.
    fn reset_stream(&mut self, id: u32, code: ErrorCode, msg: &str, on: On<'_>) {
        self.release(id);
        write_rst_stream(&mut self.out, id, code);
        let end = StreamEnd::Protocol(format!("stream {id}: {} ({})", msg, code.name()));
        on(Event::Closed { stream: id, end });
    }

    fn apply_settings(&mut self, params: SettingsIter<'_>) -> Result<(), ConnError> {
        for (id, value) in params {
            match id {
                SETTINGS_MAX_FRAME_SIZE => self.peer_max_frame = value.max(DEFAULT_MAX_FRAME_SIZE),
                SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = value,
                // The session's encoder never indexes, so only a shrink below the default needs a
                // word.
                SETTINGS_HEADER_TABLE_SIZE if (value as usize) < DEFAULT_HEADER_TABLE_SIZE => {
                    self.table_update_due = true;
                }
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for stream in self.streams.iter_mut() {
                        stream.send_window += delta;
                        if stream.send_window > i64::from(MAX_WINDOW_SIZE) {
                            let msg = "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window";
                            return Err(conn_error(ErrorCode::FlowControlError, msg));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// No new streams from now on; streams above `last` were not processed by the server.
    fn on_goaway(&mut self, last: u32, on: On<'_>) {
        let last = self.goaway_last.map_or(last, |earlier| earlier.min(last));
        self.goaway_last = Some(last);
        while let Some(id) = self.streams.last_id().filter(|&id| id > last) {
            self.release(id);
            on(Event::Closed {
                stream: id,
                end: StreamEnd::Refused,
            });
        }
    }

    fn on_window_update(&mut self, id: u32, increment: u32, on: On<'_>) -> Result<(), ConnError> {
        let increment = i64::from(increment);
        if id == 0 {
            self.send_window += increment;
            if self.send_window > i64::from(MAX_WINDOW_SIZE) {
                let msg = "WINDOW_UPDATE pushed the connection window past 2^31-1 bytes";
                return Err(conn_error(ErrorCode::FlowControlError, msg));
            }
        } else {
            self.check_not_idle(id, "WINDOW_UPDATE")?;
            let Some(stream) = self.streams.get_mut(id) else {
                return Ok(());
            };
            stream.send_window += increment;
            if stream.send_window > i64::from(MAX_WINDOW_SIZE) {
                let msg = "WINDOW_UPDATE pushed the stream window past 2^31-1 bytes";
                self.reset_stream(id, ErrorCode::FlowControlError, msg, on);
                return Ok(());
            }
        }
        self.flush_blocked();
        Ok(())
    }
}

/// Feeds one DATA payload to a stream's reader and reports every whole message; a message
/// flagged compressed on a response without `grpc-encoding` (`encoded` false) is an error,
/// as gRPC has nothing to decompress it with.
fn deliver_messages(
    id: u32,
    reader: &mut crate::protocol::grpc::message::MessageReader,
    encoded: bool,
    data: &[u8],
    on: On<'_>,
) -> Result<(), GrpcFramingError> {
    reader.push(data)?;
    while let Some(message) = reader.next_message()? {
        if message.compressed && !encoded {
            return Err(GrpcFramingError::CompressedWithoutEncoding);
        }
        on(Event::Message {
            stream: id,
            compressed: message.compressed,
            data: message.data,
        });
    }
    Ok(())
}
