//! JSON data files: every form perf_analyzer accepts and every error naming file, stream, step and
//! tensor.

use super::*;
use crate::tensor::DataType;

fn tensor(name: &str, datatype: DataType, dims: &[i64], optional: bool) -> TensorSpec {
    TensorSpec {
        name: name.into(),
        datatype,
        dims: dims.to_vec(),
        default_shape: dims.iter().all(|&d| d >= 0).then(|| dims.to_vec()),
        optional,
        shape_tensor: false,
    }
}

fn model(fixed_schedule: bool) -> ModelSpec {
    let mut shape = tensor("SH", DataType::I64, &[1], true);
    shape.shape_tensor = true;
    ModelSpec {
        inputs: vec![
            tensor("IN", DataType::I32, &[2], false),
            tensor("TXT", DataType::Bytes, &[-1], true),
            tensor("HALF", DataType::F16, &[-1], true),
            shape,
        ],
        outputs: vec![tensor("OUT", DataType::I32, &[2], true)],
        batched: true,
        fixed_schedule,
    }
}

fn parse(text: &str) -> Result<Vec<Vec<Step>>> {
    parse_with(text, false)
}

fn parse_with(text: &str, fixed: bool) -> Result<Vec<Vec<Step>>> {
    let mut acc = Collected::default();
    parse_json(text.as_bytes(), "d.json", &model(fixed), &mut acc)?;
    Ok(acc.streams)
}

fn i32s(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn flat_data_is_one_stream() {
    let streams = parse(r#"{"data": [{"IN": [1, 2]}, {"IN": [3, 4], "model": "x"}]}"#).unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].len(), 2);
    let input = &streams[0][1].inputs[0];
    assert_eq!((input.name.as_str(), input.datatype), ("IN", DataType::I32));
    assert_eq!(input.shape, vec![2]);
    assert_eq!(input.data, i32s(&[3, 4]));
    assert_eq!(streams[0][0].expected, None);
    assert_eq!(streams[0][0].timestamp_ms, None);
}

#[test]
fn multi_stream_data_and_validation() {
    let text = r#"{
        "data": [[{"IN": [1, 2]}, {"IN": [3, 4]}], [{"IN": [5, 6]}]],
        "validation_data": [[{"OUT": [2, 4]}, {"OUT": [6, 8]}], [{"OUT": [10, 12]}]]
    }"#;
    let streams = parse(text).unwrap();
    assert_eq!(streams.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 1]);
    let expected = streams[0][1].expected.as_ref().unwrap();
    assert_eq!(expected[0].name, "OUT");
    assert_eq!(expected[0].data, i32s(&[6, 8]));
    assert_eq!(streams[1][0].inputs[0].data, i32s(&[5, 6]));
}

#[test]
fn value_forms_of_the_spec() {
    let text = r#"{"data": [{
        "IN": {"content": [7, 8], "shape": [2]},
        "TXT": {"content": ["hello", "world"], "shape": [2]},
        "HALF": {"content": {"b64": "AAA8AA=="}, "shape": [2]},
        "SH": [4]
    }, {
        "IN": {"b64": "AQAAAAIAAAA="},
        "TXT": {"b64": "AQAAAHo=", "shape": [1]}
    }]}"#;
    let streams = parse(text).unwrap();
    let first = &streams[0][0];
    assert_eq!(first.inputs.len(), 4);
    assert_eq!(first.inputs[1].shape, vec![2]);
    assert_eq!(&first.inputs[1].data[..9], b"\x05\0\0\0hello");
    assert_eq!(first.inputs[2].data, vec![0, 0, 0x3c, 0]);
    assert_eq!(first.inputs[3].data, 4i64.to_le_bytes().to_vec());
    let second = &streams[0][1];
    assert_eq!(second.inputs[0].data, i32s(&[1, 2]));
    assert_eq!(second.inputs.len(), 2, "optional inputs may be left out");
}

