//! Engine records of one point to [`LlmRequest`]s: the endpoint's kind decodes the stored
//! events, responses or body, then failures are classified and tokens counted (client
//! tokenizer, or the server's `usage` when asked).

use super::payload::Entry;
use super::runner::PointRun;
use crate::measure::llm::{Chunk, LlmRequest, RequestError};
use crate::measure::{FailKind, RequestRecord};
use crate::run::kinds::reply::{Parsed, Reply};
use crate::run::kinds::Service;

/// What converting needs besides the records.
pub struct Context<'a> {
    /// Request steps: the prompt behind each (`record.step` indexes it).
    pub entries: &'a [Entry],
    /// Model index of each step.
    pub models: &'a [u32],
    /// Token counter for output text: whole text, and one chunk on its own.
    pub count: &'a dyn Fn(&str) -> u64,
    pub count_chunk: &'a dyn Fn(&str) -> u64,
    /// Take ISL/OSL from `usage` when the server sent it.
    pub server_counts: bool,
    /// The endpoint's kind: it decodes each reply and says whether a stream must end with
    /// `[DONE]`.
    pub service: &'a dyn Service,
}

/// One [`LlmRequest`] per record, in record order.
pub fn convert(run: &PointRun, cx: &Context<'_>) -> Vec<LlmRequest> {
    run.records.iter().map(|r| one(run, r, cx)).collect()
}

fn one(run: &PointRun, r: &RequestRecord, cx: &Context<'_>) -> LlmRequest {
    let body = run
        .bodies
        .get(r.body_off as usize..(r.body_off as usize + r.body_len as usize))
        .unwrap_or(&[]);
    let mut parsed = cx.service.decode(&Reply {
        sse: r.sse,
        ok: r.ok,
        end_ns: r.end_ns,
        body,
    });
    let step = r.step as usize;
    let entry = cx.entries.get(step);
    let mut error = classify(r, body, &parsed, cx.service.needs_done());
    if let Some(e) = error.as_mut().filter(|e| e.fail_kind() == FailKind::Status) {
        e.code = (r.status != 0).then_some(r.status);
    }
    if r.fail == FailKind::Connect {
        // A request the run could not send: its connection could not be reopened.
        let example = run.fails.example(FailKind::Connect);
        error = Some(RequestError::new(
            FailKind::Connect,
            example.unwrap_or("the connection could not be opened"),
        ));
    }
    if parsed.error.is_some() || r.fail == FailKind::SseError {
        parsed.drop_output();
    }
    let chunks: Vec<Chunk> = parsed
        .chunks
        .iter()
        .map(|(at, text)| Chunk {
            arrival_ns: *at,
            tokens: (cx.count_chunk)(text),
        })
        .collect();
    let mut isl = entry.map_or(0, |e| e.isl);
    let mut osl = if chunks.is_empty() {
        0
    } else {
        (cx.count)(&parsed.text())
    };
    let reasoning_tokens = if parsed.reasoning.is_empty() {
        0
    } else {
        (cx.count)(&parsed.reasoning)
    };
    // A stream without reasoning (or a layout that has none) answers from its first chunk.
    let first_output_ns = parsed.first_output_ns.or_else(|| {
        parsed
            .reasoning
            .is_empty()
            .then(|| chunks.first().map(|c| c.arrival_ns))
            .flatten()
    });
    let mut client_counts = None;
    if let (true, Some(u)) = (cx.server_counts, parsed.usage) {
        client_counts = Some((isl, osl));
        isl = u.prompt_tokens;
        osl = u.completion_tokens;
    }
    LlmRequest {
        start_ns: r.start_ns,
        intended_ns: r.intended_ns,
        end_ns: r.end_ns,
        error,
        isl,
        osl,
        requested_osl: entry.and_then(|e| e.osl),
        chunks,
        usage: parsed.usage,
        model: cx.models.get(step).copied().unwrap_or(0),
        reasoning_tokens,
        first_output_ns,
        client_counts,
        http: r.trace_in(&run.bodies),
        ..LlmRequest::default()
    }
}

