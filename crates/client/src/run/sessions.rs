//! `--session-concurrency N`: multi-turn chat over the openai service kind.
//!
//! The input data's entries are grouped into conversations by `session_id`. The engine runs
//! N slots (connections), each running one conversation at a time, turn by turn: send (with
//! the history so far merged into `messages`), read the whole answer, wait the turn's
//! `delay`, send the next turn. When a conversation ends its slot starts the next one nobody
//! has started, until all ran. The conversations are the engine's request source
//! ([`source`]); the run's driver loop ([`super::driver`]) waits for them and watches Ctrl-C.
//!
//! The only report is the profile export: one experiment `{request_rate, 0.0}` whose one
//! window spans `[0, u64::MAX]`, holding every answered turn with its per-event timestamps.
//! The console gets one summary line. A failed turn ends its conversation (the later turns
//! would carry a broken history); so does a turn whose connection moves no byte for
//! `--request-idle-timeout` (default ten minutes: "timed out after 600 s idle
//! (--request-idle-timeout) waiting for the response head") or that runs past
//! `--request-timeout`. A turn lost before any answer byte on a connection
//! the server closed while idle is sent once more on a new one. Ctrl-C stops starting turns
//! (a turn still in flight counts as failed), and the export is written either way.

mod source;

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use self::source::{Book, Logged, Plan};
use super::driver::{self, End, UntilFinished, Watch};
use super::load::LoadDesc;
use super::RunResult;
use crate::clock::Clock;
use crate::config::{Config, InputData};
use crate::engine::turns::TurnSource;
use crate::engine::wire::Wire;
use crate::engine::{available_cores, Engine, EngineSpec};
use crate::error::{Error, Result};
use crate::inputs::openai::sessions::{group_sessions, Session};
use crate::inputs::openai::{load_payloads, PayloadOptions};
use crate::measure::record::WindowRecords;
use crate::measure::RequestRecord;
use crate::report::export::ExportExperiment;
use crate::report::LoadValue;

/// How often the driver loop looks at the slots and the stop flag.
const NAP: Duration = Duration::from_millis(50);

