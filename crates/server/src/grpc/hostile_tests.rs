//! The gRPC endpoint against a hostile client: oversized and compression-bomb messages, a
//! call with endless messages, streams past the concurrent limit, PING/SETTINGS/RST floods
//! (raw HTTP/2 frames over `std::net`), and a stream whose answers are never read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::test_client::*;
use super::wire::code;
use crate::limits::Limits;
use crate::{start, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

fn grpc_limited(limits: Limits) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        limits,
        ..ServeConfig::default()
    })
    .expect("server starts")
}

const MIB: usize = 1 << 20;

/// `zeros` zero bytes compressed as tightly as zlib can (about 1000:1), framed as a gRPC
/// message with the compressed flag.
/// Asserts that `c` gets a ServerLive answer that says live.
async fn assert_live(c: &mut Client) {
    let live = c
        .unary::<_, pb::ServerLiveResponse>("ServerLive", &pb::ServerLiveRequest {})
        .await;
    assert!(live.unwrap().live);
}

/// Asserts that a new connection to `addr` is still served.
fn assert_serving(addr: SocketAddr) {
    block_on(async move {
        let mut c = connect(addr).await;
        assert_live(&mut c).await;
    });
}

fn bomb(zeros: usize, encoding: &str) -> Vec<u8> {
    use flate2::Compression;
    let inflated = vec![0u8; zeros];
    let packed = match encoding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), Compression::best());
            e.write_all(&inflated).unwrap();
            e.finish().unwrap()
        }
        _ => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), Compression::best());
            e.write_all(&inflated).unwrap();
            e.finish().unwrap()
        }
    };
    let mut out = vec![1u8];
    out.extend_from_slice(&(packed.len() as u32).to_be_bytes());
    out.extend_from_slice(&packed);
    out
}

#[test]
fn oversized_messages_and_compression_bombs_are_resource_exhausted() {
    let server = grpc_limited(Limits {
        max_request_bytes: MIB,
        ..Limits::default()
    });
    let addr = server.grpc_addr.unwrap();
    let big_bomb = bomb(16 * MIB, "gzip");
    assert!(big_bomb.len() < 64 * 1024, "{} bytes", big_bomb.len());
    block_on(async move {
        let mut c = connect(addr).await;
        // A prefix announcing 2 GiB: refused before any of it is buffered.
        let mut huge = vec![0u8];
        huge.extend_from_slice(&(2u32 << 30).to_be_bytes());
        huge.extend_from_slice(&[0; 64]);
        let cases = [
            (
                huge,
                None,
                "request message of 2147483648 bytes exceeds the limit of 1048576",
            ),
            (
                big_bomb,
                Some("gzip"),
                "Gzip request message inflated exceeds the limit of 1048576",
            ),
            (
                bomb(2 * MIB, "deflate"),
                Some("deflate"),
                "Deflate request message inflated",
            ),
        ];
        for (body, encoding, want) in cases {
            let reply = c.call("ModelInfer", body, encoding).await;
            assert_eq!(reply.status, code::RESOURCE_EXHAUSTED, "{}", reply.message);
            assert!(reply.message.contains(want), "{}", reply.message);
            assert!(
                reply.message.contains("--max-request-bytes"),
                "{}",
                reply.message
            );
        }
        // On a stream the bomb fails its request only; the next one is answered.
        let mut s = c.stream_with(Some("gzip")).await;
        let framed = bomb(4 * MIB, "gzip");
        let ok = infer_request(
            "identity_fp32",
            "after",
            &[("INPUT0", "FP32", &[1, 1], 1f32.to_le_bytes().to_vec())],
        );
        s.send_raw(framed);
        s.send(&ok);
        s.close();
        let first = s.next().await.expect("an error message");
        assert!(
            first.error_message.contains("inflated exceeds"),
            "{first:?}"
        );
        let second = s.next().await.expect("the next answer");
        assert_eq!(second.infer_response.unwrap().id, "after");
        // A message at the limit is still fine.
        assert_live(&mut c).await;
    });
}

