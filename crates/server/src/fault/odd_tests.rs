//! The almost-right modes: a large request refused early, a reply with the wrong gRPC content
//! type or an unannounced compressed message, a 5000-digit value, one-byte chunks.

use std::io::{Read, Write};
use std::net::TcpStream;

use prost::Message;

use super::grpc_tests::{data, field, fields, infer_message, raw_call};
use super::tests::{
    exchange, get, head_and_body, infer_request, json_of, server, whole_reply, QUICK, TTL,
};
use super::FaultMode;
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// The head of an infer request announcing `len` bytes of body.
fn large_head(len: usize) -> Vec<u8> {
    format!(
        "POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\n\
         Inference-Header-Content-Length: 100\r\nContent-Length: {len}\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn payload_too_large_answers_before_reading_the_body() {
    let srv = server(FaultMode::PayloadTooLarge, TTL);
    let meta = json_of(&whole_reply(srv.addr, &get("/v2/models/identity")));
    assert_eq!(meta["inputs"][0]["shape"], serde_json::json!([4194304]));
    // A 16 MiB request: the server answers after the head and closes with the body unread,
    // so the client's write fails before it is done; the answer is still there to read.
    let mut request = large_head(16 << 20);
    request.resize(request.len() + (16 << 20), b'x');
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(QUICK * 10)).unwrap();
    let write = s.write_all(&request);
    assert!(write.is_err(), "the whole request was read");
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let (head, _) = head_and_body(&reply);
    assert!(head.starts_with("HTTP/1.1 413 "), "{head}");
    let error = json_of(&reply)["error"].as_str().unwrap().to_string();
    assert!(error.contains("limit of 1048576 bytes"), "{error}");
    assert_eq!(srv.infers(), 1);
    // A request within the limit is answered as usual.
    let (reply, _) = exchange(srv.addr, &infer_request(), 1 << 20, QUICK);
    assert!(reply.starts_with(b"HTTP/1.1 200 OK"));
}

#[test]
fn payload_too_large_over_grpc_is_resource_exhausted() {
    let srv = server(FaultMode::PayloadTooLarge, TTL);
    let big = pb::ModelInferRequest {
        model_name: "identity".into(),
        raw_input_contents: vec![vec![0; 2 << 20]],
        ..Default::default()
    }
    .encode_to_vec();
    let (frames, _) = raw_call(srv.grpc_addr.unwrap(), "ModelInfer", &big, 1 << 20);
    let fields = fields(&frames);
    assert_eq!(field(&fields, "grpc-status"), Some("8"));
    assert!(field(&fields, "grpc-message").unwrap().contains("limit"));
    assert!(data(&frames).is_empty());
}

#[test]
fn grpc_replies_with_odd_framing() {
    let call = |mode| {
        let srv = server(mode, TTL);
        raw_call(
            srv.grpc_addr.unwrap(),
            "ModelInfer",
            &infer_message(),
            1 << 20,
        )
        .0
    };
    let frames = call(FaultMode::WrongContentType);
    let got = fields(&frames);
    assert_eq!(field(&got, "content-type"), Some("text/html"));
    assert_eq!(field(&got, "grpc-status"), Some("0"));
    assert!(pb::ModelInferResponse::decode(&data(&frames)[5..]).is_ok());

    let frames = call(FaultMode::CompressedNoEncoding);
    let got = fields(&frames);
    assert_eq!(field(&got, "content-type"), Some("application/grpc"));
    assert_eq!(field(&got, "grpc-encoding"), None);
    let body = data(&frames);
    assert_eq!(body[0], 1, "compressed flag");
    assert!(pb::ModelInferResponse::decode(&body[5..]).is_ok());
}

#[test]
fn huge_number_sends_a_5000_digit_value() {
    let srv = server(FaultMode::HugeNumber, TTL);
    let (reply, _) = exchange(srv.addr, &infer_request(), 1 << 20, QUICK);
    let (head, body) = head_and_body(&reply);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    let text = std::str::from_utf8(body).unwrap();
    let first = text
        .split("\"data\":[")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert_eq!(first.len(), 5000);
    assert!(first.bytes().all(|b| b.is_ascii_digit()));
    // Past any float's range: serde_json refuses it too.
    let err = serde_json::from_slice::<serde_json::Value>(body).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn tiny_chunks_send_a_valid_body_one_byte_per_chunk() {
    let srv = server(FaultMode::TinyChunks, TTL);
    let (reply, _) = exchange(srv.addr, &infer_request(), 8 << 20, QUICK);
    let (head, mut raw) = head_and_body(&reply);
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    assert!(!head.contains("\r\nContent-Length: "), "{head}");
    let json_len: usize = head
        .split("Inference-Header-Content-Length: ")
        .nth(1)
        .unwrap()
        .split("\r\n")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut body = Vec::new();
    while let Some(rest) = raw.strip_prefix(b"1\r\n") {
        body.push(rest[0]);
        assert_eq!(&rest[1..3], b"\r\n");
        raw = &rest[3..];
    }
    assert_eq!(raw, b"0\r\n\r\n");
    assert!(body.len() > 400_000, "{}", body.len());
    let json: serde_json::Value = serde_json::from_slice(&body[..json_len]).unwrap();
    assert_eq!(json["outputs"][0]["parameters"]["binary_data_size"], 64);
    assert_eq!(&body[json_len..], (0..64).collect::<Vec<u8>>().as_slice());
}
