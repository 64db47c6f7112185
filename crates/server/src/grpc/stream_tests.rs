//! End-to-end tests of ModelStreamInfer: ordering, ids, errors, the decoupled repeat model,
//! delays, and statistics.

use std::time::{Duration, Instant};

use super::test_client::*;
use crate::test_client as http;
use crate::Delay;
use inferperf_wire::protocol::grpc::pb::inference as pb;

fn fp32_request(id: &str, value: f32) -> pb::ModelInferRequest {
    infer_request(
        "identity_fp32",
        id,
        &[("INPUT0", "FP32", &[1, 1], value.to_le_bytes().to_vec())],
    )
}

fn u32_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
}

#[test]
fn requests_on_one_stream_answer_in_order_with_ids() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        s.send(&fp32_request("a", 1.0));
        s.send(&infer_request("nope", "b", &[]));
        s.send(&fp32_request("c", 3.0));
        let mut bad_shape = fp32_request("d", 4.0);
        bad_shape.inputs[0].shape = vec![1];
        s.send(&bad_shape);
        s.send(&fp32_request("e", 5.0));
        s.close();
        let mut got = Vec::new();
        while let Some(r) = s.next().await {
            let resp = r.infer_response.expect("every response names its request");
            got.push((
                resp.id.clone(),
                r.error_message.clone(),
                resp.raw_output_contents.clone(),
            ));
            if r.error_message.is_empty() {
                assert_eq!(final_flag(&resp), Some(true), "{}", resp.id);
            }
        }
        assert_eq!(s.status().await, (0, String::new()));
        let ids: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e"]);
        assert!(got[1].1.contains("unknown model: 'nope'"), "{}", got[1].1);
        assert!(
            got[3].1.contains("unexpected shape for input 'INPUT0'"),
            "{}",
            got[3].1
        );
        assert_eq!(got[4].2, vec![5.0f32.to_le_bytes().to_vec()]);
        assert!(got[0].1.is_empty() && got[2].1.is_empty());
    });
    let c = server.counters();
    let m = c.model("identity_fp32").unwrap();
    assert_eq!((m.inferences, m.failures), (3, 1));
    assert_eq!(c.grpc_calls, 1);
}

/// Reads the responses of one repeat request, up to its final one or `limit` of them:
/// (OUT, IDX, final flag, arrival).
async fn collect(s: &mut Stream, limit: usize) -> Vec<(Option<i32>, Option<u32>, bool, Instant)> {
    let mut responses = Vec::new();
    while responses.len() < limit {
        let Some(r) = s.next().await else { break };
        assert!(r.error_message.is_empty(), "{}", r.error_message);
        let resp = r.infer_response.unwrap();
        let arrived = Instant::now();
        let is_final = final_flag(&resp).expect("decoupled responses carry the flag");
        let (out, idx) = match resp.raw_output_contents.as_slice() {
            [] => (None, None),
            [out, idx] => {
                assert_eq!(resp.outputs[0].name, "OUT");
                assert_eq!(resp.outputs[1].datatype, "UINT32");
                (Some(u32_of(out) as i32), Some(u32_of(idx)))
            }
            other => panic!("unexpected outputs {other:?}"),
        };
        assert_eq!(resp.id, "rep");
        responses.push((out, idx, is_final, arrived));
        if is_final {
            break;
        }
    }
    responses
}

