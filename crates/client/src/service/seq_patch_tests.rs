use prost::Message;
use serde_json::Value;

use super::*;
use crate::protocol::grpc::compress::decompress;
use crate::protocol::grpc::pb::inference as pb;
use crate::tensor::DataType;
use pb::infer_parameter::ParameterChoice as P;

const IDS: [u64; 10] = [
    0,
    1,
    9,
    10,
    127,
    128,
    12_345,
    u32::MAX as u64,
    i64::MAX as u64,
    u64::MAX,
];

fn fields(id: u64, start: bool, end: bool) -> SeqFields {
    SeqFields {
        id,
        start,
        end,
        stream: 0,
        step: 0,
    }
}

/// Every (id, start, end) the tests patch in.
fn all_fields() -> impl Iterator<Item = SeqFields> {
    IDS.into_iter().flat_map(|id| {
        [(false, false), (true, false), (false, true), (true, true)].map(|(s, e)| fields(id, s, e))
    })
}

fn inputs(bytes: usize) -> Vec<InputTensor> {
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    vec![InputTensor {
        name: "INPUT0".into(),
        datatype: DataType::U8,
        shape: vec![1, bytes as i64],
        data,
    }]
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Checks one patched HTTP request: lengths, the three parameters, everything else intact.
fn check_http(out: &[u8], f: &SeqFields, input: &[u8], binary_in: bool, binary_out_param: bool) {
    let split = find(out, b"\r\n\r\n").unwrap() + 4;
    let head = std::str::from_utf8(&out[..split]).unwrap();
    let body = &out[split..];
    let content_length: usize = header(head, "Content-Length").unwrap().parse().unwrap();
    assert_eq!(content_length, body.len());
    let json_len = match header(head, "Inference-Header-Content-Length") {
        Some(n) => n.parse().unwrap(),
        None => body.len(),
    };
    assert_eq!(json_len < body.len(), binary_in);
    if binary_in {
        assert_eq!(&body[json_len..], input, "binary input data untouched");
    }
    let json: Value = serde_json::from_slice(&body[..json_len]).unwrap();
    let params = &json["parameters"];
    assert_eq!(params[SEQUENCE_ID].as_u64(), Some(f.id), "{params}");
    assert_eq!(params[SEQUENCE_START].as_bool(), Some(f.start));
    assert_eq!(params[SEQUENCE_END].as_bool(), Some(f.end));
    assert_eq!(
        params["binary_data_output"].as_bool(),
        binary_out_param.then_some(true)
    );
    assert_eq!(json["inputs"][0]["name"], "INPUT0");
}

#[test]
fn http_patches_round_trip_through_a_json_parser() {
    use TensorFormat::{Binary, Json};
    let tensors = inputs(16);
    let headers = [("X-Trace".to_string(), "\"sequence_id\":1".to_string())];
    let table: &[(TensorFormat, TensorFormat, &[&str])] = &[
        (Binary, Binary, &[]),
        (Binary, Binary, &["OUTPUT0"]),
        (Json, Json, &[]),
        (Json, Binary, &["OUTPUT0", "OUTPUT1"]),
    ];
    for &(fmt_in, fmt_out, outs) in table {
        let outs: Vec<String> = outs.iter().map(|s| s.to_string()).collect();
        let path = "/v2/models/seq/infer";
        let t = http_template("h:1", path, &tensors, &outs, fmt_in, fmt_out, &headers).unwrap();
        let binary_param = outs.is_empty() && fmt_out == Binary;
        check_http(
            &t.bytes,
            &fields(0, false, false),
            &tensors[0].data,
            fmt_in == Binary,
            binary_param,
        );
        for f in all_fields() {
            let mut out = t.bytes.clone();
            t.patch(&mut out, &f);
            check_http(&out, &f, &tensors[0].data, fmt_in == Binary, binary_param);
            let changed = out.iter().zip(&t.bytes).filter(|(a, b)| a != b).count();
            assert!(changed <= HTTP_ID_WIDTH + 10, "{changed} bytes changed");
        }
    }
}

#[test]
fn http_template_errors_like_the_plain_encoder() {
    let bad = [("Bad Name".to_string(), "v".to_string())];
    let fmt = TensorFormat::Binary;
    let plain = triton_http::encode_infer_request("h", "/p", &inputs(4), &[], fmt, fmt, &bad);
    let seq = http_template("h", "/p", &inputs(4), &[], fmt, fmt, &bad);
    assert_eq!(plain.unwrap_err().msg, seq.unwrap_err().msg);
}

/// Decodes one patched gRPC message (decompressing as flagged) into the request.
fn decode_grpc(out: &[u8], c: Compression) -> pb::ModelInferRequest {
    let len = u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
    assert_eq!(len, out.len() - MESSAGE_PREFIX_LEN, "length prefix");
    assert_eq!(out[0], u8::from(c != Compression::None), "compressed flag");
    let payload = &out[MESSAGE_PREFIX_LEN..];
    let plain = match c {
        Compression::None => payload.to_vec(),
        Compression::Gzip => decompress("gzip", payload, 1 << 24).unwrap(),
        Compression::Deflate => decompress("deflate", payload, 1 << 24).unwrap(),
    };
    pb::ModelInferRequest::decode(plain.as_slice()).unwrap()
}

fn choice<'a>(req: &'a pb::ModelInferRequest, name: &str) -> Option<&'a P> {
    req.parameters.get(name)?.parameter_choice.as_ref()
}

