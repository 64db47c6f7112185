//! `--session-concurrency N` (spec §2.9): multi-turn chat over the openai service kind.
//!
//! The input data's entries are grouped into conversations by `session_id`. N threads each
//! run one conversation at a time, turn by turn: send (with the history so far merged into
//! `messages`), read the whole answer, sleep the turn's `delay`, send the next turn. When a
//! conversation ends its thread starts the next one nobody has started, until all ran.
//!
//! The only report is the profile export: one experiment `{request_rate, 0.0}` whose one
//! window spans `[0, u64::MAX]`, holding every answered turn with its per-event timestamps.
//! The console gets one summary line. A failed turn ends its conversation (the later turns
//! would carry a broken history); Ctrl-C stops starting turns, and the export is written
//! either way. The threads are the request source of the run's driver loop
//! ([`super::driver`]), which watches Ctrl-C and the stop flag and tells them to halt.

mod conn;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use self::conn::{Dest, SessionConn, TurnResult};
use super::driver::{self, End, Source, UntilFinished, Watch};
use super::RunResult;
use crate::clock::Clock;
use crate::config::{Config, InputData};
use crate::error::{Error, Result};
use crate::inputs::openai::sessions::{group_sessions, History, Session};
use crate::inputs::openai::{load_payloads, PayloadOptions};
use crate::measure::record::WindowRecords;
use crate::protocol::http1::blocking::server_address_for;
use crate::report::export::ExportExperiment;
use crate::report::LoadValue;
use crate::service::openai::{encode_request, request_inputs_json};

/// Connect (and write) timeout of a session's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A turn whose server sends nothing for this long fails (10 min: long prompts on a busy
/// server can take minutes to their first token).
const IDLE_LIMIT: Duration = Duration::from_secs(600);
/// Longest nap of a turn's delay between looks at the stop flag.
const NAP: Duration = Duration::from_millis(50);

/// Runs the sessions, writes the export and prints the summary line to `out`.
pub fn run(cfg: &Config, out: &mut dyn Write, stop: &AtomicBool) -> Result<RunResult> {
    let sessions = load_sessions(cfg)?;
    let threads = usize::try_from(cfg.session_concurrency).unwrap_or(usize::MAX);
    check_enough(threads, sessions.len())?;
    if cfg.profile_export_file.is_none() {
        eprintln!(
            "Warning: --session-concurrency reports only through --profile-export-file, \
             which was not given."
        );
    }
    // Sessions are an openai-kind feature (the flags were checked against the kind).
    let service = super::kinds::pick(cfg);
    let target = service.prepare(cfg)?;
    let run = SessionRun {
        cfg,
        host: &target.host,
        dest: Dest {
            address: server_address_for(&target.host, target.tls.is_some())?,
            tls: target.tls.clone(),
            connect_timeout: CONNECT_TIMEOUT,
            idle_limit: IDLE_LIMIT,
        },
        clock: Clock::new(),
        sessions: &sessions,
        next: AtomicUsize::new(0),
        stop,
        halt: AtomicBool::new(false),
        finished: AtomicUsize::new(0),
    };
    let mut turns: Vec<TurnDone> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(|| run.worker())).collect();
        run.drive(threads);
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    turns.sort_by_key(|t| t.result.record.start_ns);
    let interrupted = run.stopped() || driver::stopped(stop);
    let summary = Summary::of(&sessions, &turns, run.started(), interrupted);
    let _ = out.write_all(summary.line(threads).as_bytes());
    let _ = out.flush();
    let error = summary.error(&turns);
    let experiment = export_experiment(turns);
    let decode = service.export_decoder(cfg, &target, None);
    super::write_reports(cfg, &service.labels(), &[], &[experiment], false, &decode)?;
    Ok(RunResult {
        points: Vec::new(),
        error,
    })
}

/// The data's conversations; a usage error names the file or entry at fault.
fn load_sessions(cfg: &Config) -> Result<Vec<Session>> {
    let InputData::Files(paths) = &cfg.input_data else {
        return Err(Error::usage(
            "--session-concurrency: must supply --input-data (a JSON file whose entries hold \
             \"payload\" and \"session_id\").",
        ));
    };
    let opts = PayloadOptions {
        fixed_schedule: false,
        sessions: true,
    };
    group_sessions(load_payloads(paths, opts)?)
}

/// N threads need at least N conversations.
fn check_enough(threads: usize, sessions: usize) -> Result<()> {
    if sessions < threads {
        return Err(Error::usage(format!(
            "--session-concurrency {threads}: the input data has only {sessions} unique \
             session(s) (by \"session_id\"); at least {threads} are needed."
        )));
    }
    Ok(())
}

/// One sent turn.
struct TurnDone {
    /// Session index (data order) and turn index within it.
    session: usize,
    /// The export's `request_inputs` object: the body as sent, history included.
    inputs: String,
    result: TurnResult,
}