#[test]
fn a_call_may_not_carry_endless_messages() {
    let server = grpc_limited(Limits {
        max_request_bytes: MIB,
        ..Limits::default()
    });
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let empty_messages = frame(b"", None).repeat(5000);
        let three_400k = frame(&vec![7u8; 400 << 10], None).repeat(3);
        let cases = [
            (empty_messages, "more than 4096 request messages"),
            (
                three_400k,
                "the sum of the call's request messages exceeds the limit of 1048576",
            ),
        ];
        for (body, want) in cases {
            let reply = c.call("/inferperf.test.Echo/Echo", body, None).await;
            assert_eq!(reply.status, code::RESOURCE_EXHAUSTED, "{}", reply.message);
            assert!(reply.message.contains(want), "{}", reply.message);
        }
        let two = frame(&vec![7u8; 400 << 10], None).repeat(2);
        let reply = c.call("/inferperf.test.Echo/Echo", two, None).await;
        assert_eq!((reply.status, reply.messages[0].len()), (0, 800 << 10));
    });
}

// ---- raw HTTP/2 ----

pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub(super) const DATA: u8 = 0;
pub(super) const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
pub(super) const SETTINGS: u8 = 4;
const PING: u8 = 6;
pub(super) const GOAWAY: u8 = 7;

pub(super) fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A HEADERS block (HPACK, literals without indexing) for a call to `method`.
pub(super) fn call_headers(method: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    let path = format!("/inference.GRPCInferenceService/{method}");
    block.push(0x04); // :path, literal value
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x0f, 0x10, 16]); // content-type
    block.extend_from_slice(b"application/grpc");
    block
}

pub(super) struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// Connects, sends the preface and empty SETTINGS, and acks the server's SETTINGS, which
    /// it returns as (id, value) pairs.
    pub(super) fn connect(addr: SocketAddr) -> (Raw, Vec<(u16, u32)>) {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut raw = Raw {
            stream,
            buf: Vec::new(),
        };
        raw.send(PREFACE);
        raw.send(&h2_frame(SETTINGS, 0, 0, &[]));
        let settings = loop {
            let (kind, flags, _, payload) = raw.next().expect("server SETTINGS");
            if kind == SETTINGS && flags & 1 == 0 {
                break payload
                    .chunks(6)
                    .map(|c| {
                        (
                            u16::from_be_bytes([c[0], c[1]]),
                            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                        )
                    })
                    .collect();
            }
        };
        raw.send(&h2_frame(SETTINGS, 1, 0, &[]));
        (raw, settings)
    }

    pub(super) fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next frame (kind, flags, stream, payload); None at EOF or timeout.
    pub(super) fn next(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let (kind, flags) = (self.buf[3], self.buf[4]);
                    let id = u32::from_be_bytes(self.buf[5..9].try_into().unwrap()) & 0x7fff_ffff;
                    let payload = self.buf[9..9 + len].to_vec();
                    self.buf.drain(..9 + len);
                    return Some((kind, flags, id, payload));
                }
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

#[test]
fn streams_past_the_concurrent_limit_are_refused() {
    let server = grpc_limited(Limits {
        max_streams: 4,
        ..Limits::default()
    });
    let (mut raw, settings) = Raw::connect(server.grpc_addr.unwrap());
    // SETTINGS_MAX_CONCURRENT_STREAMS (3) and SETTINGS_MAX_HEADER_LIST_SIZE (6).
    assert!(settings.contains(&(3, 4)), "{settings:?}");
    assert!(settings.contains(&(6, 64 << 10)), "{settings:?}");
    // Ten calls that never send their request: four are open, six refused at once.
    for i in 0..10u32 {
        raw.send(&h2_frame(
            HEADERS,
            0x4,
            2 * i + 1,
            &call_headers("ModelInfer"),
        ));
    }
    let mut refused = Vec::new();
    while refused.len() < 6 {
        let (kind, _, id, payload) = raw.next().expect("a frame");
        assert_ne!(kind, GOAWAY, "{payload:?}");
        if kind == RST_STREAM {
            assert_eq!(payload, 7u32.to_be_bytes(), "REFUSED_STREAM");
            refused.push(id);
        }
    }
    assert_eq!(refused, vec![9, 11, 13, 15, 17, 19]);
    // The open ones still work: stream 1 sends an empty request and ends its side.
    raw.send(&h2_frame(DATA, 1, 1, &frame(b"", None)));
    let mut saw_headers = false;
    while let Some((kind, flags, id, _)) = raw.next() {
        if id == 1 && kind == HEADERS {
            saw_headers = true;
            if flags & 1 == 1 {
                break; // the trailers: the call is over
            }
        }
    }
    assert!(saw_headers, "stream 1 was answered");
}

