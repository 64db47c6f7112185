//! End-to-end gRPC tests of the sequence model, the ensemble config and TraceSetting.

use super::test_client::*;
use super::wire::code;
use inferperf_wire::protocol::grpc::pb::inference as pb;
use pb::infer_parameter::ParameterChoice;

fn param(choice: ParameterChoice) -> pb::InferParameter {
    pb::InferParameter {
        parameter_choice: Some(choice),
    }
}

/// An `accumulate_int32` request with the given sequence parameters.
fn accumulate(
    value: i32,
    id: Option<ParameterChoice>,
    start: bool,
    end: bool,
) -> pb::ModelInferRequest {
    let mut req = infer_request(
        "accumulate_int32",
        "",
        &[("INPUT", "INT32", &[1], value.to_le_bytes().to_vec())],
    );
    if let Some(id) = id {
        req.parameters.insert("sequence_id".into(), param(id));
    }
    req.parameters.insert(
        "sequence_start".into(),
        param(ParameterChoice::BoolParam(start)),
    );
    req.parameters.insert(
        "sequence_end".into(),
        param(ParameterChoice::BoolParam(end)),
    );
    req
}

fn output(r: &pb::ModelInferResponse) -> i32 {
    let b = &r.raw_output_contents[0];
    i32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[test]
fn accumulate_over_grpc() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.expect("gRPC is on");
    block_on(async move {
        let mut c = connect(addr).await;
        let id = || Some(ParameterChoice::Int64Param(42));
        let text = || Some(ParameterChoice::StringParam("s1".into()));
        let steps = [
            (accumulate(4, id(), true, false), 4),
            (accumulate(7, text(), true, false), 7),
            (accumulate(5, id(), false, false), 9),
            (accumulate(-1, text(), false, true), 6),
            (accumulate(1, id(), false, true), 10),
        ];
        for (req, want) in steps {
            let r: pb::ModelInferResponse = c.unary("ModelInfer", &req).await.unwrap();
            assert_eq!(output(&r), want);
        }
        let violations = [
            (accumulate(1, None, true, false), "correlation ID"),
            (
                accumulate(1, id(), false, false),
                "inference request for sequence 42 to model 'accumulate_int32' must specify \
                 the START flag on the first request of the sequence",
            ),
            (
                accumulate(1, Some(ParameterChoice::Int64Param(-3)), true, false),
                "must not be negative",
            ),
            (
                accumulate(1, Some(ParameterChoice::BoolParam(true)), true, false),
                "'sequence_id' must be an int64, uint64 or string",
            ),
        ];
        for (req, want) in violations {
            let (status, msg) = c
                .unary::<_, pb::ModelInferResponse>("ModelInfer", &req)
                .await
                .unwrap_err();
            assert_eq!(status, code::INVALID_ARGUMENT, "{msg}");
            assert!(msg.contains(want), "{msg}");
        }
        // START on a live id restarts it, as on Triton.
        let live = accumulate(1, Some(ParameterChoice::Uint64Param(8)), true, false);
        let _: pb::ModelInferResponse = c.unary("ModelInfer", &live).await.unwrap();
        let again = accumulate(6, Some(ParameterChoice::Uint64Param(8)), true, false);
        let r: pb::ModelInferResponse = c.unary("ModelInfer", &again).await.unwrap();
        assert_eq!(output(&r), 6);
    });
    let counters = server.counters();
    assert_eq!(
        (
            counters.sequences_started,
            counters.sequences_ended,
            counters.sequences_live
        ),
        (4, 2, 1)
    );
    assert_eq!(server.sequences_restarted(), 1);
    assert_eq!(server.arrivals("accumulate_int32").len(), 11);
}

#[test]
fn ensemble_config_and_trace_setting_over_grpc() {
    let server = grpc_server(Vec::new(), Vec::new());
    let addr = server.grpc_addr.expect("gRPC is on");
    block_on(async move {
        let mut c = connect(addr).await;
        let q = pb::ModelConfigRequest {
            name: "ensemble_simple".into(),
            version: String::new(),
        };
        let r: pb::ModelConfigResponse = c.unary("ModelConfig", &q).await.unwrap();
        let config = r.config.unwrap();
        assert_eq!(config.platform, "ensemble");
        use pb::model_config::SchedulingChoice;
        let Some(SchedulingChoice::EnsembleScheduling(e)) = config.scheduling_choice else {
            panic!("ensemble scheduling expected");
        };
        let steps: Vec<(&str, i64)> = e
            .step
            .iter()
            .map(|s| (s.model_name.as_str(), s.model_version))
            .collect();
        assert_eq!(steps, [("simple", -1), ("identity_int32", -1)]);
        assert_eq!(e.step[0].output_map["OUTPUT0"], "sum");
        let q = pb::ModelConfigRequest {
            name: "accumulate_int32".into(),
            version: String::new(),
        };
        let r: pb::ModelConfigResponse = c.unary("ModelConfig", &q).await.unwrap();
        assert!(matches!(
            r.config.unwrap().scheduling_choice,
            Some(SchedulingChoice::SequenceBatching(_))
        ));
        let value = |v: &[&str]| pb::trace_setting_request::SettingValue {
            value: v.iter().map(|s| s.to_string()).collect(),
        };
        let q = pb::TraceSettingRequest {
            settings: [
                ("trace_level".to_string(), value(&["TIMESTAMPS"])),
                ("trace_rate".to_string(), value(&["20"])),
            ]
            .into_iter()
            .collect(),
            model_name: String::new(),
        };
        let r: pb::TraceSettingResponse = c.unary("TraceSetting", &q).await.unwrap();
        assert_eq!(r.settings["trace_rate"].value, ["20"]);
        assert_eq!(r.settings["trace_count"].value, ["-1"]);
        let bad = pb::TraceSettingRequest {
            settings: [("trace_count".to_string(), value(&["-9"]))]
                .into_iter()
                .collect(),
            model_name: "simple".into(),
        };
        let (status, msg) = c
            .unary::<_, pb::TraceSettingResponse>("TraceSetting", &bad)
            .await
            .unwrap_err();
        assert_eq!(status, code::INVALID_ARGUMENT, "{msg}");
        let unknown = pb::TraceSettingRequest {
            model_name: "nope".into(),
            ..Default::default()
        };
        let (status, _) = c
            .unary::<_, pb::TraceSettingResponse>("TraceSetting", &unknown)
            .await
            .unwrap_err();
        assert_eq!(status, code::NOT_FOUND);
    });
    let last = server.last_trace_update().unwrap();
    assert_eq!(last.model, None);
    assert_eq!(last.settings["trace_level"], vec!["TIMESTAMPS"]);
    assert_eq!(server.trace_updates().len(), 1);
}
