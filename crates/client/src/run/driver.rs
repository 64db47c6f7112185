//! The one loop that drives a running load: it watches Ctrl-C (and the run's stop flag),
//! worker errors and the caller's end condition, and hands the workers' records to the
//! caller on a tick. Its users, all on the engine, are the level coordinator (windows,
//! stability, warm-up, the periodic ramp), `profile` (every record kept, a progress line) and
//! the multi-turn sessions (every conversation to its end). What differs between them is the
//! engine's request source and a [`Phase`]: when to stop and what to do with gathered records.

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

/// What sends the requests: the engine's workers (a stand-in in tests).
pub trait Source {
    /// The first worker error: the worker's index and the message.
    fn first_error(&self) -> Option<(usize, String)>;
    /// Every worker has finished its budget.
    fn all_finished(&self) -> bool;
    /// The failures so far by kind, as one line (see `FailTally::summary`).
    fn fail_summary(&self) -> Option<String> {
        None
    }
}

impl Source for Engine {
    fn first_error(&self) -> Option<(usize, String)> {
        Engine::first_error(self)
    }
    fn fail_summary(&self) -> Option<String> {
        let (tally, completed) = self.fail_tally();
        tally.summary(completed)
    }
    fn all_finished(&self) -> bool {
        Engine::all_finished(self)
    }
}

/// The caller's part of the loop.
pub trait Phase<S: ?Sized = Engine> {
    /// When to stop: `true` ends the loop with [`End::Done`]. Looked at before each gather,
    /// so a caller that gathers once more after the loop has every record.
    fn done(&mut self, source: &S) -> bool;
    /// What to do with the workers' records; `Some(message)` fails the phase.
    fn gather(&mut self, source: &mut S) -> Result<Option<String>>;
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

/// Runs `phase` on `source` until it is done, interrupted or failed.
pub fn drive<S: Source + ?Sized>(
    watch: Watch,
    source: &mut S,
    phase: &mut dyn Phase<S>,
) -> Result<End> {
    let mut gathered_at = Instant::now();
    loop {
        if watch.stop.is_some_and(stopped) {
            return Ok(End::Interrupted);
        }
        if watch.fail_on_error {
            if let Some((i, msg)) = source.first_error() {
                let mut line = format!("Thread [{i}] had error: {msg}");
                if let Some(summary) = source.fail_summary() {
                    line = format!("{line}\n{summary}");
                }
                return Ok(End::Failed(line));
            }
        }
        if phase.done(source) {
            return Ok(End::Done);
        }
        if gathered_at.elapsed() >= watch.gather_every {
            if let Some(msg) = phase.gather(source)? {
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

impl<S: Source + ?Sized> Phase<S> for UntilFinished {
    fn done(&mut self, source: &S) -> bool {
        source.all_finished()
    }
    fn gather(&mut self, _source: &mut S) -> Result<Option<String>> {
        Ok(None)
    }
    fn nap(&self) -> Duration {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Finishes after `looks` looks at it; fails from look `fail_at` on.
    struct Fake {
        looks: Cell<u32>,
        finish_at: u32,
        fail_at: u32,
    }

    impl Source for Fake {
        fn first_error(&self) -> Option<(usize, String)> {
            (self.looks.get() >= self.fail_at).then(|| (2, "boom".to_string()))
        }
        fn all_finished(&self) -> bool {
            self.looks.set(self.looks.get() + 1);
            self.looks.get() >= self.finish_at
        }
    }

    fn fake(finish_at: u32, fail_at: u32) -> Fake {
        Fake {
            looks: Cell::new(0),
            finish_at,
            fail_at,
        }
    }

    /// Counts gathers; fails the phase at gather `fail_at`.
    struct Count {
        gathers: u32,
        fail_at: u32,
    }

    impl Phase<Fake> for Count {
        fn done(&mut self, source: &Fake) -> bool {
            source.all_finished()
        }
        fn gather(&mut self, _source: &mut Fake) -> Result<Option<String>> {
            self.gathers += 1;
            Ok((self.gathers == self.fail_at).then(|| "bad output".to_string()))
        }
        fn nap(&self) -> Duration {
            Duration::ZERO
        }
    }

    fn watch(stop: Option<&AtomicBool>, fail_on_error: bool, every: Duration) -> Watch<'_> {
        Watch {
            stop,
            fail_on_error,
            gather_every: every,
        }
    }

    #[test]
    fn gathers_on_each_look_until_the_phase_is_done() {
        let mut count = Count {
            gathers: 0,
            fail_at: 0,
        };
        let flag = AtomicBool::new(false);
        let w = watch(Some(&flag), true, Duration::ZERO);
        let end = drive(w, &mut fake(4, u32::MAX), &mut count).unwrap();
        assert_eq!(end, End::Done);
        assert_eq!(count.gathers, 3);
        let mut quiet = Count {
            gathers: 0,
            fail_at: 0,
        };
        let w = watch(None, true, Duration::MAX);
        assert_eq!(
            drive(w, &mut fake(4, u32::MAX), &mut quiet).unwrap(),
            End::Done
        );
        assert_eq!(quiet.gathers, 0);
    }

    #[test]
    fn a_worker_error_ends_the_phase_only_when_watched() {
        let mut phase = UntilFinished(Duration::ZERO);
        let w = watch(None, true, Duration::MAX);
        let end = drive(w, &mut fake(10, 3), &mut phase).unwrap();
        assert_eq!(end, End::Failed("Thread [2] had error: boom".into()));
        let w = watch(None, false, Duration::MAX);
        assert_eq!(drive(w, &mut fake(10, 3), &mut phase).unwrap(), End::Done);
    }

    #[test]
    fn a_failed_gather_fails_the_phase() {
        let mut count = Count {
            gathers: 0,
            fail_at: 2,
        };
        let w = watch(None, true, Duration::ZERO);
        let end = drive(w, &mut fake(10, u32::MAX), &mut count).unwrap();
        assert_eq!(end, End::Failed("bad output".into()));
        assert_eq!(count.gathers, 2);
    }

    #[test]
    fn the_stop_flag_interrupts_unless_draining() {
        let flag = AtomicBool::new(true);
        let mut phase = UntilFinished(Duration::ZERO);
        let mut source = fake(5, u32::MAX);
        let w = watch(Some(&flag), true, Duration::MAX);
        assert_eq!(drive(w, &mut source, &mut phase).unwrap(), End::Interrupted);
        assert_eq!(source.looks.get(), 0);
        let w = watch(None, true, Duration::MAX);
        assert_eq!(drive(w, &mut source, &mut phase).unwrap(), End::Done);
        assert_eq!(source.looks.get(), 5);
    }
}
