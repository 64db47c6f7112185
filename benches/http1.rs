//! Hot-path costs of HTTP/1.1: building an infer request (done once per input step, but it
//! bounds setup time for large input sets) and parsing a response (done once per request).
//! Model: Triton's `simple` (two INT32[1,16] inputs, two INT32[1,16] outputs).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inferperf::config::TensorFormat;
use inferperf::protocol::http1::{Progress, ResponseReader};
use inferperf::service::triton_http::{encode_infer_request, infer_path};
use inferperf::tensor::{DataType, InputTensor};

fn simple_inputs() -> Vec<InputTensor> {
    let tensor = |name: &str, offset: i32| InputTensor {
        name: name.into(),
        datatype: DataType::I32,
        shape: vec![1, 16],
        data: (0..16)
            .flat_map(|v: i32| (v + offset).to_le_bytes())
            .collect(),
    };
    vec![tensor("INPUT0", 0), tensor("INPUT1", 100)]
}

fn bench_encode(c: &mut Criterion) {
    let inputs = simple_inputs();
    let outputs = vec!["OUTPUT0".to_string(), "OUTPUT1".to_string()];
    let path = infer_path("simple", "");
    let mut group = c.benchmark_group("encode_infer_request");
    for (name, format) in [
        ("binary", TensorFormat::Binary),
        ("json", TensorFormat::Json),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                encode_infer_request(
                    black_box("localhost:8000"),
                    &path,
                    black_box(&inputs),
                    &outputs,
                    format,
                    format,
                    &[],
                )
            })
        });
    }
    group.finish();
}

/// A binary response of `simple`, framed by Content-Length or chunked in 64-byte chunks.
fn simple_response(chunked: bool) -> Vec<u8> {
    let header = br#"{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}]}"#;
    let mut body = header.to_vec();
    body.extend((0..32).flat_map(|v: i32| v.to_le_bytes()));
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
         Inference-Header-Content-Length: {}\r\n",
        header.len()
    )
    .into_bytes();
    if chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        for chunk in body.chunks(64) {
            out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(&body);
    }
    out
}

/// Feeds `response` in reads of `read_size` bytes, as a connection would; returns body length.
fn parse(reader: &mut ResponseReader, response: &[u8], read_size: usize) -> usize {
    reader.reset();
    let mut received = 0;
    loop {
        received = (received + read_size).min(response.len());
        if let Ok(Progress::Done(head)) = reader.advance(&response[..received]) {
            return reader.body(&response[..received]).len() + head.consumed;
        }
        if received == response.len() {
            return 0;
        }
    }
}

fn bench_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_response");
    for (framing, chunked) in [("content_length", false), ("chunked", true)] {
        let response = simple_response(chunked);
        group.throughput(Throughput::Bytes(response.len() as u64));
        let mut reader = ResponseReader::new();
        for (feeding, read_size) in [("whole", response.len()), ("split_100", 100)] {
            group.bench_function(format!("{framing}/{feeding}"), |b| {
                b.iter(|| parse(&mut reader, black_box(&response), read_size))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_encode, bench_parse);
criterion_main!(benches);
