//! `/inference.GRPCInferenceService/*`: routing a call to its RPC, inference with the
//! configured delays, the loaded instances and batching or `--serial`, the decoupled repeat model, and the stream (which also
//! serves the fake LLM, see `llm`).
//!
//! Statistics go to the same `Stats` as the HTTP side, with the same timing points: `received`
//! is when the request message was fully read; a delay is compute time; success runs to the
//! (last) response being ready to send.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use prost::Message;

use super::convert::{
    bool_param, build_response, choose_outputs, decode_inputs, int32_values, seq_control,
    EMPTY_FINAL,
};
use super::llm;
use super::sleep::sleep_until;
use super::unary;
use super::wire::{
    answer_unary, code, drained, send_message, send_status, send_stream_response, start_response,
    Encoding, MessageSource, Next, Status,
};
use crate::delay::sample_delay;
use crate::execute::{execute, Env};
use crate::infer::decoupled_refusal;
use crate::instances::Run;
use crate::models::MODELS;
use crate::sequence::SeqControl;
use crate::shm::{self, cuda as cuda_shm};
use crate::state::Shared;
use crate::stats::InferTiming;
use inferperf_wire::protocol::grpc::pb::inference as pb;

const SERVICE_PREFIX: &str = "/inference.GRPCInferenceService/";

