//! End-to-end tests of the fake LLM on ModelStreamInfer: chunk responses and their text, the
//! final flag (with and without the empty final response), the whole-answer mode, the token
//! log, errors on the stream, and the LLM's metadata, config and readiness RPCs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::test_client::*;
use crate::{start, Delay, OpenAiConfig, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

const LLM: &str = "inferperf-llm";

fn llm_server(ttft_ms: u64, itl_ms: u64, tokens_per_chunk: u32) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let ms = Duration::from_millis;
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        openai: OpenAiConfig {
            ttft: Delay::Fixed(ms(ttft_ms)),
            itl: Delay::Fixed(ms(itl_ms)),
            tokens_per_chunk,
            ..OpenAiConfig::default()
        },
        ..ServeConfig::default()
    })
    .expect("server starts")
}

fn framed(text: &str) -> Vec<u8> {
    let mut out = (text.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out
}

/// An LLM request; `stream` None leaves the input out.
fn llm_request(id: &str, max_tokens: i32, stream: Option<bool>) -> pb::ModelInferRequest {
    let mut inputs: Vec<(&str, &str, &[i64], Vec<u8>)> = vec![
        ("text_input", "BYTES", &[1], framed("three word prompt")),
        (
            "max_tokens",
            "INT32",
            &[1],
            max_tokens.to_le_bytes().to_vec(),
        ),
    ];
    if let Some(s) = stream {
        inputs.push(("stream", "BOOL", &[1], vec![u8::from(s)]));
    }
    infer_request(LLM, id, &inputs)
}

/// The responses of one request up to its final flag: (text, final flag).
async fn collect(s: &mut Stream, id: &str) -> Vec<(Option<String>, bool)> {
    let mut got = Vec::new();
    while let Some(r) = s.next().await {
        assert!(r.error_message.is_empty(), "{}", r.error_message);
        let resp = r.infer_response.expect("a response");
        assert_eq!((resp.id.as_str(), resp.model_name.as_str()), (id, LLM));
        assert_eq!(resp.model_version, "1");
        let is_final = final_flag(&resp).expect("every response carries the flag");
        let text = match resp.raw_output_contents.as_slice() {
            [] => None,
            [raw] => {
                assert_eq!(resp.outputs[0].name, "text_output");
                assert_eq!(resp.outputs[0].datatype, "BYTES");
                assert_eq!(resp.outputs[0].shape, vec![1]);
                let len = u32::from_le_bytes(raw[..4].try_into().unwrap()) as usize;
                assert_eq!(len + 4, raw.len(), "one length-prefixed element");
                Some(String::from_utf8(raw[4..].to_vec()).unwrap())
            }
            other => panic!("unexpected outputs {other:?}"),
        };
        got.push((text, is_final));
        if is_final {
            break;
        }
    }
    got
}

fn joined(got: &[(Option<String>, bool)]) -> String {
    got.iter().filter_map(|g| g.0.as_deref()).collect()
}

#[test]
fn stream_sends_one_response_per_chunk_with_the_final_flag() {
    let server = llm_server(0, 0, 2);
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        for (max_tokens, stream) in [(7, None), (1, Some(true)), (4, Some(true))] {
            s.send(&llm_request("q", max_tokens, stream));
            let got = collect(&mut s, "q").await;
            let chunks = (max_tokens as usize).div_ceil(2);
            assert_eq!(got.len(), chunks, "{max_tokens}");
            let flags: Vec<bool> = got.iter().map(|g| g.1).collect();
            let mut want = vec![false; chunks];
            want[chunks - 1] = true;
            assert_eq!(flags, want);
            let text = joined(&got);
            assert_eq!(text.split_whitespace().count(), max_tokens as usize);
            assert_eq!(text, crate::llm::stream::token_text(0, max_tokens as u32));
        }
        s.close();
        assert!(s.next().await.is_none());
        assert_eq!(s.status().await, (0, String::new()));
    });
    let counts: Vec<usize> = server.token_times().iter().map(Vec::len).collect();
    assert_eq!(counts, vec![4, 1, 2]);
    assert_eq!(server.counters().grpc_calls, 1);
}

