//! The fake LLM as a decoupled model on ModelStreamInfer (Triton's vLLM / TensorRT-LLM way):
//! a request's inputs are `text_input` BYTES [1], optional `max_tokens` INT32 [1] and `stream`
//! BOOL [1]; it is answered with one response per chunk, each carrying `text_output` BYTES [1]
//! and `triton_final_response`, paced by the OpenAI settings and stamped in the same token log.
//!
//! `stream` false (or 0) asks for one whole response instead, sent when the whole answer
//! would have been generated. Inputs the model does not know are ignored, as Triton's LLM
//! backends ignore sampling inputs they do not use.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use h2::SendStream;

use super::convert::{bool_param, EMPTY_FINAL, FINAL_RESPONSE};
use super::sleep::sleep_until;
use super::unary::{config_of, metadata_of, model_config, model_metadata, model_ready};
use super::wire::{send_stream_response, Status};
use crate::delay::sample_delay;
use crate::llm::generate::{
    optional_input, LLM_MODEL, MAX_TOKENS, STREAM, TEXT_INPUT, TEXT_OUTPUT,
};
use crate::llm::openai::sample_seed;
use crate::llm::request::{words, Endpoint, GenRequest, DEFAULT_MAX_TOKENS, MAX_OUTPUT_TOKENS};
use crate::llm::stream::{full_answer_delay, token_text, Pace};
use crate::models::MODEL_VERSION;
use crate::state::Shared;
use inferperf_wire::protocol::grpc::pb::inference as pb;
use inferperf_wire::protocol::grpc::pb::inference::infer_parameter::ParameterChoice;
use inferperf_wire::protocol::grpc::pb::inference::model_infer_request::InferInputTensor;
use inferperf_wire::tensor::{push_bytes_element, split_bytes_elements};

/// What one LLM request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmInputs {
    /// Whitespace words of `text_input`.
    pub prompt_tokens: u64,
    /// Exact output length, tokens.
    pub max_tokens: u32,
    /// One response per chunk (true, the default) or one whole response.
    pub stream: bool,
    /// `triton_enable_empty_final_response`: the final flag goes on a separate empty response.
    pub empty_final: bool,
}

/// Whether `name` is the served LLM.
pub fn is_llm(shared: &Shared, name: &str) -> bool {
    name == &*shared.openai.model
}

/// The refusal of a unary ModelInfer for the LLM.
pub fn unary_refusal(name: &str) -> Status {
    Status::invalid(format!(
        "model '{name}' is decoupled (it sends any number of responses per request): \
         use the gRPC ModelStreamInfer stream"
    ))
}

/// ModelReady, with the LLM ready too.
pub fn ready(shared: &Shared, req: &pb::ModelReadyRequest) -> pb::ModelReadyResponse {
    let llm = is_llm(shared, &req.name) && check_version(&req.name, &req.version).is_ok();
    pb::ModelReadyResponse {
        ready: llm || model_ready(&shared.repo, req).ready,
    }
}

/// ModelMetadata of the LLM (under its served name) or of a hosted model.
pub fn metadata(
    shared: &Shared,
    req: &pb::ModelMetadataRequest,
) -> Result<pb::ModelMetadataResponse, Status> {
    if !is_llm(shared, &req.name) {
        return model_metadata(&shared.repo, req);
    }
    check_version(&req.name, &req.version)?;
    let mut metadata = metadata_of(&LLM_MODEL);
    metadata.name = req.name.clone();
    Ok(metadata)
}

/// ModelConfig of the LLM (decoupled, `max_tokens` and `stream` optional) or a hosted model.
pub fn config(
    shared: &Shared,
    req: &pb::ModelConfigRequest,
) -> Result<pb::ModelConfigResponse, Status> {
    if !is_llm(shared, &req.name) {
        return model_config(&shared.repo, req);
    }
    check_version(&req.name, &req.version)?;
    let mut config = config_of(&LLM_MODEL);
    config.name = req.name.clone();
    for input in &mut config.input {
        input.optional = optional_input(&input.name);
    }
    Ok(pb::ModelConfigResponse {
        config: Some(config),
    })
}

