//! The state every server thread shares: counters, configured delays, sequences, arrival and
//! trace logs, the fake LLM's settings, registered shared memory and the model repository.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::delay::Delay;
use super::limits::Limits;
use super::llm::state::OpenAiState;
use super::models::MODELS;
use super::places::Places;
use super::repository::Repository;
use super::request_log::{ArrivalLog, ARRIVALS_KEPT};
use super::sequence::Sequences;
use super::shm::ShmRegions;
use super::stats::Stats;
use super::trace::Trace;
use inferperf_wire::clock::Clock;

/// What every server thread shares.
#[derive(Debug)]
pub struct Shared {
    pub stats: Stats,
    /// Per model (index into `MODELS`): its configured compute delay.
    pub delays: Vec<Option<Delay>>,
    /// Per model: executions are serialised (see `ServeConfig::serial`).
    pub serial: Vec<bool>,
    pub stop: AtomicBool,
    /// Live sequences of the sequence models.
    pub sequences: Sequences,
    /// Arrival times of infer requests, per model.
    pub arrivals: ArrivalLog,
    /// Trace settings received.
    pub trace: Trace,
    /// The clock of the arrival times.
    pub clock: Clock,
    /// OpenAI endpoint settings and the token send log.
    pub openai: OpenAiState,
    /// Registered system shared memory regions.
    pub shm: ShmRegions,
    /// Which models are loaded, with which config (the model repository extension).
    pub repo: Repository,
    /// What a client may send (sizes, connections, time).
    pub limits: Limits,
    /// Connections open now, HTTP and gRPC, and their places.
    pub conns: Places,
    /// What `/metrics` serves (`--metrics-style`).
    pub metrics_style: crate::metrics::MetricsStyle,
}

impl Shared {
    /// Fresh state for the given per-model delays and serial flags (indexed like `MODELS`).
    pub fn new(delays: Vec<Option<Delay>>, serial: Vec<bool>) -> Shared {
        Shared {
            stats: Stats::new(),
            delays,
            serial,
            stop: AtomicBool::new(false),
            sequences: Sequences::default(),
            arrivals: ArrivalLog::new(MODELS.len(), ARRIVALS_KEPT),
            trace: Trace::default(),
            clock: Clock::new(),
            openai: OpenAiState::default(),
            shm: Default::default(),
            repo: Default::default(),
            limits: Limits::default(),
            conns: Places::default(),
            metrics_style: Default::default(),
        }
    }

    /// Logs the arrival of an infer request for model `index` at `at`.
    pub fn log_arrival(&self, index: usize, at: Instant) {
        self.arrivals.record(index, self.clock.at_ns(at));
    }
}
