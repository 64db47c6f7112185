//! `--input-data <dir>`: one file per input, named exactly like it, holding one
//! batch-1 tensor; files named like outputs are validation data. The directory is one step.
//! Non-BYTES files are raw little-endian row-major bytes; BYTES files hold one element per
//! line (the line break is not part of the element, as with C++ `getline`).

use std::path::Path;

use super::model::{shape_text, ModelSpec, TensorSpec};
use super::value::check_size;
use super::{Step, TensorValue};
use crate::error::{Error, Result};
use crate::tensor::{push_bytes_element, DataType};

/// Reads the directory `dir` as one step.
pub fn read_directory(dir: &Path, model: &ModelSpec) -> Result<Step> {
    let shown = dir.display().to_string();
    let fail = |msg: String| Error::usage(format!("--input-data {shown}: {msg}"));
    if model.fixed_schedule {
        return Err(fail(
            "--fixed-schedule needs a timestamp per step, which a data directory cannot give; \
             use a JSON data file"
                .into(),
        ));
    }
    // Tensor names come from the server: one naming `/etc/passwd` or `../x` must not make
    // the client read (and send) a file outside the directory.
    for spec in model.inputs.iter().chain(&model.outputs) {
        if !is_plain_file_name(&spec.name) {
            return Err(fail(format!(
                "the model's tensor name '{}' is not a plain file name, so it cannot be read \
                 from a data directory; use a JSON data file",
                crate::text::escape_control(&spec.name)
            )));
        }
    }
    let entries = std::fs::read_dir(dir).map_err(|e| fail(format!("cannot list: {e}")))?;
    for entry in entries {
        let entry = entry.map_err(|e| fail(format!("cannot list: {e}")))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let known = model
            .inputs
            .iter()
            .chain(&model.outputs)
            .any(|t| t.name == name);
        if !known {
            return Err(fail(format!(
                "Provided data file '{name}' does not correspond to a valid model input or \
                 output."
            )));
        }
    }
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for spec in &model.inputs {
        let path = dir.join(&spec.name);
        if !path.exists() {
            if spec.optional {
                continue;
            }
            return Err(fail(format!(
                "no data file for input {} (expected '{}')",
                spec.name,
                path.display()
            )));
        }
        inputs.push(read_tensor_file(&path, spec, true).map_err(fail)?);
    }
    let mut expected = Vec::new();
    for spec in &model.outputs {
        let path = dir.join(&spec.name);
        if path.exists() {
            expected.push(read_tensor_file(&path, spec, false).map_err(fail)?);
        }
    }
    Ok(Step {
        inputs,
        expected: (!expected.is_empty()).then_some(expected),
        timestamp_ms: None,
    })
}

/// `name` joined to a directory names a file directly inside it.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// One tensor file. `need_shape`: the tensor must have a fully defined shape (inputs).
fn read_tensor_file(
    path: &Path,
    spec: &TensorSpec,
    need_shape: bool,
) -> std::result::Result<TensorValue, String> {
    let name = &spec.name;
    let raw =
        super::file::read_bounded(path).map_err(|e| format!("file '{}': {e}", path.display()))?;
    if raw.is_empty() {
        return Err(format!("file '{}' is empty", path.display()));
    }
    let shape = match &spec.default_shape {
        Some(shape) => shape.clone(),
        None if need_shape => {
            return Err(format!(
                "input {name} contains dynamic shape {}, provide shapes to send along with the \
                 request (--shape {name}:d1,d2,...)",
                shape_text(&spec.dims)
            ))
        }
        None => spec.dims.clone(),
    };
    let data = if spec.datatype == DataType::Bytes {
        frame_lines(&raw)
    } else {
        raw
    };
    if shape.iter().all(|&d| d >= 0) {
        check_size(name, spec.datatype, &shape, &data)
            .map_err(|e| format!("file '{}': {e}", path.display()))?;
    }
    Ok(TensorValue {
        name: name.clone(),
        datatype: spec.datatype,
        shape,
        data,
    })
}

