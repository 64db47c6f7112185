//! The one loop that drives a running engine through a load: it watches Ctrl-C (and the
//! run's stop flag), worker errors and the caller's end condition, and hands the workers'
//! records to the caller on a tick. The level coordinator (windows, stability, warm-up, the
//! periodic ramp) and `profile` (every record kept, a progress line) are its users; what
//! differs between them is a [`Phase`]: when to stop and what to do with gathered records.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::error::Result;

/// How a driven phase ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The phase's own end condition held.
    Done,
    /// Ctrl-C or the run's stop flag.
    Interrupted,
    /// A worker failed (`Thread [i] had error: ...`) or gathered records did (validation).
    Failed(String),
}

/// The caller's part of the loop.
pub trait Phase {
    /// When to stop: `true` ends the loop with [`End::Done`]. Looked at before each gather,
    /// so a caller that gathers once more after the loop has every record.
    fn done(&mut self, engine: &Engine) -> bool;
    /// What to do with the workers' records; `Some(message)` fails the phase.
    fn gather(&mut self, engine: &mut Engine) -> Result<Option<String>>;
    /// How long to sleep before the next look.
    fn nap(&self) -> Duration;
}

/// What the loop watches besides the phase.
#[derive(Clone, Copy)]
pub struct Watch<'a> {
    /// The run's stop flag; with it Ctrl-C is watched too. `None`: neither is (a drain).
    pub stop: Option<&'a AtomicBool>,
    /// The first worker error ends the phase (perf_analyzer); `false` leaves failed requests
    /// to the records (`profile`).
    pub fail_on_error: bool,
    /// How often [`Phase::gather`] is called; `Duration::MAX`: never.
    pub gather_every: Duration,
}

/// The run was stopped: its flag is set or the user pressed Ctrl-C.
pub fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed) || crate::signal::interrupted()
}

/// Runs `phase` on `engine` until it is done, interrupted or failed.
pub fn drive(watch: Watch, engine: &mut Engine, phase: &mut dyn Phase) -> Result<End> {
    let mut gathered_at = Instant::now();
    loop {
        if watch.stop.is_some_and(stopped) {
            return Ok(End::Interrupted);
        }
        if watch.fail_on_error {
            if let Some((i, msg)) = engine.first_error() {
                return Ok(End::Failed(format!("Thread [{i}] had error: {msg}")));
            }
        }
        if phase.done(engine) {
            return Ok(End::Done);
        }
        if gathered_at.elapsed() >= watch.gather_every {
            if let Some(msg) = phase.gather(engine)? {
                return Ok(End::Failed(msg));
            }
            gathered_at = Instant::now();
        }
        std::thread::sleep(phase.nap());
    }
}

/// A phase that only waits for every worker to finish its budget (a warm-up); sleeps `.0`
/// between looks.
pub struct UntilFinished(pub Duration);

impl Phase for UntilFinished {
    fn done(&mut self, engine: &Engine) -> bool {
        engine.all_finished()
    }
    fn gather(&mut self, _engine: &mut Engine) -> Result<Option<String>> {
        Ok(None)
    }
    fn nap(&self) -> Duration {
        self.0
    }
}
