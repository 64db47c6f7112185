use super::*;
use crate::tensor::push_bytes_element;

/// `request_inputs` of the reference export (profile_export_http_concurrency.json).
const SAMPLE_INPUTS: &str = r#"{"INPUT0":[1.8521564417127637e+31,-9.816348528062273e+26,-1.3273038267438975e-12,29181.97265625,-1.7261117902572557e+34,-1.4292351507975655e-30,3.2162518663361274e+21,-8.338885177111754e-23,-8.415989213972352e-06,2.298869434023936e+16,4.3092182688325235e-25,-3829590392832.0,-26329.333984375,1.6779504547547165e-28,15.28175163269043,-3.3137849261140026e-34]}"#;
/// The nginx reference server's infer response and the export's `response_outputs` entry.
const NGINX_INFER: &str = r#"{"model_name":"identity","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[16],"data":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}]}"#;
const SAMPLE_OUTPUTS: &str =
    r#"{"OUTPUT0":[0.0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0,11.0,12.0,13.0,14.0,15.0]}"#;

fn tensor(name: &str, datatype: DataType, shape: &[i64], data: Vec<u8>) -> InputTensor {
    InputTensor {
        name: name.into(),
        datatype,
        shape: shape.to_vec(),
        data,
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn floats_print_like_the_reference_export() {
    let cases: &[(f64, &str)] = &[
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (15.0, "15.0"),
        (0.5, "0.5"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-5, "1.5e-05"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.5e100, "1.5e+100"),
        (-3829590392832.0, "-3829590392832.0"),
        (123.456, "123.456"),
        (f64::NAN, "null"),
        (f64::INFINITY, "null"),
    ];
    for (value, want) in cases {
        let mut out = String::new();
        push_f64(&mut out, *value);
        assert_eq!(out, *want, "value {value}");
    }
}

#[test]
fn inputs_json_matches_the_sample_export() {
    let header = "{\"INPUT0\":[";
    let values: Vec<f32> = SAMPLE_INPUTS[header.len()..SAMPLE_INPUTS.len() - 2]
        .split(',')
        .map(|v| v.parse::<f64>().unwrap() as f32)
        .collect();
    assert_eq!(values.len(), 16);
    let input = tensor("INPUT0", DataType::F32, &[16], f32_bytes(&values));
    assert_eq!(inputs_json(&[input]), SAMPLE_INPUTS);
}

#[test]
fn export_values_per_datatype() {
    let mut two_strings = Vec::new();
    push_bytes_element(&mut two_strings, b"ab");
    push_bytes_element(&mut two_strings, b"c");
    let cases: Vec<(DataType, Vec<u8>, &str)> = vec![
        (DataType::I32, 7i32.to_le_bytes().to_vec(), "7"),
        (
            DataType::I32,
            [(-1i32).to_le_bytes(), 2i32.to_le_bytes()].concat(),
            "[-1,2]",
        ),
        (
            DataType::U64,
            u64::MAX.to_le_bytes().to_vec(),
            "18446744073709551615",
        ),
        (DataType::I8, vec![0xff, 1], "[-1,1]"),
        (DataType::U16, vec![1, 1], "257"),
        (DataType::Bool, vec![1, 0, 2], "[true,false,true]"),
        (DataType::F64, 0.25f64.to_le_bytes().to_vec(), "0.25"),
        (DataType::F32, f32_bytes(&[0.1]), "0.10000000149011612"),
        (DataType::F16, vec![0, 60], "\"\""),
        (DataType::Bf16, vec![0, 60, 0, 60], "\"\""),
        (DataType::I32, vec![], "\"\""),
        (DataType::Bytes, vec![], "\"\""),
        // Only the first length prefix is stripped; the second stays embedded.
        (
            DataType::Bytes,
            two_strings,
            "\"ab\\u0001\\u0000\\u0000\\u0000c\"",
        ),
        (
            DataType::Bytes,
            vec![3, 0, 0, 0, b'"', 0xff, b'x'],
            "\"\\\"\u{fffd}x\"",
        ),
    ];
    for (datatype, raw, want) in cases {
        let mut out = String::new();
        push_export_value(&mut out, datatype, &raw);
        assert_eq!(out, want, "{datatype:?} {raw:?}");
    }
}

#[test]
fn decodes_json_outputs_like_the_sample() {
    assert_eq!(
        decode_outputs_json(NGINX_INFER.as_bytes(), None).unwrap(),
        SAMPLE_OUTPUTS
    );
    let nested = r#"{"outputs":[{"name":"A","datatype":"INT64","shape":[2,1],"data":[[5],[6]]},
        {"name":"B","datatype":"FP32","shape":[1],"data":[0.1]},
        {"name":"C","datatype":"BYTES","shape":[2],"data":["hi","x"]},
        {"name":"D","datatype":"BOOL","shape":[1],"data":[true]}]}"#;
    assert_eq!(
        decode_outputs_json(nested.as_bytes(), None).unwrap(),
        r#"{"A":[5,6],"B":0.10000000149011612,"C":"hi\u0001\u0000\u0000\u0000x","D":true}"#
    );
    assert_eq!(
        decode_outputs_json(b"{\"model_name\":\"m\"}", None).unwrap(),
        "{}"
    );
}

