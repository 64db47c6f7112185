//! Running a model on validated inputs, whatever its kind: plain compute, the sequence model
//! (its state lives in the server's sequence table) or an ensemble (its composing models run
//! in order and each records its own statistics, as Triton's do).
//!
//! HTTP and gRPC both come through [`execute`], so both protocols behave the same.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use super::delay::sample_delay;
use super::models::{find_model, Compute, EnsembleStep, ModelDef, TensorData};
use super::sequence::SeqControl;
use super::state::Shared;
use super::stats::InferTiming;

/// What running a model needs besides its inputs.
pub struct Env<'a> {
    pub shared: &'a Shared,
    /// The calling thread's generator, for composing models' random delays.
    pub rng: &'a mut u64,
}

/// A model's outputs (in the order of its `outputs`) and the configured delays of the
/// composing models it ran, which the caller adds to the response's own delay.
pub struct Executed<'a> {
    pub outputs: Vec<TensorData<'a>>,
    pub composing_delay: Duration,
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Runs `model` on `inputs` (validated, in model input order) of `batch_size` inferences.
/// `Err` is a message for the client (a sequence-protocol violation).
pub fn execute<'a>(
    env: &mut Env,
    model: &ModelDef,
    inputs: Vec<TensorData<'a>>,
    batch_size: usize,
    seq: &SeqControl,
) -> Result<Executed<'a>, String> {
    match model.compute {
        Compute::Accumulate => accumulate(env, model, inputs, seq).map(|outputs| Executed {
            outputs,
            composing_delay: Duration::ZERO,
        }),
        Compute::Ensemble => run_ensemble(env, model, inputs, batch_size),
        _ => Ok(Executed {
            outputs: model.run(inputs),
            composing_delay: Duration::ZERO,
        }),
    }
}

/// The sequence model: OUTPUT = [running sum] for the request's sequence.
fn accumulate<'a>(
    env: &mut Env,
    model: &ModelDef,
    inputs: Vec<TensorData<'a>>,
    seq: &SeqControl,
) -> Result<Vec<TensorData<'a>>, String> {
    let index = find_model(model.name).unwrap_or(0);
    // Validated: INPUT is INT32 [1], so exactly 4 bytes.
    let bytes: [u8; 4] = inputs
        .first()
        .and_then(|t| t.data.get(..4))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("model '{}' expects one INT32 element", model.name))?;
    let sum =
        env.shared
            .sequences
            .accumulate((index, model.name), seq, i32::from_le_bytes(bytes))?;
    Ok(vec![TensorData {
        shape: vec![1],
        data: Cow::Owned(sum.to_le_bytes().to_vec()),
    }])
}

/// Runs every step of an ensemble; tensors pass between steps by name.
fn run_ensemble<'a>(
    env: &mut Env,
    model: &ModelDef,
    inputs: Vec<TensorData<'a>>,
    batch_size: usize,
) -> Result<Executed<'a>, String> {
    let mut pool: Vec<(&str, TensorData<'a>)> =
        model.inputs.iter().map(|s| s.name).zip(inputs).collect();
    let mut composing_delay = Duration::ZERO;
    let mut step_ready = Instant::now();
    for step in model.steps {
        let index = find_model(step.model).ok_or_else(|| {
            format!(
                "ensemble '{}': unknown step model '{}'",
                model.name, step.model
            )
        })?;
        let composing = &env.shared.repo.model(index);
        check_batch(model, composing, batch_size)?;
        let started = Instant::now();
        let step_inputs = step_inputs(model, step, composing, &pool)?;
        let input_bytes = step_inputs.iter().map(|t| t.data.len() as u64).sum();
        let computed = Instant::now();
        // Composing models get no sequence control: none of the server's models is stateful.
        let ran = execute(
            env,
            composing,
            step_inputs,
            batch_size,
            &SeqControl::default(),
        )?;
        let delay = match &env.shared.delays[index] {
            Some(d) => sample_delay(d, env.rng),
            None => Duration::ZERO,
        };
        composing_delay += delay + ran.composing_delay;
        let encoding = Instant::now();
        for (spec, tensor) in composing.outputs.iter().zip(ran.outputs) {
            if let Some((_, to)) = step.output_map.iter().find(|(o, _)| *o == spec.name) {
                pool.retain(|(n, _)| n != to);
                pool.push((to, tensor));
            }
        }
        let done = Instant::now();
        let infer_ns = nanos(encoding - computed) + nanos(delay + ran.composing_delay);
        let timing = InferTiming {
            batch_size,
            input_bytes,
            queue_ns: nanos(started - step_ready),
            input_ns: nanos(computed - started),
            infer_ns,
            output_ns: nanos(done - encoding),
            success_ns: nanos(done - step_ready) + nanos(delay + ran.composing_delay),
            batched: false,
        };
        env.shared.stats.record_success(index, &timing);
        step_ready = done;
    }
    Ok(Executed {
        outputs: ensemble_outputs(model, pool)?,
        composing_delay,
    })
}