fn nanos(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// The gRPC service: the server's shared state plus the gRPC runtime's own model instances.
pub struct Service {
    pub shared: Arc<Shared>,
    /// Per model: when the runtime's single instance of a `--serial` model is free again
    /// (the gRPC runtime is one more "server thread" with its own instances).
    busy_until: Mutex<Vec<Instant>>,
    pub(super) rng: Mutex<u64>,
}

impl Service {
    pub fn new(shared: Arc<Shared>, seed: u64) -> Service {
        Service {
            shared,
            busy_until: Mutex::new(vec![Instant::now(); MODELS.len()]),
            rng: Mutex::new(seed | 1),
        }
    }

    /// The configured delay of model `index`, one sample (zero without `--delay`).
    fn sample(&self, index: usize) -> Duration {
        match &self.shared.delays[index] {
            None => Duration::ZERO,
            Some(delay) => {
                let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
                sample_delay(delay, &mut rng)
            }
        }
    }

    /// When an execution of `batch` inferences, ready at `ready` and lasting `busy`, runs:
    /// under the model's loaded instances and batcher, else at once or, for a serial model,
    /// when the previous execution is over.
    fn reserve(&self, index: usize, ready: Instant, batch: usize, busy: Duration) -> Run {
        if let Some(run) = self.shared.repo.reserve(index, ready, batch, busy) {
            return run;
        }
        if !self.shared.serial[index] {
            return Run::serial(None, ready, busy);
        }
        let mut until = self.busy_until.lock().unwrap_or_else(|e| e.into_inner());
        Run::serial(Some(&mut until[index]), ready, busy)
    }

    /// Answers one call, whatever its method.
    pub async fn handle(
        self: Arc<Self>,
        request: http::Request<RecvStream>,
        mut respond: SendResponse<Bytes>,
    ) {
        self.shared.stats.count_grpc_call();
        let (parts, body) = request.into_parts();
        let max = self.shared.limits.max_request_bytes;
        let limit = self.shared.limits.request_read_timeout;
        if super::tfserving::owns(parts.uri.path()) {
            let path = parts.uri.path().to_string();
            let headers = &parts.headers;
            return super::tfserving::handle(&path, headers, body, respond, max, limit).await;
        }
        let encoding = match Encoding::from_headers(&parts.headers) {
            Ok(e) => e,
            Err(status) => {
                return answer_unary(&mut respond, Err::<pb::ServerLiveResponse, _>(status))
            }
        };
        let mut source = MessageSource::new(body, encoding, max, limit);
        let path = parts.uri.path();
        let method = path.strip_prefix(SERVICE_PREFIX).unwrap_or("");
        let r = &mut respond;
        let shared = &*self.shared;
        match method {
            "ModelStreamInfer" => self.stream(source.per_message(), respond).await,
            "ModelInfer" => {
                let result = match source.single::<pb::ModelInferRequest>().await {
                    Ok(req) => self.infer_once(&req, Instant::now(), None).await,
                    Err(status) => Err(status),
                };
                answer_unary(r, result)
            }
            m if m.contains("SharedMemory") => shared_memory_call(m, &mut source, r, shared).await,
            _ => self.plain_call(method, path, &mut source, r).await,
        }
    }

    /// Answers a health, metadata, statistics, repository or trace call (and an unknown
    /// method with UNIMPLEMENTED).
    async fn plain_call(
        &self,
        method: &str,
        path: &str,
        source: &mut MessageSource,
        r: &mut SendResponse<Bytes>,
    ) {
        let shared = &*self.shared;
        let stats = &shared.stats;
        match method {
            "ServerLive" => {
                unary(source, r, |_: pb::ServerLiveRequest| {
                    Ok(pb::ServerLiveResponse { live: true })
                })
                .await
            }
            "ServerReady" => {
                unary(source, r, |_: pb::ServerReadyRequest| {
                    Ok(pb::ServerReadyResponse { ready: true })
                })
                .await
            }
            "ModelReady" => unary(source, r, |q| Ok(llm::ready(shared, &q))).await,
            "ServerMetadata" => {
                unary(source, r, |_: pb::ServerMetadataRequest| {
                    Ok(unary::server_metadata())
                })
                .await
            }
            "ModelMetadata" => unary(source, r, |q| llm::metadata(shared, &q)).await,
            "ModelConfig" => unary(source, r, |q| llm::config(shared, &q)).await,
            "ModelStatistics" => {
                unary(source, r, |q| {
                    unary::model_statistics(stats, &shared.repo, &q)
                })
                .await
            }
            "RepositoryIndex" => {
                let repo = &shared.repo;
                unary(source, r, |q| Ok(unary::repository_index(repo, &q))).await
            }
            "RepositoryModelLoad" => {
                unary(source, r, |q| unary::repository_load(&shared.repo, &q)).await
            }
            "RepositoryModelUnload" => {
                unary(source, r, |q| unary::repository_unload(&shared.repo, &q)).await
            }
            "TraceSetting" => {
                let trace = &self.shared.trace;
                unary(source, r, |q| unary::trace_setting(trace, q)).await
            }
            _ => answer_unary(
                r,
                Err::<pb::ServerLiveResponse, _>(Status::new(
                    code::UNIMPLEMENTED,
                    format!("unknown gRPC method '{path}'"),
                )),
            ),
        }
    }

    /// Runs one request of a model that answers once; `final_flag` is set on stream responses.
    /// Validation errors are INVALID_ARGUMENT and count as failures of the model.
    async fn infer_once(
        &self,
        req: &pb::ModelInferRequest,
        received: Instant,
        final_flag: Option<bool>,
    ) -> Result<pb::ModelInferResponse, Status> {
        if llm::is_llm(&self.shared, &req.model_name) {
            return Err(llm::unary_refusal(&req.model_name));
        }
        let index = unary::lookup_loaded(&self.shared.repo, &req.model_name, &req.model_version)?;
        self.shared.log_arrival(index, received);
        let model = &self.shared.repo.model(index);
        let stats = &self.shared.stats;
        let started = Instant::now();
        let fail = |msg: String| {
            stats.record_failure(index, nanos(received.elapsed()));
            Status::invalid(msg)
        };
        let staged = shm::stage_grpc_inputs(&self.shared.shm, req).map_err(fail)?;
        let req = staged.as_ref().unwrap_or(req);
        let checked = if model.decoupled {
            Err(decoupled_refusal(model))
        } else {
            decode_inputs(model, req).and_then(|decoded| {
                let chosen = choose_outputs(model, req)?;
                let seq = match model.sequence {
                    true => seq_control(&req.parameters)?,
                    false => SeqControl::default(),
                };
                Ok((decoded, chosen, seq))
            })
        };
        let ((inputs, batch_size), chosen, seq) = checked.map_err(fail)?;
        let input_bytes = inputs.iter().map(|t| t.data.len() as u64).sum();
        let computed = Instant::now();
        let ran = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            let mut env = Env {
                shared: &self.shared,
                rng: &mut rng,
            };
            execute(&mut env, model, inputs, batch_size, &seq).map_err(fail)?
        };
        let outputs = ran.outputs;
        let encoding = Instant::now();
        let mut response = build_response(model, &req.id, &chosen, &outputs, final_flag);
        shm::write_grpc_outputs(&self.shared.shm, req, &mut response).map_err(fail)?;
        let ready = Instant::now();
        let mut timing = InferTiming {
            batch_size,
            input_bytes,
            queue_ns: nanos(started - received),
            input_ns: nanos(computed - started),
            infer_ns: nanos(encoding - computed),
            output_ns: nanos(ready - encoding),
            success_ns: 0,
            batched: false,
        };
        let wait = self.sample(index) + ran.composing_delay;
        let run = self.reserve(index, ready, batch_size, wait);
        if run.end > ready {
            timing.queue_ns += nanos(run.start - ready);
            timing.batched = run.batched;
            sleep_until(run.end).await;
            timing.infer_ns += nanos(run.start.elapsed());
        }
        timing.success_ns = nanos(received.elapsed());
        stats.record_success(index, &timing);
        Ok(response)
    }

    /// Runs one request of the decoupled repeat model, sending its responses on `send`.
    async fn infer_decoupled(
        &self,
        index: usize,
        req: &pb::ModelInferRequest,
        received: Instant,
        send: &mut SendStream<Bytes>,
    ) -> Result<(), Status> {
        self.shared.log_arrival(index, received);
        let model = &self.shared.repo.model(index);
        let stats = &self.shared.stats;
        let started = Instant::now();
        let checked = decode_inputs(model, req).and_then(|(inputs, _)| {
            let chosen = choose_outputs(model, req)?;
            let empty_final = bool_param(&req.parameters, EMPTY_FINAL)?;
            let input_bytes = inputs[0].data.len() as u64;
            Ok((
                int32_values(&inputs[0].data),
                chosen,
                empty_final,
                input_bytes,
            ))
        });
        let (values, chosen, empty_final, input_bytes) = checked.map_err(|msg| {
            stats.record_failure(index, nanos(received.elapsed()));
            Status::invalid(msg)
        })?;
        let ready = Instant::now();
        let gaps: Vec<Duration> = values.iter().map(|_| self.sample(index)).collect();
        let run = self.reserve(index, ready, 1, gaps.iter().sum());
        let start = run.start;
        let mut last = start;
        for (i, (&value, &gap)) in values.iter().zip(&gaps).enumerate() {
            sleep_until(last + gap).await;
            // As Triton's repeat model (final flag sent on its own, after the last element):
            // no data response is final; the end shows only to clients that asked for the
            // empty final response.
            let outputs = model.repeat_response(i as u32, value);
            let response = build_response(model, &req.id, &chosen, &outputs, Some(false));
            last = Instant::now();
            if !drained(send).await || send_stream_response(send, Ok(response)).is_err() {
                break; // The client went away; the execution still counts below.
            }
        }
        if empty_final {
            // Triton's empty final response names the model but no version.
            let mut response = build_response(model, &req.id, &[], &[], Some(true));
            response.model_version.clear();
            let _ = send_stream_response(send, Ok(response));
        }
        let done = Instant::now();
        let timing = InferTiming {
            batch_size: 1,
            input_bytes,
            queue_ns: nanos(started - received) + nanos(start.saturating_duration_since(ready)),
            input_ns: nanos(ready - started),
            infer_ns: nanos(done.saturating_duration_since(start)),
            output_ns: 0,
            success_ns: nanos(done - received),
            batched: run.batched,
        };
        stats.record_success(index, &timing);
        Ok(())
    }

    /// ModelStreamInfer: requests in order, each answered (or refused with `error_message`)
    /// before the next is read; the call ends OK when the client closes its side.
    async fn stream(&self, mut source: MessageSource, mut respond: SendResponse<Bytes>) {
        let Some(mut send) = start_response(&mut respond) else {
            return;
        };
        loop {
            // The answers so far must be on their way before the next request is read.
            if !drained(&mut send).await {
                return;
            }
            let next = match source.next::<pb::ModelInferRequest>().await {
                Ok(next) => next,
                Err(status) => return send_status(&mut send, &status),
            };
            let received = Instant::now();
            let req = match next {
                Next::End => break,
                Next::Bad(status) => {
                    if stream_error(&mut send, &pb::ModelInferRequest::default(), status).is_err() {
                        return;
                    }
                    continue;
                }
                Next::Message(req) => req,
            };
            let result = match unary::lookup_loaded(
                &self.shared.repo,
                &req.model_name,
                &req.model_version,
            ) {
                // The LLM is not in MODELS (so not in statistics): its served name wins.
                _ if llm::is_llm(&self.shared, &req.model_name) => {
                    llm::serve(&self.shared, &self.rng, &req, &mut send).await
                }
                Err(status) => Err(status),
                Ok(index) if MODELS[index].decoupled => {
                    self.infer_decoupled(index, &req, received, &mut send).await
                }
                Ok(_) => match self.infer_once(&req, received, Some(true)).await {
                    Ok(response) => send_stream_response(&mut send, Ok(response))
                        .map_err(|e| Status::new(code::INTERNAL, e.to_string())),
                    Err(status) => Err(status),
                },
            };
            if let Err(status) = result {
                if stream_error(&mut send, &req, status).is_err() {
                    return;
                }
            }
        }
        send_status(&mut send, &Status::new(code::OK, ""));
    }
}