#[test]
fn decodes_binary_outputs() {
    let header = r#"{"outputs":[{"name":"X","datatype":"INT32","shape":[2],"parameters":{"binary_data_size":8}},{"name":"Y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}"#;
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
    push_bytes_element(&mut body, b"ok");
    let want = r#"{"X":[1,2],"Y":"ok"}"#;
    assert_eq!(
        decode_outputs_json(&body, Some(header.len())).unwrap(),
        want
    );
    // Without the header length, the JSON's own end is found.
    assert_eq!(decode_outputs_json(&body, None).unwrap(), want);
}

#[test]
fn rejects_broken_responses() {
    let cases: &[(&[u8], Option<usize>, &str)] = &[
        (b"{}", Some(10), "exceeds the body length"),
        (b"", None, "empty body"),
        (b"{\"outputs\":[", None, "EOF"),
        (b"{\"outputs\":[{\"datatype\":\"FP32\"}]}", None, "missing field 'outputs[0].name'"),
        (b"{\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP8\"}]}", None, "output 'O'"),
        (
            b"{\"outputs\":[{\"name\":\"O\",\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":4}}]}ab",
            None,
            "binary_data_size exceeds",
        ),
    ];
    for (body, len, want) in cases {
        let err = decode_outputs_json(body, *len).unwrap_err();
        assert!(
            err.msg.contains(want),
            "{:?}: {}",
            String::from_utf8_lossy(body),
            err.msg
        );
    }
}

#[test]
fn request_data_arrays() {
    let mut strings = Vec::new();
    push_bytes_element(&mut strings, b"a\"b");
    push_bytes_element(&mut strings, b"");
    let ok_cases = vec![
        (
            tensor(
                "I",
                DataType::I32,
                &[1, 2],
                [3i32.to_le_bytes(), (-4i32).to_le_bytes()].concat(),
            ),
            "[3,-4]",
        ),
        (tensor("B", DataType::Bool, &[1], vec![1]), "[true]"),
        (
            tensor("S", DataType::Bytes, &[2], strings),
            "[\"a\\\"b\",\"\"]",
        ),
        (
            tensor("F", DataType::F32, &[1], f32_bytes(&[1e20])),
            "[1.0000000200408773e+20]",
        ),
    ];
    for (input, want) in ok_cases {
        check_input(&input).unwrap();
        let mut out = String::new();
        push_request_data(&mut out, &input).unwrap();
        assert_eq!(out, want, "{}", input.name);
    }
    let bad_cases = vec![
        (
            tensor("H", DataType::F16, &[1], vec![0, 0]),
            "input 'H' has datatype FP16",
        ),
        (
            tensor("N", DataType::F32, &[1], f32_bytes(&[f32::NAN])),
            "element 0 is NaN",
        ),
        (
            tensor("U", DataType::Bytes, &[1], vec![1, 0, 0, 0, 0xff]),
            "element 0 is not UTF-8",
        ),
    ];
    for (input, want) in bad_cases {
        let err = push_request_data(&mut String::new(), &input).unwrap_err();
        assert!(
            err.msg.contains(want) && err.msg.contains("--input-tensor-format"),
            "{}",
            err.msg
        );
    }
}

#[test]
fn checks_data_against_shape() {
    let cases = vec![
        (tensor("A", DataType::I32, &[1, 2], vec![0; 8]), Ok(2)),
        (
            tensor("A", DataType::I32, &[1, 2], vec![0; 7]),
            Err("needs 8 bytes of data, got 7"),
        ),
        (
            tensor("A", DataType::I32, &[-1, 2], vec![0; 8]),
            Err("undefined dimension"),
        ),
        (tensor("S", DataType::Bytes, &[1], vec![0, 0, 0, 0]), Ok(1)),
        (
            tensor("S", DataType::Bytes, &[2], vec![0, 0, 0, 0]),
            Err("needs 2 length-prefixed"),
        ),
        (
            tensor("S", DataType::Bytes, &[1], vec![9, 0, 0, 0]),
            Err("needs 1 length-prefixed"),
        ),
    ];
    for (input, want) in cases {
        match (check_input(&input), want) {
            (Ok(n), Ok(m)) => assert_eq!(n, m),
            (Err(e), Err(text)) => assert!(e.msg.contains(text), "{}", e.msg),
            (got, want) => panic!("{}: got {got:?}, want {want:?}", input.name),
        }
    }
}
