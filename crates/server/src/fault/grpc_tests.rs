//! The fault server's gRPC front: healthy calls through the client crate's blocking gRPC
//! client, faults from raw HTTP/2 frames.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use prost::Message;

use super::tests::{read_until, server, End};
use super::FaultMode;
use inferperf_client::protocol::grpc::blocking::GrpcClient;
use inferperf_wire::protocol::grpc::frame::{
    write_data, write_headers, write_settings, END_HEADERS, PREFACE,
};
use inferperf_wire::protocol::grpc::hpack::Decoder;
use inferperf_wire::protocol::grpc::pb::inference as pb;
use inferperf_wire::protocol::grpc::request::call_headers;

const TTL: Duration = Duration::from_secs(20);
const QUICK: Duration = Duration::from_millis(300);

pub(super) fn framed(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

pub(super) fn infer_message() -> Vec<u8> {
    pb::ModelInferRequest {
        model_name: "identity".into(),
        id: "7".into(),
        raw_input_contents: vec![(0..64).collect()],
        ..Default::default()
    }
    .encode_to_vec()
}

/// One raw call on stream 1: what came back, and how it ended.
pub(super) fn raw_call(
    addr: SocketAddr,
    method: &str,
    message: &[u8],
    max: usize,
) -> (Vec<Frame>, End) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(QUICK)).unwrap();
    let mut out = PREFACE.to_vec();
    write_settings(&mut out, &[]);
    let block = call_headers(&addr.to_string(), method, &[], false, None);
    write_headers(&mut out, 1, &block, false, 16_384);
    write_data(&mut out, 1, &framed(message), true, 16_384);
    s.write_all(&out).unwrap();
    let (bytes, end) = read_until(&mut s, max);
    (frames(&bytes), end)
}

/// A frame as received: (type, flags, stream, payload).
pub(super) type Frame = (u8, u8, u32, Vec<u8>);

fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let Some(payload) = bytes.get(9..9 + len) else {
            break;
        };
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        out.push((bytes[3], bytes[4], stream, payload.to_vec()));
        bytes = &bytes[9 + len..];
    }
    out
}

/// Header fields of stream 1, every block decoded (HEADERS + CONTINUATION joined).
pub(super) fn fields(frames: &[Frame]) -> Vec<(String, String)> {
    let mut decoder = Decoder::with_limits(4096, 8 << 20);
    let mut out = Vec::new();
    let mut block = Vec::new();
    for (kind, flags, stream, payload) in frames {
        if *stream == 1 && (*kind == 1 || *kind == 9) {
            block.extend_from_slice(payload);
            if flags & END_HEADERS != 0 {
                decoder
                    .decode(&block, |n, v| {
                        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                        out.push((text(n), text(v)))
                    })
                    .unwrap();
                block.clear();
            }
        }
    }
    out
}

pub(super) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The DATA bytes of stream 1.
pub(super) fn data(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, _, stream, payload) in frames {
        if *kind == 0 && *stream == 1 {
            out.extend_from_slice(payload);
        }
    }
    out
}

#[test]
fn healthy_calls_through_a_grpc_client() {
    let srv = server(FaultMode::None, TTL);
    let mut client = GrpcClient::connect(&srv.grpc_addr.unwrap().to_string(), QUICK * 10).unwrap();
    let server = client.unary("ServerMetadata", &[]).unwrap();
    let server = pb::ServerMetadataResponse::decode(server.as_slice()).unwrap();
    assert!(server.extensions.iter().any(|e| e == "statistics"));
    let named = pb::ModelMetadataRequest {
        name: "identity".into(),
        version: String::new(),
    }
    .encode_to_vec();
    let meta = client.unary("ModelMetadata", &named).unwrap();
    let meta = pb::ModelMetadataResponse::decode(meta.as_slice()).unwrap();
    assert_eq!(meta.inputs[0].shape, [16]);
    let config = client.unary("ModelConfig", &named).unwrap();
    let config = pb::ModelConfigResponse::decode(config.as_slice())
        .unwrap()
        .config
        .unwrap();
    assert_eq!(
        (config.name.as_str(), config.max_batch_size),
        ("identity", 0)
    );
    let reply = client.unary("ModelInfer", &infer_message()).unwrap();
    let reply = pb::ModelInferResponse::decode(reply.as_slice()).unwrap();
    assert_eq!(reply.raw_output_contents, [(0..64).collect::<Vec<u8>>()]);
    assert_eq!(reply.id, "7");
    let stats = client.unary("ModelStatistics", &named).unwrap();
    let stats = pb::ModelStatisticsResponse::decode(stats.as_slice()).unwrap();
    assert_eq!(stats.model_stats[0].inference_count, 1);
    let err = client.unary("RepositoryIndex", &[]).unwrap_err();
    assert!(err.msg.contains("not implemented"), "{}", err.msg);
}