#[test]
fn ping_and_settings_floods_queue_nothing() {
    let server = grpc_limited(Limits::default());
    let addr = server.grpc_addr.unwrap();
    let (raw, _) = Raw::connect(addr);
    let mut writer = raw.stream.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // 17 MB of PINGs and SETTINGS, and no read: the server answers each before reading the
    // next, so once the answers fill the sockets it stops reading and the writes stall.
    let mut flood = Vec::new();
    for i in 0..1000u64 {
        flood.extend_from_slice(&h2_frame(PING, 0, 0, &i.to_be_bytes()));
        flood.extend_from_slice(&h2_frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]));
    }
    let total = flood.len() * 500;
    let mut written = 0;
    for _ in 0..500 {
        match writer.write(&flood) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    assert!(
        written < total,
        "the server read all {total} bytes of the flood"
    );
    // The server still serves another connection.
    assert_serving(addr);
    drop((raw, writer));
    let give_up = Instant::now() + Duration::from_secs(10);
    while server.open_connections() > 0 {
        assert!(
            Instant::now() < give_up,
            "the flooding connection is still open"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn rapid_resets_leave_the_server_serving() {
    let server = grpc_limited(Limits::default());
    let addr = server.grpc_addr.unwrap();
    let (mut raw, _) = Raw::connect(addr);
    raw.stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut burst = Vec::new();
    for i in 0..5000u32 {
        let id = 2 * i + 1;
        burst.extend_from_slice(&h2_frame(HEADERS, 0x4, id, &call_headers("ServerLive")));
        burst.extend_from_slice(&h2_frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let _ = raw.stream.write_all(&burst);
    let _ = raw.stream.write_all(&h2_frame(PING, 0, 0, b"burstend"));
    // h2 either keeps up (and acks the PING after the burst) or ends the connection with
    // GOAWAY ENHANCE_YOUR_CALM; it does not grow.
    let mut goaway = None;
    while let Some((kind, flags, _, payload)) = raw.next() {
        if kind == GOAWAY {
            goaway = Some(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
            break;
        }
        if kind == PING && flags & 1 == 1 && payload == b"burstend" {
            break;
        }
    }
    if let Some(reason) = goaway {
        assert_eq!(reason, 0xb, "ENHANCE_YOUR_CALM");
    }
    assert_serving(addr);
}

#[test]
fn a_stream_whose_answers_are_never_read_stops_being_read() {
    let server = grpc_limited(Limits::default());
    let addr = server.grpc_addr.unwrap();
    let counted = || server.counters().infer_requests;
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        let req = infer_request(
            "identity_fp32",
            "x",
            &[("INPUT0", "FP32", &[1, 256], vec![0; 1024])],
        );
        // 20,000 requests of 1 KiB answered with 1 KiB each, none of it read.
        for _ in 0..20_000 {
            s.send(&req);
        }
        s.close();
        let mut last = 0;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            last = counted();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(counted(), last, "still answering with nobody reading");
        assert!(last > 0 && last < 2000, "{last} answered");
        drop(s);
    });
}

#[test]
fn absurd_shapes_are_invalid_argument() {
    let server = grpc_limited(Limits::default());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let g = 1i64 << 32;
        let shapes: [&[i64]; 4] = [&[g, g, g], &[65536, 65536], &[1, g * g / 4], &[1, -1]];
        for shape in shapes {
            let req = infer_request(
                "identity_fp32",
                "x",
                &[("INPUT0", "FP32", shape, vec![0; 8])],
            );
            let err = c
                .unary::<_, pb::ModelInferResponse>("ModelInfer", &req)
                .await
                .unwrap_err();
            assert_eq!(err.0, code::INVALID_ARGUMENT, "{shape:?}: {}", err.1);
            assert!(
                err.1.contains("INPUT0") || err.1.contains("batch-size"),
                "{}",
                err.1
            );
        }
        let ok = infer_request(
            "identity_fp32",
            "x",
            &[("INPUT0", "FP32", &[1, 2], vec![0; 8])],
        );
        assert!(c
            .unary::<_, pb::ModelInferResponse>("ModelInfer", &ok)
            .await
            .is_ok());
    });
}
