//! Batching: a request of batch `b` concatenates steps `first..first+b-1`
//! (wrapping around) of one stream. The steps must agree on shapes; a batch dim `b` is
//! prepended when the model batches. Shape tensors are sent once, unbatched.
//!
//! Order: request k is the batch that starts at step `(k * b) % steps`, as
//! perf_analyzer's `data_step_id * batch_size`; the pattern repeats after
//! `steps / gcd(steps, b)` requests.

use super::{InputSet, Step, TensorValue};
use crate::error::{Error, Result};
use crate::tensor::InputTensor;

/// The first step of each pre-encoded request: `(k * b) % steps` for k until it repeats.
pub fn request_starts(steps: usize, b: usize) -> Vec<usize> {
    if steps == 0 {
        return Vec::new();
    }
    let b = b.max(1);
    let count = steps / gcd(steps, b);
    (0..count).map(|k| (k * b) % steps).collect()
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The input tensors of one request: steps `first_step..first_step+b-1 (mod steps)` of
/// `stream`, concatenated. `batched`: the model has `max_batch_size > 0`.
pub fn batch(
    set: &InputSet,
    stream: usize,
    first_step: usize,
    b: usize,
    batched: bool,
) -> Result<Vec<InputTensor>> {
    let steps = batch_steps(set, stream, first_step, b, batched)?;
    let first = steps[0];
    let mut out = Vec::with_capacity(first.inputs.len());
    for tensor in &first.inputs {
        let unbatched = set.shape_tensors.contains(&tensor.name);
        let parts: Vec<&TensorValue> = if unbatched {
            vec![tensor]
        } else {
            steps
                .iter()
                .map(|s| find(&s.inputs, tensor, stream, first_step))
                .collect::<Result<_>>()?
        };
        let add_batch_dim = batched && !unbatched;
        out.push(concat(&parts, add_batch_dim, b)?);
    }
    for step in &steps[1..] {
        let in_first = |t: &&TensorValue| first.inputs.iter().any(|f| f.name == t.name);
        if let Some(extra) = step.inputs.iter().find(|t| !in_first(t)) {
            return Err(Error::usage(format!(
                "can not batch steps with different inputs together: input '{}' is in only some \
                 steps of the batch at step {first_step} of stream {stream}",
                extra.name
            )));
        }
    }
    Ok(out)
}

/// The expected outputs of the same batch (`None` when the first step has none): the
/// validation data of the `b` steps, concatenated.
pub fn batch_expected(
    set: &InputSet,
    stream: usize,
    first_step: usize,
    b: usize,
    batched: bool,
) -> Result<Option<Vec<TensorValue>>> {
    let steps = batch_steps(set, stream, first_step, b, batched)?;
    let Some(first) = &steps[0].expected else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(first.len());
    for tensor in first {
        let parts = steps
            .iter()
            .map(|s| {
                let expected = s.expected.as_deref().unwrap_or_default();
                find(expected, tensor, stream, first_step)
            })
            .collect::<Result<Vec<_>>>()?;
        let joined = concat(&parts, batched, b)?;
        out.push(TensorValue {
            name: joined.name,
            datatype: joined.datatype,
            shape: joined.shape,
            data: joined.data,
        });
    }
    Ok(Some(out))
}

/// The `b` steps of a batch, checked.
fn batch_steps(
    set: &InputSet,
    stream: usize,
    first_step: usize,
    b: usize,
    batched: bool,
) -> Result<Vec<&Step>> {
    if b == 0 || (!batched && b > 1) {
        return Err(Error::usage(format!(
            "-b {b}: the batch size must be 1 for a model that does not batch, and > 0"
        )));
    }
    let steps = set
        .streams
        .get(stream)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::usage(format!("input data has no steps in stream {stream}")))?;
    Ok((0..b)
        .map(|j| &steps[(first_step % steps.len() + j) % steps.len()])
        .collect())
}

/// `like`'s counterpart in another step, with the same shape.
fn find<'a>(
    tensors: &'a [TensorValue],
    like: &TensorValue,
    stream: usize,
    first_step: usize,
) -> Result<&'a TensorValue> {
    let found = tensors
        .iter()
        .find(|t| t.name == like.name)
        .ok_or_else(|| {
            Error::usage(format!(
            "can not batch steps with different inputs together: tensor '{}' is missing from a \
             step of the batch at step {first_step} of stream {stream}",
            like.name
        ))
        })?;
    if found.shape != like.shape {
        return Err(Error::usage(format!(
            "can not batch tensors with different shapes together (input '{}' expected shape \
             {} and received {})",
            like.name,
            super::model::shape_text(&like.shape),
            super::model::shape_text(&found.shape)
        )));
    }
    Ok(found)
}

