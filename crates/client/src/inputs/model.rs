//! The model's tensors as the input loaders see them: batch-1 dims, the shape `--shape`
//! gives, and the config flags (optional, shape tensor) that change how data is read.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::service::triton_http::{ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::DataType;

/// Name of the `--fixed-schedule` pseudo-input (UINT64, ms since the start of the run).
pub const TIMESTAMP_INPUT: &str = "timestamp";

/// One model input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub datatype: DataType,
    /// Model dims without the batch dim; -1 marks a variable dim.
    pub dims: Vec<i64>,
    /// The shape used when a step gives none: `--shape`, else `dims` when fully defined.
    pub default_shape: Option<Vec<i64>>,
    /// The config marks the input `optional`: steps may leave it out.
    pub optional: bool,
    /// The config marks the input `is_shape_tensor`: sent once per request, never batched.
    pub shape_tensor: bool,
}

/// Everything the loaders check data against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    /// `max_batch_size > 0`: shapes in the metadata carry a leading batch dim.
    pub batched: bool,
    /// `--fixed-schedule`: every step carries the `timestamp` pseudo-input.
    pub fixed_schedule: bool,
}

impl ModelSpec {
    /// Builds the spec from the model's metadata and config plus `--shape`.
    pub fn new(
        meta: &ModelMetadata,
        config: &ModelConfig,
        cfg: &Config,
        fixed_schedule: bool,
    ) -> Result<ModelSpec> {
        let batched = config.max_batch_size > 0;
        check_dims(meta)?;
        let mut inputs = Vec::with_capacity(meta.inputs.len());
        for t in &meta.inputs {
            let conf = config.inputs.iter().find(|c| c.name == t.name);
            inputs.push(TensorSpec {
                name: t.name.clone(),
                datatype: t.datatype,
                dims: batch1_dims(t, batched).to_vec(),
                default_shape: shape_from_flags(t, batched, cfg)?,
                optional: conf.is_some_and(|c| c.optional),
                shape_tensor: conf.is_some_and(|c| c.is_shape_tensor),
            });
        }
        let outputs = meta
            .outputs
            .iter()
            .map(|t| {
                let dims = batch1_dims(t, batched).to_vec();
                TensorSpec {
                    name: t.name.clone(),
                    datatype: t.datatype,
                    default_shape: dims.iter().all(|&d| d >= 0).then(|| dims.clone()),
                    dims,
                    optional: true,
                    shape_tensor: false,
                }
            })
            .collect();
        Ok(ModelSpec {
            inputs,
            outputs,
            batched,
            fixed_schedule,
        })
    }

    /// The spec of the `timestamp` pseudo-input, read like any UINT64 `[1]` input.
    pub fn timestamp_spec() -> TensorSpec {
        TensorSpec {
            name: TIMESTAMP_INPUT.into(),
            datatype: DataType::U64,
            dims: vec![1],
            default_shape: Some(vec![1]),
            optional: false,
            shape_tensor: false,
        }
    }
}

/// Every dim in the metadata is a size or -1 (variable): a server's -2 is an error, not a
/// dim to skip or to wrap around.
fn check_dims(meta: &ModelMetadata) -> Result<()> {
    let tensors = meta.inputs.iter().map(|t| ("input", t));
    for (what, t) in tensors.chain(meta.outputs.iter().map(|t| ("output", t))) {
        if let Some(d) = t.shape.iter().find(|&&d| d < -1) {
            return Err(Error::generic(format!(
                "model metadata: {what} {}: shape {} has the dimension {d}; only -1 (a variable \
                 dimension) may be negative",
                t.name,
                shape_text(&t.shape)
            )));
        }
    }
    Ok(())
}

/// Metadata dims without the batch dim.
fn batch1_dims(meta: &TensorMeta, batched: bool) -> &[i64] {
    if batched {
        meta.shape.get(1..).unwrap_or(&[])
    } else {
        &meta.shape[..]
    }
}

/// The `--shape` of an input when given (checked against the model dims), else the model
/// dims when they are fully defined, else `None`.
pub fn shape_from_flags(
    meta: &TensorMeta,
    batched: bool,
    cfg: &Config,
) -> Result<Option<Vec<i64>>> {
    let dims = batch1_dims(meta, batched);
    if let Some((_, given)) = cfg.shapes.iter().rev().find(|(n, _)| *n == meta.name) {
        if !shape_fits(given, dims) {
            return Err(Error::usage(format!(
                "--shape {}: {:?} does not fit the model's dims {:?}",
                meta.name, given, dims
            )));
        }
        return Ok(Some(given.clone()));
    }
    Ok(dims.iter().all(|&d| d >= 0).then(|| dims.to_vec()))
}

