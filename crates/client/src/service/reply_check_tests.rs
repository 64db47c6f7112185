//! The reply checks: real replies of the reference server pass (HTTP bodies captured from
//! `inferperf serve`; gRPC messages built as its `grpc/convert.rs` builds them, with prost),
//! and every rule refuses a reply that breaks it, with the right kind and message.

use prost::Message;

use super::*;
use crate::protocol::grpc::pb::inference as pb;

/// `POST /v2/models/simple/infer` with binary outputs: the JSON header as served.
const SIMPLE_HEADER: &str = r#"{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}]}"#;
/// The same request with JSON outputs, as served.
const SIMPLE_JSON: &str = r#"{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30]},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}"#;
/// `identity_bytes` with the elements "ab", "", "xyz", binary output, as served.
const BYTES_HEADER: &str = r#"{"model_name":"identity_bytes","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[1,3],"parameters":{"binary_data_size":17}}]}"#;
const BYTES_TAIL: &[u8] = b"\x02\x00\x00\x00ab\x00\x00\x00\x00\x03\x00\x00\x00xyz";

fn expect(model: &str, outputs: &[&str]) -> Expect {
    Expect {
        model: model.into(),
        outputs: outputs.iter().map(|o| o.to_string()).collect(),
        shm_outputs: false,
    }
}

fn simple() -> Expect {
    expect("simple", &["OUTPUT0", "OUTPUT1"])
}

/// A header followed by `tail`, as (body, Inference-Header-Content-Length).
fn binary(header: &str, tail: &[u8]) -> (Vec<u8>, Option<usize>) {
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(tail);
    (body, Some(header.len()))
}

fn http_err(exp: &Expect, body: &[u8], len: Option<usize>) -> Bad {
    check_kserve_http(exp, body, len).expect_err(&String::from_utf8_lossy(body))
}

#[test]
fn served_http_replies_pass() {
    let (body, len) = binary(SIMPLE_HEADER, &[7; 128]);
    check_kserve_http(&simple(), &body, len).unwrap();
    check_kserve_http(&simple(), SIMPLE_JSON.as_bytes(), None).unwrap();
    let (body, len) = binary(BYTES_HEADER, BYTES_TAIL);
    check_kserve_http(&expect("identity_bytes", &["OUTPUT0"]), &body, len).unwrap();
    // Binary data straight after the JSON, with no header length (the value ends it).
    let (body, _) = binary(SIMPLE_HEADER, &[7; 128]);
    check_kserve_http(&simple(), &body, None).unwrap();
    // Escapes in names, whitespace, extra members, nested data, no model_name.
    let loose = r#" { "id" : "x", "outputs" : [ {"name":"OUT\u0050UT0", "datatype":"FP32",
        "shape":[ 2 , 2 ], "data":[[1.5,-2e3],[0,1]], "parameters":{"other":[true,null]}} ] } "#;
    check_kserve_http(&expect("m", &["OUTPUT0"]), loose.as_bytes(), None).unwrap();
    // Through the run's check value.
    let check = ReplyCheck::KserveHttp(std::sync::Arc::new(simple()));
    check.http(SIMPLE_JSON.as_bytes(), None).unwrap();
    assert!(ReplyCheck::None.http(b"not json", None).is_ok());
}

#[test]
fn http_reply_that_is_not_json_is_not_json() {
    let cases: [(&[u8], &str); 6] = [
        (
            b"not json",
            "reply is not JSON (expected a JSON object at byte 0)",
        ),
        (b"", "reply is not JSON (expected a JSON object at byte 0)"),
        (
            b"{\"outputs\":[",
            "reply is not JSON (JSON value missing at byte 12)",
        ),
        (
            b"{\"a\":tru}",
            "reply is not JSON (invalid literal at byte 5)",
        ),
        (
            b"{\"a\":\"\x01\"}",
            "reply is not JSON (control character in a string at byte 6)",
        ),
        (
            b"{} x",
            "reply is not JSON (unexpected data after the JSON value at byte 3)",
        ),
    ];
    for (body, msg) in cases {
        let bad = http_err(&expect("simple", &[]), body, None);
        assert_eq!(bad.kind, FailKind::NotJson, "{}", bad.msg);
        assert_eq!(bad.msg, msg);
    }
    let deep = "[".repeat(200);
    let bad = check_json(deep.as_bytes()).unwrap_err();
    assert!(bad.msg.contains("nested deeper than 128"), "{}", bad.msg);
}

