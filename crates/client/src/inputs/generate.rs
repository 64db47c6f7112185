//! `--input-data random|zero`: one step whose tensors are generated once.

use super::model::{shape_text, ModelSpec, TensorSpec};
use super::{Step, TensorValue};
use crate::config::{Config, InputData, TensorFormat};
use crate::error::{Error, Result};
use crate::tensor::{element_count, push_bytes_element, DataType};

/// Characters of random BYTES elements (perf_analyzer's 66-character alphabet).
const STRING_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .?!";

/// A small, fast, seedable generator (xorshift64*); input data needs no cryptographic quality.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The single generated step: every input at its `--shape` (or fully defined model shape).
pub fn generated_step(model: &ModelSpec, cfg: &Config) -> Result<Step> {
    let mut rng = Rng::new(0x5EED_1234_ABCD_0001);
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for t in &model.inputs {
        if t.shape_tensor {
            return Err(Error::usage(format!(
                "can not generate data for shape tensor '{}', user-provided data is needed \
                 (--input-data <file.json>)",
                t.name
            )));
        }
        let Some(shape) = t.default_shape.clone() else {
            return Err(Error::usage(format!(
                "input {} contains dynamic shape {}, provide shapes to send along with the \
                 request (--shape {}:d1,d2,...)",
                t.name,
                shape_text(&t.dims),
                t.name
            )));
        };
        let count = check_generated_size(t, &shape, model.batched, cfg)?;
        let data = batch1_data(t.datatype, count, cfg, &mut rng);
        inputs.push(TensorValue {
            name: t.name.clone(),
            datatype: t.datatype,
            shape,
            data,
        });
    }
    Ok(Step {
        inputs,
        expected: None,
        timestamp_ms: None,
    })
}

/// Checks input `t` at batch-1 `shape` against `--max-input-bytes` before anything is
/// allocated: its bytes in one request (times `-b` when the model batches) may not pass the
/// limit. Returns the batch-1 element count.
fn check_generated_size(
    t: &TensorSpec,
    shape: &[i64],
    batched: bool,
    cfg: &Config,
) -> Result<usize> {
    let per_element = if t.datatype == DataType::Bytes {
        let len = cfg
            .string_data
            .as_ref()
            .map_or(cfg.string_length, String::len);
        (len as u128).saturating_add(4)
    } else {
        t.datatype.size() as u128
    };
    let batch = if batched { cfg.batch_size.max(1) } else { 1 };
    let count = element_count(shape);
    let bytes = count
        .and_then(|n| (n as u128).checked_mul(per_element))
        .and_then(|b| b.checked_mul(u128::from(batch)));
    match (count, bytes) {
        (Some(n), Some(b)) if b <= u128::from(cfg.max_input_bytes) => Ok(n),
        _ => {
            let at_batch = if batch > 1 {
                format!(" at batch size {batch}")
            } else {
                String::new()
            };
            let size = bytes.map_or_else(
                || "too many bytes to count".into(),
                |b| format!("{b} bytes"),
            );
            Err(Error::usage(format!(
                "input {}: shape {} of {}{at_batch} is {size}, over the {}-byte limit for \
                 generated data (raise it with --max-input-bytes)",
                t.name,
                shape_text(shape),
                t.datatype.name(),
                cfg.max_input_bytes
            )))
        }
    }
}

/// The bytes of one batch-1 tensor of `n` elements.
fn batch1_data(datatype: DataType, n: usize, cfg: &Config, rng: &mut Rng) -> Vec<u8> {
    let zero = cfg.input_data == InputData::Zero;
    if datatype == DataType::Bytes {
        let mut out = Vec::new();
        for _ in 0..n {
            let elem: Vec<u8> = match &cfg.string_data {
                Some(s) => s.as_bytes().to_vec(),
                None if zero => vec![b'0'; cfg.string_length],
                None => (0..cfg.string_length)
                    .map(|_| STRING_CHARS[(rng.next_u64() % STRING_CHARS.len() as u64) as usize])
                    .collect(),
            };
            push_bytes_element(&mut out, &elem);
        }
        return out;
    }
    let size = n * datatype.size();
    if zero {
        return vec![0; size];
    }
    let mut data: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
    sanitize(datatype, &mut data, cfg.input_tensor_format);
    data
}