#[test]
fn repeat_model_sends_one_response_per_element() {
    let gap = Duration::from_millis(15);
    let server = grpc_server(vec![("repeat_int32".into(), Delay::Fixed(gap))], Vec::new());
    let addr = server.grpc_addr.unwrap();
    block_on(async move {
        let mut c = connect(addr).await;
        let mut s = c.stream().await;
        for empty_final in [true, false] {
            let sent = Instant::now();
            s.send(&repeat_request("rep", &[7, -8, 9], empty_final));
            let got = collect(&mut s, 3 + usize::from(empty_final)).await;
            let data: Vec<(Option<i32>, Option<u32>, bool)> =
                got.iter().map(|g| (g.0, g.1, g.2)).collect();
            let mut want = vec![
                (Some(7), Some(0), false),
                (Some(-8), Some(1), false),
                (Some(9), Some(2), false),
            ];
            if empty_final {
                want.push((None, None, true));
            }
            assert_eq!(data, want, "empty_final={empty_final}");
            assert!(got[0].3 - sent >= gap, "the first response waits one gap");
            for pair in got[..3].windows(2) {
                let between = pair[1].3 - pair[0].3;
                // Arrival gaps can shrink by scheduling jitter on the client side only.
                assert!(between >= gap - Duration::from_millis(3), "{between:?}");
            }
        }
        // N = 0: nothing, or the empty final response alone when asked for; the request
        // sent first answers nothing (the next response belongs to the second).
        s.send(&repeat_request("none", &[], false));
        s.send(&repeat_request("rep", &[], true));
        let got = collect(&mut s, 2).await;
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1, got[0].2), (None, None, true));
        s.close();
        assert!(s.next().await.is_none());
        assert_eq!(s.status().await.0, 0);
    });
    let c = server.counters();
    let m = c.model("repeat_int32").unwrap();
    assert_eq!(
        m.input_bytes,
        2 * 3 * 4,
        "IN bytes of the two 3-element requests"
    );
    assert_eq!(
        (m.infer_requests, m.inferences, m.failures),
        (4, 4, 0),
        "one success per request"
    );
    // Each request's success time runs to its final response: at least 3 gaps for N = 3.
    let mut h = http::Client::connect(server.addr);
    let stats = h
        .request(&http::get("/v2/models/repeat_int32/stats"))
        .json();
    let success_ns = stats["model_stats"][0]["inference_stats"]["success"]["ns"]
        .as_u64()
        .unwrap();
    assert!(success_ns >= 6 * gap.as_nanos() as u64, "{success_ns}");
}

#[test]
fn http_refuses_the_decoupled_model() {
    let server = grpc_server(Vec::new(), Vec::new());
    let mut h = http::Client::connect(server.addr);
    let body = r#"{"inputs":[{"name":"IN","datatype":"INT32","shape":[2],"data":[1,2]}]}"#;
    let resp = h.request(&http::post_json("/v2/models/repeat_int32/infer", body));
    assert_eq!(resp.status, 400);
    assert!(
        resp.error().contains("model 'repeat_int32' is decoupled"),
        "{}",
        resp.error()
    );
    let config = h
        .request(&http::get("/v2/models/repeat_int32/config"))
        .json();
    assert_eq!(config["model_transaction_policy"]["decoupled"], true);
    assert_eq!(server.counters().model("repeat_int32").unwrap().failures, 1);
}

#[test]
fn serial_delay_applies_to_grpc() {
    let delay = Duration::from_millis(20);
    let server = grpc_server(
        vec![("identity_fp32".into(), Delay::Fixed(delay))],
        vec!["identity_fp32".into()],
    );
    let addr = server.grpc_addr.unwrap();
    let took = block_on(async move {
        let started = Instant::now();
        // Two streams at once: with one serial instance the second waits for the first.
        let mut c = connect(addr).await;
        let (mut s1, mut s2) = (c.stream().await, c.stream().await);
        s1.send(&fp32_request("1", 1.0));
        s2.send(&fp32_request("2", 2.0));
        assert!(s1.next().await.unwrap().error_message.is_empty());
        assert!(s2.next().await.unwrap().error_message.is_empty());
        started.elapsed()
    });
    assert!(took >= 2 * delay, "{took:?}");
    let mut h = http::Client::connect(server.addr);
    let stats = h
        .request(&http::get("/v2/models/identity_fp32/stats"))
        .json();
    let queue_ns = stats["model_stats"][0]["inference_stats"]["queue"]["ns"]
        .as_u64()
        .unwrap();
    assert!(
        queue_ns >= delay.as_nanos() as u64 / 2,
        "the second request queued: {queue_ns}"
    );
}