/// Frames each line of a text file as one BYTES element; a final line break ends the last
/// line rather than starting an empty one.
fn frame_lines(text: &[u8]) -> Vec<u8> {
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() + 16);
    for line in body.split(|&b| b == b'\n') {
        push_bytes_element(&mut out, line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::triton_http::{ConfigTensor, ModelConfig, ModelMetadata, TensorMeta};

    fn model() -> ModelSpec {
        let meta = ModelMetadata {
            inputs: vec![
                TensorMeta {
                    name: "NUM".into(),
                    datatype: DataType::I32,
                    shape: vec![2],
                },
                TensorMeta {
                    name: "TEXT".into(),
                    datatype: DataType::Bytes,
                    shape: vec![3],
                },
                TensorMeta {
                    name: "OPT".into(),
                    datatype: DataType::U8,
                    shape: vec![1],
                },
            ],
            outputs: vec![TensorMeta {
                name: "OUT".into(),
                datatype: DataType::F32,
                shape: vec![-1],
            }],
            ..ModelMetadata::default()
        };
        let config = ModelConfig {
            inputs: vec![ConfigTensor {
                name: "OPT".into(),
                optional: true,
                ..ConfigTensor::default()
            }],
            ..ModelConfig::default()
        };
        ModelSpec::new(&meta, &config, &crate::config::Config::default(), false).unwrap()
    }

    fn dir_with(tag: &str, files: &[(&str, &[u8])]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("inferperf-inputs-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn reads_raw_bytes_lines_and_validation_files() {
        let num = [1i32.to_le_bytes(), 2i32.to_le_bytes()].concat();
        let out = 0.5f32.to_le_bytes();
        let dir = dir_with(
            "ok",
            &[("NUM", &num), ("TEXT", b"a\n\nccc\n"), ("OUT", &out)],
        );
        let step = read_directory(&dir, &model()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(step.inputs.len(), 2, "optional OPT left out");
        assert_eq!(step.inputs[0].data, num);
        assert_eq!(step.inputs[1].shape, vec![3]);
        let mut text = Vec::new();
        for e in [&b"a"[..], b"", b"ccc"] {
            push_bytes_element(&mut text, e);
        }
        assert_eq!(step.inputs[1].data, text);
        let expected = step.expected.unwrap();
        assert_eq!(expected[0].name, "OUT");
        assert_eq!(expected[0].data, out.to_vec());
    }

    #[test]
    fn tensor_names_that_are_paths_are_never_read() {
        let secret = dir_with("secret", &[("NUM", &[7u8; 8])]);
        let data = dir_with("data", &[("NUM", &[0u8; 8])]);
        let outside = secret.join("NUM").display().to_string();
        let escape = format!("../{}/NUM", secret.file_name().unwrap().to_string_lossy());
        for name in [outside.as_str(), escape.as_str(), "..", "a\\b"] {
            let mut m = model();
            m.inputs[0].name = name.to_string();
            let err = read_directory(&data, &m).unwrap_err();
            assert!(err.msg.contains("is not a plain file name"), "{}", err.msg);
        }
        std::fs::remove_dir_all(&secret).unwrap();
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn errors_name_the_directory_and_file() {
        let num = [0u8; 8];
        type Files<'a> = &'a [(&'a str, &'a [u8])];
        let rows: &[(&str, Files, &str)] = &[
            (
                "stray",
                &[("NUM", &num), ("TEXT", b"a\nb\nc"), ("EXTRA", b"x")],
                "'EXTRA' does not correspond",
            ),
            (
                "missing",
                &[("TEXT", b"a\nb\nc")],
                "no data file for input NUM",
            ),
            (
                "short",
                &[("NUM", &num[..6]), ("TEXT", b"a\nb\nc")],
                "Expected: 8 bytes, Got: 6 bytes",
            ),
            (
                "lines",
                &[("NUM", &num), ("TEXT", b"a\nb\n")],
                "Expected: 3 elements, Got: 2 elements",
            ),
            ("empty", &[("NUM", &num), ("TEXT", b"")], "is empty"),
        ];
        for (tag, files, needle) in rows {
            let dir = dir_with(tag, files);
            let err = read_directory(&dir, &model()).unwrap_err();
            std::fs::remove_dir_all(&dir).unwrap();
            assert!(err.msg.contains(needle), "{tag}: {}", err.msg);
            assert!(
                err.msg.contains(&dir.display().to_string()),
                "{tag}: {}",
                err.msg
            );
            assert_eq!(err.exit_code(), 99);
        }
    }

    #[test]
    fn a_tensor_file_over_the_bound_is_refused_unread() {
        let dir = dir_with("huge", &[("TEXT", b"a\nb\nc")]);
        let f = std::fs::File::create(dir.join("NUM")).unwrap();
        // Sparse: the size is over the bound, no byte of it is written.
        f.set_len(super::super::file::MAX_FILE_BYTES + 1).unwrap();
        let err = read_directory(&dir, &model()).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        let want = format!(
            "--input-data {}: file '{}': the file is larger than 1 GiB (the bound on an input \
             file)",
            dir.display(),
            dir.join("NUM").display()
        );
        assert_eq!(err.msg, want);
    }

    #[test]
    fn frames_lines_like_getline() {
        let mut want = Vec::new();
        push_bytes_element(&mut want, b"x");
        assert_eq!(frame_lines(b"x\n"), want);
        assert_eq!(frame_lines(b"x"), want);
        push_bytes_element(&mut want, b"");
        assert_eq!(frame_lines(b"x\n\n"), want);
    }
}
