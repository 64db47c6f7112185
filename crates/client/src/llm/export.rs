//! The files perf_analyzer writes for GenAI-Perf, from a `profile` point: `inputs.json` (the
//! `--input-data` form of the payloads) and the raw `profile_export.json` (perf_analyzer's
//! schema: one request per entry with its send time, payload, and every response's read
//! time and text). Headers (API keys) are never written.

use std::io::{self, Write};

use serde_json::Value;

use super::cli::LoadPoint;
use super::runner::PointRun;
use crate::measure::record::framed_responses;
use crate::measure::RequestRecord;
use crate::report::write::WRITE_PIECE;

/// The names of a profile's summary files, from `--profile-export-file` as GenAI-Perf
/// derives them: the file name without its last extension, then `_genai_perf.json`,
/// `_genai_perf.csv` and (AIPerf's per-record file) `.jsonl`. `profile_export.json` gives
/// `profile_export_genai_perf.json`, `my.json` gives `my_genai_perf.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportNames {
    pub genai_perf_json: String,
    pub genai_perf_csv: String,
    pub records_jsonl: String,
    /// `--slice-duration`: per-slice statistics (AIPerf's `_timeslices` files).
    pub timeslices_json: String,
    pub timeslices_csv: String,
}

impl ExportNames {
    pub fn from_export_file(name: &str) -> Self {
        let stem = std::path::Path::new(name)
            .file_stem()
            .map_or_else(|| name.to_string(), |s| s.to_string_lossy().into_owned());
        Self {
            genai_perf_json: format!("{stem}_genai_perf.json"),
            genai_perf_csv: format!("{stem}_genai_perf.csv"),
            records_jsonl: format!("{stem}.jsonl"),
            timeslices_json: format!("{stem}_timeslices.json"),
            timeslices_csv: format!("{stem}_timeslices.csv"),
        }
    }
}

/// `{"data": [{"payload": [<body>], "payloads": [<body>], "session_id": "session_<i>"}, ...]}`,
/// pretty-printed as `serde_json` prints that tree: each entry in both tools' shapes at once,
/// GenAI-Perf's `payload` (what perf_analyzer's `--input-data` reads) and AIPerf's
/// `session_id` and `payloads`.
///
/// Written straight into `w`, a piece of about [`WRITE_PIECE`] bytes at a time: a synthetic
/// multi-turn dataset of 1,000 conversations of 20 turns with a 1,000-token system prompt is
/// about 190 MB, never held whole. Each body is printed once, by `serde_json`'s own `{:#}`, and
/// indented by its newlines (a JSON string holds no raw newline).
pub fn write_inputs_json(w: &mut dyn Write, bodies: &[Value]) -> io::Result<()> {
    if bodies.is_empty() {
        return w.write_all(b"{\n  \"data\": []\n}\n");
    }
    let mut out = String::with_capacity(WRITE_PIECE + (64 << 10));
    out.push_str("{\n  \"data\": [\n");
    for (i, body) in bodies.iter().enumerate() {
        // Eight spaces deep: the body's own lines, each but the first, get them too.
        let text = format!("{body:#}").replace('\n', "\n        ");
        if i > 0 {
            out.push_str(",\n");
        }
        out.push_str("    {\n");
        for key in ["payload", "payloads"] {
            out.push_str("      \"");
            out.push_str(key);
            out.push_str("\": [\n        ");
            out.push_str(&text);
            out.push_str("\n      ],\n");
        }
        out.push_str("      \"session_id\": \"session_");
        out.push_str(&i.to_string());
        out.push_str("\"\n    }");
        if out.len() >= WRITE_PIECE {
            w.write_all(out.as_bytes())?;
            out.clear();
        }
    }
    out.push_str("\n  ]\n}\n");
    w.write_all(out.as_bytes())
}

