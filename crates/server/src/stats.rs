//! Statistics counters shared by all server threads, and their Triton JSON form.
//!
//! One mutex per model: a request takes it once, after its response is ready, so it is
//! uncontended with one thread and short with several; a snapshot is then always consistent
//! (count and ns of a bucket move together), which a client differencing two snapshots needs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::models::{MODELS, MODEL_VERSION};

/// Triton's `StatisticDuration`: how many times, and how long in total (ns).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatDuration {
    pub count: u64,
    pub ns: u64,
}

impl StatDuration {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.ns += ns;
    }

    fn json(&self) -> Value {
        json!({"count": self.count, "ns": self.ns})
    }
}

/// What one successful inference contributes; all durations in ns.
#[derive(Debug, Default, Clone, Copy)]
pub struct InferTiming {
    pub batch_size: usize,
    /// Tensor data bytes of all inputs (binary or decoded from JSON).
    pub input_bytes: u64,
    /// From the request being fully read to its processing starting.
    pub queue_ns: u64,
    /// Parsing the request JSON and decoding/validating the input tensors.
    pub input_ns: u64,
    /// The model's compute plus its configured delay, as actually elapsed.
    pub infer_ns: u64,
    /// Encoding the response.
    pub output_ns: u64,
    /// From the request being fully read to its response being ready to write.
    pub success_ns: u64,
    /// It joined a dynamic batch another request started: its inferences count, but the
    /// execution (and its batch statistics) is the other request's.
    pub batched: bool,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct BatchStats {
    pub compute_input: StatDuration,
    pub compute_infer: StatDuration,
    pub compute_output: StatDuration,
}

/// One model's statistics (a snapshot of it is what the gRPC statistics message carries).
#[derive(Debug, Default, Clone)]
pub struct ModelStats {
    /// Milliseconds since the Unix epoch of the last finished inference (0 = never).
    pub last_inference_ms: u64,
    pub inference_count: u64,
    pub execution_count: u64,
    pub success: StatDuration,
    pub fail: StatDuration,
    pub queue: StatDuration,
    pub compute_input: StatDuration,
    pub compute_infer: StatDuration,
    pub compute_output: StatDuration,
    /// By batch size (1 for a model that does not batch), sizes that ran only.
    pub batch: BTreeMap<usize, BatchStats>,
    pub input_bytes: u64,
}

/// Per-model totals for tests and the lead's integration checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelCounters {
    pub name: String,
    /// Infer requests that named this model (successful and failed).
    pub infer_requests: u64,
    /// Sum of the batch sizes of successful requests.
    pub inferences: u64,
    /// Tensor data bytes of successful requests' inputs.
    pub input_bytes: u64,
    /// Infer requests that were answered with an error.
    pub failures: u64,
}

/// A snapshot of the server's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Every HTTP request answered, on any path, including malformed ones.
    pub http_requests: u64,
    /// Every gRPC call answered (unary calls and streams, on any method).
    pub grpc_calls: u64,
    /// Infer requests for known models (successful and failed).
    pub infer_requests: u64,
    pub per_model: Vec<ModelCounters>,
    /// Sequences started (accepted START requests) and ended (accepted END requests).
    pub sequences_started: u64,
    pub sequences_ended: u64,
    /// Sequences started and not yet ended.
    pub sequences_live: u64,
}

impl Counters {
    /// The counters of one model by name.
    pub fn model(&self, name: &str) -> Option<&ModelCounters> {
        self.per_model.iter().find(|m| m.name == name)
    }
}