fn concat(parts: &[&TensorValue], add_batch_dim: bool, b: usize) -> Result<InputTensor> {
    let first = parts[0];
    let too_big = || {
        Error::usage(format!(
            "input '{}': a batch of {b} does not fit in memory",
            first.name
        ))
    };
    let len = first
        .data
        .len()
        .checked_mul(parts.len())
        .ok_or_else(too_big)?;
    let mut data = Vec::with_capacity(len);
    parts.iter().for_each(|p| data.extend_from_slice(&p.data));
    let mut shape = first.shape.clone();
    if add_batch_dim {
        shape.insert(0, i64::try_from(b).map_err(|_| too_big())?);
    }
    Ok(InputTensor {
        name: first.name.clone(),
        datatype: first.datatype,
        shape,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;

    fn value(name: &str, shape: &[i64], data: &[u8]) -> TensorValue {
        TensorValue {
            name: name.into(),
            datatype: DataType::U8,
            shape: shape.to_vec(),
            data: data.to_vec(),
        }
    }

    fn step(a: u8) -> Step {
        Step {
            inputs: vec![value("A", &[2], &[a, a]), value("S", &[1], &[a])],
            expected: Some(vec![value("Y", &[1], &[a + 100])]),
            timestamp_ms: None,
        }
    }

    fn set(n: u8) -> InputSet {
        InputSet {
            streams: vec![(0..n).map(step).collect(), vec![step(50)]],
            shape_tensors: vec!["S".into()],
            generated: false,
        }
    }

    #[test]
    fn batches_wrap_around_the_stream() {
        let rows: &[(usize, usize, &[u8], i64)] = &[
            (0, 1, &[0, 0], 1),
            (2, 2, &[2, 2, 0, 0], 2),
            (1, 3, &[1, 1, 2, 2, 0, 0], 3),
            (4, 1, &[1, 1], 1),
        ];
        let s = set(3);
        for (first, b, data, dim) in rows {
            let tensors = batch(&s, 0, *first, *b, true).unwrap();
            assert_eq!(tensors[0].data, *data, "first {first} b {b}");
            assert_eq!(tensors[0].shape, vec![*dim, 2]);
            // The shape tensor comes from the first step only, without a batch dim.
            assert_eq!(tensors[1].shape, vec![1]);
            assert_eq!(tensors[1].data, vec![(*first % 3) as u8]);
        }
        let unbatched = batch(&s, 1, 0, 1, false).unwrap();
        assert_eq!(unbatched[0].shape, vec![2]);
        assert_eq!(unbatched[0].data, vec![50, 50]);
    }

    #[test]
    fn expected_outputs_follow_the_batch() {
        let e = batch_expected(&set(3), 0, 2, 2, true).unwrap().unwrap();
        assert_eq!(e[0].data, vec![102, 100]);
        assert_eq!(e[0].shape, vec![2, 1]);
        let mut s = set(2);
        s.streams[0][1].expected = None;
        assert!(batch_expected(&s, 0, 1, 1, true).unwrap().is_none());
        assert!(batch_expected(&s, 0, 0, 2, true).is_err());
    }

    #[test]
    fn refuses_what_cannot_batch() {
        let mut s = set(2);
        s.streams[0][1].inputs[0].shape = vec![1, 2];
        let err = batch(&s, 0, 0, 2, true).unwrap_err();
        assert!(
            err.msg.contains(
                "can not batch tensors with different shapes together (input 'A' expected \
                 shape [2] and received [1,2])"
            ),
            "{}",
            err.msg
        );
        let mut s = set(2);
        s.streams[0][1].inputs.push(value("B", &[1], &[1]));
        assert!(batch(&s, 0, 0, 2, true).unwrap_err().msg.contains("'B'"));
        s.streams[0][0].inputs.remove(0);
        assert!(batch(&s, 0, 1, 2, true).unwrap_err().msg.contains("'A'"));
        assert!(batch(&set(2), 0, 0, 2, false).is_err());
        assert!(batch(&set(2), 0, 0, 0, true).is_err());
        assert!(batch(&set(2), 7, 0, 1, true)
            .unwrap_err()
            .msg
            .contains("stream 7"));
    }

    #[test]
    fn request_order_follows_data_step_times_batch() {
        let rows: &[(usize, usize, &[usize])] = &[
            (1, 1, &[0]),
            (1, 4, &[0]),
            (3, 1, &[0, 1, 2]),
            (3, 2, &[0, 2, 1]),
            (4, 2, &[0, 2]),
            (6, 4, &[0, 4, 2]),
            (5, 5, &[0]),
            (0, 1, &[]),
        ];
        for (steps, b, want) in rows {
            assert_eq!(request_starts(*steps, *b), *want, "steps {steps} b {b}");
        }
    }
}