#[test]
fn empty_final_response_and_whole_answers() {
    let (ttft, itl) = (Duration::from_millis(20), Duration::from_millis(5));
    let server = llm_server(20, 5, 1);
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        let mut req = llm_request("e", 3, Some(true));
        req.parameters.insert(
            "triton_enable_empty_final_response".into(),
            pb::InferParameter {
                parameter_choice: Some(pb::infer_parameter::ParameterChoice::BoolParam(true)),
            },
        );
        s.send(&req);
        let got = collect(&mut s, "e").await;
        let shape: Vec<(bool, bool)> = got.iter().map(|g| (g.0.is_some(), g.1)).collect();
        assert_eq!(
            shape,
            [(true, false), (true, false), (true, false), (false, true)]
        );
        // stream = false: one response with every token, after TTFT + 3 ITLs at the earliest.
        let sent = Instant::now();
        s.send(&llm_request("w", 4, Some(false)));
        let got = collect(&mut s, "w").await;
        assert!(sent.elapsed() >= ttft + 3 * itl, "{:?}", sent.elapsed());
        assert_eq!(got.len(), 1);
        assert_eq!((joined(&got).as_str(), got[0].1), (" the of and to", true));
    });
    let log = server.token_times();
    assert_eq!(log.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 1]);
    let itl_ns = itl.as_nanos() as u64;
    assert!(
        log[0].windows(2).all(|w| w[1] - w[0] >= itl_ns),
        "{:?}",
        log[0]
    );
}

#[test]
fn bad_requests_fail_on_the_stream_and_it_goes_on() {
    let server = llm_server(0, 0, 1);
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        let mut no_text = llm_request("a", 2, None);
        no_text.inputs.remove(0);
        no_text.raw_input_contents.remove(0);
        let mut versioned = llm_request("b", 2, None);
        versioned.model_version = "2".into();
        for (req, needle) in [
            (no_text, "missing input 'text_input'"),
            (versioned, "version 2 is not found"),
            (llm_request("c", 0, None), "'max_tokens' must be in 1.."),
        ] {
            let id = req.id.clone();
            s.send(&req);
            let r = s.next().await.unwrap();
            assert!(r.error_message.contains(needle), "{}", r.error_message);
            assert_eq!(r.infer_response.unwrap().id, id);
        }
        s.send(&llm_request("d", 2, None));
        assert_eq!(joined(&collect(&mut s, "d").await), " the of");
        s.close();
        assert!(s.next().await.is_none());
        let infer: Result<pb::ModelInferResponse, _> =
            c.unary("ModelInfer", &llm_request("u", 2, None)).await;
        let (code, message) = infer.unwrap_err();
        assert_eq!(code, 3, "INVALID_ARGUMENT");
        assert!(message.contains("decoupled"), "{message}");
    });
    assert_eq!(server.token_times().len(), 1, "only the accepted request");
}

#[test]
fn metadata_config_and_readiness_of_the_llm() {
    let server = llm_server(0, 0, 1);
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let metadata: pb::ModelMetadataResponse = c
            .unary(
                "ModelMetadata",
                &pb::ModelMetadataRequest {
                    name: LLM.into(),
                    version: String::new(),
                },
            )
            .await
            .unwrap();
        assert_eq!(metadata.name, LLM);
        let inputs: Vec<(&str, &str)> = metadata
            .inputs
            .iter()
            .map(|t| (t.name.as_str(), t.datatype.as_str()))
            .collect();
        assert_eq!(
            inputs,
            [
                ("text_input", "BYTES"),
                ("max_tokens", "INT32"),
                ("stream", "BOOL")
            ]
        );
        assert_eq!(metadata.outputs[0].name, "text_output");
        let config: pb::ModelConfigResponse = c
            .unary(
                "ModelConfig",
                &pb::ModelConfigRequest {
                    name: LLM.into(),
                    version: "1".into(),
                },
            )
            .await
            .unwrap();
        let config = config.config.unwrap();
        assert!(config.model_transaction_policy.unwrap().decoupled);
        let optional: Vec<bool> = config.input.iter().map(|i| i.optional).collect();
        assert_eq!(optional, [false, true, true]);
        let ready: pb::ModelReadyResponse = c
            .unary(
                "ModelReady",
                &pb::ModelReadyRequest {
                    name: LLM.into(),
                    version: String::new(),
                },
            )
            .await
            .unwrap();
        assert!(ready.ready);
        let stats: pb::ModelStatisticsResponse = c
            .unary("ModelStatistics", &pb::ModelStatisticsRequest::default())
            .await
            .unwrap();
        assert_eq!(stats.model_stats.len(), 7, "the hosted models only");
        let simple: pb::ModelMetadataResponse = c
            .unary(
                "ModelMetadata",
                &pb::ModelMetadataRequest {
                    name: "simple".into(),
                    version: String::new(),
                },
            )
            .await
            .unwrap();
        assert_eq!(simple.name, "simple");
    });
}
