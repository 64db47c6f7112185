//! A small blocking gRPC client for the setup calls the coordinator makes (server and model
//! metadata, config, statistics, readiness): one unary call at a time over cleartext HTTP/2
//! (prior knowledge, no TLS). Not for the measured load: it allocates freely and waits on the
//! socket.
//!
//! A call that ends with a gRPC or stream error keeps the connection; a connection-level
//! failure (I/O, timeout, protocol error, GOAWAY) drops it and the next call reconnects.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::frame::{
    parse_frame, write_data, write_headers, write_ping_ack, write_preface, write_rst_stream,
    write_settings, write_settings_ack, write_window_update, ErrorCode, Frame, SettingsIter,
    DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_LEN, MAX_WINDOW_SIZE, SETTINGS_ENABLE_PUSH,
    SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE,
};
use super::hpack::{Decoder, DEFAULT_MAX_HEADER_LIST_SIZE};
use super::message::write_message;
use crate::error::{Error, Result};
use crate::protocol::tcp::{connect_blocking, os_message};
use crate::service::triton_grpc::request_headers;

mod call;
#[cfg(test)]
use call::percent_decode;
use call::{Call, Failure, Phase};

/// Receive window we advertise for each stream and for the connection (bytes): large, so a
/// metadata or statistics response rarely waits for a WINDOW_UPDATE.
const RECV_WINDOW: u32 = 16 << 20;
/// Flow-control window every HTTP/2 connection and stream starts with (bytes).
const INITIAL_WINDOW: u32 = 65_535;
/// Bytes read from the socket per `read` call.
const READ_CHUNK: usize = 64 * 1024;
/// Cap on one received header block, HEADERS plus CONTINUATIONs (bytes): bounds memory
/// against a peer that sends CONTINUATION frames forever.
const MAX_HEADER_BLOCK: usize = 4 * DEFAULT_MAX_HEADER_LIST_SIZE;
/// Highest client stream id (odd, 31 bits); past it the connection is replaced.
const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// One HTTP/2 connection to a gRPC server, reopened after a connection-level failure.
#[derive(Debug)]
pub struct GrpcClient {
    /// `host:port` as given: used in messages and as `:authority`.
    address: String,
    /// Connect, read and write timeout; also the bound on one whole call.
    timeout: Duration,
    /// Receive window we advertise (bytes); `RECV_WINDOW` except in tests.
    recv_window: u32,
    conn: Option<Connection>,
}

/// The socket and the HTTP/2 state that outlives one call.
struct Connection {
    socket: TcpStream,
    hpack: Decoder,
    /// Received bytes not yet parsed as whole frames.
    inbuf: Vec<u8>,
    /// Frames waiting to be written.
    outbuf: Vec<u8>,
    next_stream: u32,
    /// The server's SETTINGS_MAX_FRAME_SIZE (bytes): the longest frame we may send.
    peer_max_frame: u32,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE (bytes): each new stream's send window.
    peer_initial_window: i64,
    /// Bytes we may still send on the connection (may go negative after SETTINGS).
    send_window: i64,
    /// Bytes the server may still send on the connection before our next WINDOW_UPDATE.
    recv_remaining: i64,
    /// Our advertised window (bytes), for connection and streams.
    recv_window: u32,
    /// A header block whose CONTINUATIONs are still arriving: (stream, bytes, end_stream).
    pending_block: Option<(u32, Vec<u8>, bool)>,
    /// Set by a graceful GOAWAY: finish the current call, then drop the connection.
    going_away: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("next_stream", &self.next_stream)
            .finish_non_exhaustive()
    }
}

