use super::*;
use crate::protocol::http1::{Progress, ResponseReader};
use crate::tensor::DataType;

fn int32_input(name: &str, values: &[i32]) -> InputTensor {
    InputTensor {
        name: name.into(),
        datatype: DataType::I32,
        shape: vec![1, values.len() as i64],
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

#[test]
fn paths() {
    assert_eq!(infer_path("simple", ""), "/v2/models/simple/infer");
    assert_eq!(
        infer_path("simple", "3"),
        "/v2/models/simple/versions/3/infer"
    );
    assert_eq!(metadata_path("m", ""), "/v2/models/m");
    assert_eq!(config_path("m", "1"), "/v2/models/m/versions/1/config");
    assert_eq!(stats_path("m", ""), "/v2/models/m/stats");
    assert_eq!(ready_path("m", ""), "/v2/models/m/ready");
    assert_eq!(model_path("a b/c?é", ""), "/v2/models/a%20b%2Fc%3F%C3%A9");
    assert_eq!(model_path("my_model-1.x~", ""), "/v2/models/my_model-1.x~");
}

#[test]
fn encodes_a_binary_request_exactly() {
    let inputs = [int32_input("INPUT0", &[1, 2])];
    let outputs = ["OUTPUT0".to_string()];
    let got = encode_infer_request(
        "localhost:8000",
        "/v2/models/simple/infer",
        &inputs,
        &outputs,
        TensorFormat::Binary,
        TensorFormat::Binary,
        &[("X-User".to_string(), "1".to_string())],
    )
    .unwrap();
    let json = r#"{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"parameters":{"binary_data_size":8}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}"#;
    let mut want = format!(
        "POST /v2/models/simple/infer HTTP/1.1\r\nHost: localhost:8000\r\n\
         Inference-Header-Content-Length: {}\r\nContent-Type: application/octet-stream\r\n\
         X-User: 1\r\nContent-Length: {}\r\n\r\n{json}",
        json.len(),
        json.len() + 8
    )
    .into_bytes();
    want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

#[test]
fn encodes_a_json_request_exactly() {
    let inputs = [int32_input("A", &[-1]), int32_input("B", &[7, 8])];
    let got = encode_infer_request(
        "h:1",
        "/p",
        &inputs,
        &["O1".to_string(), "O2".to_string()],
        TensorFormat::Json,
        TensorFormat::Json,
        &[("content-type".to_string(), "application/x".to_string())],
    )
    .unwrap();
    let json = r#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1,1],"data":[-1]},{"name":"B","datatype":"INT32","shape":[1,2],"data":[7,8]}],"outputs":[{"name":"O1","parameters":{"binary_data":false}},{"name":"O2","parameters":{"binary_data":false}}]}"#;
    let want = format!(
        "POST /p HTTP/1.1\r\nHost: h:1\r\ncontent-type: application/x\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    );
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn asks_for_binary_output_when_no_outputs_are_listed() {
    let inputs = [int32_input("A", &[5])];
    let request = |format| {
        let bytes =
            encode_infer_request("h", "/p", &inputs, &[], TensorFormat::Json, format, &[]).unwrap();
        String::from_utf8(bytes).unwrap()
    };
    assert!(request(TensorFormat::Binary).ends_with(
        r#"{"parameters":{"binary_data_output":true},"inputs":[{"name":"A","datatype":"INT32","shape":[1,1],"data":[5]}]}"#
    ));
    assert!(request(TensorFormat::Json)
        .ends_with(r#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1,1],"data":[5]}]}"#));
}

#[test]
fn request_errors_name_the_input_or_header() {
    let fp16 = InputTensor {
        name: "H".into(),
        datatype: DataType::F16,
        shape: vec![1],
        data: vec![0, 0],
    };
    let short = InputTensor {
        data: vec![0; 3],
        ..int32_input("S", &[1])
    };
    let bad_header = [("Bad Name".to_string(), "v".to_string())];
    type Case<'a> = (
        Vec<InputTensor>,
        TensorFormat,
        &'a [(String, String)],
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            vec![fp16.clone()],
            TensorFormat::Json,
            &[],
            "input 'H' has datatype FP16",
        ),
        (vec![short], TensorFormat::Binary, &[], "input 'S'"),
        (
            vec![],
            TensorFormat::Binary,
            &bad_header,
            "invalid HTTP header name 'Bad Name'",
        ),
    ];
    for (inputs, format, headers, want) in cases {
        let err =
            encode_infer_request("h", "/p", &inputs, &[], format, format, headers).unwrap_err();
        assert!(err.msg.contains(want), "{}", err.msg);
    }
    // FP16 is fine in binary form.
    assert!(encode_infer_request(
        "h",
        "/p",
        &[fp16],
        &[],
        TensorFormat::Binary,
        TensorFormat::Binary,
        &[]
    )
    .is_ok());
}

#[test]
fn encoded_requests_frame_correctly() {
    // What the encoder writes, an HTTP parser reads back with the right body length.
    let inputs = [int32_input("A", &[1, 2, 3])];
    let bytes = encode_infer_request(
        "h",
        "/p",
        &inputs,
        &[],
        TensorFormat::Binary,
        TensorFormat::Binary,
        &[],
    )
    .unwrap();
    let mut fields = [httparse::EMPTY_HEADER; 16];
    let mut request = httparse::Request::new(&mut fields);
    let httparse::Status::Complete(head_len) = request.parse(&bytes).unwrap() else {
        panic!("partial")
    };
    let length: usize = request
        .headers
        .iter()
        .find(|h| h.name == "Content-Length")
        .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
        .unwrap();
    assert_eq!(head_len + length, bytes.len());
}

#[test]
fn error_messages() {
    let long = "x".repeat(300);
    let cases: &[(u16, &[u8], String)] = &[
        (
            400,
            br#"{"error":"unexpected shape for input 'A'"}"#,
            "unexpected shape for input 'A'".into(),
        ),
        (404, br#"{"error":5}"#, r#"HTTP 404: {"error":5}"#.into()),
        (
            502,
            b"<html>Bad Gateway</html>\n",
            "HTTP 502: <html>Bad Gateway</html>".into(),
        ),
        (503, b"", "HTTP 503".into()),
        (
            500,
            long.as_bytes(),
            format!("HTTP 500: {}...", "x".repeat(200)),
        ),
    ];
    for (status, body, want) in cases {
        assert_eq!(error_message(*status, body), *want);
    }
}

#[test]
fn decodes_a_full_binary_response() {
    let header = r#"{"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,2],"parameters":{"binary_data_size":8}}]}"#;
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n{header}",
        header.len(),
        header.len() + 8
    )
    .into_bytes();
    response.extend_from_slice(&[3, 0, 0, 0, 4, 0, 0, 0]);
    let mut reader = ResponseReader::new();
    let Ok(Progress::Done(head)) = reader.advance(&response) else {
        panic!("not done")
    };
    let outputs = decode_outputs_json(reader.body(&response), head.inference_header_len).unwrap();
    assert_eq!(outputs, r#"{"OUTPUT0":[3,4]}"#);
}