/// What every session thread shares.
struct SessionRun<'a> {
    cfg: &'a Config,
    /// `Host` header value.
    host: &'a str,
    dest: Dest,
    clock: Clock,
    sessions: &'a [Session],
    /// The next session nobody has started.
    next: AtomicUsize,
    stop: &'a AtomicBool,
    /// Set by the driver loop when the run is stopped: no new turn starts.
    halt: AtomicBool,
    /// Threads that have ended.
    finished: AtomicUsize,
}

/// The session threads as the driver's request source. A failed turn ends only its
/// conversation, so there is no error that ends the run.
struct Threads<'r, 'a> {
    run: &'r SessionRun<'a>,
    count: usize,
}

impl Source for Threads<'_, '_> {
    fn first_error(&self) -> Option<(usize, String)> {
        None
    }
    fn all_finished(&self) -> bool {
        self.run.finished.load(Ordering::Acquire) >= self.count
    }
}

/// Counts its thread as ended when dropped (a panicking thread included).
struct Ended<'a>(&'a AtomicUsize);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl SessionRun<'_> {
    /// Drives the `threads` session threads until they have all ended; a stop (Ctrl-C or
    /// the flag) tells them to halt.
    fn drive(&self, threads: usize) {
        let watch = Watch {
            stop: Some(self.stop),
            fail_on_error: false,
            gather_every: Duration::MAX,
        };
        let mut source = Threads {
            run: self,
            count: threads,
        };
        let mut phase = UntilFinished(NAP);
        // Waiting for the threads gathers nothing, so it cannot fail.
        if let Ok(End::Interrupted) = driver::drive(watch, &mut source, &mut phase) {
            self.halt.store(true, Ordering::Relaxed);
        }
    }

    fn stopped(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
    }

    /// Sessions started so far.
    fn started(&self) -> usize {
        self.next.load(Ordering::Relaxed).min(self.sessions.len())
    }

    /// One thread: sessions one after another on one keep-alive connection.
    fn worker(&self) -> Vec<TurnDone> {
        let _ended = Ended(&self.finished);
        let mut conn = SessionConn::new(self.dest.clone());
        let mut done = Vec::new();
        while !self.stopped() {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(session) = self.sessions.get(k) else {
                break;
            };
            self.run_session(k, session, &mut conn, &mut done);
        }
        done
    }

    /// The turns of session `k` in order, until one fails or the run is stopped.
    fn run_session(
        &self,
        k: usize,
        session: &Session,
        conn: &mut SessionConn,
        done: &mut Vec<TurnDone>,
    ) {
        let cfg = self.cfg;
        let stop = || self.stopped();
        let mut history = History::default();
        for (t, turn) in session.turns.iter().enumerate() {
            if t > 0 && self.stopped() {
                return;
            }
            let body = history.compose(&turn.payload);
            let request = encode_request(self.host, &cfg.endpoint, &cfg.headers, &body.body);
            let result = conn.exchange(&request, &self.clock, &stop);
            let failed = result.error.is_some();
            let reply = result.reply.clone();
            done.push(TurnDone {
                session: k,
                inputs: request_inputs_json(&body.body),
                result,
            });
            if failed {
                return;
            }
            history.commit(body, &reply);
            if t + 1 < session.turns.len() {
                self.pause(Duration::from_millis(turn.delay_ms));
            }
        }
    }

    /// Sleeps `delay`, waking early when the run is stopped.
    fn pause(&self, delay: Duration) {
        let until = Instant::now() + delay;
        while !self.stopped() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(NAP));
        }
    }
}

/// The counts of the console line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    sessions: usize,
    started: usize,
    /// Sessions whose every turn was answered.
    completed: usize,
    turns_total: usize,
    sent: usize,
    errors: usize,
    interrupted: bool,
}

impl Summary {
    fn of(sessions: &[Session], turns: &[TurnDone], started: usize, interrupted: bool) -> Self {
        let mut answered = vec![0usize; sessions.len()];
        for t in turns.iter().filter(|t| t.result.error.is_none()) {
            if let Some(n) = answered.get_mut(t.session) {
                *n += 1;
            }
        }
        let completed = sessions
            .iter()
            .zip(&answered)
            .filter(|(s, &n)| n == s.turns.len())
            .count();
        Summary {
            sessions: sessions.len(),
            started,
            completed,
            turns_total: sessions.iter().map(|s| s.turns.len()).sum(),
            sent: turns.len(),
            errors: turns.iter().filter(|t| t.result.error.is_some()).count(),
            interrupted,
        }
    }