impl GrpcClient {
    /// Connects to `addr` (`host:port`) and sends the HTTP/2 preface and our SETTINGS, so an
    /// unreachable server is reported at once. `timeout` bounds the connect and each call.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self> {
        Self::connect_with_window(addr, timeout, RECV_WINDOW)
    }

    fn connect_with_window(addr: &str, timeout: Duration, recv_window: u32) -> Result<Self> {
        let mut client = GrpcClient {
            address: addr.trim().to_string(),
            timeout: timeout.max(Duration::from_millis(1)),
            recv_window: recv_window.clamp(INITIAL_WINDOW, MAX_WINDOW_SIZE),
            conn: None,
        };
        client.conn = Some(client.open()?);
        Ok(client)
    }

    /// The `host:port` this client talks to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Calls `method` (e.g. `ServerMetadata`, under `/inference.GRPCInferenceService/`) with
    /// the encoded protobuf `request`; returns the encoded response message.
    pub fn unary(&mut self, method: &str, request: &[u8]) -> Result<Vec<u8>> {
        let mut body = Vec::with_capacity(request.len() + 5);
        write_message(&mut body, request, false)
            .map_err(|e| Error::generic(format!("{method}: {e}")))?;
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => self.open()?,
        };
        let block = request_headers(&self.address, method, &[]);
        let deadline = Instant::now() + self.timeout;
        match conn.call(&block, body, deadline, self.timeout) {
            Ok((message, reusable)) => {
                if reusable {
                    self.conn = Some(conn);
                }
                Ok(message)
            }
            Err(Failure::Call(why)) => {
                if !conn.going_away {
                    self.conn = Some(conn);
                }
                Err(Error::generic(format!("{method}: {why}")))
            }
            Err(Failure::Connection(why)) => Err(Error::generic(format!(
                "{method} to gRPC server at {}: {why}",
                self.address
            ))),
        }
    }

    fn open(&self) -> Result<Connection> {
        let socket = connect_blocking(&self.address, self.timeout, "gRPC server")?;
        let mut conn = Connection::new(socket, self.recv_window);
        conn.start().map_err(|e| {
            let why = os_message(&e);
            Error::generic(format!(
                "cannot connect to gRPC server at {}: {why}",
                self.address
            ))
        })?;
        Ok(conn)
    }
}

impl Connection {
    fn new(socket: TcpStream, recv_window: u32) -> Self {
        Connection {
            socket,
            hpack: Decoder::new(),
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            next_stream: 1,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            peer_initial_window: i64::from(INITIAL_WINDOW),
            send_window: i64::from(INITIAL_WINDOW),
            recv_remaining: i64::from(INITIAL_WINDOW),
            recv_window,
            pending_block: None,
            going_away: false,
        }
    }

