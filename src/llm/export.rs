//! The files perf_analyzer writes for GenAI-Perf, from a `profile` point: `inputs.json` (the
//! `--input-data` form of the payloads) and the raw `profile_export.json` (perf_analyzer's
//! schema: one request per entry with its send time, payload, and every response's read
//! time and text). Headers (API keys) are never written.

use serde_json::{json, Value};

use super::cli::LoadPoint;
use super::runner::PointRun;
use crate::measure::record::framed_responses;

/// `{"data": [{"payload": [<body>]}, ...]}`.
pub fn inputs_json(bodies: &[Value]) -> String {
    let data: Vec<Value> = bodies.iter().map(|b| json!({"payload": [b]})).collect();
    let mut s = serde_json::to_string_pretty(&json!({ "data": data })).unwrap_or_default();
    s.push('\n');
    s
}

/// perf_analyzer's raw export for one point. `bodies[step]` is the payload of each request
/// step; streamed events are written as `data: <event>` and the end marker as
/// `data: [DONE]`, the form perf_analyzer stores and GenAI-Perf parses.
pub fn profile_export(
    run: &PointRun,
    point: LoadPoint,
    payloads: &[String],
    service_kind: &str,
    endpoint: &str,
) -> String {
    let requests: Vec<Value> = run
        .records
        .iter()
        .map(|r| {
            let body = run
                .bodies
                .get(r.body_off as usize..(r.body_off + r.body_len) as usize)
                .unwrap_or(&[]);
            let (stamps, outputs): (Vec<u64>, Vec<Value>) = if r.sse {
                framed_responses(body)
                    .map(|(at, data)| (at, json!({ "response": sse_text(data) })))
                    .unzip()
            } else {
                let text = String::from_utf8_lossy(body);
                (vec![r.end_ns], vec![json!({ "response": text })])
            };
            json!({
                "timestamp": r.start_ns,
                "request_inputs": {"payload": payloads.get(r.step as usize).cloned().unwrap_or_default()},
                "response_timestamps": stamps,
                "response_outputs": outputs,
            })
        })
        .collect();
    let (mode, value) = match point {
        LoadPoint::Concurrency(c) => ("concurrency", json!(c)),
        LoadPoint::RequestRate(r) => ("request_rate", json!(r)),
    };
    let doc = json!({
        "experiments": [{
            "experiment": {"mode": mode, "value": value},
            "requests": requests,
            "window_boundaries": [run.start_ns, run.end_ns],
        }],
        "version": env!("CARGO_PKG_VERSION"),
        "service_kind": service_kind,
        "endpoint": endpoint,
    });
    let mut s = serde_json::to_string(&doc).unwrap_or_default();
    s.push('\n');
    s
}

fn sse_text(data: &[u8]) -> String {
    if data.is_empty() {
        "data: [DONE]".into()
    } else {
        format!("data: {}", String::from_utf8_lossy(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::push_framed_response;
    use crate::measure::RequestRecord;

    #[test]
    fn export_lists_every_event_with_its_time() {
        let mut bodies = Vec::new();
        push_framed_response(
            &mut bodies,
            11,
            br#"{"choices":[{"delta":{"content":"a"}}]}"#,
        );
        push_framed_response(&mut bodies, 12, b"");
        let streamed = RequestRecord {
            start_ns: 10,
            end_ns: 12,
            body_len: bodies.len() as u32,
            sse: true,
            ok: true,
            ..RequestRecord::default()
        };
        let whole_off = bodies.len() as u32;
        bodies.extend_from_slice(b"{\"x\":1}");
        let whole = RequestRecord {
            start_ns: 20,
            end_ns: 25,
            step: 1,
            body_off: whole_off,
            body_len: 7,
            ok: true,
            ..RequestRecord::default()
        };
        let run = PointRun {
            records: vec![streamed, whole],
            bodies,
            start_ns: 5,
            end_ns: 30,
            interrupted: false,
            worker_cpu_ns: 0,
        };
        let payloads = vec!["{\"p\":0}".to_string(), "{\"p\":1}".to_string()];
        let text = profile_export(&run, LoadPoint::Concurrency(2), &payloads, "openai", "v1/x");
        let v: Value = serde_json::from_str(&text).unwrap();
        let e = &v["experiments"][0];
        assert_eq!(e["experiment"], json!({"mode": "concurrency", "value": 2}));
        assert_eq!(e["window_boundaries"], json!([5, 30]));
        let r = &e["requests"];
        assert_eq!(r[0]["response_timestamps"], json!([11, 12]));
        assert_eq!(r[0]["response_outputs"][1]["response"], "data: [DONE]");
        assert_eq!(r[0]["request_inputs"]["payload"], "{\"p\":0}");
        assert_eq!(r[1]["response_timestamps"], json!([25]));
        assert_eq!(r[1]["response_outputs"][0]["response"], "{\"x\":1}");
        assert_eq!(v["service_kind"], "openai");
        let inputs: Value = serde_json::from_str(&inputs_json(&[json!({"a": 1})])).unwrap();
        assert_eq!(inputs, json!({"data": [{"payload": [{"a": 1}]}]}));
    }
}
