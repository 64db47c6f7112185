//! Input data for a run: generated (`--input-data random|zero`), JSON files
//! (`--input-data a.json --input-data b.json`) or a directory of raw tensor files, all read
//! into one [`InputSet`] of streams of steps. [`batch`] turns steps into a request's tensors;
//! [`check_outputs`] compares a response with the steps' validation data.
//!
//! Split by role: `model` (what the model expects), `value` (one JSON tensor value),
//! `json` and `directory` (the file formats), `file` and `lines` (bounded reading of input
//! files, whole or line by line), `generate` (random/zero), `batch`, `validation` (outputs
//! against expected data).

mod batch;
mod directory;
pub mod file;
mod generate;
mod json;
pub mod lines;
pub mod model;
pub mod openai;
#[cfg(feature = "llm")]
pub mod prompts;
#[cfg(feature = "llm")]
pub mod tokenizer;
pub(crate) mod validation;
mod value;

use std::path::PathBuf;

pub use batch::{batch, batch_expected, request_starts};
pub use generate::Rng;
pub use validation::{check_outputs, ResponseFormat};

use crate::config::{Config, InputData};
use crate::error::{Error, Result};
use crate::service::triton_http::{ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::DataType;
use json::Collected;
use model::ModelSpec;

/// One batch-1 tensor of a step (an input, or an expected output).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorValue {
    pub name: String,
    pub datatype: DataType,
    /// Without the batch dim. Expected outputs may keep a -1 where the model's dim is
    /// variable and the data file gave no shape.
    pub shape: Vec<i64>,
    /// Little-endian row-major bytes; BYTES elements carry 4-byte LE length prefixes.
    pub data: Vec<u8>,
}

/// One step of a stream: the values of one batch-1 request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// In model input order; optional inputs the data leaves out are absent.
    pub inputs: Vec<TensorValue>,
    /// `validation_data` (or output files of a data directory), in model output order.
    pub expected: Option<Vec<TensorValue>>,
    /// The `--fixed-schedule` pseudo-input: when to send, in ms since the start.
    pub timestamp_ms: Option<u64>,
}

/// All input data of a run: streams of steps (one stream unless the data is multi-stream).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputSet {
    /// Never empty, and no stream is empty, once [`load_inputs`] returns.
    pub streams: Vec<Vec<Step>>,
    /// Inputs the config marks `is_shape_tensor`: sent once per request, not batched.
    pub shape_tensors: Vec<String>,
    /// The data was generated (`random`/`zero`), not read from files: sequence lengths then
    /// come from `--sequence-length`, not from the steps of a stream.
    pub generated: bool,
}

impl InputSet {
    /// Steps of `stream` (0 when there is no such stream).
    pub fn steps(&self, stream: usize) -> usize {
        self.streams.get(stream).map_or(0, Vec::len)
    }

    /// Steps of each stream when the data came from files; empty for generated data (the
    /// form the sequence manager takes).
    pub fn stream_steps(&self) -> Vec<usize> {
        if self.generated {
            return Vec::new();
        }
        self.streams.iter().map(Vec::len).collect()
    }

    /// Some step carries validation data.
    pub fn has_validation(&self) -> bool {
        self.streams.iter().flatten().any(|s| s.expected.is_some())
    }
}

/// What the run mode adds to the data rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputOptions {
    /// `--fixed-schedule`: JSON data, one flat stream, a `timestamp` in every step.
    pub fixed_schedule: bool,
}

/// Reads the run's input data as `cfg` says (`--input-data`, `--shape`, `-b`, strings).
pub fn load_inputs(meta: &ModelMetadata, config: &ModelConfig, cfg: &Config) -> Result<InputSet> {
    load_inputs_with(meta, config, cfg, InputOptions::default())
}

/// The name `run` used before the data model had streams; same as [`load_inputs`].
pub use self::load_inputs as build_inputs;