/// A composing model loaded with a smaller largest batch than the ensemble's refuses the
/// batch it cannot take, with Triton's words for such an ensemble.
fn check_batch(ensemble: &ModelDef, composing: &ModelDef, batch_size: usize) -> Result<(), String> {
    let theirs = composing.max_batch_size;
    if ensemble.max_batch_size == 0 || (theirs != 0 && batch_size <= theirs) {
        return Ok(());
    }
    let limit = match theirs {
        0 => "does not batch".to_string(),
        n => format!("only allows maximum batch size to be {n}"),
    };
    Err(format!(
        "ensemble {} allows maximum batch size {}, but it contains model {} which {limit}",
        ensemble.name, ensemble.max_batch_size, composing.name
    ))
}

/// The inputs of one ensemble step, taken from the tensors produced so far.
fn step_inputs<'a>(
    model: &ModelDef,
    step: &EnsembleStep,
    composing: &ModelDef,
    pool: &[(&str, TensorData<'a>)],
) -> Result<Vec<TensorData<'a>>, String> {
    composing
        .inputs
        .iter()
        .map(|spec| {
            let source = step.input_map.iter().find(|(input, _)| *input == spec.name);
            let tensor = source.and_then(|(_, from)| pool.iter().find(|(n, _)| n == from));
            tensor
                .map(|(_, t)| TensorData {
                    shape: t.shape.clone(),
                    data: t.data.clone(),
                })
                .ok_or_else(|| {
                    format!(
                        "ensemble '{}': no tensor for input '{}' of step '{}'",
                        model.name, spec.name, step.model
                    )
                })
        })
        .collect()
}