/// perf_analyzer's raw export for one point. `bodies[step]` is the payload of each request
/// step; streamed events are written as the server sent them, `data: <event>` and the
/// blank line that ends the event, and the end marker as `data: [DONE]` with its blank line:
/// the bytes perf_analyzer stores and GenAI-Perf parses.
///
/// Written straight into `w`, a piece of about [`WRITE_PIECE`] bytes at a time (one response
/// per event adds up to hundreds of megabytes in a long run, never held whole), with the keys
/// in the sorted order `serde_json` gives a `Value`, so the bytes are those of the tree it
/// replaces (a test compares them).
pub fn write_profile_export(
    w: &mut dyn Write,
    run: &PointRun,
    point: LoadPoint,
    payloads: &[String],
    service_kind: &str,
    endpoint: &str,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(WRITE_PIECE + (64 << 10));
    out.extend_from_slice(b"{\"endpoint\":");
    push_str(&mut out, endpoint);
    out.extend_from_slice(b",\"experiments\":[{\"experiment\":{\"mode\":");
    match point {
        LoadPoint::Concurrency(c) => {
            push_str(&mut out, "concurrency");
            out.extend_from_slice(b",\"value\":");
            push_value(&mut out, &c);
        }
        LoadPoint::RequestRate(r) => {
            push_str(&mut out, "request_rate");
            out.extend_from_slice(b",\"value\":");
            push_value(&mut out, &r);
        }
    }
    out.extend_from_slice(b"},\"requests\":[");
    for (i, r) in run.records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_request(&mut out, run, r, payloads);
        if out.len() >= WRITE_PIECE {
            w.write_all(&out)?;
            out.clear();
        }
    }
    out.extend_from_slice(b"],\"window_boundaries\":[");
    push_value(&mut out, &run.start_ns);
    out.push(b',');
    push_value(&mut out, &run.end_ns);
    out.extend_from_slice(b"]}],\"service_kind\":");
    push_str(&mut out, service_kind);
    out.extend_from_slice(b",\"version\":");
    push_str(&mut out, env!("CARGO_PKG_VERSION"));
    out.extend_from_slice(b"}\n");
    w.write_all(&out)
}

/// One request's entry: payload, each response's text and time, send time.
fn push_request(out: &mut Vec<u8>, run: &PointRun, r: &RequestRecord, payloads: &[String]) {
    let body = run
        .bodies
        .get(r.body_off as usize..(r.body_off + r.body_len) as usize)
        .unwrap_or(&[]);
    out.extend_from_slice(b"{\"request_inputs\":{\"payload\":");
    push_str(
        out,
        payloads.get(r.step as usize).map_or("", String::as_str),
    );
    out.extend_from_slice(b"},\"response_outputs\":[");
    if r.sse {
        // The usage check runs once per event; the second pass reads the kept times.
        let mut times = Vec::new();
        for (at, data) in framed_responses(body).filter(|(_, data)| !usage_only(data)) {
            out.extend_from_slice(if times.is_empty() {
                b"{\"response\":"
            } else {
                b",{\"response\":"
            });
            if data.is_empty() {
                push_str(out, "data: [DONE]\n\n");
            } else {
                push_sse_event_str(out, &String::from_utf8_lossy(data));
            }
            out.push(b'}');
            times.push(at);
        }
        out.extend_from_slice(b"],\"response_timestamps\":[");
        for (i, at) in times.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_value(out, at);
        }
    } else {
        out.extend_from_slice(b"{\"response\":");
        push_str(out, &String::from_utf8_lossy(body));
        out.extend_from_slice(b"}],\"response_timestamps\":[");
        push_value(out, &r.end_ns);
    }
    out.extend_from_slice(b"],\"timestamp\":");
    push_value(out, &r.start_ns);
    out.push(b'}');
}

