//! Differential: the same RPCs through the `h2` crate's client and through inferperf's own
//! HTTP/2 client (`GrpcClient`, the load engine's `Session` underneath) must decode to
//! identical messages, errors included.

use std::time::Duration;

use prost::Message;

use super::test_client::{block_on, connect, frame, grpc_server, infer_request};
use inferperf_client::protocol::grpc::blocking::GrpcClient;
use inferperf_wire::protocol::grpc::pb::inference as pb;

/// Calls `method` with `req` on both clients; returns (h2's reply, inferperf's reply) as decoded
/// messages or (status, message) / inferperf's error text.
fn both<Req: Message, Resp: Message + Default>(
    addr: std::net::SocketAddr,
    method: &str,
    req: &Req,
) -> (Result<Resp, (u32, String)>, Result<Resp, String>) {
    let theirs = block_on(async {
        let mut client = connect(addr).await;
        client.unary::<Req, Resp>(method, req).await
    });
    let mut ours = GrpcClient::connect(&addr.to_string(), Duration::from_secs(5)).unwrap();
    let mine = ours
        .unary(method, &req.encode_to_vec())
        .map(|bytes| Resp::decode(bytes.as_slice()).expect("our reply decodes"))
        .map_err(|e| e.msg);
    (theirs, mine)
}

fn same<Req: Message, Resp: Message + Default + PartialEq + std::fmt::Debug>(
    addr: std::net::SocketAddr,
    method: &str,
    req: &Req,
) -> Resp {
    match both::<Req, Resp>(addr, method, req) {
        (Ok(theirs), Ok(mine)) => {
            assert_eq!(theirs, mine, "{method}");
            mine
        }
        other => panic!("{method}: {other:?}"),
    }
}

#[test]
fn both_clients_decode_the_same_replies() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    same::<_, pb::ServerMetadataResponse>(addr, "ServerMetadata", &pb::ServerMetadataRequest {});
    same::<_, pb::ServerReadyResponse>(addr, "ServerReady", &pb::ServerReadyRequest {});
    for model in ["simple", "identity_bytes", "repeat_int32"] {
        let meta = pb::ModelMetadataRequest {
            name: model.into(),
            version: String::new(),
        };
        let m: pb::ModelMetadataResponse = same(addr, "ModelMetadata", &meta);
        assert_eq!(m.name, model);
        let config = pb::ModelConfigRequest {
            name: model.into(),
            version: String::new(),
        };
        let c: pb::ModelConfigResponse = same(addr, "ModelConfig", &config);
        assert_eq!(c.config.unwrap().name, model);
    }
    // A large reply (above the 16 KiB frame size and the initial 64 KiB window): 40,000
    // FP32 values through identity_fp32.
    let data: Vec<u8> = (0..40_000u32)
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect();
    let req = infer_request(
        "identity_fp32",
        "7",
        &[("INPUT0", "FP32", &[1, 40_000], data.clone())],
    );
    let r: pb::ModelInferResponse = same(addr, "ModelInfer", &req);
    assert_eq!(r.raw_output_contents, vec![data]);
    assert_eq!(r.id, "7");
    // Statistics last: both reads see the same counters (no inference in between).
    let stats = pb::ModelStatisticsRequest::default();
    let s: pb::ModelStatisticsResponse = same(addr, "ModelStatistics", &stats);
    assert!(s.model_stats.iter().any(|m| m.inference_count == 2));
}

#[test]
fn both_clients_see_the_same_errors() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    let meta = pb::ModelMetadataRequest {
        name: "no_such_model".into(),
        version: String::new(),
    };
    let (theirs, mine) = both::<_, pb::ModelMetadataResponse>(addr, "ModelMetadata", &meta);
    let (code, message) = theirs.expect_err("h2 client sees the error");
    let mine = mine.expect_err("our client sees the error");
    assert!(mine.contains(&format!("gRPC status {code}")), "{mine}");
    assert!(mine.contains(&message), "{mine} vs {message}");
    // The same bytes framed by hand through the h2 client: still the same status.
    let reply = block_on(async {
        let mut client = connect(addr).await;
        client
            .call("ModelMetadata", frame(&meta.encode_to_vec(), None), None)
            .await
    });
    assert_eq!(reply.status, code);
}