/// [`load_inputs`] with mode-specific rules (`--fixed-schedule`).
pub fn load_inputs_with(
    meta: &ModelMetadata,
    config: &ModelConfig,
    cfg: &Config,
    opts: InputOptions,
) -> Result<InputSet> {
    check_flags(meta, config, cfg)?;
    let model = ModelSpec::new(meta, config, cfg, opts.fixed_schedule)?;
    let streams = match &cfg.input_data {
        InputData::Files(paths) => read_sources(paths, &model)?,
        InputData::Random | InputData::Zero if opts.fixed_schedule => {
            return Err(Error::usage(
                "--fixed-schedule needs --input-data <file.json> with a 'timestamp' in every \
                 step",
            ))
        }
        InputData::Random | InputData::Zero => vec![vec![generate::generated_step(&model, cfg)?]],
    };
    let shape_tensors = model
        .inputs
        .iter()
        .filter(|t| t.shape_tensor)
        .map(|t| t.name.clone())
        .collect();
    Ok(InputSet {
        streams,
        shape_tensors,
        generated: !matches!(cfg.input_data, InputData::Files(_)),
    })
}

/// `--shape` names real inputs; `-b` fits the model.
fn check_flags(meta: &ModelMetadata, config: &ModelConfig, cfg: &Config) -> Result<()> {
    for (name, _) in &cfg.shapes {
        if !meta.inputs.iter().any(|t| &t.name == name) {
            return Err(Error::usage(format!(
                "--shape {name}: the model has no input named '{name}'"
            )));
        }
    }
    let batched = config.max_batch_size > 0;
    if !batched && cfg.batch_size > 1 {
        return Err(Error::usage(format!(
            "-b {}: model '{}' does not support batching (max_batch_size 0)",
            cfg.batch_size, meta.name
        )));
    }
    if batched && cfg.batch_size > config.max_batch_size {
        return Err(Error::usage(format!(
            "-b {}: exceeds the model's max_batch_size {}",
            cfg.batch_size, config.max_batch_size
        )));
    }
    Ok(())
}

/// Every `--input-data` path in order: directories are one flat step, JSON files add their
/// steps or streams.
fn read_sources(paths: &[PathBuf], model: &ModelSpec) -> Result<Vec<Vec<Step>>> {
    let mut acc = Collected::default();
    for path in paths {
        if path.is_dir() {
            let step = directory::read_directory(path, model)?;
            acc.push_flat(&path.display().to_string(), vec![step])?;
        } else {
            json::read_json_file(path, model, &mut acc)?;
        }
    }
    if acc.streams.is_empty() {
        return Err(Error::usage("--input-data: no data was read"));
    }
    Ok(acc.streams)
}

/// The batch-1 shape of a model input: metadata dims without the batch dim, with `-1` dims
/// taken from `--shape`.
pub fn resolve_shape(meta: &TensorMeta, batched: bool, cfg: &Config) -> Result<Vec<i64>> {
    model::shape_from_flags(meta, batched, cfg)?.ok_or_else(|| {
        Error::usage(format!(
            "input {} contains dynamic shape, provide shapes to send along with the request \
             (--shape {}:d1,d2,...)",
            meta.name, meta.name
        ))
    })
}

/// Fuzz entry (`fuzz/fuzz_targets/input_json.rs`, also run on the seed corpus by
/// `tests/it/fuzz_corpus.rs`): any file content must give data or an error, never a panic,
/// through parsing, batching and output validation.
pub fn fuzz_input_json(data: &[u8]) {
    for fixed_schedule in [false, true] {
        let model = json::fuzz_model(fixed_schedule);
        let mut acc = Collected::default();
        if json::parse_json(data, "fuzz.json", &model, &mut acc).is_err() {
            continue;
        }
        let set = InputSet {
            streams: acc.streams,
            shape_tensors: vec!["SHAPE".into()],
            generated: false,
        };
        for stream in 0..set.streams.len() {
            for b in 1..=3 {
                let _ = batch(&set, stream, 1, b, true);
                if let Ok(Some(expected)) = batch_expected(&set, stream, 0, b, true) {
                    let _ = check_outputs(&expected, data, ResponseFormat::Http);
                }
            }
        }
    }
    for format in [
        ResponseFormat::Http,
        ResponseFormat::Grpc,
        ResponseFormat::GrpcStream,
    ] {
        let _ = check_outputs(&[], data, format);
    }
}

#[cfg(test)]
#[path = "inputs_tests.rs"]
mod tests;