/// Runs the sessions, writes the export and prints the summary line to `out`.
pub fn run(cfg: &Config, out: &mut dyn Write, stop: &AtomicBool) -> Result<RunResult> {
    let sessions = load_sessions(cfg)?;
    let slots = usize::try_from(cfg.session_concurrency).unwrap_or(usize::MAX);
    check_enough(slots, sessions.len())?;
    if cfg.profile_export_file.is_none() {
        eprintln!(
            "Warning: --session-concurrency reports only through --profile-export-file, \
             which was not given."
        );
    }
    // Sessions are an openai-kind feature (the flags were checked against the kind).
    let service = super::kinds::service(super::kinds::pick(cfg)?)?;
    let target = service.prepare(cfg)?;
    let headers = cfg.headers.clone();
    let book = Arc::new(Book::new(
        target.host.clone(),
        cfg.endpoint.clone(),
        headers,
        sessions,
    ));
    let spec = engine_spec(cfg, &target);
    let (turns, stopped) = run_turns(&spec, &book, cfg.session_concurrency, stop)?;
    let interrupted = stopped || driver::stopped(stop);
    let summary = Summary::of(&book.sessions, &turns, book.started(), interrupted);
    let _ = out.write_all(summary.line(slots).as_bytes());
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

/// The engine for the slots: plain HTTP/1.1 connections, every answer kept (the history
/// needs it, and so does the export), a failed turn no reason to stop.
fn engine_spec(cfg: &Config, target: &super::setup::Target) -> EngineSpec {
    let cores = available_cores().len().max(1);
    EngineSpec {
        addr: target.addr,
        // Unused: every request is composed at send time.
        requests: Arc::new(vec![Vec::new()]),
        keep_bodies: true,
        keep_going: true,
        http_trace: false,
        rx_stamps: cfg.rx_stamps,
        tx_stamps: cfg.tx_stamps.then(Default::default),
        packet_stamps: None,
        fresh_connections: false,
        pin: cfg.pin_threads,
        max_workers: cfg.max_threads.unwrap_or(cores).min(cores),
        clock: Clock::new(),
        tls: target.tls.clone(),
        wire: Wire::Http1,
        sequences: None,
        slots: None,
        read_batch: None,
        request_limits: super::request_limits(cfg),
        reply_check: Default::default(),
        max_response_bytes: cfg.max_response_bytes,
        cancel: None,
        prefill: None,
    }
}

/// Runs the book's conversations on `slots` engine slots until every one ran or `stop` is
/// set: every composed turn with its result, in start order, and whether the run was
/// stopped.
fn run_turns(
    spec: &EngineSpec,
    book: &Arc<Book>,
    slots: u64,
    stop: &AtomicBool,
) -> Result<(Vec<TurnDone>, bool)> {
    let load = LoadDesc::sessions(slots, TurnSource(Arc::new(Plan(book.clone()))));
    let mut engine = Engine::start_load(spec, &load.engine_load(), None)?;
    let stopped = wait(&mut engine, stop);
    let mut window = WindowRecords::default();
    let collected = engine.collect(u64::MAX, &mut window);
    drop(engine);
    collected?;
    let mut turns = turns_done(&book.take_log(), &window, spec.clock.now_ns());
    turns.sort_by_key(|t| t.result.record.start_ns);
    Ok((turns, stopped))
}

/// Waits until every conversation ran, or the run is stopped (then no new turn starts);
/// `true` when stopped.
fn wait(engine: &mut Engine, stop: &AtomicBool) -> bool {
    let watch = Watch {
        stop: Some(stop),
        fail_on_error: false,
        gather_every: Duration::MAX,
    };
    let mut phase = UntilFinished(NAP);
    // Waiting gathers nothing, so it cannot fail.
    let end = driver::drive(watch, engine, &mut phase);
    let stopped = matches!(end, Ok(End::Interrupted));
    if stopped {
        engine.halt();
    }
    stopped
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

/// N slots need at least N conversations.
fn check_enough(slots: usize, sessions: usize) -> Result<()> {
    if sessions < slots {
        return Err(Error::usage(format!(
            "--session-concurrency {slots}: the input data has only {sessions} unique \
             session(s) (by \"session_id\"); at least {slots} are needed."
        )));
    }
    Ok(())
}

/// What one turn gave.
#[derive(Debug, Clone)]
struct TurnResult {
    /// Times (ns since the epoch), `ok`, `sse` and `responses` set; body offsets not yet.
    record: RequestRecord,
    /// The export body: the whole answer, or the framed events of a streamed one.
    body: Vec<u8>,
    /// Why the turn failed.
    error: Option<String>,
}

/// One sent turn.
struct TurnDone {
    /// Session index (data order).
    session: usize,
    /// The export's `request_inputs` object: the body as sent, history included.
    inputs: String,
    result: TurnResult,
}

/// Every composed turn with its record from the engine (`step` is the turn's id in `log`).
/// A turn without a record was still in flight when the run was stopped: it failed, and
/// ends at `now_ns`.
fn turns_done(log: &[Logged], window: &WindowRecords, now_ns: u64) -> Vec<TurnDone> {
    let mut results: Vec<Option<TurnResult>> = vec![None; log.len()];
    for rec in &window.records {
        let Some(slot) = results.get_mut(rec.step as usize) else {
            continue;
        };
        let (off, len) = (rec.body_off as usize, rec.body_len as usize);
        let body = window.bodies.get(off..off + len).unwrap_or(&[]).to_vec();
        let record = RequestRecord {
            body_off: 0,
            body_len: 0,
            ..*rec
        };
        let error = log[rec.step as usize].error.clone();
        let error = error.or_else(|| (!rec.ok).then(|| "the request failed".to_string()));
        *slot = Some(TurnResult {
            record,
            body,
            error,
        });
    }
    log.iter()
        .zip(results)
        .map(|(turn, result)| TurnDone {
            session: turn.session,
            inputs: turn.inputs.clone(),
            result: result.unwrap_or_else(|| TurnResult {
                record: RequestRecord {
                    start_ns: turn.composed_ns,
                    send_end_ns: turn.composed_ns,
                    end_ns: now_ns.max(turn.composed_ns),
                    ok: false,
                    ..RequestRecord::default()
                },
                body: Vec::new(),
                error: Some("interrupted before the answer was complete".into()),
            }),
        })
        .collect()
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
#[path = "sessions_conn_tests.rs"]
mod conn_tests;

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
            },
        }
    }

    #[test]
    fn records_meet_their_turns_and_a_turn_in_flight_at_a_stop_failed() {
        let logged = |session, error: Option<&str>| Logged {
            session,
            inputs: format!("in{session}"),
            composed_ns: 7,
            error: error.map(str::to_string),
        };
        let log = [
            logged(0, None),
            logged(1, Some("HTTP 500: boom")),
            logged(0, None),
        ];
        let mut window = WindowRecords::default();
        let answered = RequestRecord {
            step: 0,
            start_ns: 10,
            ok: true,
            body_len: 6,
            ..RequestRecord::default()
        };
        let failed = RequestRecord {
            step: 1,
            start_ns: 20,
            ..RequestRecord::default()
        };
        window.append_records(&[answered, failed], b"answer");
        let turns = turns_done(&log, &window, 99);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].result.body, b"answer");
        assert_eq!(
            turns[0].result.record.body_len, 0,
            "offsets are set by the export"
        );
        assert!(turns[0].result.error.is_none());
        assert_eq!(turns[1].result.error.as_deref(), Some("HTTP 500: boom"));
        assert_eq!((turns[1].session, turns[1].inputs.as_str()), (1, "in1"));
        let cut = &turns[2].result;
        assert_eq!(
            cut.error.as_deref(),
            Some("interrupted before the answer was complete")
        );
        assert_eq!((cut.record.start_ns, cut.record.end_ns), (7, 99));
        assert!(!cut.record.ok);
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