/// An error for one stream request: `error_message`, plus the request's model and id so the
/// client can tell which request failed.
fn stream_error(
    send: &mut SendStream<Bytes>,
    req: &pb::ModelInferRequest,
    status: Status,
) -> Result<(), h2::Error> {
    let msg = pb::ModelStreamInferResponse {
        error_message: status.message,
        infer_response: Some(pb::ModelInferResponse {
            model_name: req.model_name.clone(),
            model_version: req.model_version.clone(),
            id: req.id.clone(),
            ..Default::default()
        }),
    };
    send_message(send, &msg)
}

/// The system and CUDA shared memory extensions' calls.
async fn shared_memory_call(
    method: &str,
    source: &mut MessageSource,
    r: &mut SendResponse<Bytes>,
    shared: &Shared,
) {
    let (sys, cuda) = (&shared.shm, &shared.shm.cuda);
    let invalid = Status::invalid;
    match method {
        "SystemSharedMemoryRegister" => {
            unary(source, r, |q| shm::grpc_register(sys, &q).map_err(invalid)).await
        }
        "SystemSharedMemoryUnregister" => {
            unary(source, r, |q| Ok(shm::grpc_unregister(sys, &q))).await
        }
        "SystemSharedMemoryStatus" => {
            unary(source, r, |q| shm::grpc_status(sys, &q).map_err(invalid)).await
        }
        "CudaSharedMemoryRegister" => {
            unary(source, r, |q| {
                cuda_shm::grpc_register(cuda, &q).map_err(invalid)
            })
            .await
        }
        "CudaSharedMemoryUnregister" => {
            unary(source, r, |q| Ok(cuda_shm::grpc_unregister(cuda, &q))).await
        }
        "CudaSharedMemoryStatus" => {
            unary(source, r, |q| {
                cuda_shm::grpc_status(cuda, &q).map_err(invalid)
            })
            .await
        }
        _ => answer_unary(
            r,
            Err::<pb::ServerLiveResponse, _>(Status::new(
                code::UNIMPLEMENTED,
                format!("unknown gRPC method '{method}'"),
            )),
        ),
    }
}

