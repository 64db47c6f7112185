use super::*;

// The fixed answers of the nginx peer (`benches/peers/nginx/`), as it serves them.
const NGINX_CONFIG: &str = include_str!("../../../../benches/peers/nginx/config.json");
const NGINX_METADATA: &str = include_str!("../../../../benches/peers/nginx/metadata.json");
const NGINX_SERVER: &str = r#"{"name":"nginx-fixed","version":"0","extensions":[]}"#;

/// The shape of Triton's own config JSON: many extra sections, 64-bit integers as strings.
const TRITON_CONFIG: &str = r#"{"name":"seq","platform":"onnxruntime_onnx","backend":"onnxruntime",
 "version_policy":{"latest":{"num_versions":1}},"max_batch_size":8,
 "input":[{"name":"IN","data_type":"TYPE_INT32","format":"FORMAT_NONE","dims":["-1","4"],
   "is_shape_tensor":false,"allow_ragged_batch":false,"optional":true}],
 "output":[{"name":"OUT","data_type":"TYPE_STRING","dims":[1],"label_filename":"","is_shape_tensor":false}],
 "sequence_batching":{"max_sequence_idle_microseconds":"1000000","control_input":[]},
 "instance_group":[{"name":"seq_0","kind":"KIND_CPU","count":1}],
 "model_transaction_policy":{"decoupled":true},"response_cache":{"enable":true},
 "parameters":{},"model_warmup":[]}"#;

const ENSEMBLE_CONFIG: &str = r#"{"name":"ens","platform":"ensemble","max_batch_size":"4",
 "input":[],"output":[],"dynamic_batching":{},
 "ensemble_scheduling":{"step":[{"model_name":"pre","model_version":"-1","input_map":{}},
                                {"model_name":"main","model_version":2}]}}"#;

#[test]
fn parses_the_nginx_files() {
    let server = parse_server_metadata(NGINX_SERVER.as_bytes()).unwrap();
    assert_eq!(
        server,
        ServerMetadata {
            name: "nginx-fixed".into(),
            version: "0".into(),
            extensions: vec![]
        }
    );

    let meta = parse_model_metadata(NGINX_METADATA.as_bytes()).unwrap();
    let tensor = |name: &str| TensorMeta {
        name: name.into(),
        datatype: DataType::F32,
        shape: vec![16],
    };
    assert_eq!(
        meta,
        ModelMetadata {
            name: "identity".into(),
            versions: vec!["1".into()],
            platform: "identity".into(),
            inputs: vec![tensor("INPUT0")],
            outputs: vec![tensor("OUTPUT0")],
        }
    );

    let config = parse_model_config(NGINX_CONFIG.as_bytes()).unwrap();
    let tensor = |name: &str| ConfigTensor {
        name: name.into(),
        data_type: Some(DataType::F32),
        dims: vec![16],
        ..ConfigTensor::default()
    };
    let want = ModelConfig {
        name: "identity".into(),
        backend: "identity".into(),
        inputs: vec![tensor("INPUT0")],
        outputs: vec![tensor("OUTPUT0")],
        ..ModelConfig::default()
    };
    assert_eq!(config, want);
}

#[test]
fn parses_triton_style_configs() {
    let config = parse_model_config(TRITON_CONFIG.as_bytes()).unwrap();
    assert_eq!(config.max_batch_size, 8);
    assert!(config.decoupled && config.sequence_batching && config.response_cache);
    assert!(!config.dynamic_batching && !config.is_ensemble);
    assert_eq!(
        config.inputs,
        vec![ConfigTensor {
            name: "IN".into(),
            optional: true,
            is_shape_tensor: false,
            data_type: Some(DataType::I32),
            dims: vec![-1, 4],
        }]
    );
    assert_eq!(config.outputs[0].data_type, Some(DataType::Bytes));

    let ensemble = parse_model_config(ENSEMBLE_CONFIG.as_bytes()).unwrap();
    assert!(ensemble.is_ensemble && ensemble.dynamic_batching);
    assert_eq!(ensemble.max_batch_size, 4);
    assert_eq!(
        ensemble.ensemble_steps,
        vec![
            EnsembleStep {
                model_name: "pre".into(),
                model_version: -1
            },
            EnsembleStep {
                model_name: "main".into(),
                model_version: 2
            },
        ]
    );
    // Everything optional may be absent.
    assert_eq!(parse_model_config(b"{}").unwrap(), ModelConfig::default());
}

/// Checks each `(body, want)`: `parse` fails on `body` with a message containing `want`.
fn check_errors(parse: fn(&[u8]) -> crate::error::Result<()>, cases: &[(&str, &str)]) {
    for (body, want) in cases {
        let err = parse(body.as_bytes()).unwrap_err();
        assert!(err.msg.contains(want), "{body}: {}", err.msg);
    }
}

#[test]
fn server_metadata_errors_name_the_document_and_field() {
    check_errors(
        |b| parse_server_metadata(b).map(|_| ()),
        &[
            (
                "not json",
                "server metadata from the server is not valid JSON",
            ),
            (
                "[]",
                "server metadata from the server: the document is not an object",
            ),
            (
                r#"{"extensions":"x"}"#,
                "field 'extensions' is not an array",
            ),
        ],
    );
}

#[test]
fn model_metadata_errors_name_the_document_and_field() {
    check_errors(
        |b| parse_model_metadata(b).map(|_| ()),
        &[
            (
                r#"{"inputs":[],"outputs":[]}"#,
                "model metadata from the server: field 'name' is missing",
            ),
            (r#"{"name":"m","outputs":[]}"#, "field 'inputs' is missing"),
            (
                r#"{"name":"m","inputs":[{"name":"a","shape":[1]}],"outputs":[]}"#,
                "field 'inputs[0].datatype' is missing",
            ),
            (
                r#"{"name":"m","inputs":[{"name":"a","datatype":"FP32"}],"outputs":[]}"#,
                "field 'inputs[0].shape' is missing",
            ),
            (
                r#"{"name":"m","inputs":[],"outputs":[{"name":"o","datatype":"FP9","shape":[]}]}"#,
                "field 'outputs[0].datatype' is invalid",
            ),
            (
                r#"{"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":["x"]}],"outputs":[]}"#,
                "field 'inputs[0].shape' holds a non-integer",
            ),
        ],
    );
}

#[test]
fn model_config_errors_name_the_document_and_field() {
    check_errors(
        |b| parse_model_config(b).map(|_| ()),
        &[
            (
                r#"{"max_batch_size":-1}"#,
                "field 'max_batch_size' is negative",
            ),
            (
                r#"{"max_batch_size":1.5}"#,
                "field 'max_batch_size' is not an integer",
            ),
            (
                r#"{"input":[{"dims":[1]}]}"#,
                "model config from the server: field 'input[0].name' is missing",
            ),
            (
                r#"{"model_transaction_policy":{"decoupled":"yes"}}"#,
                "field 'model_transaction_policy.decoupled' is not a boolean",
            ),
            (
                r#"{"ensemble_scheduling":{"step":[{}]}}"#,
                "field 'ensemble_scheduling.step[0].model_name' is missing",
            ),
        ],
    );
}