#[test]
fn failing_modes_send_grpc_status_13() {
    let srv = server(FaultMode::Status500, TTL);
    let mut client = GrpcClient::connect(&srv.grpc_addr.unwrap().to_string(), QUICK * 10).unwrap();
    let err = client.unary("ModelInfer", &infer_message()).unwrap_err();
    assert!(err.msg.contains("internal error"), "{}", err.msg);

    let srv = server(FaultMode::EscapeText, TTL);
    let (frames, _) = raw_call(
        srv.grpc_addr.unwrap(),
        "ModelInfer",
        &infer_message(),
        1 << 20,
    );
    let fields = fields(&frames);
    assert_eq!(field(&fields, "grpc-status"), Some("13"));
    let message = field(&fields, "grpc-message").unwrap();
    assert!(message.contains("%1B[31m") && message.contains("%07") && message.contains("%0D"));

    let srv = server(FaultMode::EveryNthFails, TTL);
    let mut client = GrpcClient::connect(&srv.grpc_addr.unwrap().to_string(), QUICK * 10).unwrap();
    let ok: Vec<bool> = (0..3)
        .map(|_| client.unary("ModelInfer", &infer_message()).is_ok())
        .collect();
    assert_eq!(ok, [true, true, false]);
}

#[test]
fn broken_replies_are_sent_as_the_mode_says() {
    let call = |mode| {
        let srv = server(mode, TTL);
        raw_call(
            srv.grpc_addr.unwrap(),
            "ModelInfer",
            &infer_message(),
            4 << 20,
        )
    };
    let (frames, end) = call(FaultMode::Reset);
    assert_eq!(end, End::Reset);
    assert!(!data(&frames).is_empty());

    let (frames, end) = call(FaultMode::CloseMidBody);
    assert_eq!(end, End::Eof);
    let body = data(&frames);
    let claimed = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert!(body.len() - 5 < claimed);

    let (frames, _) = call(FaultMode::WrongContentLength);
    let body = data(&frames);
    let claimed = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(claimed, body.len() - 5 + 100);
    assert_eq!(field(&fields(&frames), "grpc-status"), Some("0"));

    let (frames, end) = call(FaultMode::NotProtobuf);
    assert_eq!(end, End::Idle);
    assert!(pb::ModelInferResponse::decode(&data(&frames)[5..]).is_err());

    let (frames, _) = call(FaultMode::HugeContentLength);
    assert_eq!(data(&frames)[1..5], u32::MAX.to_be_bytes());

    let (frames, _) = call(FaultMode::HugeHeaders);
    let fields = fields(&frames);
    assert!(field(&fields, "x-fault-huge").unwrap().len() > 1 << 20);
    assert_eq!(field(&fields, "grpc-status"), Some("0"));
    assert!(pb::ModelInferResponse::decode(&data(&frames)[5..]).is_ok());

    let (frames, end) = call(FaultMode::StallHead);
    assert_eq!(end, End::Idle);
    let answers = frames
        .iter()
        .filter(|f| f.2 == 1 && matches!(f.0, 0 | 1 | 3));
    assert_eq!(answers.count(), 0, "stream 1 got an answer");
}