/// Random bytes can form NaN/Inf floats, which JSON cannot carry, and BOOL needs 0/1.
fn sanitize(dt: DataType, data: &mut [u8], format: TensorFormat) {
    match dt {
        DataType::Bool => data.iter_mut().for_each(|b| *b &= 1),
        DataType::F32 if format == TensorFormat::Json => {
            for c in data.chunks_exact_mut(4) {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if !v.is_finite() {
                    c.copy_from_slice(&0f32.to_le_bytes());
                }
            }
        }
        DataType::F64 if format == TensorFormat::Json => {
            for c in data.chunks_exact_mut(8) {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                if !f64::from_le_bytes(b).is_finite() {
                    c.copy_from_slice(&0f64.to_le_bytes());
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_sizes_follow_types() {
        let mut cfg = Config::default();
        let mut rng = Rng::new(1);
        assert_eq!(batch1_data(DataType::I32, 16, &cfg, &mut rng).len(), 64);
        cfg.string_length = 5;
        let b = batch1_data(DataType::Bytes, 2, &cfg, &mut rng);
        assert_eq!(b.len(), 2 * (4 + 5));
        cfg.string_data = Some("hi".into());
        let b = batch1_data(DataType::Bytes, 1, &cfg, &mut rng);
        assert_eq!(b, [2, 0, 0, 0, b'h', b'i']);
        cfg.input_data = InputData::Zero;
        let z = batch1_data(DataType::F64, 4, &cfg, &mut rng);
        assert!(z.iter().all(|&x| x == 0) && z.len() == 32);
    }

    fn spec(name: &str, datatype: DataType, dims: &[i64]) -> ModelSpec {
        ModelSpec {
            inputs: vec![TensorSpec {
                name: name.into(),
                datatype,
                dims: dims.to_vec(),
                default_shape: Some(dims.to_vec()),
                optional: false,
                shape_tensor: false,
            }],
            outputs: Vec::new(),
            batched: false,
            fixed_schedule: false,
        }
    }

    #[test]
    fn generated_inputs_over_the_limit_name_the_input_and_its_dims() {
        let cfg = Config::default();
        let err =
            generated_step(&spec("INPUT0", DataType::F32, &[65536, 65536]), &cfg).unwrap_err();
        assert_eq!(err.exit_code(), 99);
        assert_eq!(
            err.msg,
            "input INPUT0: shape [65536,65536] of FP32 is 17179869184 bytes, over the \
             268435456-byte limit for generated data (raise it with --max-input-bytes)"
        );
        let big = 1i64 << 32;
        let err = generated_step(&spec("X", DataType::F32, &[big, big, big]), &cfg).unwrap_err();
        assert!(
            err.msg.starts_with(
                "input X: shape [4294967296,4294967296,4294967296] of FP32 is too many bytes"
            ),
            "{}",
            err.msg
        );
        // BYTES: 4-byte length plus --string-length per element.
        let err = generated_step(&spec("S", DataType::Bytes, &[1 << 21]), &cfg).unwrap_err();
        assert!(
            err.msg.contains("of BYTES is 276824064 bytes"),
            "{}",
            err.msg
        );
        // The batch counts when the model batches.
        let mut batched = spec("B", DataType::U8, &[1 << 20]);
        batched.batched = true;
        let cfg8 = Config {
            batch_size: 8,
            max_input_bytes: (8 << 20) - 1,
            ..Config::default()
        };
        let err = generated_step(&batched, &cfg8).unwrap_err();
        assert!(
            err.msg
                .contains("of UINT8 at batch size 8 is 8388608 bytes, over the 8388607-byte"),
            "{}",
            err.msg
        );
    }

    #[test]
    fn inputs_at_the_limit_are_generated() {
        let cfg = Config {
            max_input_bytes: 64,
            ..Config::default()
        };
        let step = generated_step(&spec("A", DataType::I32, &[4, 4]), &cfg).unwrap();
        assert_eq!(step.inputs[0].data.len(), 64);
        assert!(generated_step(&spec("A", DataType::I32, &[4, 5]), &cfg).is_err());
        let step = generated_step(&spec("E", DataType::F32, &[0, 3]), &cfg).unwrap();
        assert!(step.inputs[0].data.is_empty());
    }

    #[test]
    fn random_floats_are_finite_for_json() {
        let cfg = Config {
            input_tensor_format: TensorFormat::Json,
            ..Config::default()
        };
        let mut rng = Rng::new(7);
        let data = batch1_data(DataType::F32, 4096, &cfg, &mut rng);
        assert!(data
            .chunks_exact(4)
            .all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()));
        let bools = batch1_data(DataType::Bool, 64, &Config::default(), &mut rng);
        assert!(bools.iter().all(|&b| b <= 1));
    }
}
