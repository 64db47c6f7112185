//! `--input-data random|zero` (spec §4.1): one step whose tensors are generated once.

use super::model::{shape_text, ModelSpec};
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
        let data = batch1_data(t.datatype, &shape, cfg, &mut rng);
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

/// The bytes of one batch-1 tensor.
fn batch1_data(datatype: DataType, dims: &[i64], cfg: &Config, rng: &mut Rng) -> Vec<u8> {
    let n = element_count(dims);
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
        assert_eq!(batch1_data(DataType::I32, &[16], &cfg, &mut rng).len(), 64);
        cfg.string_length = 5;
        let b = batch1_data(DataType::Bytes, &[2], &cfg, &mut rng);
        assert_eq!(b.len(), 2 * (4 + 5));
        cfg.string_data = Some("hi".into());
        let b = batch1_data(DataType::Bytes, &[1], &cfg, &mut rng);
        assert_eq!(b, [2, 0, 0, 0, b'h', b'i']);
        cfg.input_data = InputData::Zero;
        let z = batch1_data(DataType::F64, &[4], &cfg, &mut rng);
        assert!(z.iter().all(|&x| x == 0) && z.len() == 32);
    }

    #[test]
    fn random_floats_are_finite_for_json() {
        let cfg = Config {
            input_tensor_format: TensorFormat::Json,
            ..Config::default()
        };
        let mut rng = Rng::new(7);
        let data = batch1_data(DataType::F32, &[4096], &cfg, &mut rng);
        assert!(data
            .chunks_exact(4)
            .all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()));
        let bools = batch1_data(DataType::Bool, &[64], &Config::default(), &mut rng);
        assert!(bools.iter().all(|&b| b <= 1));
    }
}