/// Why a request failed, if it did.
fn classify(
    r: &RequestRecord,
    body: &[u8],
    parsed: &Parsed,
    needs_done: bool,
) -> Option<RequestError> {
    let err = |kind: FailKind, message: String| Some(RequestError::new(kind, message));
    let error_event = r.fail == FailKind::SseError;
    if let Some(e) = &parsed.error {
        return Some(e.request_error(parsed.streamed, error_event));
    }
    if error_event {
        return err(
            FailKind::SseError,
            "an `event: error` packet in the response stream".into(),
        );
    }
    if r.ok {
        return if r.sse && needs_done && !parsed.finished {
            err(
                FailKind::Closed,
                "the stream ended without [DONE] or a finish reason".into(),
            )
        } else {
            None
        };
    }
    // The engine's kind names the failure; a record without one broke off unexplained.
    let kind = if r.fail == FailKind::None {
        FailKind::Closed
    } else {
        r.fail
    };
    match kind {
        FailKind::Cancelled => {
            return err(kind, "cancelled on purpose by the client".into());
        }
        FailKind::Timeout => {
            return err(
                kind,
                "past the request's time limit (--request-timeout or --request-idle-timeout)"
                    .into(),
            );
        }
        _ => {}
    }
    if r.sse {
        return err(kind, "the stream broke off".into());
    }
    if body.is_empty() {
        return err(kind, "no response (connection failed or closed)".into());
    }
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .and_then(|m| m.as_str().map(str::to_string))
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    err(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::push_framed_response;
    use crate::run::kinds::registry::for_endpoint;

    /// The [`Service`] of the registry's `--endpoint-type name`.
    fn service(name: &str) -> &'static dyn Service {
        for_endpoint(name).unwrap().service
    }

    fn words(s: &str) -> u64 {
        s.split_whitespace().count() as u64
    }

    fn run_with(records: Vec<RequestRecord>, bodies: Vec<u8>) -> PointRun {
        PointRun {
            records,
            bodies,
            ..PointRun::default()
        }
    }

    fn cx<'a>(entries: &'a [Entry], server: bool) -> Context<'a> {
        Context {
            entries,
            models: &[0, 1],
            count: &words,
            count_chunk: &words,
            server_counts: server,
            service: service("chat"),
        }
    }

    fn streamed() -> (RequestRecord, Vec<u8>) {
        let mut b = Vec::new();
        push_framed_response(
            &mut b,
            100,
            br#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
        );
        push_framed_response(
            &mut b,
            150,
            br#"{"choices":[{"delta":{"content":"tok1 tok2 "}}]}"#,
        );
        push_framed_response(
            &mut b,
            170,
            br#"{"choices":[{"delta":{"content":"tok3 "},"finish_reason":"length"}]}"#,
        );
        push_framed_response(
            &mut b,
            171,
            br#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#,
        );
        push_framed_response(&mut b, 172, b"");
        let r = RequestRecord {
            start_ns: 50,
            end_ns: 172,
            step: 1,
            ok: true,
            sse: true,
            body_len: b.len() as u32,
            ..RequestRecord::default()
        };
        (r, b)
    }

    fn entries() -> Vec<Entry> {
        let e = Entry {
            text: "p".into(),
            isl: 7,
            osl: Some(3),
            payload: None,
        };
        vec![e.clone(), e]
    }

    #[test]
    fn streamed_request_counts_text_chunks_only() {
        let (r, b) = streamed();
        let es = entries();
        let out = convert(&run_with(vec![r], b.clone()), &cx(&es, false));
        let q = &out[0];
        assert!(q.ok());
        assert_eq!(
            q.chunks,
            vec![
                Chunk {
                    arrival_ns: 150,
                    tokens: 2
                },
                Chunk {
                    arrival_ns: 170,
                    tokens: 1
                }
            ]
        );
        assert_eq!((q.isl, q.osl, q.requested_osl, q.model), (7, 3, Some(3), 1));
        let out = convert(&run_with(vec![r], b), &cx(&es, true));
        assert_eq!((out[0].isl, out[0].osl), (9, 4));
        assert_eq!(
            out[0].client_counts,
            Some((7, 3)),
            "the client's own counts are kept"
        );
    }

    #[test]
    fn failures_are_classified() {
        let es = entries();
        let (mut r, _) = streamed();
        let mut b = Vec::new();
        push_framed_response(
            &mut b,
            150,
            br#"{"choices":[{"delta":{"content":"tok1 "}}]}"#,
        );
        r.body_len = b.len() as u32;
        let out = convert(&run_with(vec![r], b.clone()), &cx(&es, false));
        assert_eq!(out[0].error.as_ref().unwrap().kind, "closed_early");
        let lenient = Context {
            service: service("generate"),
            ..cx(&es, false)
        };
        let out = convert(&run_with(vec![r], b.clone()), &lenient);
        assert!(out[0].ok(), "a Triton generate stream ends without [DONE]");

        let mut b = Vec::new();
        push_framed_response(&mut b, 9, br#"{"error":{"message":"boom"}}"#);
        r.body_len = b.len() as u32;
        let e = convert(&run_with(vec![r], b), &cx(&es, false))[0]
            .error
            .clone()
            .unwrap();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("sse_error_event", "error in the response stream: boom")
        );

        let body = br#"{"error":{"message":"model 'x' not found"}}"#.to_vec();
        let r = RequestRecord {
            ok: false,
            fail: FailKind::Status,
            body_len: body.len() as u32,
            ..RequestRecord::default()
        };
        let e = convert(&run_with(vec![r], body), &cx(&es, false))[0]
            .error
            .clone()
            .unwrap();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("http_error", "model 'x' not found")
        );

        // The engine's kind names a failure without a body; none at all is a closed stream.
        let cases = [
            (FailKind::Reset, "reset", FailKind::Reset),
            (FailKind::None, "closed_early", FailKind::Closed),
        ];
        for (fail, name, kind) in cases {
            let r = RequestRecord {
                ok: false,
                fail,
                ..RequestRecord::default()
            };
            let e = convert(&run_with(vec![r], vec![]), &cx(&es, false))[0]
                .error
                .clone()
                .unwrap();
            assert_eq!((e.kind.as_str(), e.fail_kind()), (name, kind));
        }

        let r = RequestRecord {
            ok: false,
            fail: FailKind::Timeout,
            ..RequestRecord::default()
        };
        let e = convert(&run_with(vec![r], vec![]), &cx(&es, false))[0]
            .error
            .clone()
            .unwrap();
        assert_eq!(e.kind, "timeout");
    }

    /// The kind and message of the one request `r` with `body` converts to, and its OSL and
    /// chunk count (server counts on).
    fn outcome(r: RequestRecord, body: Vec<u8>) -> (String, String, u64, usize) {
        let r = RequestRecord {
            body_len: body.len() as u32,
            ..r
        };
        let es = entries();
        let q = convert(&run_with(vec![r], body), &cx(&es, true)).remove(0);
        let e = q.error.expect("failed");
        (e.kind, e.message, q.osl, q.chunks.len())
    }

    #[test]
    fn an_error_after_good_chunks_fails_and_counts_no_token() {
        let (r, mut b) = streamed();
        push_framed_response(
            &mut b,
            180,
            br#"{"object":"error","message":"oom","code":500}"#,
        );
        let got = outcome(r, b);
        let want = "error in the response stream: oom (code: 500)";
        assert_eq!(got, ("sse_error_event".into(), want.into(), 0, 0));

        let (r, mut b) = streamed();
        push_framed_response(&mut b, 180, b"{not json");
        let got = outcome(r, b);
        let want = "an event of the response stream is not JSON: {not json";
        assert_eq!(got, ("not_json".into(), want.into(), 0, 0));

        // An `event: error` packet (the engine failed the record) with plain text data.
        let (mut r, mut b) = streamed();
        push_framed_response(&mut b, 180, b"overloaded\r\n\x1b[31m");
        (r.ok, r.fail) = (false, FailKind::SseError);
        let got = outcome(r, b);
        let want = "error event in the response stream: overloaded\\x0d\\x0a\\x1b[31m";
        assert_eq!(got, ("sse_error_event".into(), want.into(), 0, 0));
        let (r, mut b) = streamed();
        let r = RequestRecord {
            ok: false,
            fail: FailKind::SseError,
            ..r
        };
        push_framed_response(&mut b, 180, br#"{"note":1}"#);
        let (kind, message, ..) = outcome(r, b);
        assert_eq!(kind, "sse_error_event");
        assert!(message.contains("event: error"), "{message}");
    }

    #[test]
    fn a_whole_reply_with_an_error_or_not_json_fails() {
        let whole = RequestRecord {
            ok: true,
            end_ns: 9,
            ..RequestRecord::default()
        };
        let body = br#"{"error":{"message":"no","type":"t"}}"#.to_vec();
        let got = outcome(whole, body);
        assert_eq!(
            got,
            (
                "invalid_reply".into(),
                "error in the reply: no (type: t)".into(),
                0,
                0
            )
        );
        let got = outcome(whole, b"<html>".to_vec());
        assert_eq!(
            got,
            (
                "not_json".into(),
                "the reply is not JSON: <html>".into(),
                0,
                0
            )
        );
    }

    /// The kind decodes: a kserve record (gRPC, no SSE) is read as Triton stream responses,
    /// whose error is a stream's, and a stream that just ends is complete.
    #[test]
    fn the_endpoint_kind_decodes_the_reply() {
        use crate::protocol::grpc::pb::inference as pb;
        use prost::Message;
        let es = entries();
        let kserve = Context {
            service: service("kserve"),
            ..cx(&es, false)
        };
        let error = pb::ModelStreamInferResponse {
            error_message: "bad input".into(),
            infer_response: None,
        }
        .encode_to_vec();
        let mut b = Vec::new();
        push_framed_response(&mut b, 9, &error);
        let r = RequestRecord {
            ok: true,
            end_ns: 9,
            body_len: b.len() as u32,
            ..RequestRecord::default()
        };
        let e = convert(&run_with(vec![r], b.clone()), &kserve)[0]
            .error
            .clone()
            .unwrap();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("sse_error_event", "error in the response stream: bad input")
        );
        // The chat kind reads the same bytes as one body, which is not JSON.
        let e = convert(&run_with(vec![r], b), &cx(&es, false))[0]
            .error
            .clone()
            .unwrap();
        assert_eq!(e.kind, "not_json");
        // A stream of responses without `[DONE]` is complete: its text counts.
        let text = pb::ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(pb::ModelInferResponse {
                outputs: vec![pb::model_infer_response::InferOutputTensor {
                    name: crate::service::kserve_llm::TEXT_OUTPUT.into(),
                    datatype: "BYTES".into(),
                    shape: vec![1],
                    ..Default::default()
                }],
                raw_output_contents: vec![b"\x0a\0\0\0tok1 tok2 ".to_vec()],
                ..Default::default()
            }),
        }
        .encode_to_vec();
        let mut b = Vec::new();
        push_framed_response(&mut b, 7, &text);
        let r = RequestRecord {
            body_len: b.len() as u32,
            ..r
        };
        let q = convert(&run_with(vec![r], b), &kserve).remove(0);
        assert!(q.ok(), "{:?}", q.error);
        assert_eq!((q.osl, q.chunks.len(), q.chunks[0].arrival_ns), (2, 1, 7));
    }
}
