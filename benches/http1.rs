//! Hot-path costs of HTTP/1.1: building an infer request (done once per input step, but it
//! bounds setup time for large input sets) and parsing a response (done once per request).
//! Model: Triton's `simple` (two INT32[1,16] inputs, two INT32[1,16] outputs).
//!
//! `cargo bench --bench http1 [-- FILTER]`: each case is warmed up for 0.3 s, then timed in 30
//! samples of about 10 ms each; the line gives the median and the fastest sample per call.

use std::hint::black_box;
use std::time::{Duration, Instant};

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

/// Times `f` (see the module doc) unless `filter` leaves `name` out, and prints one line.
fn bench<R>(filter: Option<&str>, name: &str, bytes: Option<usize>, mut f: impl FnMut() -> R) {
    if filter.is_some_and(|want| !name.contains(want)) {
        return;
    }
    let warm_until = Instant::now() + Duration::from_millis(300);
    let mut calls: u64 = 0;
    while Instant::now() < warm_until {
        black_box(f());
        calls += 1;
    }
    // Calls per sample: about 10 ms at the warm-up's rate.
    let per_sample = (calls / 30).max(1);
    let mut samples: Vec<f64> = (0..30)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_sample {
                black_box(f());
            }
            start.elapsed().as_nanos() as f64 / per_sample as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let rate = bytes
        .map(|b| format!(", {:.0} MB/s", b as f64 * 1e3 / median))
        .unwrap_or_default();
    println!(
        "{name:<40} median {median:>8.1} ns, fastest {:>8.1} ns{rate}",
        samples[0]
    );
}

fn bench_encode(filter: Option<&str>) {
    let inputs = simple_inputs();
    let outputs = vec!["OUTPUT0".to_string(), "OUTPUT1".to_string()];
    let path = infer_path("simple", "");
    for (name, format) in [
        ("binary", TensorFormat::Binary),
        ("json", TensorFormat::Json),
    ] {
        bench(
            filter,
            &format!("encode_infer_request/{name}"),
            None,
            || {
                encode_infer_request(
                    black_box("localhost:8000"),
                    &path,
                    black_box(&inputs),
                    &outputs,
                    format,
                    format,
                    &[],
                )
            },
        );
    }
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

fn bench_parse(filter: Option<&str>) {
    for (framing, chunked) in [("content_length", false), ("chunked", true)] {
        let response = simple_response(chunked);
        let mut reader = ResponseReader::new();
        for (feeding, read_size) in [("whole", response.len()), ("split_100", 100)] {
            let name = format!("parse_response/{framing}/{feeding}");
            bench(filter, &name, Some(response.len()), || {
                parse(&mut reader, black_box(&response), read_size)
            });
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the first other argument filters the case names.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    bench_encode(filter.as_deref());
    bench_parse(filter.as_deref());
}
