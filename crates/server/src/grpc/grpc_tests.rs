//! End-to-end tests of the unary RPCs over real sockets on 127.0.0.1 (h2 client).

use prost::Message;

use super::test_client::*;
use super::wire::code;
use crate::test_client as http;
use inferperf_wire::protocol::grpc::pb::inference as pb;

fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn simple_request(id: &str, batch: i64) -> pb::ModelInferRequest {
    let n = batch as i32 * 16;
    let a: Vec<i32> = (0..n).collect();
    let b: Vec<i32> = vec![10; n as usize];
    infer_request(
        "simple",
        id,
        &[
            ("INPUT0", "INT32", &[batch, 16], i32s(&a)),
            ("INPUT1", "INT32", &[batch, 16], i32s(&b)),
        ],
    )
}

#[test]
fn health_and_metadata_rpcs() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.expect("gRPC is on");
    block_on(async move {
        let mut c = connect(addr).await;
        let live: pb::ServerLiveResponse = c
            .unary("ServerLive", &pb::ServerLiveRequest {})
            .await
            .unwrap();
        let ready: pb::ServerReadyResponse = c
            .unary("ServerReady", &pb::ServerReadyRequest {})
            .await
            .unwrap();
        assert!(live.live && ready.ready);
        let meta: pb::ServerMetadataResponse = c
            .unary("ServerMetadata", &pb::ServerMetadataRequest {})
            .await
            .unwrap();
        assert_eq!(meta.name, "inferperf");
        assert!(meta.extensions.contains(&"statistics".to_string()));
        for model in ["simple", "identity_fp32", "identity_bytes", "repeat_int32"] {
            let q = pb::ModelReadyRequest {
                name: model.into(),
                version: String::new(),
            };
            let r: pb::ModelReadyResponse = c.unary("ModelReady", &q).await.unwrap();
            assert!(r.ready, "{model}");
            let q = pb::ModelMetadataRequest {
                name: model.into(),
                version: "1".into(),
            };
            let m: pb::ModelMetadataResponse = c.unary("ModelMetadata", &q).await.unwrap();
            assert_eq!(
                (m.name.as_str(), m.versions.clone()),
                (model, vec!["1".to_string()])
            );
            let q = pb::ModelConfigRequest {
                name: model.into(),
                version: String::new(),
            };
            let cfg: pb::ModelConfigResponse = c.unary("ModelConfig", &q).await.unwrap();
            let cfg = cfg.config.unwrap();
            assert_eq!(cfg.name, model);
            assert_eq!(
                cfg.model_transaction_policy.unwrap().decoupled,
                model == "repeat_int32"
            );
        }
        let q = pb::ModelMetadataRequest {
            name: "simple".into(),
            version: String::new(),
        };
        let m: pb::ModelMetadataResponse = c.unary("ModelMetadata", &q).await.unwrap();
        assert_eq!(m.inputs[1].shape, vec![-1, 16]);
        assert_eq!(m.outputs[0].datatype, "INT32");
        let q = pb::ModelReadyRequest {
            name: "nope".into(),
            version: String::new(),
        };
        let r: pb::ModelReadyResponse = c.unary("ModelReady", &q).await.unwrap();
        assert!(!r.ready);
    });
}