/// A concrete shape fits model dims when the ranks agree and every dim matches (-1 in the
/// model matches anything).
pub fn shape_fits(shape: &[i64], dims: &[i64]) -> bool {
    shape.len() == dims.len() && dims.iter().zip(shape).all(|(&m, &g)| m == -1 || m == g)
}

/// Elements of a fully defined shape; `None` for a negative dim or when the count
/// overflows (shapes come from user files and servers and must not panic).
pub use crate::tensor::element_count as checked_element_count;

/// `[1,2,3]`, as perf_analyzer prints shapes in its messages.
pub fn shape_text(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::triton_http::ConfigTensor;

    fn meta() -> ModelMetadata {
        ModelMetadata {
            name: "m".into(),
            inputs: vec![
                TensorMeta {
                    name: "A".into(),
                    datatype: DataType::I32,
                    shape: vec![-1, 4],
                },
                TensorMeta {
                    name: "B".into(),
                    datatype: DataType::F32,
                    shape: vec![-1, -1, -1],
                },
            ],
            outputs: vec![TensorMeta {
                name: "Y".into(),
                datatype: DataType::F32,
                shape: vec![-1, -1],
            }],
            ..ModelMetadata::default()
        }
    }

    #[test]
    fn spec_reads_dims_flags_and_config() {
        let config = ModelConfig {
            max_batch_size: 8,
            inputs: vec![ConfigTensor {
                name: "B".into(),
                optional: true,
                is_shape_tensor: true,
                ..ConfigTensor::default()
            }],
            ..ModelConfig::default()
        };
        let mut cfg = Config::default();
        let spec = ModelSpec::new(&meta(), &config, &cfg, false).unwrap();
        assert!(spec.batched);
        assert_eq!(spec.inputs[0].dims, vec![4]);
        assert_eq!(spec.inputs[0].default_shape, Some(vec![4]));
        assert_eq!(spec.inputs[1].default_shape, None);
        assert!(spec.inputs[1].optional && spec.inputs[1].shape_tensor);
        assert!(!spec.inputs[0].optional);
        assert_eq!(spec.outputs[0].default_shape, None);
        cfg.shapes.push(("B".into(), vec![2, 3]));
        let spec = ModelSpec::new(&meta(), &config, &cfg, false).unwrap();
        assert_eq!(spec.inputs[1].default_shape, Some(vec![2, 3]));
        cfg.shapes.push(("A".into(), vec![5]));
        let err = ModelSpec::new(&meta(), &config, &cfg, false).unwrap_err();
        assert!(err.msg.contains("--shape A"), "{}", err.msg);
    }

    #[test]
    fn negative_dims_other_than_minus_one_are_errors() {
        let config = ModelConfig::default();
        let cfg = Config::default();
        for (input, output) in [(vec![4, -2], vec![-1]), (vec![4], vec![i64::MIN])] {
            let mut m = meta();
            m.inputs[0].shape = input;
            m.outputs[0].shape = output;
            let err = ModelSpec::new(&m, &config, &cfg, false).unwrap_err();
            assert_eq!(err.exit_code(), 99);
            assert!(
                err.msg.contains("only -1 (a variable dimension)"),
                "{}",
                err.msg
            );
        }
        let mut m = meta();
        m.inputs[0].shape = vec![4, -2];
        let err = ModelSpec::new(&m, &config, &cfg, false).unwrap_err();
        assert_eq!(
            err.msg,
            "model metadata: input A: shape [4,-2] has the dimension -2; only -1 (a variable \
             dimension) may be negative"
        );
    }

    #[test]
    fn counts_and_fits() {
        assert_eq!(checked_element_count(&[2, 3]), Some(6));
        assert_eq!(checked_element_count(&[]), Some(1));
        assert_eq!(checked_element_count(&[-1, 3]), None);
        assert_eq!(checked_element_count(&[i64::MAX, i64::MAX]), None);
        assert!(shape_fits(&[3, 4], &[-1, 4]));
        assert!(!shape_fits(&[3, 5], &[-1, 4]));
        assert!(!shape_fits(&[3], &[-1, 4]));
        assert_eq!(shape_text(&[1, -1]), "[1,-1]");
    }
}
