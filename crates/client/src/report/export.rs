//! The profile export (`--profile-export-file`): every request of every window of
//! every point, as compact JSON with perf_analyzer's key order (GenAI-Perf and other tools
//! parse it).

use super::LoadValue;
use crate::measure::record::{framed_responses, RequestRecord, WindowRecords};
use std::io::{self, Write};

/// One sweep point's raw data.
#[derive(Clone, Debug, Default)]
pub struct ExportExperiment {
    pub load: LoadValue,
    /// All windows of all trials, in time order.
    pub windows: Vec<WindowRecords>,
    /// JSON object text of each pre-encoded input step (`{"INPUT0":[...]}`), indexed by
    /// `RequestRecord::step`.
    pub step_inputs: Vec<String>,
}

/// Writes the whole export. `decode_outputs` turns one response body into the JSON object
/// text of its outputs. Failed requests are left out; requests of a window are listed by
/// start time; `window_boundaries` are the first window's start and then each window's end.
/// No trailing newline, like perf_analyzer.
pub fn write_export(
    w: &mut impl Write,
    exps: &[ExportExperiment],
    meta: &ExportMeta,
    decode_outputs: &dyn Fn(&[u8]) -> String,
) -> io::Result<()> {
    w.write_all(b"{\"experiments\":[")?;
    for (i, exp) in exps.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write_experiment(w, exp, decode_outputs, meta.framed)?;
    }
    write!(
        w,
        "],\"version\":{},\"service_kind\":{},\"endpoint\":{}",
        json_string(meta.version),
        json_string(meta.service_kind),
        json_string(meta.endpoint)
    )?;
    if let Some(seed) = meta.seed {
        write!(w, ",\"seed\":{seed}")?;
    }
    w.write_all(b"}")
}

/// The export's run-level fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExportMeta<'a> {
    pub version: &'a str,
    pub service_kind: &'a str,
    pub endpoint: &'a str,
    /// Bodies hold every response of a streamed request (see `framed_responses`); records
    /// with `sse` set are framed either way.
    pub framed: bool,
    /// inferperf only: the schedule's seed (open loop), to repeat the run.
    pub seed: Option<u64>,
}

fn write_experiment(
    w: &mut impl Write,
    exp: &ExportExperiment,
    decode_outputs: &dyn Fn(&[u8]) -> String,
    framed: bool,
) -> io::Result<()> {
    let (mode, value) = match exp.load {
        LoadValue::Concurrency(c) => ("concurrency", c.to_string()),
        // serde_json prints f64 with a fractional part ("2000.0"), as perf_analyzer does.
        LoadValue::RequestRate(r) => ("request_rate", json_f64(r)),
    };
    write!(
        w,
        "{{\"experiment\":{{\"mode\":\"{mode}\",\"value\":{value}}},\"requests\":["
    )?;
    let mut first = true;
    for window in &exp.windows {
        let mut ok: Vec<&RequestRecord> = window.records.iter().filter(|r| r.ok).collect();
        ok.sort_by_key(|r| r.start_ns);
        for r in ok {
            if !first {
                w.write_all(b",")?;
            }
            first = false;
            let inputs = exp
                .step_inputs
                .get(r.step as usize)
                .map_or("{}", String::as_str);
            let body = body_of(window, r);
            write!(w, "{{\"timestamp\":{}", r.start_ns)?;
            if r.seq_id != 0 {
                // Sequence models, as perf_analyzer: only when non-zero.
                write!(w, ",\"sequence_id\":{}", r.seq_id)?;
            }
            if r.intended_ns != 0 {
                // inferperf only, open loop: when the schedule meant the request to go.
                write!(w, ",\"intended_timestamp\":{}", r.intended_ns)?;
            }
            write!(w, ",\"request_inputs\":{inputs},\"response_timestamps\":[")?;
            if r.sse {
                write_framed(w, body, &|event| decode_outputs(&sse_event(event)))?;
            } else if framed {
                write_framed(w, body, decode_outputs)?;
            } else {
                write!(
                    w,
                    "{}],\"response_outputs\":[{}",
                    r.end_ns,
                    decode_outputs(body)
                )?;
            }
            w.write_all(b"]}")?;
        }
    }
    w.write_all(b"],\"window_boundaries\":[")?;
    let boundaries = exp
        .windows
        .first()
        .map(|f| f.start_ns)
        .into_iter()
        .chain(exp.windows.iter().map(|win| win.end_ns));
    for (i, b) in boundaries.enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{b}")?;
    }
    w.write_all(b"]}")
}