#[test]
fn timestamps_in_fixed_schedule_mode() {
    let text = r#"{"data": [{"IN": [1, 2], "timestamp": [0]},
                             {"IN": [1, 2], "timestamp": {"content": [250], "shape": [1]}}]}"#;
    let streams = parse_with(text, true).unwrap();
    let times: Vec<_> = streams[0].iter().map(|s| s.timestamp_ms).collect();
    assert_eq!(times, vec![Some(0), Some(250)]);
    assert_eq!(
        streams[0][0].inputs.len(),
        1,
        "timestamp is not a model input"
    );
    let err = parse(text).unwrap_err();
    assert!(
        err.msg
            .contains("'timestamp' is not found in the model configuration"),
        "{}",
        err.msg
    );
    let err = parse_with(r#"{"data": [{"IN": [1, 2]}]}"#, true).unwrap_err();
    assert!(err.msg.contains("missing tensor timestamp"), "{}", err.msg);
    let err = parse_with(r#"{"data": [[{"IN": [1, 2], "timestamp": [1]}]]}"#, true).unwrap_err();
    assert!(err.msg.contains("--fixed-schedule"), "{}", err.msg);
}

#[test]
fn errors_name_file_stream_step_and_tensor() {
    let rows: &[(&str, &str)] = &[
        (
            r#"{"data": [{"IN": [1, 2]}, {"TXT": ["a"]}]}"#,
            "--input-data d.json: missing tensor IN (Location stream id: 0, step id: 1)",
        ),
        (
            r#"{"data": [[{"IN": [1, 2]}], [{"IN": [1, 2]}, {"IN": [1, 2, 3]}]]}"#,
            "mismatch in the data provided for IN. Expected: 8 bytes, Got: 12 bytes \
             (Location stream id: 1, step id: 1)",
        ),
        (
            r#"{"data": [{"IN": [1, 2], "EXTRA": [1]}]}"#,
            "The input or output 'EXTRA' is not found in the model configuration \
             (Location stream id: 0, step id: 0)",
        ),
        (
            r#"{"data": [{"IN": [1, 2], "OUT": [1, 2]}]}"#,
            "'OUT' is not found",
        ),
        (
            r#"{"data": [{"IN": [1, 2]}], "validation_data": [{"IN": [1, 2]}]}"#,
            "'IN' is not found",
        ),
        (
            r#"{"data": [{"IN": [1, 2]}], "validation_data": [{"OUT": [1]}]}"#,
            "mismatch in the data provided for OUT. Expected: 8 bytes, Got: 4 bytes",
        ),
        (
            r#"{"data": [{"IN": [1, 2]}, 5]}"#,
            "a step must be an object mapping input names to values (Location stream id: 0, \
             step id: 1)",
        ),
        (
            r#"{"data": [{"IN": [1, 2], "HALF": [1.0]}]}"#,
            "tensor HALF has datatype FP16",
        ),
        (
            r#"{"data": [{"IN": [1, "x"]}]}"#,
            "element 1 of tensor IN (INT32)",
        ),
        (
            r#"{"data": [{"IN": [1, 2], "TXT": ["a"]}]}"#,
            "variable-sized tensor \"TXT\"",
        ),
        (
            r#"{"nodata": []}"#,
            "d.json: The json file doesn't contain data field",
        ),
        (r#"{"data": {}}"#, "must be an array"),
        (r#"{"data": []}"#, "empty"),
        (r#"[1]"#, "top level must be an object"),
        (
            r#"{"data": [{"IN""#,
            "d.json: failed to parse the specified json file",
        ),
        (
            r#"{"data": [{"IN": [1, 2]}, [{"IN": [1, 2]}]]}"#,
            "Can not have a combination of objects and arrays",
        ),
        (r#"{"data": [[]]}"#, "stream 0 of \"data\" has no steps"),
        (
            r#"{"data": [{"IN": [1, 2]}], "validation_data": []}"#,
            "The 'validation_data' field doesn't align with 'data' field in the json file",
        ),
        (
            r#"{"data": [[{"IN": [1, 2]}]], "validation_data": [[{}, {}]]}"#,
            "doesn't align",
        ),
    ];
    for (text, needle) in rows {
        let err = parse(text).unwrap_err();
        assert!(err.msg.contains(needle), "{text}\n  gave: {}", err.msg);
        assert!(err.msg.starts_with("--input-data d.json: "), "{}", err.msg);
        assert_eq!(err.exit_code(), 99);
    }
}

#[test]
fn several_files_append() {
    let m = model(false);
    let mut acc = Collected::default();
    parse_json(br#"{"data": [{"IN": [1, 2]}]}"#, "a.json", &m, &mut acc).unwrap();
    parse_json(
        br#"{"data": [{"IN": [3, 4]}, {"IN": [5, 6]}]}"#,
        "b.json",
        &m,
        &mut acc,
    )
    .unwrap();
    assert_eq!(acc.streams.len(), 1);
    assert_eq!(acc.streams[0].len(), 3, "flat entries append to stream 0");
    let err = parse_json(br#"{"data": [[{"IN": [1, 2]}]]}"#, "c.json", &m, &mut acc).unwrap_err();
    assert!(
        err.msg.contains("c.json") && err.msg.contains("combination"),
        "{}",
        err.msg
    );

    let mut acc = Collected::default();
    parse_json(br#"{"data": [[{"IN": [1, 2]}]]}"#, "a.json", &m, &mut acc).unwrap();
    parse_json(
        br#"{"data": [[{"IN": [3, 4]}], [{"IN": [5, 6]}]]}"#,
        "b.json",
        &m,
        &mut acc,
    )
    .unwrap();
    assert_eq!(acc.streams.len(), 3, "streams append");
    assert_eq!(acc.streams[2][0].inputs[0].data, i32s(&[5, 6]));
}

#[test]
fn fuzz_model_reads_its_own_forms() {
    let mut acc = Collected::default();
    let text = br#"{"data": [{"INT": {"content": [1], "shape": [1]}, "FLAG": [true],
        "SHAPE": [3], "HALF": {"b64": "AAA="}}], "validation_data": [{"OUT": [1, 2]}]}"#;
    parse_json(text, "f.json", &fuzz_model(false), &mut acc).unwrap();
    assert_eq!(acc.streams[0][0].inputs.len(), 4);
}

#[test]
fn a_broken_file_names_the_place_and_quotes_a_short_excerpt() {
    let dir = std::env::temp_dir().join(format!("inferperf-json-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("broken.json");
    let mut text = br#"{"data": ["#.to_vec();
    text.extend(br#"{"IN": [1, 2]},"#.repeat(10_000));
    text.extend(b"\x1b[31m");
    std::fs::write(&path, &text).unwrap();
    let err = read_json_file(&path, &model(false), &mut Collected::default()).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    // The error is at the ESC, byte 150011; the 79 bytes before it are quoted with it.
    let before = std::str::from_utf8(&text[150_011 - 80..150_010]).unwrap();
    let want = format!(
        "--input-data {}: failed to parse the specified json file for reading provided data: \
         expected value at line 1 column 150011, near '...{before}\\x1b'",
        path.display(),
    );
    assert_eq!(err.msg, want);
}