    fn line(&self, threads: usize) -> String {
        let mut line = format!(
            "Session concurrency {threads}: {} of {} sessions completed, {} of {} turns sent, \
             {} errors",
            self.completed, self.sessions, self.sent, self.turns_total, self.errors
        );
        if self.interrupted {
            let not_started = self.sessions - self.started;
            line.push_str(&format!(
                " (interrupted; {not_started} sessions not started)"
            ));
        }
        line.push('\n');
        line
    }

    /// The run's error when a turn failed, naming the first failure (turns are in start
    /// order).
    fn error(&self, turns: &[TurnDone]) -> Option<Error> {
        let first = turns.iter().find_map(|t| t.result.error.as_deref())?;
        Some(Error::generic(format!(
            "{} of {} turns failed; the first: {first}",
            self.errors, self.sent
        )))
    }
}

/// The export's one experiment: every sent turn (failed ones are left out by the writer),
/// `request_inputs` as each was sent.
fn export_experiment(turns: Vec<TurnDone>) -> ExportExperiment {
    let mut window = WindowRecords {
        start_ns: 0,
        end_ns: u64::MAX,
        ..WindowRecords::default()
    };
    let mut step_inputs = Vec::with_capacity(turns.len());
    for (i, turn) in turns.into_iter().enumerate() {
        let mut rec = turn.result.record;
        rec.step = u32::try_from(i).unwrap_or(u32::MAX);
        let off = u32::try_from(window.bodies.len());
        let len = u32::try_from(turn.result.body.len());
        if let (true, Ok(off), Ok(len)) = (rec.ok, off, len) {
            rec.body_off = off;
            rec.body_len = len;
            window.bodies.extend_from_slice(&turn.result.body);
        }
        window.records.push(rec);
        window.sent += 1;
        step_inputs.push(turn.inputs);
    }
    ExportExperiment {
        load: LoadValue::RequestRate(0.0),
        windows: vec![window],
        step_inputs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::openai::sessions::Turn;
    use crate::measure::RequestRecord;

    fn session(turns: usize) -> Session {
        Session {
            id: format!("s{turns}"),
            turns: vec![
                Turn {
                    payload: b"{}".to_vec(),
                    delay_ms: 0,
                };
                turns
            ],
        }
    }

    fn sent(session: usize, start_ns: u64, error: Option<&str>) -> TurnDone {
        TurnDone {
            session,
            inputs: format!("{{\"payload\":\"{start_ns}\"}}"),
            result: TurnResult {
                record: RequestRecord {
                    start_ns,
                    end_ns: start_ns + 5,
                    ok: error.is_none(),
                    ..RequestRecord::default()
                },
                body: b"body".to_vec(),
                error: error.map(str::to_string),
                ..TurnResult::default()
            },
        }
    }

    #[test]
    fn too_few_sessions_is_a_usage_error_naming_both_numbers() {
        assert!(check_enough(2, 2).is_ok());
        let err = check_enough(3, 2).unwrap_err();
        assert_eq!(err.exit_code(), 99);
        assert!(err.msg.starts_with("--session-concurrency 3: "), "{err}");
        assert!(err.msg.contains("only 2 unique session(s)"), "{err}");
    }

    #[test]
    fn summary_counts_sessions_turns_and_errors() {
        let sessions = [session(2), session(3)];
        let turns = [
            sent(0, 1, None),
            sent(1, 2, None),
            sent(0, 3, None),
            sent(1, 4, Some("HTTP 500: boom")),
        ];
        let s = Summary::of(&sessions, &turns, 2, false);
        assert_eq!((s.completed, s.turns_total, s.sent, s.errors), (1, 5, 4, 1));
        assert_eq!(
            s.line(2),
            "Session concurrency 2: 1 of 2 sessions completed, 4 of 5 turns sent, 1 errors\n"
        );
        let err = s.error(&turns).unwrap();
        assert_eq!(err.msg, "1 of 4 turns failed; the first: HTTP 500: boom");
        let cut = Summary::of(&sessions, &turns[..1], 1, true);
        assert!(cut
            .line(1)
            .ends_with("(interrupted; 1 sessions not started)\n"));
        assert!(cut.error(&turns[..1]).is_none());
    }

    #[test]
    fn export_keeps_every_turn_and_bodies_of_answered_ones() {
        let exp = export_experiment(vec![sent(0, 10, None), sent(0, 20, Some("x"))]);
        assert_eq!(exp.load, LoadValue::RequestRate(0.0));
        let w = &exp.windows[0];
        assert_eq!((w.start_ns, w.end_ns), (0, u64::MAX));
        assert_eq!(w.records.len(), 2);
        assert_eq!((w.records[0].step, w.records[1].step), (0, 1));
        assert_eq!((w.records[0].body_off, w.records[0].body_len), (0, 4));
        assert_eq!(w.records[1].body_len, 0, "a failed turn keeps no body");
        assert_eq!(w.bodies, b"body");
        assert_eq!(exp.step_inputs[1], "{\"payload\":\"20\"}");
    }
}
