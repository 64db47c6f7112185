//! The kserve kind's decoder: stored `ModelStreamInferResponse` messages to text chunks,
//! errors and the end of the stream.

use prost::Message;

use super::*;
use crate::measure::record::push_framed_response;
use crate::protocol::grpc::pb::inference as pb;
use crate::service::kserve_llm::TEXT_OUTPUT;

fn response(text: Option<&str>, last: bool) -> Vec<u8> {
    let mut resp = pb::ModelInferResponse::default();
    if let Some(t) = text {
        resp.outputs
            .push(pb::model_infer_response::InferOutputTensor {
                name: TEXT_OUTPUT.into(),
                datatype: "BYTES".into(),
                shape: vec![1],
                ..Default::default()
            });
        let mut raw = (t.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(t.as_bytes());
        resp.raw_output_contents.push(raw);
    }
    let flag = pb::InferParameter {
        parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(last)),
    };
    resp.parameters.insert("triton_final_response".into(), flag);
    pb::ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(resp),
    }
    .encode_to_vec()
}

#[test]
fn responses_to_text_chunks() {
    let (a, b, end) = (
        response(Some(" the"), false),
        response(Some(" of"), false),
        response(None, true),
    );
    let p = parse_responses([(1, &a[..]), (2, &b[..]), (3, &end[..])].into_iter());
    assert_eq!(p.chunks, vec![(1, " the".into()), (2, " of".into())]);
    assert!(p.finished && p.error.is_none());
    let err = pb::ModelStreamInferResponse {
        error_message: "bad input".into(),
        infer_response: None,
    }
    .encode_to_vec();
    let p = parse_responses([(1, &err[..]), (2, &[0xff_u8, 0xff][..])].into_iter());
    assert_eq!(p.error.unwrap().detail, "bad input");
    let p = parse_responses([(1, &[0xff_u8, 0xff][..])].into_iter());
    assert_eq!(p.error.unwrap().kind, K::NotProtobuf);
}

/// The kind reads its framed responses whatever the record says (a gRPC stream is no SSE),
/// and its errors are a stream's; the OpenAI default would read nothing of them.
#[test]
fn the_kind_decodes_its_stream_responses() {
    let mut body = Vec::new();
    push_framed_response(&mut body, 5, &response(Some(" a"), false));
    push_framed_response(&mut body, 9, &response(Some(" b"), true));
    let reply = Reply {
        sse: false,
        ok: true,
        end_ns: 9,
        body: &body,
    };
    let p = KIND.service.decode(&reply);
    assert_eq!(p.chunks, vec![(5, " a".into()), (9, " b".into())]);
    assert!(p.finished && p.streamed && p.error.is_none());
    assert!(!KIND.service.needs_done());
    let default = crate::run::kinds::reply::decode_openai(&reply);
    assert!(default.chunks.is_empty() && default.error.is_some());
}