fn check_version(name: &str, version: &str) -> Result<(), Status> {
    if version.is_empty() || version == MODEL_VERSION {
        return Ok(());
    }
    Err(Status::not_found(format!(
        "Request for unknown model: '{name}' version {version} is not found"
    )))
}

/// The one element of input `i` as raw bytes (BYTES still length-prefixed), from
/// `raw_input_contents` or from the typed contents via `typed`.
fn element<'a>(
    req: &'a pb::ModelInferRequest,
    i: usize,
    want_type: &str,
    typed: impl FnOnce(&pb::InferTensorContents) -> Option<Vec<u8>>,
) -> Result<Cow<'a, [u8]>, String> {
    let input = &req.inputs[i];
    let name = &input.name;
    if input.datatype != want_type {
        return Err(format!(
            "input '{name}' must be {want_type}, got '{}'",
            input.datatype
        ));
    }
    if input.shape.is_empty() || input.shape.iter().product::<i64>() != 1 {
        return Err(format!(
            "input '{name}' must hold one element, got shape {:?}",
            input.shape
        ));
    }
    match (req.raw_input_contents.get(i), &input.contents) {
        (Some(raw), None) => Ok(Cow::Borrowed(raw.as_slice())),
        (None, Some(contents)) => typed(contents)
            .map(Cow::Owned)
            .ok_or_else(|| format!("input '{name}': contents must hold one {want_type} element")),
        (Some(_), Some(_)) => Err(format!(
            "input '{name}' has both raw_input_contents and contents"
        )),
        (None, None) => Err(format!(
            "input '{name}' has neither raw_input_contents nor contents"
        )),
    }
}

/// Exactly one item of a typed contents list.
fn single<T: Clone>(items: &[T]) -> Option<T> {
    match items {
        [one] => Some(one.clone()),
        _ => None,
    }
}

fn text_words(req: &pb::ModelInferRequest, i: usize) -> Result<u64, String> {
    let raw = element(req, i, "BYTES", |c| {
        let mut framed = Vec::new();
        push_bytes_element(&mut framed, &single(&c.bytes_contents)?);
        Some(framed)
    })?;
    match split_bytes_elements(&raw).as_deref() {
        Some([text]) => Ok(words(&String::from_utf8_lossy(text))),
        _ => Err(format!(
            "input '{TEXT_INPUT}' must be one length-prefixed BYTES element ({} bytes given)",
            raw.len()
        )),
    }
}

fn token_limit(req: &pb::ModelInferRequest, i: usize) -> Result<u32, String> {
    let raw = element(req, i, "INT32", |c| {
        Some(single(&c.int_contents)?.to_le_bytes().to_vec())
    })?;
    let value = <[u8; 4]>::try_from(raw.as_ref())
        .map(i32::from_le_bytes)
        .map_err(|_| format!("input '{MAX_TOKENS}' must be 4 bytes, got {}", raw.len()))?;
    u32::try_from(value)
        .ok()
        .filter(|n| (1..=MAX_OUTPUT_TOKENS).contains(n))
        .ok_or_else(|| {
            format!("input '{MAX_TOKENS}' must be in 1..={MAX_OUTPUT_TOKENS}, got {value}")
        })
}

fn stream_flag(req: &pb::ModelInferRequest, i: usize) -> Result<bool, String> {
    let raw = element(req, i, "BOOL", |c| {
        Some(vec![u8::from(single(&c.bool_contents)?)])
    })?;
    match raw.as_ref() {
        [byte] => Ok(*byte != 0),
        other => Err(format!(
            "input '{STREAM}' must be 1 byte, got {}",
            other.len()
        )),
    }
}

/// Validates an LLM request's inputs and parameters.
pub fn parse(req: &pb::ModelInferRequest) -> Result<LlmInputs, String> {
    let raw = req.raw_input_contents.len();
    if raw != 0 && raw != req.inputs.len() {
        return Err(format!(
            "expected {} raw_input_contents entries (one per input), got {raw}",
            req.inputs.len()
        ));
    }
    let position = |name: &str| {
        req.inputs
            .iter()
            .position(|t: &InferInputTensor| t.name == name)
    };
    let prompt_tokens = match position(TEXT_INPUT) {
        Some(i) => text_words(req, i)?,
        None => return Err(format!("missing input '{TEXT_INPUT}'")),
    };
    let max_tokens = match position(MAX_TOKENS) {
        Some(i) => token_limit(req, i)?,
        None => DEFAULT_MAX_TOKENS,
    };
    let stream = match position(STREAM) {
        Some(i) => stream_flag(req, i)?,
        None => true,
    };
    Ok(LlmInputs {
        prompt_tokens,
        max_tokens,
        stream,
        empty_final: bool_param(&req.parameters, EMPTY_FINAL)?,
    })
}