#[test]
fn drip_sends_the_reply_a_byte_at_a_time() {
    let srv = server(FaultMode::Drip, TTL);
    let addr = srv.grpc_addr.unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut out = PREFACE.to_vec();
    write_settings(&mut out, &[]);
    let block = call_headers(&addr.to_string(), "ModelInfer", &[], false, None);
    write_headers(&mut out, 1, &block, false, 16_384);
    write_data(&mut out, 1, &framed(&infer_message()), true, 16_384);
    s.write_all(&out).unwrap();
    // The reply's HEADERS frame alone is over 20 bytes: after a second and a half at a byte
    // per 100 ms it has begun and not ended.
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    while started.elapsed() < Duration::from_millis(1500) {
        if let Ok(n) = std::io::Read::read(&mut s, &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    let frames = frames(&got);
    let answered = frames.iter().any(|f| f.2 == 1 && matches!(f.0, 0 | 1));
    assert!(!answered, "stream 1 got a whole HEADERS or DATA frame");
    let whole: usize = frames.iter().map(|f| 9 + f.3.len()).sum();
    let partial = &got[whole..];
    assert!(!partial.is_empty(), "nothing dripped");
    if partial.len() >= 9 {
        assert_eq!(
            (partial[3], partial[8]),
            (1, 1),
            "a HEADERS frame of stream 1"
        );
    }
}

#[test]
fn garbage_and_floods() {
    let srv = server(FaultMode::Garbage, TTL);
    let mut s = TcpStream::connect(srv.grpc_addr.unwrap()).unwrap();
    s.set_read_timeout(Some(QUICK)).unwrap();
    let mut out = PREFACE.to_vec();
    write_settings(&mut out, &[]);
    let addr = srv.grpc_addr.unwrap().to_string();
    write_headers(
        &mut out,
        1,
        &call_headers(&addr, "ModelInfer", &[], false, None),
        false,
        16_384,
    );
    write_data(&mut out, 1, &framed(&infer_message()), true, 16_384);
    s.write_all(&out).unwrap();
    let (bytes, _) = read_until(&mut s, 1 << 20);
    assert!(bytes.windows(7).any(|w| w == b"GARBAGE"));

    for (mode, kind) in [(FaultMode::SettingsFlood, 4), (FaultMode::PingFlood, 6)] {
        let srv = server(mode, TTL);
        let (frames, end) = raw_call(
            srv.grpc_addr.unwrap(),
            "ModelInfer",
            &infer_message(),
            4 << 20,
        );
        assert_eq!(end, End::Max, "{mode:?}");
        let asking = frames
            .iter()
            .filter(|f| f.0 == kind && f.1 & 1 == 0)
            .count();
        assert!(asking > 100_000, "{mode:?}: {asking}");
    }

    let srv = server(FaultMode::EndlessHeader, TTL);
    let (frames, end) = raw_call(
        srv.grpc_addr.unwrap(),
        "ModelInfer",
        &infer_message(),
        4 << 20,
    );
    assert_eq!(end, End::Max);
    let on_stream: Vec<&Frame> = frames.iter().filter(|f| f.2 == 1 && f.0 != 8).collect();
    assert_eq!(on_stream[0].0, 1);
    assert!(on_stream.iter().all(|f| f.1 & END_HEADERS == 0));
    assert!(on_stream.len() > 200 && on_stream[1..].iter().all(|f| f.0 == 9));
}

#[test]
fn metadata_modes_over_grpc() {
    for (mode, dims, step) in [
        (FaultMode::DimsHuge, vec![1i64 << 32; 3], None),
        (FaultMode::DimsBig, vec![65_536, 65_536], None),
        (FaultMode::NameDotdot, vec![16], Some("../../x")),
        (FaultMode::NameAbs, vec![16], Some("/abs/x")),
    ] {
        let srv = server(mode, TTL);
        let mut client =
            GrpcClient::connect(&srv.grpc_addr.unwrap().to_string(), QUICK * 10).unwrap();
        let named = |name: &str| {
            pb::ModelConfigRequest {
                name: name.into(),
                version: String::new(),
            }
            .encode_to_vec()
        };
        let meta = client.unary("ModelMetadata", &named("identity")).unwrap();
        let meta = pb::ModelMetadataResponse::decode(meta.as_slice()).unwrap();
        assert_eq!(meta.inputs[0].shape, dims, "{mode:?}");
        let config = client.unary("ModelConfig", &named("identity")).unwrap();
        let config = pb::ModelConfigResponse::decode(config.as_slice())
            .unwrap()
            .config
            .unwrap();
        assert_eq!(config.input[0].dims, dims, "{mode:?}");
        let steps: Vec<String> = match config.scheduling_choice {
            Some(pb::model_config::SchedulingChoice::EnsembleScheduling(e)) => {
                e.step.into_iter().map(|s| s.model_name).collect()
            }
            _ => Vec::new(),
        };
        assert_eq!(steps.first().map(String::as_str), step, "{mode:?}");
        if let Some(step) = step {
            let composing = client.unary("ModelConfig", &named(step)).unwrap();
            let composing = pb::ModelConfigResponse::decode(composing.as_slice()).unwrap();
            assert_eq!(composing.config.unwrap().name, step);
            let stats = client.unary("ModelStatistics", &named("")).unwrap();
            let stats = pb::ModelStatisticsResponse::decode(stats.as_slice()).unwrap();
            assert_eq!(stats.model_stats.len(), 2);
        }
    }
}