    /// Preface + SETTINGS + the connection WINDOW_UPDATE in one write.
    fn start(&mut self) -> std::io::Result<()> {
        write_preface(&mut self.outbuf);
        let settings = [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, self.recv_window),
        ];
        write_settings(&mut self.outbuf, &settings);
        let raise = self.recv_window - INITIAL_WINDOW;
        if raise > 0 {
            write_window_update(&mut self.outbuf, 0, raise);
        }
        self.recv_remaining = i64::from(self.recv_window);
        self.socket.write_all(&self.outbuf)?;
        self.outbuf.clear();
        Ok(())
    }

    /// Runs one unary call to its end: the response message and whether the connection may
    /// be reused.
    fn call(
        &mut self,
        block: &[u8],
        body: Vec<u8>,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<(Vec<u8>, bool), Failure> {
        let stream = self.next_stream;
        self.next_stream = self.next_stream.saturating_add(2);
        let mut call = Call::new(stream, body, self.peer_initial_window, self.recv_window);
        write_headers(&mut self.outbuf, stream, block, false, self.peer_max_frame);
        let result = self.drive(&mut call, deadline, timeout);
        if let Err(Failure::Call(_)) = &result {
            if call.phase != Phase::Done {
                // Abandon the stream so the server stops sending on it.
                write_rst_stream(&mut self.outbuf, stream, ErrorCode::Cancel);
            }
            // Also sends any SETTINGS or PING acks queued before the failure.
            self.flush()
                .map_err(|e| Failure::Connection(os_message(&e)))?;
        }
        let message = result?;
        let reusable = !self.going_away && self.next_stream <= MAX_STREAM_ID;
        Ok((message, reusable))
    }

    /// Sends the request as windows allow and reads frames until the response ends.
    fn drive(
        &mut self,
        call: &mut Call,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<Vec<u8>, Failure> {
        loop {
            self.pump_body(call);
            self.flush()
                .map_err(|e| Failure::Connection(os_message(&e)))?;
            if call.phase == Phase::Done {
                return call.outcome();
            }
            self.read_more(deadline, timeout)?;
            let inbuf = std::mem::take(&mut self.inbuf);
            let mut used = 0;
            let step = self.process_frames(&inbuf, &mut used, call);
            self.inbuf = inbuf;
            self.inbuf.drain(..used);
            step?;
        }
    }

    /// Handles every whole frame in `buf`, counting consumed bytes in `used`.
    fn process_frames(
        &mut self,
        buf: &[u8],
        used: &mut usize,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        // We advertise no SETTINGS_MAX_FRAME_SIZE, so frames stay within the default.
        while let Some((frame, len)) = parse_frame(&buf[*used..], DEFAULT_MAX_FRAME_SIZE)
            .map_err(|e| Failure::Connection(e.to_string()))?
        {
            *used += len;
            self.on_frame(frame, len - FRAME_HEADER_LEN, call)?;
        }
        Ok(())
    }

    /// Appends DATA frames for as much of the request as both send windows allow.
    fn pump_body(&mut self, call: &mut Call) {
        let left = call.body.len() - call.sent;
        if left == 0 || call.phase == Phase::Done {
            return;
        }
        let window = self.send_window.min(call.send_window);
        let Ok(allowed) = usize::try_from(window) else {
            return;
        };
        let take = left.min(allowed);
        if take == 0 {
            return;
        }
        let chunk = &call.body[call.sent..call.sent + take];
        let end_stream = take == left;
        write_data(
            &mut self.outbuf,
            call.stream,
            chunk,
            end_stream,
            self.peer_max_frame,
        );
        call.sent += take;
        // take <= window, which fits i64.
        self.send_window -= take as i64;
        call.send_window -= take as i64;
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.outbuf.is_empty() {
            self.socket.write_all(&self.outbuf)?;
            self.outbuf.clear();
        }
        Ok(())
    }

    /// Reads at least one byte into `inbuf`, waiting no later than `deadline`.
    fn read_more(
        &mut self,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<(), Failure> {
        let silent =
            || Failure::Connection(format!("no response within {:.1} s", timeout.as_secs_f64()));
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(silent());
            }
            self.socket
                .set_read_timeout(Some(left))
                .map_err(|e| Failure::Connection(os_message(&e)))?;
            match self.socket.read(&mut chunk) {
                Ok(0) => {
                    return Err(Failure::Connection(
                        "server closed the connection".to_string(),
                    ))
                }
                Ok(n) => {
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(silent())
                }
                Err(e) => return Err(Failure::Connection(os_message(&e))),
            }
        }
    }

    /// One frame; `flow_len` is its payload length with padding (what flow control counts).
    fn on_frame(
        &mut self,
        frame: Frame<'_>,
        flow_len: usize,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        let protocol = |why: &str| Err(Failure::Connection(why.to_string()));
        if self.pending_block.is_some() && !matches!(frame, Frame::Continuation { .. }) {
            return protocol("frame interleaved with a header block's CONTINUATIONs");
        }
        match frame {
            Frame::Data {
                stream,
                end_stream,
                data,
            } => self.on_data(stream, end_stream, data, flow_len, call),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
            } => {
                self.pending_block = Some((stream, block.to_vec(), end_stream));
                self.finish_block_if(end_headers, call)
            }
            Frame::Continuation {
                stream,
                end_headers,
                block,
            } => {
                self.on_continuation(stream, block)?;
                self.finish_block_if(end_headers, call)
            }
            Frame::RstStream { stream, error_code } => {
                if stream == call.stream && call.phase != Phase::Done {
                    call.reset = Some(error_code);
                    call.phase = Phase::Done;
                }
                Ok(())
            }
            Frame::Settings { ack, params } => {
                if !ack {
                    self.apply_settings(params, call)?;
                    write_settings_ack(&mut self.outbuf);
                }
                Ok(())
            }
            Frame::Ping { ack: false, data } => {
                write_ping_ack(&mut self.outbuf, data);
                Ok(())
            }
            Frame::GoAway {
                last_stream,
                error_code,
                debug,
            } => self.on_goaway(last_stream, error_code, debug, call),
            Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment, call)
            }
            Frame::PushPromise { .. } => protocol("PUSH_PROMISE although push is disabled"),
            Frame::Ping { ack: true, .. } | Frame::Priority { .. } | Frame::Unknown { .. } => {
                Ok(())
            }
        }
    }

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: usize,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        // flow_len < 2^24, so the conversion is exact.
        let flow = flow_len as i64;
        self.recv_remaining -= flow;
        if self.recv_remaining < 0 {
            return Err(Failure::Connection(
                "server overran the connection flow-control window".to_string(),
            ));
        }
        if self.recv_remaining < i64::from(self.recv_window / 2) {
            self.replenish_connection();
        }
        if stream != call.stream || call.phase == Phase::Done {
            // A stream we abandoned or already finished: only the connection window counts.
            return Ok(());
        }
        if call.phase != Phase::Body {
            return Err(Failure::Connection(
                "DATA before the response headers".to_string(),
            ));
        }
        call.recv_remaining -= flow;
        if call.recv_remaining < 0 {
            return Err(Failure::Connection(
                "server overran the stream flow-control window".to_string(),
            ));
        }
        call.take_messages(data)?;
        if end_stream {
            call.end_of_body()?;
        } else if call.recv_remaining < i64::from(self.recv_window / 2) {
            let raise = i64::from(self.recv_window) - call.recv_remaining;
            write_window_update(&mut self.outbuf, call.stream, raise as u32);
            call.recv_remaining = i64::from(self.recv_window);
        }
        Ok(())
    }

    /// Sends a connection WINDOW_UPDATE restoring the full receive window.
    fn replenish_connection(&mut self) {
        let raise = i64::from(self.recv_window) - self.recv_remaining;
        if raise > 0 {
            // raise <= recv_window <= 2^31-1.
            write_window_update(&mut self.outbuf, 0, raise as u32);
            self.recv_remaining = i64::from(self.recv_window);
        }
    }

    fn apply_settings(
        &mut self,
        params: SettingsIter<'_>,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        for (id, value) in params {
            match id {
                SETTINGS_MAX_FRAME_SIZE => self.peer_max_frame = value,
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    call.send_window += delta;
                    if call.send_window > i64::from(MAX_WINDOW_SIZE) {
                        return Err(Failure::Connection(
                            "SETTINGS_INITIAL_WINDOW_SIZE overflowed a send window".to_string(),
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn on_goaway(
        &mut self,
        last_stream: u32,
        code: ErrorCode,
        debug: &[u8],
        call: &Call,
    ) -> std::result::Result<(), Failure> {
        self.going_away = true;
        if code == ErrorCode::NoError && last_stream >= call.stream {
            // Graceful shutdown that still covers our stream: let it finish.
            return Ok(());
        }
        let mut why = format!("server closed the connection (GOAWAY {}", code.name());
        if !debug.is_empty() {
            why.push_str(": ");
            why.push_str(&String::from_utf8_lossy(debug));
        }
        why.push(')');
        Err(Failure::Connection(why))
    }

    fn on_continuation(&mut self, stream: u32, block: &[u8]) -> std::result::Result<(), Failure> {
        let protocol = |why: &str| Err(Failure::Connection(why.to_string()));
        let Some((open, bytes, _)) = self.pending_block.as_mut() else {
            return protocol("CONTINUATION without a HEADERS frame");
        };
        if *open != stream {
            return protocol("CONTINUATION on another stream than its HEADERS");
        }
        if bytes.len() + block.len() > MAX_HEADER_BLOCK {
            return protocol("response header block too large");
        }
        bytes.extend_from_slice(block);
        Ok(())
    }

    fn on_window_update(
        &mut self,
        stream: u32,
        increment: u32,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        let window = if stream == 0 {
            &mut self.send_window
        } else if stream == call.stream {
            &mut call.send_window
        } else {
            return Ok(());
        };
        *window += i64::from(increment);
        if *window > i64::from(MAX_WINDOW_SIZE) {
            return Err(Failure::Connection(
                "WINDOW_UPDATE pushed a send window past 2^31-1 bytes".to_string(),
            ));
        }
        Ok(())
    }

    fn finish_block_if(
        &mut self,
        end_headers: bool,
        call: &mut Call,
    ) -> std::result::Result<(), Failure> {
        if end_headers {
            self.finish_block(call)?;
        }
        Ok(())
    }

    /// Decodes the completed header block (always, to keep HPACK in step) and applies it to
    /// the call if it belongs to it.
    fn finish_block(&mut self, call: &mut Call) -> std::result::Result<(), Failure> {
        let Some((stream, block, end_stream)) = self.pending_block.take() else {
            return Ok(());
        };
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.hpack
            .decode(&block, |name, value| {
                fields.push((name.to_vec(), value.to_vec()))
            })
            .map_err(|e| Failure::Connection(e.to_string()))?;
        if stream != call.stream || call.phase == Phase::Done {
            return Ok(());
        }
        call.on_headers(&fields, end_stream)
    }
}

#[cfg(test)]
#[path = "blocking_tests.rs"]
mod tests;
