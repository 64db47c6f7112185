//! The other processes a run measures its levels with (`--enable-mpi`), as the coordinator
//! sees them: a few agreements per level and per window. A run on its own uses [`Alone`],
//! for which every agreement is immediate.

use crate::config::Config;
use crate::error::Result;
use crate::measure::{WindowRecords, WindowStats};

/// What the level coordinator needs from its peers. Every call is made by every process in
/// the same order.
pub trait Peers {
    /// This process's part of `total` (requests, concurrency).
    fn share(&self, total: u64) -> u64;
    /// This process's part of a request rate (per second).
    fn share_rate(&self, total: f64) -> f64;
    /// The load is split across the processes and their windows merged into one.
    fn scale_out(&self) -> bool;
    /// This process writes the console report, CSV and profile export.
    fn reports(&self) -> bool;
    /// The configuration this process runs with, when it differs from the run's.
    fn local_config(&self, cfg: &Config) -> Option<Config>;
    /// Every process waits for the others before a level's load starts.
    fn start_level(&mut self) -> Result<()>;
    /// Scale-out: every process ends its window at the same moment.
    fn end_window(&mut self) -> Result<()>;
    /// Scale-out: the window's statistics and records are merged on the reporting process
    /// (the others keep theirs).
    fn merge_window(
        &mut self,
        stats: &mut WindowStats,
        records: &mut Option<WindowRecords>,
    ) -> Result<()>;
    /// After a window: agrees on whether the level goes on. `local` is this process's
    /// verdict (`None`: measure another window); returns the level's status, or `None` to go
    /// on.
    fn agree(&mut self, local: Option<PointStatus>) -> Option<PointStatus>;
}

/// A run with no peers.
pub struct Alone;

impl Peers for Alone {
    fn share(&self, total: u64) -> u64 {
        total
    }
    fn share_rate(&self, total: f64) -> f64 {
        total
    }
    fn scale_out(&self) -> bool {
        false
    }
    fn reports(&self) -> bool {
        true
    }
    fn local_config(&self, _cfg: &Config) -> Option<Config> {
        None
    }
    fn start_level(&mut self) -> Result<()> {
        Ok(())
    }
    fn end_window(&mut self) -> Result<()> {
        Ok(())
    }
    fn merge_window(
        &mut self,
        _stats: &mut WindowStats,
        _records: &mut Option<WindowRecords>,
    ) -> Result<()> {
        Ok(())
    }
    fn agree(&mut self, local: Option<PointStatus>) -> Option<PointStatus> {
        local
    }
}

/// How a level ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PointStatus {
    Stable,
    /// Not stable within `-r` windows.
    Unstable,
    /// Stable, but its latency reached `-l`.
    OverThreshold,
    /// Ctrl-C: the last windows are reported as they are.
    Interrupted,
    /// A request failed (server error, connection lost); what was measured is reported.
    Failed(String),
    /// No valid request in the windows that count (exit code 3).
    NoValidRequests,
}
