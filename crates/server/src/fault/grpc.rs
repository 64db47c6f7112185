//! The fault server's gRPC front: a small HTTP/2 server on one blocking socket, written with
//! the client crate's frame codec and HPACK. It answers SETTINGS and PING, credits every DATA
//! byte back with WINDOW_UPDATE, and serves Triton's unary RPCs; ModelInfer gets the mode's
//! fault. Streams are answered in the order their requests complete.

use std::collections::HashMap;
use std::net::TcpStream;

use prost::Message;

use super::model::{self, TENSOR_BYTES};
use super::{io, FaultMode, Shared};
use inferperf_wire::protocol::grpc::frame::{
    parse_frame, write_data, write_frame_header, write_goaway, write_headers, write_ping,
    write_ping_ack, write_settings, write_settings_ack, write_window_update, ErrorCode, Frame,
    FrameType, DEFAULT_MAX_FRAME_SIZE, PREFACE, SETTINGS_MAX_CONCURRENT_STREAMS,
};
use inferperf_wire::protocol::grpc::hpack::{Decoder, Encoder};
use inferperf_wire::protocol::grpc::pb::{health, inference as pb};

/// Longest request header block (HEADERS + CONTINUATION) buffered, in bytes.
const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// Longest request message buffered per stream, in bytes.
const MAX_MESSAGE: usize = 16 << 20;
/// Value bytes of the response header in `huge-headers` (the block is a little longer).
const HUGE_HEADER: usize = 1536 * 1024;
/// Bytes of the 4 GiB message sent in `huge-content-length` before the stall.
const HUGE_SENT: usize = 16 * 1024;
/// Most streams open at once, as advertised in SETTINGS.
const MAX_STREAMS: u32 = 128;

/// What the connection does after a frame.
enum Next {
    Go,
    /// Clean close (FIN).
    Close,
    /// TCP reset.
    Reset,
    /// The peer is gone, or the connection was held until it went.
    Gone,
}

struct Conn<'a> {
    sh: &'a Shared,
    decoder: Decoder,
    encoder: Encoder,
    /// Request bodies so far, by stream, with the RPC path.
    streams: HashMap<u32, (String, Vec<u8>)>,
    /// A header block still waiting for CONTINUATION: (stream, block, END_STREAM).
    pending: Option<(u32, Vec<u8>, bool)>,
    /// Frames to write after the current read.
    out: Vec<u8>,
}

/// Serves one connection until the peer closes it, a fault ends it, or the server stops.
pub(super) fn serve_conn(mut s: TcpStream, sh: &Shared) {
    io::prepare(&s);
    if sh.mode == FaultMode::StallForever {
        io::hold_silent(&s, sh);
        return;
    }
    let mut buf = Vec::with_capacity(32 * 1024);
    while buf.len() < PREFACE.len() {
        let want = PREFACE.len() - buf.len();
        if io::read_more(&mut s, &mut buf, want, sh).is_none() {
            return;
        }
    }
    if !buf.starts_with(PREFACE) {
        let _ = io::write_all(
            &mut s,
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
            sh,
        );
        return io::close_clean(s, sh);
    }
    buf.drain(..PREFACE.len());
    let mut conn = Conn {
        sh,
        decoder: Decoder::new(),
        encoder: Encoder::new(),
        streams: HashMap::new(),
        pending: None,
        out: Vec::with_capacity(4096),
    };
    write_settings(
        &mut conn.out,
        &[(SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS)],
    );
    let next = conn.run(&mut s, &mut buf);
    match next {
        Next::Close => io::close_clean(s, sh),
        Next::Reset => io::close_reset(s),
        Next::Go | Next::Gone => {}
    }
}