/// Counters of the whole server, one entry per model of [`MODELS`].
#[derive(Debug)]
pub struct Stats {
    http_requests: AtomicU64,
    grpc_calls: AtomicU64,
    models: Vec<Mutex<ModelStats>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        let models = MODELS
            .iter()
            .map(|_| Mutex::new(ModelStats::default()))
            .collect();
        Stats {
            http_requests: AtomicU64::new(0),
            grpc_calls: AtomicU64::new(0),
            models,
        }
    }

    /// A poisoned lock only means another thread panicked mid-update; the numbers are still
    /// the best available, so keep serving them.
    fn model(&self, index: usize) -> MutexGuard<'_, ModelStats> {
        self.models[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn count_http_request(&self) {
        self.http_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_grpc_call(&self) {
        self.grpc_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// A consistent copy of one model's statistics (index into `MODELS`).
    pub fn snapshot(&self, index: usize) -> ModelStats {
        self.model(index).clone()
    }

    /// Records one successful request (one execution of `t.batch_size` inferences, unless
    /// it joined another's batch).
    pub fn record_success(&self, model: usize, t: &InferTiming) {
        let now = now_ms();
        let mut s = self.model(model);
        s.last_inference_ms = now;
        s.inference_count += t.batch_size as u64;
        s.success.add(t.success_ns);
        s.queue.add(t.queue_ns);
        s.compute_input.add(t.input_ns);
        s.compute_infer.add(t.infer_ns);
        s.compute_output.add(t.output_ns);
        s.input_bytes += t.input_bytes;
        if !t.batched {
            s.execution_count += 1;
            let b = s.batch.entry(t.batch_size).or_default();
            b.compute_input.add(t.input_ns);
            b.compute_infer.add(t.infer_ns);
            b.compute_output.add(t.output_ns);
        }
    }

    /// Records one failed request; `ns` from the request being read to the error being ready.
    pub fn record_failure(&self, model: usize, ns: u64) {
        self.model(model).fail.add(ns);
    }

    /// `{"model_stats":[...]}` for one model or (None) all of them.
    pub fn to_json(&self, only: Option<usize>) -> Value {
        self.to_json_of((0..MODELS.len()).filter(|&i| only.is_none() || only == Some(i)))
    }

    /// The statistics JSON of the given models (indices into `MODELS`), in that order.
    pub fn to_json_of(&self, models: impl Iterator<Item = usize>) -> Value {
        let entries: Vec<Value> = models.map(|i| self.model_json(i)).collect();
        json!({ "model_stats": entries })
    }

    fn model_json(&self, index: usize) -> Value {
        let s = self.model(index);
        let batch_stats: Vec<Value> = s
            .batch
            .iter()
            .map(|(size, b)| {
                json!({"batch_size": size, "compute_input": b.compute_input.json(),
                    "compute_infer": b.compute_infer.json(),
                    "compute_output": b.compute_output.json()})
            })
            .collect();
        let zero = StatDuration::default().json();
        json!({
            "name": MODELS[index].name,
            "version": MODEL_VERSION,
            "last_inference": s.last_inference_ms,
            "inference_count": s.inference_count,
            "execution_count": s.execution_count,
            "inference_stats": {
                "success": s.success.json(),
                "fail": s.fail.json(),
                "queue": s.queue.json(),
                "compute_input": s.compute_input.json(),
                "compute_infer": s.compute_infer.json(),
                "compute_output": s.compute_output.json(),
                "cache_hit": zero,
                "cache_miss": zero,
            },
            "response_stats": {},
            "batch_stats": batch_stats,
            "memory_usage": [],
        })
    }

    pub fn counters(&self) -> Counters {
        let per_model: Vec<ModelCounters> = (0..MODELS.len())
            .map(|i| {
                let s = self.model(i);
                ModelCounters {
                    name: MODELS[i].name.to_string(),
                    infer_requests: s.success.count + s.fail.count,
                    inferences: s.inference_count,
                    input_bytes: s.input_bytes,
                    failures: s.fail.count,
                }
            })
            .collect();
        Counters {
            http_requests: self.http_requests.load(Ordering::Relaxed),
            grpc_calls: self.grpc_calls.load(Ordering::Relaxed),
            infer_requests: per_model.iter().map(|m| m.infer_requests).sum(),
            per_model,
            sequences_started: 0,
            sequences_ended: 0,
            sequences_live: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failure_accumulate() {
        let stats = Stats::new();
        let t = InferTiming {
            batch_size: 4,
            input_bytes: 512,
            queue_ns: 1,
            input_ns: 10,
            infer_ns: 100,
            output_ns: 20,
            success_ns: 140,
            batched: false,
        };
        stats.record_success(0, &t);
        stats.record_success(0, &InferTiming { batch_size: 1, ..t });
        let joined = InferTiming { batched: true, ..t };
        let other = Stats::new();
        other.record_success(1, &joined);
        let s1 = other.snapshot(1);
        assert_eq!((s1.inference_count, s1.execution_count), (4, 0));
        assert!(s1.batch.is_empty() && s1.compute_infer.count == 1);
        stats.record_failure(0, 7);
        stats.count_http_request();
        stats.count_grpc_call();
        stats.count_grpc_call();
        let j = stats.to_json(Some(0));
        let m = &j["model_stats"][0];
        assert_eq!(j["model_stats"].as_array().unwrap().len(), 1);
        assert_eq!(m["name"], "simple");
        assert_eq!(m["inference_count"], 5);
        assert_eq!(m["execution_count"], 2);
        assert_eq!(
            m["inference_stats"]["success"],
            json!({"count": 2, "ns": 280})
        );
        assert_eq!(m["inference_stats"]["fail"], json!({"count": 1, "ns": 7}));
        assert_eq!(
            m["inference_stats"]["compute_infer"],
            json!({"count": 2, "ns": 200})
        );
        assert_eq!(m["batch_stats"][0]["batch_size"], 1);
        assert_eq!(m["batch_stats"][1]["batch_size"], 4);
        assert!(m["last_inference"].as_u64().unwrap() > 0);
        let c = stats.counters();
        assert_eq!((c.http_requests, c.grpc_calls), (1, 2));
        assert_eq!(stats.snapshot(0).success.count, 2);
        assert_eq!(c.infer_requests, 3);
        let simple = c.model("simple").unwrap();
        assert_eq!(
            (simple.inferences, simple.input_bytes, simple.failures),
            (5, 1024, 1)
        );
        assert_eq!(
            stats.to_json(None)["model_stats"].as_array().unwrap().len(),
            MODELS.len()
        );
    }
}