#[test]
fn model_infer_on_every_model() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let r: pb::ModelInferResponse = c
            .unary("ModelInfer", &simple_request("s1", 2))
            .await
            .unwrap();
        assert_eq!(
            (
                r.id.as_str(),
                r.model_name.as_str(),
                r.model_version.as_str()
            ),
            ("s1", "simple", "1")
        );
        assert_eq!(r.outputs.len(), 2);
        assert_eq!(r.outputs[0].shape, vec![2, 16]);
        let sum: Vec<i32> = (0..32).map(|i| i + 10).collect();
        let diff: Vec<i32> = (0..32).map(|i| i - 10).collect();
        assert_eq!(r.raw_output_contents, vec![i32s(&sum), i32s(&diff)]);
        assert!(
            r.parameters.is_empty(),
            "unary responses carry no final flag"
        );

        let fp: Vec<u8> = [1.5f32, -2.25, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let req = infer_request(
            "identity_fp32",
            "f",
            &[("INPUT0", "FP32", &[1, 3], fp.clone())],
        );
        let r: pb::ModelInferResponse = c.unary("ModelInfer", &req).await.unwrap();
        assert_eq!(
            (
                r.outputs[0].datatype.as_str(),
                r.raw_output_contents[0].clone()
            ),
            ("FP32", fp)
        );

        // Typed contents instead of raw bytes.
        let mut req = infer_request(
            "identity_bytes",
            "b",
            &[("INPUT0", "BYTES", &[1, 2], Vec::new())],
        );
        req.raw_input_contents.clear();
        req.inputs[0].contents = Some(pb::InferTensorContents {
            bytes_contents: vec![b"hi".to_vec(), b"there".to_vec()],
            ..Default::default()
        });
        let mut req_out = req.clone();
        req_out.outputs = vec![pb::model_infer_request::InferRequestedOutputTensor {
            name: "OUTPUT0".into(),
            ..Default::default()
        }];
        let r: pb::ModelInferResponse = c.unary("ModelInfer", &req_out).await.unwrap();
        let mut framed = vec![2, 0, 0, 0, b'h', b'i', 5, 0, 0, 0];
        framed.extend_from_slice(b"there");
        assert_eq!(r.raw_output_contents, vec![framed]);
        assert_eq!(r.outputs[0].shape, vec![1, 2]);
    });
    let counters = server.counters();
    assert_eq!(counters.model("simple").unwrap().inferences, 2);
    assert_eq!(counters.model("identity_bytes").unwrap().inferences, 1);
    assert_eq!(counters.grpc_calls, 3);
    assert_eq!(counters.http_requests, 0);
}

#[test]
fn error_statuses() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut wrong_size = simple_request("x", 1);
        wrong_size.raw_input_contents[1].truncate(60);
        let mut bad_version = simple_request("v", 1);
        bad_version.model_version = "3".into();
        let cases: Vec<(pb::ModelInferRequest, u32, &str)> = vec![
            (infer_request("nope", "1", &[]), code::NOT_FOUND, "Request for unknown model: 'nope' is not found"),
            (bad_version, code::NOT_FOUND, "'simple' version 3 is not found"),
            (wrong_size, code::INVALID_ARGUMENT, "input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 60"),
            (repeat_request("r", &[1, 2], true), code::INVALID_ARGUMENT, "model 'repeat_int32' is decoupled"),
        ];
        for (req, status, want) in cases {
            let err = c
                .unary::<_, pb::ModelInferResponse>("ModelInfer", &req)
                .await
                .unwrap_err();
            assert_eq!(err.0, status, "{}", err.1);
            assert!(err.1.contains(want), "{} does not contain {want}", err.1);
        }
        let q = pb::ModelConfigRequest {
            name: "gone".into(),
            version: String::new(),
        };
        let err = c
            .unary::<_, pb::ModelConfigResponse>("ModelConfig", &q)
            .await
            .unwrap_err();
        assert_eq!(err.0, code::NOT_FOUND);
        let reply = c.call("RepositoryFrobnicate", frame(&[], None), None).await;
        assert_eq!(reply.status, code::UNIMPLEMENTED);
        assert!(
            reply.message.contains("RepositoryFrobnicate"),
            "{}",
            reply.message
        );
        let reply = c
            .call("ModelInfer", frame(b"\xff\xff\xff", None), None)
            .await;
        assert_eq!(reply.status, code::INVALID_ARGUMENT, "{}", reply.message);
        let reply = c.call("ServerLive", Vec::new(), None).await;
        assert_eq!(reply.status, code::INVALID_ARGUMENT, "{}", reply.message);
        // A message that is not UTF-8-clean comes back percent-decoded intact.
        let q = pb::ModelConfigRequest {
            name: "é%".into(),
            version: String::new(),
        };
        let err = c
            .unary::<_, pb::ModelConfigResponse>("ModelConfig", &q)
            .await
            .unwrap_err();
        assert!(err.1.contains("'é%'"), "{}", err.1);
    });
    let counters = server.counters();
    let simple = counters.model("simple").unwrap();
    // The unknown version never reached the model; the size mismatch did.
    assert_eq!((simple.failures, simple.inferences), (1, 0));
    assert_eq!(counters.model("repeat_int32").unwrap().failures, 1);
}