#[test]
fn http_reply_naming_another_model_is_invalid() {
    let body = SIMPLE_JSON.replace("\"simple\"", "\"other\"");
    let bad = http_err(&simple(), body.as_bytes(), None);
    assert_eq!(bad.kind, FailKind::Invalid);
    assert_eq!(bad.msg, r#"reply names model "other", expected "simple""#);
    // Server text is shown with control characters escaped.
    let body = SIMPLE_JSON.replace("\"simple\"", r#""a\u001b[2Jb""#);
    let bad = http_err(&simple(), body.as_bytes(), None);
    assert_eq!(
        bad.msg,
        r#"reply names model "a\u{1b}[2Jb", expected "simple""#
    );
}

#[test]
fn http_reply_missing_an_output_is_invalid() {
    let one = r#"{"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1],"data":[1]}]}"#;
    let bad = http_err(&simple(), one.as_bytes(), None);
    assert_eq!(
        (bad.kind, bad.msg.as_str()),
        (FailKind::Invalid, "reply has no output OUTPUT1")
    );
    let bad = http_err(&simple(), br#"{"model_name":"simple"}"#, None);
    assert_eq!(bad.msg, "reply has no output OUTPUT0");
    for (field, out) in [
        ("name", r#"{"datatype":"INT32","shape":[1],"data":[1]}"#),
        ("datatype", r#"{"name":"OUTPUT0","shape":[1],"data":[1]}"#),
        (
            "shape",
            r#"{"name":"OUTPUT0","datatype":"INT32","data":[1]}"#,
        ),
    ] {
        let body = format!(r#"{{"outputs":[{out}]}}"#);
        let bad = http_err(&simple(), body.as_bytes(), None);
        assert_eq!(bad.kind, FailKind::Invalid);
        assert_eq!(bad.msg, format!("reply's outputs[0] has no \"{field}\""));
    }
    let body = br#"{"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1]}]}"#;
    let bad = http_err(&simple(), body, None);
    assert_eq!(
        bad.msg,
        r#"output OUTPUT0 has no data (neither "data" nor "parameters.binary_data_size")"#
    );
    // Outputs in shared memory carry no data.
    let shm = Expect {
        shm_outputs: true,
        ..expect("simple", &["OUTPUT0"])
    };
    check_kserve_http(&shm, body, None).unwrap();
    let bad = http_err(&simple(), br#"{"outputs":{}}"#, None);
    assert_eq!(bad.msg, r#"reply's "outputs" is not a array (at byte 11)"#);
}

#[test]
fn http_shape_contradicting_its_bytes_is_invalid() {
    let header = SIMPLE_HEADER.replace("[1,16]", "[2,16]");
    let (body, len) = binary(&header, &[0; 128]);
    let bad = http_err(&simple(), &body, len);
    assert_eq!(bad.kind, FailKind::Invalid);
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [2,16] (128 bytes as INT32) but 64 bytes of data"
    );
    let json = SIMPLE_JSON.replace("14,16,", "");
    let bad = http_err(&simple(), json.as_bytes(), None);
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [1,16] (16 elements) but 14 elements of data"
    );
    let huge = SIMPLE_HEADER.replacen("[1,16]", "[4294967296,4294967296,4294967296]", 1);
    let (body, len) = binary(&huge, &[0; 128]);
    let bad = http_err(&simple(), &body, len);
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [4294967296,4294967296,4294967296] whose element count overflows"
    );
    let (body, len) = binary(&SIMPLE_HEADER.replacen("[1,16]", "[-1,16]", 1), &[0; 128]);
    let bad = http_err(&simple(), &body, len);
    assert!(
        bad.msg.contains("negative or non-integer dimension"),
        "{}",
        bad.msg
    );
    let (body, len) = binary(&SIMPLE_HEADER.replace("INT32", "INT33"), &[0; 128]);
    assert_eq!(
        http_err(&simple(), &body, len).msg,
        "output OUTPUT0 has unknown datatype \"INT33\""
    );
    // BYTES: the length prefixes must tile the data into the shape's element count.
    let exp = expect("identity_bytes", &["OUTPUT0"]);
    let (body, len) = binary(&BYTES_HEADER.replace("[1,3]", "[1,2]"), BYTES_TAIL);
    let bad = http_err(&exp, &body, len);
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [1,2] (2 elements) but its BYTES data holds 3 elements"
    );
    let mut torn = BYTES_TAIL.to_vec();
    torn[13] = 9;
    let (body, len) = binary(BYTES_HEADER, &torn);
    assert!(http_err(&exp, &body, len)
        .msg
        .contains("not a sequence of length-prefixed"));
}

#[test]
fn http_json_value_its_datatype_cannot_hold_is_invalid() {
    let digits = format!("1{}", "0".repeat(4999));
    let json = SIMPLE_JSON.replacen("[0,2,4,", &format!("[0,{digits},4,"), 1);
    let bad = http_err(&simple(), json.as_bytes(), None);
    assert_eq!(bad.kind, FailKind::Invalid);
    assert!(
        bad.msg.starts_with("output OUTPUT0 has 1000"),
        "{}",
        bad.msg
    );
    assert!(
        bad.msg
            .ends_with("... as element 1 of its INT32 data, which INT32 cannot hold"),
        "{}",
        bad.msg
    );
    let json = SIMPLE_JSON.replacen(",0]}]}", ",-2147483649]}]}", 1);
    let bad = http_err(&simple(), json.as_bytes(), None);
    assert_eq!(
        bad.msg,
        "output OUTPUT1 has -2147483649 as element 15 of its INT32 data, which INT32 cannot hold"
    );
}

#[test]
fn http_binary_tail_of_the_wrong_length_is_length() {
    let (body, len) = binary(SIMPLE_HEADER, &[0; 100]);
    let bad = http_err(&simple(), &body, len);
    assert_eq!(bad.kind, FailKind::Length);
    assert_eq!(
        bad.msg,
        "the outputs declare 128 bytes of binary data but 100 bytes follow the JSON header"
    );
    let bad = http_err(&simple(), SIMPLE_HEADER.as_bytes(), Some(400));
    assert_eq!(bad.kind, FailKind::Length);
    assert_eq!(
        bad.msg,
        "Inference-Header-Content-Length 400 exceeds the reply body's 235 bytes"
    );
    let at = SIMPLE_HEADER.rfind("64}").unwrap();
    let big = format!(
        "{}18446744073709551615}}{}",
        &SIMPLE_HEADER[..at],
        &SIMPLE_HEADER[at + 3..]
    );
    let (body, len) = binary(&big, &[0; 128]);
    let bad = http_err(&simple(), &body, len);
    assert_eq!(
        (bad.kind, bad.msg.as_str()),
        (FailKind::Length, "binary_data_size total overflows")
    );
}

#[test]
fn json_check_takes_one_value() {
    for good in [
        &b"{}"[..],
        b" [1, -0.5e+3, \"\\u00e9\", null] ",
        b"\"x\"",
        b"0",
    ] {
        check_json(good).unwrap();
    }
    for bad in [
        &b""[..],
        b"{",
        b"01",
        b"1.",
        b"[1,]",
        b"{\"a\"}",
        b"\"\\x\"",
        b"{}{}",
        b"\"\xff\"",
    ] {
        let e = check_json(bad).unwrap_err();
        assert_eq!(
            e.kind,
            FailKind::NotJson,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    let check = ReplyCheck::Json;
    assert!(check.http(b"{\"id\":1}", None).is_ok());
    assert_eq!(
        check.http(b"<html>", None).unwrap_err().kind,
        FailKind::NotJson
    );
}

/// A `ModelInferResponse` as the reference server builds it (`build_response`).
fn served(model: &str, outputs: &[(&str, &str, Vec<i64>, Vec<u8>)]) -> pb::ModelInferResponse {
    let mut response = pb::ModelInferResponse {
        model_name: model.into(),
        model_version: "1".into(),
        id: "7".into(),
        ..Default::default()
    };
    for (name, datatype, shape, data) in outputs {
        response
            .outputs
            .push(pb::model_infer_response::InferOutputTensor {
                name: name.to_string(),
                datatype: datatype.to_string(),
                shape: shape.clone(),
                ..Default::default()
            });
        response.raw_output_contents.push(data.clone());
    }
    response
}

fn simple_grpc() -> pb::ModelInferResponse {
    served(
        "simple",
        &[
            ("OUTPUT0", "INT32", vec![1, 16], vec![1; 64]),
            ("OUTPUT1", "INT32", vec![1, 16], vec![2; 64]),
        ],
    )
}

fn grpc_err(exp: &Expect, msg: &[u8]) -> Bad {
    check_infer_response(exp, msg).expect_err("refused")
}

#[test]
fn served_grpc_replies_pass() {
    check_infer_response(&simple(), &simple_grpc().encode_to_vec()).unwrap();
    let bytes = served(
        "identity_bytes",
        &[("OUTPUT0", "BYTES", vec![1, 3], BYTES_TAIL.to_vec())],
    );
    check_infer_response(
        &expect("identity_bytes", &["OUTPUT0"]),
        &bytes.encode_to_vec(),
    )
    .unwrap();
    // A stream response with outputs, and a decoupled model's empty final one.
    let stream = pb::ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(simple_grpc()),
    };
    check_stream_response(&simple(), &stream.encode_to_vec()).unwrap();
    let mut last = served("simple", &[]);
    last.parameters.insert(
        "triton_final_response".into(),
        pb::InferParameter {
            parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(true)),
        },
    );
    let stream = pb::ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(last),
    };
    check_stream_response(&simple(), &stream.encode_to_vec()).unwrap();
    // Unpacked shape encoding (one varint field per dim) reads the same.
    let unpacked = [
        &[0x0a, 7][..],
        b"OUTPUT0",
        &[0x12, 5],
        b"INT32",
        &[0x18, 1, 0x18, 16],
    ]
    .concat();
    let mut msg = vec![0x2a, unpacked.len() as u8];
    msg.extend_from_slice(&unpacked);
    msg.extend_from_slice(&[0x32, 64]);
    msg.extend_from_slice(&[0; 64]);
    check_infer_response(&expect("simple", &["OUTPUT0"]), &msg).unwrap();
}

#[test]
fn grpc_reply_that_is_not_protobuf_is_not_protobuf() {
    let good = simple_grpc().encode_to_vec();
    let bad = grpc_err(&simple(), b"not a protobuf");
    assert_eq!(bad.kind, FailKind::NotProtobuf);
    assert!(
        bad.msg
            .starts_with("reply is not a ModelInferResponse protobuf (field "),
        "{}",
        bad.msg
    );
    // Cut inside the outputs: the field and the byte are named.
    let at = good.iter().position(|&b| b == 0x2a).unwrap();
    let bad = grpc_err(&simple(), &good[..at + 5]);
    assert_eq!(
        bad.msg,
        format!(
            "reply is not a ModelInferResponse protobuf (field 5 truncated at byte {})",
            at + 2
        )
    );
    // A string that is not UTF-8, a message field with the wrong wire type.
    let bad = grpc_err(&simple(), &[0x0a, 1, 0xff]);
    assert_eq!(
        bad.msg,
        "reply is not a ModelInferResponse protobuf (field 1 is not UTF-8 at byte 2)"
    );
    let bad = grpc_err(&simple(), &[0x28, 1]);
    assert!(
        bad.msg.contains("field 5 has the wrong wire type"),
        "{}",
        bad.msg
    );
    let bad = grpc_err(&simple(), &[0x0f]);
    assert!(bad.msg.contains("invalid wire type"), "{}", bad.msg);
    for cut in 0..good.len() {
        let _ = check_infer_response(&simple(), &good[..cut]);
        fuzz_kserve_grpc(&good[..cut]);
    }
    let e = check_protobuf("PredictResponse", b"\x0a\x05ab").unwrap_err();
    assert_eq!(e.kind, FailKind::NotProtobuf);
    assert_eq!(
        e.msg,
        "reply is not a PredictResponse protobuf (field 1 truncated at byte 2)"
    );
    check_protobuf("PredictResponse", &good).unwrap();
    // Groups are skipped as protobuf decoders do.
    check_protobuf("PredictResponse", &[0x0b, 0x08, 1, 0x0c]).unwrap();
    assert!(check_protobuf("PredictResponse", &[0x0b, 0x08, 1, 0x14]).is_err());
}

#[test]
fn grpc_reply_contradicting_the_request_is_invalid() {
    let mut other = simple_grpc();
    other.model_name = "other".into();
    let bad = grpc_err(&simple(), &other.encode_to_vec());
    assert_eq!(bad.kind, FailKind::Invalid);
    assert_eq!(bad.msg, r#"reply names model "other", expected "simple""#);
    let mut one = simple_grpc();
    one.outputs.pop();
    one.raw_output_contents.pop();
    assert_eq!(
        grpc_err(&simple(), &one.encode_to_vec()).msg,
        "reply has no output OUTPUT1"
    );
    let mut wide = simple_grpc();
    wide.outputs[0].shape = vec![2, 16];
    let bad = grpc_err(&simple(), &wide.encode_to_vec());
    assert_eq!(bad.kind, FailKind::Invalid);
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [2,16] (128 bytes as INT32) but 64 bytes of data"
    );
    let mut huge = simple_grpc();
    huge.outputs[1].shape = vec![1 << 32, 1 << 32, 1 << 32];
    let bad = grpc_err(&simple(), &huge.encode_to_vec());
    assert_eq!(
        bad.msg,
        "output OUTPUT1 has shape [4294967296,4294967296,4294967296] whose element count overflows"
    );
    let mut negative = simple_grpc();
    negative.outputs[0].shape = vec![-1, 16];
    assert!(grpc_err(&simple(), &negative.encode_to_vec())
        .msg
        .contains("negative dimension"));
    let mut short = simple_grpc();
    short.raw_output_contents.pop();
    let bad = grpc_err(&simple(), &short.encode_to_vec());
    assert_eq!(
        (bad.kind, bad.msg.as_str()),
        (
            FailKind::Length,
            "reply has 2 outputs but 1 raw_output_contents"
        )
    );
    let mut none = simple_grpc();
    none.raw_output_contents.clear();
    let bad = grpc_err(&simple(), &none.encode_to_vec());
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has no data (no raw_output_contents, no contents)"
    );
    let shm = Expect {
        shm_outputs: true,
        ..simple()
    };
    check_infer_response(&shm, &none.encode_to_vec()).unwrap();
    // Outputs in shared memory leave their raw entries empty.
    let mut empty = simple_grpc();
    empty.raw_output_contents = vec![Vec::new(), Vec::new()];
    check_infer_response(&shm, &empty.encode_to_vec()).unwrap();
    let bad = grpc_err(&simple(), &empty.encode_to_vec());
    assert_eq!(
        bad.msg,
        "output OUTPUT0 has shape [1,16] (64 bytes as INT32) but 0 bytes of data"
    );
}

#[test]
fn stream_error_message_is_a_status_failure() {
    let stream = pb::ModelStreamInferResponse {
        error_message: "model crashed".into(),
        infer_response: None,
    };
    let bad = check_stream_response(&simple(), &stream.encode_to_vec()).unwrap_err();
    assert_eq!(
        (bad.kind, bad.msg.as_str()),
        (FailKind::Status, "model crashed")
    );
    let mut other = simple_grpc();
    other.model_name = "other".into();
    let stream = pb::ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(other),
    };
    let bad = check_stream_response(&simple(), &stream.encode_to_vec()).unwrap_err();
    assert_eq!(bad.kind, FailKind::Invalid);
    let bad = check_stream_response(&simple(), &[0x12, 3, 0x2a, 9, 0]).unwrap_err();
    assert_eq!(
        bad.msg,
        "reply is not a ModelStreamInferResponse protobuf (field 2.5 truncated at byte 4)"
    );
    let check = ReplyCheck::KserveGrpc(std::sync::Arc::new(simple()));
    assert_eq!(
        check.grpc_stream(b"junk!").unwrap_err().kind,
        FailKind::NotProtobuf
    );
    assert_eq!(
        check.grpc(b"junk!").unwrap_err().kind,
        FailKind::NotProtobuf
    );
}

#[test]
fn fuzz_entry_points_take_any_bytes() {
    let (body, _) = binary(SIMPLE_HEADER, &[0; 128]);
    for cut in 0..body.len() {
        fuzz_kserve_http(&body[..cut]);
    }
    fuzz_kserve_http(&[0xff, b'{']);
}

#[test]
fn a_reply_equal_to_the_last_good_one_is_not_walked_again() {
    let check = ReplyCheck::Json;
    let mut good = LastGood::default();
    let mut walks = 0;
    let mut verify = |good: &mut LastGood, reply: &[u8], header: Option<usize>| {
        good.verify(reply, header, |b, h| {
            walks += 1;
            check.http(b, h)
        })
    };
    assert!(verify(&mut good, b"{\"a\":1}", None).is_ok());
    assert!(verify(&mut good, b"{\"a\":1}", None).is_ok());
    assert!(
        verify(&mut good, b"{\"a\":1}", Some(3)).is_ok(),
        "another header length"
    );
    assert!(
        verify(&mut good, b"{\"a\":2}", Some(3)).is_ok(),
        "other bytes"
    );
    assert_eq!(
        verify(&mut good, b"{\"a\":", Some(3)).unwrap_err().kind,
        FailKind::NotJson
    );
    assert!(
        verify(&mut good, b"{\"a\":2}", Some(3)).is_ok(),
        "the failure is not kept"
    );
    let long = format!("[{}0]", "0,".repeat(MAX_KEPT));
    assert!(verify(&mut good, long.as_bytes(), None).is_ok());
    assert!(
        verify(&mut good, long.as_bytes(), None).is_ok(),
        "long replies are walked"
    );
    assert_eq!(
        walks, 6,
        "walked: first, new header, new bytes, the bad one, twice long"
    );
}

/// A kind's own check: refuses replies that do not start with `ok`.
#[derive(Debug)]
struct StartsOk;

impl CheckReply for StartsOk {
    fn check(&self, reply: &[u8]) -> Result<(), Bad> {
        if reply.starts_with(b"ok") {
            Ok(())
        } else {
            Err(Bad::invalid(format!("{} bytes without ok", reply.len())))
        }
    }
}

#[test]
fn a_kinds_own_check_reads_every_reply_shape() {
    let check = ReplyCheck::Kind(Arc::new(StartsOk));
    assert!(!check.is_none());
    assert_eq!(check.http(b"ok fine", None), Ok(()));
    assert_eq!(check.grpc(b"ok"), Ok(()));
    assert_eq!(check.grpc_stream(b"okay"), Ok(()));
    for bad in [
        check.http(b"nope", None),
        check.grpc(b"no"),
        check.grpc_stream(b""),
    ] {
        let bad = bad.unwrap_err();
        assert_eq!(bad.kind, FailKind::Invalid);
        assert!(bad.msg.ends_with("without ok"), "{}", bad.msg);
    }
}