/// The record's response body; empty when its offsets do not fit the window's buffer.
/// Every response of a streamed request: timestamps, then outputs (a null response's `{}`).
fn write_framed(
    w: &mut impl Write,
    body: &[u8],
    decode_outputs: &dyn Fn(&[u8]) -> String,
) -> io::Result<()> {
    for (i, (arrival, _)) in framed_responses(body).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{arrival}")?;
    }
    w.write_all(b"],\"response_outputs\":[")?;
    for (i, (_, payload)) in framed_responses(body).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(decode_outputs(payload).as_bytes())?;
    }
    Ok(())
}

/// One Server-Sent Event as perf_analyzer keeps it in `response_outputs[].response`: the
/// bytes the server sent, `data: <payload>` and the blank line that ends the event
/// (GenAI-Perf's parser needs the prefix and splits merged events at the blank line); the
/// end marker (an empty payload) as `data: [DONE]`.
fn sse_event(payload: &[u8]) -> Vec<u8> {
    let data: &[u8] = if payload.is_empty() {
        b"[DONE]"
    } else {
        payload
    };
    [b"data: ", data, b"\n\n"].concat()
}

fn body_of<'a>(window: &'a WindowRecords, r: &RequestRecord) -> &'a [u8] {
    let start = r.body_off as usize;
    let end = start.saturating_add(r.body_len as usize);
    window.bodies.get(start..end).unwrap_or(&[])
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A finite f64 as JSON (always with a fraction or exponent); non-finite as `null`.
fn json_f64(v: f64) -> String {
    serde_json::Number::from_f64(v).map_or_else(|| "null".into(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_samples::*;

    /// The sample's input step and output object texts, cut verbatim (identical in every
    /// request; re-serialising would change float spellings like `e+31`).
    fn sample_parts(sample: &str) -> (String, String) {
        let between = |from: &str, to: &str| {
            let start = sample.find(from).unwrap() + from.len();
            let len = sample[start..].find(to).unwrap();
            sample[start..start + len].to_string()
        };
        (
            between("\"request_inputs\":", ",\"response_timestamps\""),
            between("\"response_outputs\":[", "]},"),
        )
    }

    /// Rebuilds the sample's experiments: its requests all ended in the first window.
    fn experiments_from(sample: &str) -> Vec<ExportExperiment> {
        let v: serde_json::Value = serde_json::from_str(sample).unwrap();
        let (input, _) = sample_parts(sample);
        let mut out = Vec::new();
        for e in v["experiments"].as_array().unwrap() {
            let load = match e["experiment"]["mode"].as_str().unwrap() {
                "concurrency" => LoadValue::Concurrency(e["experiment"]["value"].as_u64().unwrap()),
                _ => LoadValue::RequestRate(e["experiment"]["value"].as_f64().unwrap()),
            };
            let bounds: Vec<u64> = e["window_boundaries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap())
                .collect();
            let mut windows: Vec<WindowRecords> = bounds
                .windows(2)
                .map(|p| WindowRecords {
                    start_ns: p[0],
                    end_ns: p[1],
                    ..WindowRecords::default()
                })
                .collect();
            // Reverse order plus a failed request: the export must sort and filter.
            for r in e["requests"].as_array().unwrap().iter().rev() {
                let end_ns = r["response_timestamps"][0].as_u64().unwrap();
                let body_off = windows[0].bodies.len() as u32;
                windows[0].bodies.extend_from_slice(b"body");
                windows[0].records.push(RequestRecord {
                    start_ns: r["timestamp"].as_u64().unwrap(),
                    end_ns,
                    ok: true,
                    body_off,
                    body_len: 4,
                    ..RequestRecord::default()
                });
            }
            windows[0].records.push(RequestRecord {
                start_ns: 1,
                end_ns: 2,
                ..Default::default()
            });
            out.push(ExportExperiment {
                load,
                windows,
                step_inputs: vec![input.clone()],
            });
        }
        out
    }

    fn render(exps: &[ExportExperiment], outputs: String) -> String {
        let decode = move |body: &[u8]| {
            assert_eq!(body, b"body");
            outputs.clone()
        };
        let mut out = Vec::new();
        let meta = ExportMeta {
            service_kind: "triton",
            ..ExportMeta::default()
        };
        write_export(&mut out, exps, &meta, &decode).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn concurrency_export_matches_sample() {
        let s = PROFILE_EXPORT_HTTP_CONCURRENCY_JSON;
        assert_eq!(render(&experiments_from(s), sample_parts(s).1), s);
    }

    #[test]
    fn request_rate_export_matches_sample() {
        let s = PROFILE_EXPORT_GRPC_REQUEST_RATE_JSON;
        let text = render(&experiments_from(s), sample_parts(s).1);
        assert!(text.contains("{\"mode\":\"request_rate\",\"value\":2000.0}"));
        assert_eq!(text, s);
    }

    #[test]
    fn empty_and_escaped() {
        let exp = ExportExperiment {
            load: LoadValue::RequestRate(12.5),
            ..Default::default()
        };
        let mut out = Vec::new();
        let decode = |_: &[u8]| String::from("{}");
        let meta = ExportMeta {
            version: "0.1.0",
            service_kind: "openai",
            endpoint: "v1/\"x\"",
            framed: false,
            seed: Some(42),
        };
        write_export(&mut out, &[exp], &meta, &decode).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"experiments\":[{\"experiment\":{\"mode\":\"request_rate\",\"value\":12.5},\
             \"requests\":[],\"window_boundaries\":[]}],\"version\":\"0.1.0\",\
             \"service_kind\":\"openai\",\"endpoint\":\"v1/\\\"x\\\"\",\"seed\":42}"
        );
    }

    #[test]
    fn framed_bodies_list_every_response() {
        let mut bodies = Vec::new();
        crate::measure::record::push_framed_response(&mut bodies, 11, b"a");
        crate::measure::record::push_framed_response(&mut bodies, 12, b"bb");
        crate::measure::record::push_framed_response(&mut bodies, 13, b"");
        let window = WindowRecords {
            start_ns: 0,
            end_ns: 20,
            records: vec![RequestRecord {
                start_ns: 10,
                end_ns: 12,
                ok: true,
                body_len: bodies.len() as u32,
                ..Default::default()
            }],
            bodies,
            ..Default::default()
        };
        let exp = ExportExperiment {
            windows: vec![window],
            load: LoadValue::Concurrency(1),
            step_inputs: vec!["{\"IN\":[1,2]}".into()],
        };
        let mut out = Vec::new();
        let decode = |b: &[u8]| format!("{{\"n\":{}}}", b.len());
        let meta = ExportMeta {
            version: "v",
            service_kind: "triton",
            framed: true,
            ..ExportMeta::default()
        };
        write_export(&mut out, &[exp], &meta, &decode).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "{\"timestamp\":10,\"request_inputs\":{\"IN\":[1,2]},\"response_timestamps\":\
                 [11,12,13],\"response_outputs\":[{\"n\":1},{\"n\":2},{\"n\":0}]}"
            ),
            "{text}"
        );
    }

    #[test]
    fn sse_records_are_framed_whatever_the_run_says_and_keep_the_sse_bytes() {
        let mut bodies = b"whole".to_vec();
        let framed_off = bodies.len() as u32;
        crate::measure::record::push_framed_response(&mut bodies, 21, b"e1");
        crate::measure::record::push_framed_response(&mut bodies, 22, b"");
        let framed_len = bodies.len() as u32 - framed_off;
        let plain = RequestRecord {
            start_ns: 1,
            end_ns: 5,
            ok: true,
            body_len: 5,
            ..Default::default()
        };
        let streamed = RequestRecord {
            start_ns: 2,
            end_ns: 21,
            ok: true,
            sse: true,
            body_off: framed_off,
            body_len: framed_len,
            ..Default::default()
        };
        let exp = ExportExperiment {
            windows: vec![WindowRecords {
                end_ns: 30,
                records: vec![streamed, plain],
                bodies,
                ..Default::default()
            }],
            load: LoadValue::Concurrency(1),
            step_inputs: vec!["{\"payload\":\"{}\"}".into()],
        };
        let decode = |b: &[u8]| crate::service::openai::response_outputs_json(b);
        let meta = ExportMeta {
            service_kind: "openai",
            endpoint: "v1/chat/completions",
            ..ExportMeta::default()
        };
        let mut out = Vec::new();
        write_export(&mut out, &[exp], &meta, &decode).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "\"response_timestamps\":[5],\"response_outputs\":[{\"response\":\"whole\"}]}"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\"response_timestamps\":[21,22],\"response_outputs\":[\
                 {\"response\":\"data: e1\\n\\n\"},{\"response\":\"data: [DONE]\\n\\n\"}]}"
            ),
            "{text}"
        );
    }

    #[test]
    fn bad_offsets_and_unknown_step_do_not_panic() {
        let window = WindowRecords {
            start_ns: 0,
            end_ns: 10,
            records: vec![RequestRecord {
                start_ns: 3,
                end_ns: 4,
                step: 9,
                ok: true,
                body_off: u32::MAX,
                body_len: u32::MAX,
                ..Default::default()
            }],
            ..Default::default()
        };
        let exp = ExportExperiment {
            windows: vec![window],
            ..Default::default()
        };
        let mut out = Vec::new();
        let decode = |b: &[u8]| format!("{{\"n\":{}}}", b.len());
        let meta = ExportMeta {
            version: "v",
            service_kind: "triton",
            ..ExportMeta::default()
        };
        write_export(&mut out, &[exp], &meta, &decode).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(
            "{\"timestamp\":3,\"request_inputs\":{},\"response_timestamps\":[4],\
             \"response_outputs\":[{\"n\":0}]}],\"window_boundaries\":[0,10]}"
        ));
    }
}