#[test]
fn compressed_requests() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let msg = simple_request("z", 1).encode_to_vec();
        for encoding in ["gzip", "deflate"] {
            let reply = c
                .call("ModelInfer", frame(&msg, Some(encoding)), Some(encoding))
                .await;
            assert_eq!(reply.status, 0, "{encoding}: {}", reply.message);
            let r = pb::ModelInferResponse::decode(reply.messages[0].as_slice()).unwrap();
            assert_eq!(r.id, "z");
            // Uncompressed messages stay allowed on a call that declares an encoding.
            let reply = c
                .call("ModelInfer", frame(&msg, None), Some(encoding))
                .await;
            assert_eq!(
                reply.status, 0,
                "{encoding} uncompressed: {}",
                reply.message
            );
        }
        let reply = c
            .call("ModelInfer", frame(&msg, Some("gzip")), Some("br"))
            .await;
        assert_eq!(reply.status, code::UNIMPLEMENTED);
        assert!(reply.message.contains("'br'"), "{}", reply.message);
        let reply = c.call("ModelInfer", frame(&msg, Some("gzip")), None).await;
        assert_eq!(reply.status, code::INTERNAL, "{}", reply.message);
        let reply = c
            .call("ModelInfer", frame(&msg, Some("gzip")), Some("deflate"))
            .await;
        assert_eq!(reply.status, code::INTERNAL, "{}", reply.message);
    });
    assert_eq!(server.counters().model("simple").unwrap().inferences, 4);
}

#[test]
fn statistics_are_shared_with_http() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    let mut h = http::Client::connect(server.addr);
    http::check_simple_binary(&h.request(&http::simple_binary(2)), 2);
    let proto = block_on(async move {
        let mut c = connect(addr).await;
        for batch in [1, 4] {
            let _: pb::ModelInferResponse = c
                .unary("ModelInfer", &simple_request("s", batch))
                .await
                .unwrap();
        }
        let q = pb::ModelStatisticsRequest {
            name: "simple".into(),
            version: String::new(),
        };
        let s: pb::ModelStatisticsResponse = c.unary("ModelStatistics", &q).await.unwrap();
        let all: pb::ModelStatisticsResponse = c
            .unary("ModelStatistics", &pb::ModelStatisticsRequest::default())
            .await
            .unwrap();
        assert_eq!(all.model_stats.len(), crate::models::MODELS.len());
        s
    });
    let json = h.request(&http::get("/v2/models/simple/stats")).json();
    let j = &json["model_stats"][0];
    let p = &proto.model_stats[0];
    assert_eq!(j["inference_count"], 7, "HTTP sees the gRPC inferences");
    assert_eq!(j["execution_count"], 3);
    assert_eq!(p.inference_count, 7);
    assert_eq!(p.execution_count, 3);
    let success = p.inference_stats.unwrap().success.unwrap();
    assert_eq!(success.count, 3);
    assert_eq!(j["inference_stats"]["success"]["ns"], success.ns);
    let batches: Vec<u64> = p.batch_stats.iter().map(|b| b.batch_size).collect();
    assert_eq!(batches, vec![1, 2, 4]);
}
