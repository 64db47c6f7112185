//! `load_inputs` end to end: flags, generated data, files and directories from `Config`.

use super::*;
use crate::service::triton_http::ConfigTensor;

fn meta_of(shape: Vec<i64>, dt: DataType) -> TensorMeta {
    TensorMeta {
        name: "IN".into(),
        datatype: dt,
        shape,
    }
}

/// A model like the reference server's `simple`: INT32 [16] x2, batching up to 8.
fn simple() -> (ModelMetadata, ModelConfig) {
    let t = |name: &str| TensorMeta {
        name: name.into(),
        datatype: DataType::I32,
        shape: vec![-1, 16],
    };
    let meta = ModelMetadata {
        name: "simple".into(),
        inputs: vec![t("INPUT0"), t("INPUT1")],
        outputs: vec![t("OUTPUT0"), t("OUTPUT1")],
        ..ModelMetadata::default()
    };
    let config = ModelConfig {
        max_batch_size: 8,
        ..ModelConfig::default()
    };
    (meta, config)
}

fn temp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("inferperf-inputs-{tag}-{}", std::process::id()))
}

#[test]
fn shapes_resolve_from_flags() {
    let mut cfg = Config::default();
    assert_eq!(
        resolve_shape(&meta_of(vec![-1, 16], DataType::I32), true, &cfg).unwrap(),
        vec![16]
    );
    assert!(resolve_shape(&meta_of(vec![-1, -1], DataType::F32), true, &cfg).is_err());
    cfg.shapes.push(("IN".into(), vec![7]));
    assert_eq!(
        resolve_shape(&meta_of(vec![-1, -1], DataType::F32), true, &cfg).unwrap(),
        vec![7]
    );
    let err = resolve_shape(&meta_of(vec![3], DataType::F32), false, &cfg).unwrap_err();
    assert!(err.msg.contains("--shape IN"), "{}", err.msg);
}

#[test]
fn generated_data_is_one_step() {
    let (meta, config) = simple();
    let cfg = Config {
        input_data: InputData::Zero,
        batch_size: 4,
        ..Config::default()
    };
    let set = load_inputs(&meta, &config, &cfg).unwrap();
    assert_eq!(set.streams.len(), 1);
    assert_eq!(set.steps(0), 1);
    assert!(!set.has_validation());
    assert!(set.generated);
    assert!(
        set.stream_steps().is_empty(),
        "generated data has no JSON streams"
    );
    let tensors = batch(&set, 0, 0, 4, true).unwrap();
    assert_eq!(tensors.len(), 2);
    assert_eq!(tensors[0].shape, vec![4, 16]);
    assert_eq!(tensors[0].data, vec![0; 4 * 64]);
}

#[test]
fn flag_errors() {
    let (meta, config) = simple();
    let rows: &[(Config, &str)] = &[
        (
            Config {
                batch_size: 9,
                ..Config::default()
            },
            "exceeds the model's max_batch_size 8",
        ),
        (
            Config {
                shapes: vec![("NOPE".into(), vec![1])],
                ..Config::default()
            },
            "--shape NOPE",
        ),
    ];
    for (cfg, needle) in rows {
        let err = load_inputs(&meta, &config, cfg).unwrap_err();
        assert!(err.msg.contains(needle), "{}", err.msg);
    }
    let unbatched = ModelConfig::default();
    let cfg = Config {
        batch_size: 2,
        ..Config::default()
    };
    let err = load_inputs(&meta, &unbatched, &cfg).unwrap_err();
    assert!(err.msg.contains("does not support batching"), "{}", err.msg);
    let fixed = InputOptions {
        fixed_schedule: true,
    };
    let err = load_inputs_with(&meta, &config, &Config::default(), fixed).unwrap_err();
    assert!(err.msg.contains("--fixed-schedule"), "{}", err.msg);
}

#[test]
fn shape_tensors_need_user_data_and_are_listed() {
    let (meta, mut config) = simple();
    config.inputs.push(ConfigTensor {
        name: "INPUT1".into(),
        is_shape_tensor: true,
        ..ConfigTensor::default()
    });
    let err = load_inputs(&meta, &config, &Config::default()).unwrap_err();
    assert!(
        err.msg
            .contains("can not generate data for shape tensor 'INPUT1'"),
        "{}",
        err.msg
    );
    let path = temp("shape-tensor.json");
    let ones = vec![1; 16];
    let text = serde_json::json!({"data": [{"INPUT0": ones, "INPUT1": ones}]}).to_string();
    std::fs::write(&path, text).unwrap();
    let cfg = Config {
        input_data: InputData::Files(vec![path.clone()]),
        ..Config::default()
    };
    let set = load_inputs(&meta, &config, &cfg).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(set.shape_tensors, vec!["INPUT1".to_string()]);
    let tensors = batch(&set, 0, 0, 2, true).unwrap();
    assert_eq!(tensors[0].shape, vec![2, 16]);
    assert_eq!(tensors[1].shape, vec![16], "shape tensors are not batched");
}

#[test]
fn files_and_directories_add_up_in_order() {
    let (meta, config) = simple();
    let dir = temp("dir-and-json");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sevens: Vec<u8> = (0..16).flat_map(|_| 7i32.to_le_bytes()).collect();
    std::fs::write(dir.join("INPUT0"), &sevens).unwrap();
    std::fs::write(dir.join("INPUT1"), &sevens).unwrap();
    let json = temp("dir-and-json.json");
    let step = |v: i32| serde_json::json!({"INPUT0": vec![v; 16], "INPUT1": vec![v; 16]});
    let text = serde_json::json!({"data": [step(1), step(2)]}).to_string();
    std::fs::write(&json, text).unwrap();
    let cfg = Config {
        input_data: InputData::Files(vec![dir.clone(), json.clone()]),
        ..Config::default()
    };
    let set = load_inputs(&meta, &config, &cfg).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&json).unwrap();
    assert_eq!(set.steps(0), 3);
    assert_eq!(set.stream_steps(), vec![3]);
    assert_eq!(set.streams[0][0].inputs[0].data, sevens);
    assert_eq!(set.streams[0][2].inputs[1].data[..4], 2i32.to_le_bytes());
}

#[test]
fn unreadable_file_names_itself() {
    let (meta, config) = simple();
    let cfg = Config {
        input_data: InputData::Files(vec![PathBuf::from("/no/such/data.json")]),
        ..Config::default()
    };
    let err = load_inputs(&meta, &config, &cfg).unwrap_err();
    assert!(err.msg.contains("/no/such/data.json"), "{}", err.msg);
    assert_eq!(err.exit_code(), 99);
}

#[test]
fn fuzz_entry_survives_odd_inputs() {
    for data in [
        &b""[..],
        b"{\"data\":[{\"INT\":{\"content\":[1],\"shape\":[1]}}]}",
        b"{\"data\":[[{\"INT\":[1]}]],\"validation_data\":[[{\"OUT\":[1]}]]}",
        b"{\"data\":[{\"INT\":{\"content\":[],\"shape\":[0]},\"timestamp\":[1]}]}",
        b"\xff\xfe",
    ] {
        fuzz_input_json(data);
    }
}