#[test]
fn grpc_patches_round_trip_through_prost() {
    let params = [
        ("tag".to_string(), ParamValue::Str("--string style".into())),
        ("n".to_string(), ParamValue::Int(-3)),
        (SEQUENCE_ID.to_string(), ParamValue::Int(77)),
    ];
    for size in [16usize, 300_000] {
        let tensors = inputs(size);
        for c in [Compression::None, Compression::Gzip, Compression::Deflate] {
            let outs = ["OUTPUT0".to_string()];
            let t = grpc_template("seq", "1", &tensors, &outs, &params, c).unwrap();
            let unpatched = decode_grpc(&t.bytes, c);
            assert_eq!(choice(&unpatched, SEQUENCE_ID), Some(&P::Int64Param(0)));
            if c != Compression::None && size > 1000 {
                assert!(t.bytes.len() < size / 4, "{c:?}: {} bytes", t.bytes.len());
            }
            for f in all_fields() {
                let mut out = t.bytes.clone();
                t.patch(&mut out, &f);
                let req = decode_grpc(&out, c);
                assert_eq!(choice(&req, SEQUENCE_ID), Some(&P::Int64Param(f.id as i64)));
                assert_eq!(choice(&req, SEQUENCE_START), Some(&P::BoolParam(f.start)));
                assert_eq!(choice(&req, SEQUENCE_END), Some(&P::BoolParam(f.end)));
                assert_eq!(
                    choice(&req, "tag"),
                    Some(&P::StringParam("--string style".into()))
                );
                assert_eq!(choice(&req, "n"), Some(&P::Int64Param(-3)));
                let empty_final = choice(&req, triton_grpc::EMPTY_FINAL_RESPONSE);
                assert_eq!(empty_final, Some(&P::BoolParam(true)));
                assert_eq!(req.parameters.len(), 6);
                assert_eq!(
                    (req.model_name.as_str(), req.model_version.as_str()),
                    ("seq", "1")
                );
                assert_eq!(req.outputs[0].name, "OUTPUT0");
                assert_eq!(req.raw_input_contents, [tensors[0].data.clone()]);
            }
        }
    }
}

#[test]
fn padded_decimal_and_long_varints() {
    let table: [(u64, &str); 4] = [
        (0, "0                   "),
        (7, "7                   "),
        (1_000_000, "1000000             "),
        (u64::MAX, "18446744073709551615"),
    ];
    for (v, text) in table {
        let mut field = [b'x'; HTTP_ID_WIDTH];
        write_padded_decimal(&mut field, v);
        assert_eq!(std::str::from_utf8(&field).unwrap(), text);
    }
    for v in IDS {
        let mut field = [0u8; VARINT_WIDTH];
        write_varint10(&mut field, v);
        let mut buf: &[u8] = &field;
        assert_eq!(prost::encoding::decode_varint(&mut buf).unwrap(), v);
        assert!(buf.is_empty(), "all 10 bytes consumed");
    }
}

#[test]
fn checksums_match_reference_values() {
    // Known answers: CRC-32 of "123456789" and Adler-32 of "Wikipedia".
    assert_eq!(!crc32_update(!0, b"123456789"), 0xCBF4_3926);
    let (a, b) = adler32_state(b"Wiki");
    assert_eq!(adler32_update(a, b, b"pedia"), 0x11E6_0398);
    // Split anywhere, long input: same as flate2's CRC.
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut reference = flate2::Crc::new();
    reference.update(&data);
    let state = crc32_update(!0, &data[..12_345]);
    assert_eq!(!crc32_update(state, &data[12_345..]), reference.sum());
    let (a, b) = adler32_state(&data[..19_990]);
    let (a_all, b_all) = adler32_state(&data);
    assert_eq!(adler32_update(a, b, &data[19_990..]), (b_all << 16) | a_all);
}