/// The ensemble's outputs, in its output order, out of the tensors the steps produced.
fn ensemble_outputs<'a>(
    model: &ModelDef,
    mut pool: Vec<(&str, TensorData<'a>)>,
) -> Result<Vec<TensorData<'a>>, String> {
    model
        .outputs
        .iter()
        .map(|spec| {
            let at = pool
                .iter()
                .position(|(n, _)| *n == spec.name)
                .ok_or_else(|| {
                    format!(
                        "ensemble '{}': no step produced output '{}'",
                        model.name, spec.name
                    )
                })?;
            Ok(pool.swap_remove(at).1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delay::Delay;
    use crate::models::MODELS;
    use crate::sequence::SeqId;

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn tensor(shape: &[i64], values: &[i32]) -> TensorData<'static> {
        TensorData {
            shape: shape.to_vec(),
            data: Cow::Owned(i32s(values)),
        }
    }

    #[test]
    fn ensemble_outputs_delays_and_composing_stats() {
        let mut delays = vec![None; MODELS.len()];
        let identity = find_model("identity_int32").unwrap();
        delays[identity] = Some(Delay::Fixed(Duration::from_millis(4)));
        let shared = Shared::new(delays, vec![false; MODELS.len()]);
        let mut rng = 3u64;
        let mut env = Env {
            shared: &shared,
            rng: &mut rng,
        };
        let model = &MODELS[find_model("ensemble_simple").unwrap()];
        let a: Vec<i32> = (0..32).collect();
        let b = vec![5; 32];
        let inputs = vec![tensor(&[2, 16], &a), tensor(&[2, 16], &b)];
        let ran = execute(&mut env, model, inputs, 2, &SeqControl::default()).unwrap();
        let sum: Vec<i32> = (5..37).collect();
        let diff: Vec<i32> = (-5..27).collect();
        assert_eq!(ran.outputs[0].data.as_ref(), i32s(&sum).as_slice());
        assert_eq!(ran.outputs[1].data.as_ref(), i32s(&diff).as_slice());
        assert_eq!(ran.outputs[0].shape, vec![2, 16]);
        assert_eq!(ran.composing_delay, Duration::from_millis(4));
        let simple = shared.stats.snapshot(find_model("simple").unwrap());
        let ident = shared.stats.snapshot(identity);
        assert_eq!((simple.inference_count, simple.execution_count), (2, 1));
        assert_eq!(ident.compute_infer.count, 1);
        assert!(
            ident.compute_infer.ns >= 4_000_000,
            "delay counts as compute"
        );
        assert_eq!(ident.input_bytes, 32 * 4);
        // The ensemble's own numbers are the caller's to record.
        let ens = shared
            .stats
            .snapshot(find_model("ensemble_simple").unwrap());
        assert_eq!(ens.execution_count, 0);
    }

    #[test]
    fn composing_models_keep_their_loaded_largest_batch() {
        use crate::repository::{ControlMode, LoadParams, Repository};
        let mut shared = Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()]);
        shared.repo = Repository::new(ControlMode::Explicit, &["*".into()]).unwrap();
        let config = LoadParams {
            config: Some(r#"{"max_batch_size": 2}"#.into()),
            files: Vec::new(),
        };
        shared.repo.load("simple", &config).unwrap();
        let mut rng = 5u64;
        let mut env = Env {
            shared: &shared,
            rng: &mut rng,
        };
        let model = &MODELS[find_model("ensemble_simple").unwrap()];
        let run = |env: &mut Env, batch: usize| {
            let values = vec![1; 16 * batch];
            let shape = [batch as i64, 16];
            let inputs = vec![tensor(&shape, &values), tensor(&shape, &values)];
            execute(env, model, inputs, batch, &SeqControl::default()).map(|r| r.outputs.len())
        };
        assert_eq!(run(&mut env, 2), Ok(2));
        assert_eq!(
            run(&mut env, 3),
            Err(
                "ensemble ensemble_simple allows maximum batch size 8, but it contains model \
                 simple which only allows maximum batch size to be 2"
                    .into()
            )
        );
    }

    #[test]
    fn accumulate_goes_through_the_sequence_table() {
        let shared = Shared::new(vec![None; MODELS.len()], vec![false; MODELS.len()]);
        let mut rng = 1u64;
        let mut env = Env {
            shared: &shared,
            rng: &mut rng,
        };
        let model = &MODELS[find_model("accumulate_int32").unwrap()];
        let ctl = |start, end| SeqControl {
            id: Some(SeqId::Number(1)),
            start,
            end,
        };
        let run = |env: &mut Env, v: i32, c: SeqControl| {
            execute(env, model, vec![tensor(&[1], &[v])], 1, &c).map(|r| r.outputs[0].data.to_vec())
        };
        assert_eq!(run(&mut env, 2, ctl(true, false)), Ok(i32s(&[2])));
        assert_eq!(run(&mut env, 3, ctl(false, true)), Ok(i32s(&[5])));
        // After END the id is not live: a step without START is Triton's error.
        assert!(run(&mut env, 3, ctl(false, false))
            .unwrap_err()
            .contains("must specify the START flag"));
        assert_eq!(shared.sequences.started_ended(), (1, 1));
    }
}
