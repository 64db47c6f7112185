//! Input tensors for a run: shapes resolved from the model metadata, `--shape` and `-b`, and
//! data from `--input-data random|zero` (JSON files and directories are later work).

use crate::config::{Config, InputData, TensorFormat};
use crate::error::{Error, Result};
use crate::service::triton_http::{ModelConfig, ModelMetadata, TensorMeta};
use crate::tensor::{element_count, push_bytes_element, DataType, InputTensor};

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

/// The batch-1 shape of a model input: metadata dims without the batch dim, with `-1` dims
/// taken from `--shape`.
pub fn resolve_shape(meta: &TensorMeta, batched: bool, cfg: &Config) -> Result<Vec<i64>> {
    let dims = if batched {
        meta.shape.get(1..).unwrap_or(&[])
    } else {
        &meta.shape[..]
    };
    if let Some((_, given)) = cfg.shapes.iter().rev().find(|(n, _)| *n == meta.name) {
        let compatible =
            given.len() == dims.len() && dims.iter().zip(given).all(|(&m, &g)| m == -1 || m == g);
        if !compatible {
            return Err(Error::usage(format!(
                "--shape {}: {:?} does not fit the model's dims {:?}",
                meta.name, given, dims
            )));
        }
        return Ok(given.clone());
    }
    if dims.iter().any(|&d| d < 0) {
        return Err(Error::usage(format!(
            "input {} contains dynamic shape, provide shapes to send along with the request \
             (--shape {}:d1,d2,...)",
            meta.name, meta.name
        )));
    }
    Ok(dims.to_vec())
}

/// Builds the input tensors of one request (all inputs, batch `-b`) from random or zero data.
pub fn build_inputs(
    meta: &ModelMetadata,
    config: &ModelConfig,
    cfg: &Config,
) -> Result<Vec<InputTensor>> {
    if let InputData::Files(paths) = &cfg.input_data {
        let p = paths
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        return Err(Error::usage(format!(
            "--input-data {p}: JSON/directory input is not supported yet"
        )));
    }
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
    let mut rng = Rng::new(0x5EED_1234_ABCD_0001);
    let mut out = Vec::with_capacity(meta.inputs.len());
    for t in &meta.inputs {
        let dims = resolve_shape(t, batched, cfg)?;
        let one = batch1_data(t, &dims, cfg, &mut rng);
        let b = if batched { cfg.batch_size as usize } else { 1 };
        let mut data = Vec::with_capacity(one.len() * b);
        for _ in 0..b {
            data.extend_from_slice(&one);
        }
        let mut shape = dims;
        if batched {
            shape.insert(0, cfg.batch_size as i64);
        }
        out.push(InputTensor {
            name: t.name.clone(),
            datatype: t.datatype,
            shape,
            data,
        });
    }
    Ok(out)
}

/// The bytes of one batch-1 tensor.
fn batch1_data(t: &TensorMeta, dims: &[i64], cfg: &Config, rng: &mut Rng) -> Vec<u8> {
    let n = element_count(dims);
    let zero = cfg.input_data == InputData::Zero;
    if t.datatype == DataType::Bytes {
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
    let size = n * t.datatype.size();
    if zero {
        return vec![0; size];
    }
    let mut data: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
    sanitize(t.datatype, &mut data, cfg.input_tensor_format);
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

    fn meta(shape: Vec<i64>, dt: DataType) -> TensorMeta {
        TensorMeta {
            name: "IN".into(),
            datatype: dt,
            shape,
        }
    }

    #[test]
    fn shapes_resolve_from_flags() {
        let mut cfg = Config::default();
        assert_eq!(
            resolve_shape(&meta(vec![-1, 16], DataType::I32), true, &cfg).unwrap(),
            vec![16]
        );
        assert!(resolve_shape(&meta(vec![-1, -1], DataType::F32), true, &cfg).is_err());
        cfg.shapes.push(("IN".into(), vec![7]));
        assert_eq!(
            resolve_shape(&meta(vec![-1, -1], DataType::F32), true, &cfg).unwrap(),
            vec![7]
        );
        let err = resolve_shape(&meta(vec![3], DataType::F32), false, &cfg).unwrap_err();
        assert!(err.msg.contains("--shape IN"), "{}", err.msg);
    }

    #[test]
    fn data_sizes_follow_types() {
        let mut cfg = Config::default();
        let mut rng = Rng::new(1);
        assert_eq!(
            batch1_data(&meta(vec![16], DataType::I32), &[16], &cfg, &mut rng).len(),
            64
        );
        cfg.string_length = 5;
        let b = batch1_data(&meta(vec![2], DataType::Bytes), &[2], &cfg, &mut rng);
        assert_eq!(b.len(), 2 * (4 + 5));
        cfg.string_data = Some("hi".into());
        let b = batch1_data(&meta(vec![1], DataType::Bytes), &[1], &cfg, &mut rng);
        assert_eq!(b, [2, 0, 0, 0, b'h', b'i']);
        cfg.input_data = InputData::Zero;
        let z = batch1_data(&meta(vec![4], DataType::F64), &[4], &cfg, &mut rng);
        assert!(z.iter().all(|&x| x == 0) && z.len() == 32);
    }
}