impl Conn<'_> {
    /// Reads and answers frames until the connection ends.
    fn run(&mut self, s: &mut TcpStream, buf: &mut Vec<u8>) -> Next {
        loop {
            let mut used = 0;
            loop {
                let frame = match parse_frame(&buf[used..], DEFAULT_MAX_FRAME_SIZE) {
                    Ok(Some((frame, n))) => {
                        used += n;
                        frame
                    }
                    Ok(None) => break,
                    Err(_) => {
                        write_goaway(&mut self.out, 0, ErrorCode::ProtocolError, b"bad frame");
                        let _ = io::write_all(s, &self.out, self.sh);
                        return Next::Close;
                    }
                };
                let next = self.on_frame(s, frame);
                if !matches!(next, Next::Go) {
                    return next;
                }
            }
            buf.drain(..used);
            if !self.out.is_empty() {
                if !io::write_all(s, &self.out, self.sh) {
                    return Next::Gone;
                }
                self.out.clear();
            }
            if io::read_more(s, buf, usize::MAX, self.sh).is_none() {
                return Next::Gone;
            }
        }
    }

    fn on_frame(&mut self, s: &mut TcpStream, frame: Frame<'_>) -> Next {
        match frame {
            Frame::Settings { ack: false, .. } => write_settings_ack(&mut self.out),
            Frame::Ping { ack: false, data } => write_ping_ack(&mut self.out, data),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                self.pending = Some((stream, block.to_vec(), end_stream));
                if end_headers {
                    return self.headers_done(s);
                }
            }
            Frame::Continuation {
                end_headers, block, ..
            } => {
                let Some((_, pending, _)) = self.pending.as_mut() else {
                    return Next::Close;
                };
                if pending.len() + block.len() > MAX_HEADER_BLOCK {
                    return Next::Close;
                }
                pending.extend_from_slice(block);
                if end_headers {
                    return self.headers_done(s);
                }
            }
            Frame::Data {
                stream,
                end_stream,
                data,
            } => {
                if !data.is_empty() {
                    let credit = data.len() as u32;
                    write_window_update(&mut self.out, 0, credit);
                    write_window_update(&mut self.out, stream, credit);
                }
                let Some((path, body)) = self.streams.get_mut(&stream) else {
                    return Next::Go;
                };
                let refused = self.sh.mode == FaultMode::PayloadTooLarge;
                if refused && body.len() + data.len() > super::odd::REQUEST_LIMIT {
                    // Answered before the message is read; later DATA of the stream is dropped.
                    self.streams.remove(&stream);
                    self.sh.next_infer();
                    self.status(stream, 8, &super::odd::too_large_text());
                    return Next::Go;
                }
                if body.len() + data.len() > MAX_MESSAGE {
                    return Next::Close;
                }
                body.extend_from_slice(data);
                if end_stream || first_stream_message(path, body) {
                    return self.request_done(s, stream);
                }
            }
            Frame::RstStream { stream, .. } => {
                self.streams.remove(&stream);
            }
            Frame::GoAway { .. } | Frame::PushPromise { .. } => return Next::Close,
            _ => {}
        }
        Next::Go
    }

    /// A complete request header block: note the stream's RPC path.
    fn headers_done(&mut self, s: &mut TcpStream) -> Next {
        let Some((stream, block, end_stream)) = self.pending.take() else {
            return Next::Go;
        };
        let mut path = String::new();
        let decoded = self.decoder.decode(&block, |name, value| {
            if name == b":path" {
                path = String::from_utf8_lossy(value).into_owned();
            }
        });
        if decoded.is_err() {
            write_goaway(
                &mut self.out,
                stream,
                ErrorCode::CompressionError,
                b"bad HPACK",
            );
            let _ = io::write_all(s, &self.out, self.sh);
            return Next::Close;
        }
        self.streams.insert(stream, (path, Vec::new()));
        if end_stream {
            return self.request_done(s, stream);
        }
        Next::Go
    }

    /// A complete request: answer it.
    fn request_done(&mut self, s: &mut TcpStream, stream: u32) -> Next {
        let Some((path, body)) = self.streams.remove(&stream) else {
            return Next::Go;
        };
        let message = body.get(5..).unwrap_or(&[]);
        let mode = self.sh.mode;
        let method = path.rsplit('/').next().unwrap_or("");
        let reply = match method {
            "ServerLive" => pb::ServerLiveResponse { live: true }.encode_to_vec(),
            "ServerReady" => pb::ServerReadyResponse { ready: true }.encode_to_vec(),
            "ModelReady" => pb::ModelReadyResponse { ready: true }.encode_to_vec(),
            "Check" => health::HealthCheckResponse { status: 1 }.encode_to_vec(),
            "ServerMetadata" => model::server_pb().encode_to_vec(),
            "ModelMetadata" | "ModelConfig" => {
                let req = pb::ModelMetadataRequest::decode(message).unwrap_or_default();
                let Some(model) = model::resolve(mode, &req.name) else {
                    let msg = format!("Request for unknown model: '{}' is not found", req.name);
                    self.status(stream, 5, &msg);
                    return Next::Go;
                };
                if method == "ModelConfig" {
                    model::config_pb(mode, model).encode_to_vec()
                } else {
                    model::metadata_pb(mode, model).encode_to_vec()
                }
            }
            "ModelStatistics" => {
                let req = pb::ModelStatisticsRequest::decode(message).unwrap_or_default();
                model::stats_pb(mode, &req.name, self.sh.infers()).encode_to_vec()
            }
            "ModelInfer" => return self.infer(s, stream, message),
            "ModelStreamInfer" => {
                // Answered at its first message by a status alone: the mode's failure
                // (grpc-status 13), else UNIMPLEMENTED; the stream's later messages are
                // dropped.
                let n = self.sh.next_infer();
                let (code, msg) = if self.sh.fails(n) {
                    (13, model::error_text(mode, n))
                } else {
                    (
                        12,
                        "ModelStreamInfer is answered by a status only".to_string(),
                    )
                };
                self.status(stream, code, &msg);
                return Next::Go;
            }
            _ => {
                self.status(stream, 12, &format!("{method} is not implemented"));
                return Next::Go;
            }
        };
        self.reply(stream, &framed(&reply), true);
        Next::Go
    }

    /// The response HEADERS (`:status 200`, gRPC content type), then `message` as DATA; `end`
    /// adds the grpc-status 0 trailers that end the stream.
    fn reply(&mut self, stream: u32, message: &[u8], end: bool) {
        let block = self.response_block(0);
        write_headers(&mut self.out, stream, &block, false, DEFAULT_MAX_FRAME_SIZE);
        write_data(
            &mut self.out,
            stream,
            message,
            false,
            DEFAULT_MAX_FRAME_SIZE,
        );
        if end {
            self.ok_trailers(stream);
        }
    }

    /// The grpc-status 0 trailers that end `stream`.
    fn ok_trailers(&mut self, stream: u32) {
        let mut trailers = Vec::new();
        self.encoder
            .encode_literal_without_indexing(&mut trailers, b"grpc-status", b"0");
        write_headers(
            &mut self.out,
            stream,
            &trailers,
            true,
            DEFAULT_MAX_FRAME_SIZE,
        );
    }

    /// `:status 200` and the gRPC content type, plus `huge` bytes of an `x-fault-huge` header.
    fn response_block(&self, huge: usize) -> Vec<u8> {
        let mut block = Vec::with_capacity(64 + huge);
        let enc = &self.encoder;
        enc.encode_literal_without_indexing(&mut block, b":status", b"200");
        enc.encode_literal_without_indexing(&mut block, b"content-type", b"application/grpc");
        if huge > 0 {
            enc.encode_literal_without_indexing(&mut block, b"x-fault-huge", &vec![b'a'; huge]);
        }
        block
    }

    /// A trailers-only reply with a non-zero grpc-status and its (percent-encoded) message.
    fn status(&mut self, stream: u32, code: u32, msg: &str) {
        let mut block = self.response_block(0);
        let code = code.to_string();
        let enc = &self.encoder;
        enc.encode_literal_without_indexing(&mut block, b"grpc-status", code.as_bytes());
        enc.encode_literal_without_indexing(&mut block, b"grpc-message", &percent_encode(msg));
        write_headers(&mut self.out, stream, &block, true, DEFAULT_MAX_FRAME_SIZE);
    }

    /// ModelInfer: the mode's fault, or an echo of the input.
    fn infer(&mut self, s: &mut TcpStream, stream: u32, message: &[u8]) -> Next {
        let sh = self.sh;
        let n = sh.next_infer();
        if sh.fails(n) {
            self.status(stream, 13, &model::error_text(sh.mode, n));
            return Next::Go;
        }
        let req = pb::ModelInferRequest::decode(message).unwrap_or_default();
        let mut data = req
            .raw_input_contents
            .into_iter()
            .next()
            .unwrap_or_default();
        data.resize(TENSOR_BYTES, 0);
        let reply = framed(&model::infer_pb(&req.id, data).encode_to_vec());
        let half = &reply[..reply.len() / 2];
        match sh.mode {
            FaultMode::Refuse => {
                sh.refused.store(true, std::sync::atomic::Ordering::Relaxed);
                return self.flush_then(s, Next::Close);
            }
            _ if sh.resets(n) => {
                self.reply(stream, half, false);
                return self.flush_then(s, Next::Reset);
            }
            FaultMode::CloseMidBody => {
                self.reply(stream, half, false);
                return self.flush_then(s, Next::Close);
            }
            FaultMode::StallHead => {}
            FaultMode::StallBody => self.reply(stream, half, false),
            FaultMode::WrongContentLength => {
                let mut wrong = reply.clone();
                let claimed = (reply.len() - 5 + 100) as u32;
                wrong[1..5].copy_from_slice(&claimed.to_be_bytes());
                self.reply(stream, &wrong, true);
            }
            FaultMode::Garbage => {
                self.out
                    .extend_from_slice(b"\x00\x00\x04\x99 GARBAGE: not HTTP/2 at all \x80\x81");
                return self.flush_then(s, Next::Close);
            }
            FaultMode::NotJson | FaultMode::NotProtobuf => self.reply(
                stream,
                &framed(b"\x0a\xff\xff\xff\xff\x0fnot protobuf"),
                true,
            ),
            FaultMode::EndlessHeader => return self.endless_header(s, stream),
            FaultMode::HugeHeaders => {
                let block = self.response_block(HUGE_HEADER);
                write_headers(&mut self.out, stream, &block, false, DEFAULT_MAX_FRAME_SIZE);
                write_data(&mut self.out, stream, &reply, false, DEFAULT_MAX_FRAME_SIZE);
                self.ok_trailers(stream);
            }
            FaultMode::HugeContentLength => {
                let mut huge = vec![0u8; 5 + HUGE_SENT];
                huge[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
                self.reply(stream, &huge, false);
            }
            FaultMode::SettingsFlood | FaultMode::PingFlood => return self.flood(s),
            FaultMode::Drip => return self.drip(s, stream, &reply),
            FaultMode::WrongContentType => {
                let mut block = Vec::new();
                let enc = &self.encoder;
                enc.encode_literal_without_indexing(&mut block, b":status", b"200");
                enc.encode_literal_without_indexing(&mut block, b"content-type", b"text/html");
                write_headers(&mut self.out, stream, &block, false, DEFAULT_MAX_FRAME_SIZE);
                write_data(&mut self.out, stream, &reply, false, DEFAULT_MAX_FRAME_SIZE);
                self.ok_trailers(stream);
            }
            FaultMode::CompressedNoEncoding => {
                let mut flagged = reply.clone();
                flagged[0] = 1;
                self.reply(stream, &flagged, true);
            }
            _ => self.reply(stream, &reply, true),
        }
        Next::Go
    }

    /// Writes what is queued, then ends the connection as `next` says.
    fn flush_then(&mut self, s: &mut TcpStream, next: Next) -> Next {
        if !io::write_all(s, &self.out, self.sh) {
            return Next::Gone;
        }
        self.out.clear();
        next
    }

    /// The whole reply (HEADERS, DATA, trailers), one byte at a time: what was queued before
    /// it goes out at once, the reply's frames drip.
    fn drip(&mut self, s: &mut TcpStream, stream: u32, reply: &[u8]) -> Next {
        if self.flush_then(s, Next::Go).is_gone() {
            return Next::Gone;
        }
        self.reply(stream, reply, true);
        let frames = std::mem::take(&mut self.out);
        let sent = io::drip(s, &frames, self.sh);
        self.out = frames;
        self.out.clear();
        if sent {
            Next::Go
        } else {
            Next::Gone
        }
    }

    /// HEADERS without END_HEADERS, then CONTINUATION frames until the peer goes.
    fn endless_header(&mut self, s: &mut TcpStream, stream: u32) -> Next {
        let mut block = self.response_block(0);
        // A literal header whose value claims 2^31 bytes: the block can never end well.
        self.encoder
            .encode_literal_without_indexing(&mut block, b"x-fault-endless", b"");
        block.pop();
        hpack_length(&mut block, 1 << 31);
        write_frame_header(&mut self.out, block.len(), FrameType::Headers, 0, stream);
        self.out.extend_from_slice(&block);
        if self.flush_then(s, Next::Go).is_gone() {
            return Next::Gone;
        }
        let mut unit = Vec::with_capacity(DEFAULT_MAX_FRAME_SIZE as usize + 9);
        let payload = DEFAULT_MAX_FRAME_SIZE as usize;
        write_frame_header(&mut unit, payload, FrameType::Continuation, 0, stream);
        unit.resize(unit.len() + payload, b'a');
        io::flood(s, &unit, self.sh);
        Next::Gone
    }

    /// SETTINGS or PING frames, each asking for an ACK, until the peer goes.
    fn flood(&mut self, s: &mut TcpStream) -> Next {
        if self.flush_then(s, Next::Go).is_gone() {
            return Next::Gone;
        }
        let mut unit = Vec::new();
        if self.sh.mode == FaultMode::SettingsFlood {
            write_settings(&mut unit, &[(SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS)]);
        } else {
            write_ping(&mut unit, *b"faultpng");
        }
        io::flood(s, &unit, self.sh);
        Next::Gone
    }
}

impl Next {
    fn is_gone(&self) -> bool {
        matches!(self, Next::Gone)
    }
}

/// A gRPC length-prefixed, uncompressed message.
/// A `ModelStreamInfer` request whose first length-prefixed message is complete: the client
/// keeps such a stream open, so it is answered without waiting for its end.
fn first_stream_message(path: &str, body: &[u8]) -> bool {
    path.ends_with("/ModelStreamInfer")
        && body.len() >= 5
        && body.len() - 5 >= u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize
}

fn framed(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// An HPACK string length (7-bit prefix, no Huffman flag), RFC 7541 §5.1.
fn hpack_length(out: &mut Vec<u8>, mut value: u64) {
    if value < 0x7f {
        out.push(value as u8);
        return;
    }
    out.push(0x7f);
    value -= 0x7f;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// grpc-message's percent-encoding: bytes outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(msg: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len());
    for &b in msg.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    out
}