/// An OpenAI stream's closing usage chunk (`"choices": []` beside `usage`, sent when a request
/// asks `stream_options.include_usage`): left out of `profile_export.json`, as GenAI-Perf
/// never asks for it and its parser reads `choices[0]` of every event.
fn usage_only(data: &[u8]) -> bool {
    if memchr::memmem::find(data, b"\"usage\"").is_none() {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(data).is_ok_and(|v| {
        v.get("usage").is_some_and(|u| !u.is_null())
            && v.get("choices")
                .and_then(|c| c.as_array())
                .is_some_and(|c| c.is_empty())
    })
}

/// A number as `serde_json` writes it.
fn push_value<T: serde::Serialize>(out: &mut Vec<u8>, v: &T) {
    // Writing numbers into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

/// A JSON string.
fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_escaped(out, s);
    out.push(b'"');
}

/// The JSON string of the SSE event `data: <text>` and its blank-line terminator.
fn push_sse_event_str(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"\"data: ");
    push_escaped(out, text);
    out.extend_from_slice(br#"\n\n""#);
}

/// The inside of a JSON string, escaped as `serde_json` escapes it: `"`, `\` and control
/// characters (`\b \f \n \r \t`, the others as `\u00xx`); everything else as it is.
fn push_escaped(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&bytes[plain..i]);
        plain = i + 1;
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0c => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            _ => {
                let code = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ];
                out.extend_from_slice(&code);
                continue;
            }
        };
        out.extend_from_slice(&[b'\\', short]);
    }
    out.extend_from_slice(&bytes[plain..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::push_framed_response;
    use crate::measure::RequestRecord;
    use serde_json::json;

    /// The export as it was built before: a `Value` tree (the reference for byte equality). `bodies[step]` is the payload of each request
    /// step; streamed events are written as `data: <event>\n\n` and the end marker as
    /// `data: [DONE]\n\n`, the bytes perf_analyzer stores and GenAI-Perf parses.
    fn profile_export_tree(
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
            "data: [DONE]\n\n".into()
        } else {
            format!("data: {}\n\n", String::from_utf8_lossy(data))
        }
    }

    #[test]
    fn direct_writing_gives_the_bytes_of_the_tree() {
        let mut bodies = Vec::new();
        let mut records = Vec::new();
        let events: [&[u8]; 5] = [
            br#"{"choices":[{"delta":{"content":"q\"b\\n\u00e9"}}]}"#,
            b"\x00\x1f\t tab \xff\xfe not utf-8 \xe2\x82",
            "caf\u{e9} \u{1f600} </script>".as_bytes(),
            b"",
            b"\r\n",
        ];
        for (i, n) in [5usize, 0, 2].into_iter().enumerate() {
            let off = bodies.len() as u32;
            for (k, e) in events.iter().take(n).enumerate() {
                push_framed_response(&mut bodies, 100 + k as u64, e);
            }
            records.push(RequestRecord {
                start_ns: 10 * i as u64,
                end_ns: 10 * i as u64 + 9,
                step: i as u32 * 3,
                body_off: off,
                body_len: bodies.len() as u32 - off,
                sse: true,
                ..RequestRecord::default()
            });
        }
        for body in [&b"{\"x\":\"\\\"\"}"[..], b"\xc3(", b""] {
            let off = bodies.len() as u32;
            bodies.extend_from_slice(body);
            records.push(RequestRecord {
                start_ns: u64::MAX - 1,
                end_ns: u64::MAX,
                body_off: off,
                body_len: body.len() as u32,
                ..RequestRecord::default()
            });
        }
        let run = PointRun {
            records,
            bodies,
            start_ns: 1,
            end_ns: 2,
            interrupted: false,
            worker_cpu_ns: 0,
            fails: Default::default(),
            connections: None,
            threshold_hit: None,
            cut_short: None,
        };
        let payloads = vec!["{\"p\":\"\\u0001\"}".to_string(), "\u{7f}\n".to_string()];
        let points = [
            LoadPoint::Concurrency(7),
            LoadPoint::RequestRate(2.5),
            LoadPoint::RequestRate(3.0),
            LoadPoint::RequestRate(1e-7),
        ];
        for point in points {
            for (kind, endpoint) in [("openai", "v1/chat/completions"), ("tri\"ton", "")] {
                let mut direct = Vec::new();
                write_profile_export(&mut direct, &run, point, &payloads, kind, endpoint).unwrap();
                let direct = String::from_utf8(direct).unwrap();
                let tree = profile_export_tree(&run, point, &payloads, kind, endpoint);
                assert_eq!(direct, tree, "{point:?} {kind}");
            }
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut text: String = (0u8..0x80).map(char::from).collect();
        text.push_str("caf\u{e9} \u{1f600} \u{2028} \"quoted\" back\\slash");
        for s in [text.as_str(), "", "plain", "\"", "\\\\", "\u{0}"] {
            let mut ours = Vec::new();
            push_str(&mut ours, s);
            assert_eq!(ours, serde_json::to_vec(s).unwrap(), "{s:?}");
            let mut event = Vec::new();
            push_sse_event_str(&mut event, s);
            assert_eq!(
                event,
                serde_json::to_vec(&format!("data: {s}\n\n")).unwrap()
            );
        }
    }

    #[test]
    fn only_a_choiceless_usage_chunk_is_usage_only() {
        assert!(usage_only(br#"{"choices":[],"usage":{"prompt_tokens":1}}"#));
        assert!(!usage_only(
            br#"{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":1}}"#
        ));
        assert!(!usage_only(br#"{"choices":[],"usage":null}"#));
        assert!(!usage_only(
            br#"{"choices":[{"delta":{"content":"usage"}}]}"#
        ));
        assert!(!usage_only(b"not json \"usage\""));
    }

    #[test]
    fn export_lists_every_event_with_its_time() {
        let mut bodies = Vec::new();
        push_framed_response(
            &mut bodies,
            11,
            br#"{"choices":[{"delta":{"content":"a"}}]}"#,
        );
        // The closing usage chunk a stream sends when asked (`include_usage`): not exported.
        push_framed_response(
            &mut bodies,
            12,
            br#"{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}"#,
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
            fails: Default::default(),
            connections: None,
            threshold_hit: None,
            cut_short: None,
        };
        let payloads = vec!["{\"p\":0}".to_string(), "{\"p\":1}".to_string()];
        let mut text = Vec::new();
        let point = LoadPoint::Concurrency(2);
        write_profile_export(&mut text, &run, point, &payloads, "openai", "v1/x").unwrap();
        let v: Value = serde_json::from_slice(&text).unwrap();
        let e = &v["experiments"][0];
        assert_eq!(e["experiment"], json!({"mode": "concurrency", "value": 2}));
        assert_eq!(e["window_boundaries"], json!([5, 30]));
        let r = &e["requests"];
        assert_eq!(r[0]["response_timestamps"], json!([11, 12]));
        assert_eq!(r[0]["response_outputs"].as_array().unwrap().len(), 2);
        assert_eq!(r[0]["response_outputs"][1]["response"], "data: [DONE]\n\n");
        assert_eq!(r[0]["request_inputs"]["payload"], "{\"p\":0}");
        assert_eq!(r[1]["response_timestamps"], json!([25]));
        assert_eq!(r[1]["response_outputs"][0]["response"], "{\"x\":1}");
        assert_eq!(v["service_kind"], "openai");
    }

    /// The bytes `serde_json::to_string_pretty` gives for the whole tree, plus a newline:
    /// nested objects and arrays, empty ones, escapes and newlines inside strings, numbers.
    #[test]
    fn inputs_json_is_the_pretty_printed_tree() {
        let cases = [
            vec![],
            vec![json!({"a": 1})],
            vec![
                json!({"messages": [{"role": "system", "content": "line\none \"q\" \\ \t"}],
                       "stream": true, "n": [], "o": {}, "x": null, "f": 1.5, "neg": -3}),
                json!([1, [2, [3, {}]], "s"]),
                json!("just a string"),
                json!({"deep": {"er": {"est": [{"k": [true, false]}]}}}),
            ],
        ];
        for bodies in cases {
            let data: Vec<Value> = bodies
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    json!({"payload": [b], "session_id": format!("session_{i}"), "payloads": [b]})
                })
                .collect();
            let mut want = serde_json::to_string_pretty(&json!({ "data": data })).unwrap();
            want.push('\n');
            let mut got = Vec::new();
            write_inputs_json(&mut got, &bodies).unwrap();
            assert_eq!(String::from_utf8(got).unwrap(), want);
        }
    }

    #[test]
    fn summary_file_names_follow_the_export_file_as_genai_perf_names_them() {
        let n = ExportNames::from_export_file("profile_export.json");
        assert_eq!(n.genai_perf_json, "profile_export_genai_perf.json");
        assert_eq!(n.genai_perf_csv, "profile_export_genai_perf.csv");
        assert_eq!(n.records_jsonl, "profile_export.jsonl");
        assert_eq!(n.timeslices_json, "profile_export_timeslices.json");
        assert_eq!(n.timeslices_csv, "profile_export_timeslices.csv");
        let n = ExportNames::from_export_file("my.json");
        assert_eq!(
            (n.genai_perf_json.as_str(), n.genai_perf_csv.as_str()),
            ("my_genai_perf.json", "my_genai_perf.csv")
        );
        // Only the last extension goes (Python's splitext / Path.stem); none is fine.
        let n = ExportNames::from_export_file("run.v2.json");
        assert_eq!(n.genai_perf_json, "run.v2_genai_perf.json");
        assert_eq!(
            ExportNames::from_export_file("noext").genai_perf_csv,
            "noext_genai_perf.csv"
        );
    }
}