/// A unary call: one request message in, `answer` out.
async fn unary<Req: Message + Default, Resp: Message>(
    source: &mut MessageSource,
    respond: &mut SendResponse<Bytes>,
    answer: impl FnOnce(Req) -> Result<Resp, Status>,
) {
    let result = source.single::<Req>().await.and_then(answer);
    answer_unary(respond, result);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delay::Delay;

    fn service(serial: bool) -> Service {
        let shared = Arc::new(Shared::new(
            vec![Some(Delay::Fixed(Duration::from_millis(2))); MODELS.len()],
            vec![serial; MODELS.len()],
        ));
        Service::new(shared, 7)
    }

    #[test]
    fn serial_models_queue_behind_each_other() {
        let ms = Duration::from_millis;
        let (s, p) = (service(true), service(false));
        let now = Instant::now();
        assert_eq!(s.reserve(0, now, 1, ms(5)).start, now);
        assert_eq!(s.reserve(0, now + ms(1), 1, ms(5)).start, now + ms(5));
        assert_eq!(
            s.reserve(1, now, 1, ms(5)).start,
            now,
            "models have their own instance"
        );
        assert_eq!(p.reserve(0, now, 1, ms(5)).start, now);
        assert_eq!(p.reserve(0, now, 1, ms(5)).start, now);
        assert_eq!(p.sample(0), ms(2));
    }
}
