use super::*;
use crate::protocol::grpc::message::MessageReader;

fn tensor(name: &str, dt: DataType, shape: Vec<i64>, data: Vec<u8>) -> InputTensor {
    InputTensor {
        name: name.into(),
        datatype: dt,
        shape,
        data,
    }
}

#[test]
fn infer_request_round_trips_through_the_framing() {
    let a: Vec<u8> = (0..16i32).flat_map(|v| v.to_le_bytes()).collect();
    let inputs = [tensor("INPUT0", DataType::I32, vec![1, 16], a.clone())];
    let bytes = encode_infer_request(
        "simple",
        "2",
        &inputs,
        &["OUTPUT0".into()],
        &[],
        Compression::None,
    )
    .unwrap();
    let mut reader = MessageReader::new();
    reader.push(&bytes).unwrap();
    let msg = reader.next_message().unwrap().expect("one whole message");
    assert!(!msg.compressed);
    let req: pb::ModelInferRequest = decode(msg.data, "test").unwrap();
    assert_eq!(
        (req.model_name.as_str(), req.model_version.as_str()),
        ("simple", "2")
    );
    assert_eq!(req.inputs[0].datatype, "INT32");
    assert_eq!(req.inputs[0].shape, [1, 16]);
    assert_eq!(req.outputs[0].name, "OUTPUT0");
    assert_eq!(req.raw_input_contents, vec![a]);
    let p = &req.parameters[EMPTY_FINAL_RESPONSE];
    assert_eq!(
        p.parameter_choice,
        Some(pb::infer_parameter::ParameterChoice::BoolParam(true))
    );
}

#[test]
fn infer_request_carries_parameters_and_compresses() {
    use pb::infer_parameter::ParameterChoice as P;
    let inputs = [tensor("IN", DataType::I32, vec![4], vec![7; 16])];
    let params = [
        ("max_tokens".to_string(), ParamValue::Int(256)),
        ("greedy".to_string(), ParamValue::Bool(true)),
        ("tag".to_string(), ParamValue::Str("a:b".into())),
        (EMPTY_FINAL_RESPONSE.to_string(), ParamValue::Bool(false)),
    ];
    for compression in [Compression::None, Compression::Gzip, Compression::Deflate] {
        let bytes = encode_infer_request("m", "", &inputs, &[], &params, compression).unwrap();
        let mut reader = MessageReader::new();
        reader.push(&bytes).unwrap();
        let msg = reader.next_message().unwrap().expect("one whole message");
        assert_eq!(msg.compressed, compression != Compression::None);
        let payload = match crate::protocol::grpc::compress::encoding_name(compression) {
            Some(name) => {
                crate::protocol::grpc::compress::decompress(name, msg.data, 1 << 20).unwrap()
            }
            None => msg.data.to_vec(),
        };
        let req: pb::ModelInferRequest = decode(&payload, "test").unwrap();
        let choice = |k: &str| req.parameters[k].parameter_choice.clone();
        assert_eq!(choice("max_tokens"), Some(P::Int64Param(256)));
        assert_eq!(choice("greedy"), Some(P::BoolParam(true)));
        assert_eq!(choice("tag"), Some(P::StringParam("a:b".into())));
        // A user's value wins over the default, as the last setting does in perf_analyzer.
        assert_eq!(choice(EMPTY_FINAL_RESPONSE), Some(P::BoolParam(false)));
    }
}

#[test]
fn responses_convert_to_the_http_structs() {
    let meta = pb::ModelMetadataResponse {
        name: "m".into(),
        versions: vec!["1".into()],
        inputs: vec![pb::model_metadata_response::TensorMetadata {
            name: "IN".into(),
            datatype: "FP32".into(),
            shape: vec![-1, 4],
        }],
        ..Default::default()
    };
    let m = to_model_metadata(meta).unwrap();
    assert_eq!(
        (m.inputs[0].datatype, m.inputs[0].shape.clone()),
        (DataType::F32, vec![-1, 4])
    );
    let bad = pb::ModelMetadataResponse {
        outputs: vec![pb::model_metadata_response::TensorMetadata {
            name: "O".into(),
            datatype: "FP8".into(),
            shape: vec![],
        }],
        ..Default::default()
    };
    assert!(to_model_metadata(bad)
        .unwrap_err()
        .msg
        .contains("output 'O'"));

    let cfg = pb::ModelConfig {
        name: "m".into(),
        max_batch_size: 8,
        input: vec![pb::ModelInput {
            name: "IN".into(),
            data_type: pb::DataType::TypeString as i32,
            optional: true,
            ..Default::default()
        }],
        scheduling_choice: Some(pb::model_config::SchedulingChoice::SequenceBatching(
            Default::default(),
        )),
        model_transaction_policy: Some(pb::ModelTransactionPolicy { decoupled: true }),
        response_cache: Some(pb::ModelResponseCache { enable: true }),
        ..Default::default()
    };
    let c = to_model_config(cfg);
    assert_eq!(c.max_batch_size, 8);
    assert!(c.decoupled && c.sequence_batching && c.response_cache && !c.is_ensemble);
    assert_eq!(c.inputs[0].data_type, Some(DataType::Bytes));
    assert!(c.inputs[0].optional);

    let stats = pb::ModelStatisticsResponse {
        model_stats: vec![pb::ModelStatistics {
            name: "m".into(),
            inference_count: 9,
            inference_stats: Some(pb::InferStatistics {
                queue: Some(pb::StatisticDuration { count: 3, ns: 300 }),
                ..Default::default()
            }),
            ..Default::default()
        }],
    };
    let s = to_model_stats(stats);
    assert_eq!(s[0].inference_count, 9);
    assert_eq!(s[0].queue, StatDuration { count: 3, ns: 300 });
    assert_eq!(s[0].success, StatDuration::default());
}

#[test]
fn outputs_follow_the_export_value_rules() {
    let resp = pb::ModelInferResponse {
        outputs: vec![
            pb::model_infer_response::InferOutputTensor {
                name: "A".into(),
                datatype: "INT32".into(),
                shape: vec![2],
                ..Default::default()
            },
            pb::model_infer_response::InferOutputTensor {
                name: "B".into(),
                datatype: "FP32".into(),
                shape: vec![1],
                ..Default::default()
            },
        ],
        raw_output_contents: vec![
            [1i32.to_le_bytes(), (-2i32).to_le_bytes()].concat(),
            0.5f32.to_le_bytes().to_vec(),
        ],
        ..Default::default()
    };
    assert_eq!(outputs_json(&resp), r#"{"A":[1,-2],"B":0.5}"#);
    assert!(decode::<pb::ModelInferResponse>(&[0xff], "ModelInfer")
        .unwrap_err()
        .msg
        .contains("ModelInfer"));
}