/// A response of request `id` carrying `text` (None: the empty final response).
fn text_response(
    model: &str,
    id: &str,
    text: Option<&str>,
    is_final: bool,
) -> pb::ModelInferResponse {
    let mut response = pb::ModelInferResponse {
        model_name: model.to_string(),
        model_version: MODEL_VERSION.to_string(),
        id: id.to_string(),
        ..Default::default()
    };
    if let Some(text) = text {
        response
            .outputs
            .push(pb::model_infer_response::InferOutputTensor {
                name: TEXT_OUTPUT.to_string(),
                datatype: "BYTES".to_string(),
                shape: vec![1],
                ..Default::default()
            });
        let mut framed = Vec::with_capacity(text.len() + 4);
        push_bytes_element(&mut framed, text.as_bytes());
        response.raw_output_contents.push(framed);
    }
    response.parameters.insert(
        FINAL_RESPONSE.to_string(),
        pb::InferParameter {
            parameter_choice: Some(ParameterChoice::BoolParam(is_final)),
        },
    );
    response
}

/// Serves one LLM request on the stream: its chunk responses as they fall due (the first
/// after TTFT, then one ITL apart, each gap counted from when the previous one went out), or
/// one whole response. Bad inputs are INVALID_ARGUMENT (sent as the stream's error message).
pub async fn serve(
    shared: &Shared,
    rng: &Mutex<u64>,
    req: &pb::ModelInferRequest,
    send: &mut SendStream<Bytes>,
) -> Result<(), Status> {
    check_version(&req.model_name, &req.model_version)?;
    let inputs = parse(req).map_err(Status::invalid)?;
    let state = &shared.openai;
    let log_id = state.log.begin();
    state
        .load
        .admit(inputs.prompt_tokens, u64::from(inputs.max_tokens));
    let _in_flight = state.load.enter();
    let (ttft, seed) = {
        let mut rng = rng.lock().unwrap_or_else(|e| e.into_inner());
        (
            sample_delay(&state.cfg.ttft, &mut rng),
            sample_seed(&mut rng),
        )
    };
    let started = Instant::now();
    let mut pace = Pace {
        first_content_at: started + ttft,
        itl: state.cfg.itl,
        tokens_per_chunk: state.cfg.tokens_per_chunk.max(1),
        rng: seed,
    };
    let (model, id) = (&*state.model, req.id.as_str());
    let max = inputs.max_tokens;
    let mut send_text = |from: u32, to: u32| {
        let is_final = to == max && !inputs.empty_final;
        let response = text_response(model, id, Some(&token_text(from, to)), is_final);
        state.log.record(log_id, shared.clock.now_ns());
        send_stream_response(send, Ok(response)).is_ok()
    };
    if inputs.stream {
        let (mut sent, mut next_at) = (0, pace.first_content_at);
        while sent < max {
            sleep_until(next_at).await;
            let to = (sent + pace.tokens_per_chunk).min(max);
            if !send_text(sent, to) {
                return Ok(()); // The client went away.
            }
            sent = to;
            next_at = next_at.max(Instant::now()) + sample_delay(&pace.itl, &mut pace.rng);
            // With a zero ITL nothing above waits: let the runtime's other calls run.
            tokio::task::yield_now().await;
        }
    } else {
        let whole = GenRequest {
            endpoint: Endpoint::Generate,
            prompt_tokens: inputs.prompt_tokens,
            max_tokens: max,
            stream: false,
            include_usage: false,
            error_event: false,
            stall: std::time::Duration::ZERO,
            reasoning_tokens: 0,
            media: Vec::new(),
        };
        sleep_until(started + full_answer_delay(&whole, ttft, &mut pace)).await;
        if !send_text(0, max) {
            return Ok(());
        }
    }
    if inputs.empty_final {
        let _ = send_stream_response(send, Ok(text_response(model, id, None, true)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, datatype: &str, shape: &[i64]) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            ..Default::default()
        }
    }

    fn framed(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        push_bytes_element(&mut out, text.as_bytes());
        out
    }

    fn raw_request(max_tokens: Option<i32>, stream: Option<bool>) -> pb::ModelInferRequest {
        let mut req = pb::ModelInferRequest {
            inputs: vec![tensor(TEXT_INPUT, "BYTES", &[1])],
            raw_input_contents: vec![framed("one two three")],
            ..Default::default()
        };
        if let Some(n) = max_tokens {
            req.inputs.push(tensor(MAX_TOKENS, "INT32", &[1]));
            req.raw_input_contents.push(n.to_le_bytes().to_vec());
        }
        if let Some(s) = stream {
            req.inputs.push(tensor(STREAM, "BOOL", &[1, 1]));
            req.raw_input_contents.push(vec![u8::from(s)]);
        }
        req
    }

    #[test]
    fn raw_and_typed_inputs() {
        let got = parse(&raw_request(Some(5), Some(false))).unwrap();
        let want = LlmInputs {
            prompt_tokens: 3,
            max_tokens: 5,
            stream: false,
            empty_final: false,
        };
        assert_eq!(got, want);
        let defaults = parse(&raw_request(None, None)).unwrap();
        assert_eq!(
            (defaults.max_tokens, defaults.stream),
            (DEFAULT_MAX_TOKENS, true)
        );
        let mut typed = pb::ModelInferRequest {
            inputs: vec![
                tensor(MAX_TOKENS, "INT32", &[1]),
                tensor(TEXT_INPUT, "BYTES", &[1]),
            ],
            ..Default::default()
        };
        typed.inputs[0].contents = Some(pb::InferTensorContents {
            int_contents: vec![7],
            ..Default::default()
        });
        typed.inputs[1].contents = Some(pb::InferTensorContents {
            bytes_contents: vec![b"a b".to_vec()],
            ..Default::default()
        });
        let got = parse(&typed).unwrap();
        assert_eq!((got.prompt_tokens, got.max_tokens), (2, 7));
    }

    #[test]
    fn input_errors_name_the_input() {
        let mut no_text = raw_request(Some(3), None);
        no_text.inputs.remove(0);
        no_text.raw_input_contents.remove(0);
        let mut wrong_type = raw_request(Some(3), None);
        wrong_type.inputs[1].datatype = "INT64".into();
        let mut two_elements = raw_request(None, None);
        two_elements.raw_input_contents[0].extend(framed("x"));
        let mut short = raw_request(Some(3), None);
        short.raw_input_contents[1].pop();
        let mut wide = raw_request(None, Some(true));
        wide.inputs[1].shape = vec![2];
        let cases = [
            (no_text, "missing input 'text_input'"),
            (raw_request(Some(0), None), "'max_tokens' must be in 1.."),
            (raw_request(Some(-4), None), "got -4"),
            (wrong_type, "'max_tokens' must be INT32"),
            (two_elements, "one length-prefixed BYTES element"),
            (short, "'max_tokens' must be 4 bytes"),
            (wide, "'stream' must hold one element"),
        ];
        for (req, needle) in cases {
            let err = parse(&req).unwrap_err();
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn responses_carry_framed_text_and_the_flag() {
        let r = text_response("m", "7", Some(" the"), false);
        assert_eq!(r.raw_output_contents, vec![framed(" the")]);
        assert_eq!(
            (r.outputs[0].name.as_str(), r.outputs[0].shape.as_slice()),
            (TEXT_OUTPUT, &[1][..])
        );
        let flag =
            |r: &pb::ModelInferResponse| r.parameters[FINAL_RESPONSE].parameter_choice.clone();
        assert_eq!(flag(&r), Some(ParameterChoice::BoolParam(false)));
        let empty = text_response("m", "7", None, true);
        assert!(empty.outputs.is_empty() && empty.raw_output_contents.is_empty());
        assert_eq!(flag(&empty), Some(ParameterChoice::BoolParam(true)));
        assert_eq!(empty.model_version, "1");
    }
}
