//! What the ranks agree on while a level is measured: when it starts, where each window ends,
//! the merged statistics (scale-out) and whether the level is done.
//!
//! Every rank makes the same collective calls in the same order whatever happened locally
//! (a failed or interrupted rank still takes part in the window's exchange), so no rank waits
//! on a call the others will never make. A collective that fails or times out breaks the
//! session: no further MPI call is made and the level ends as failed with what was measured.

use std::time::{Duration, Instant};

use super::codec::{decode_report, put_window_records, put_window_stats, Reader, Writer};
use super::Collective;
use crate::error::{Error, Result};
use crate::measure::{WindowRecords, WindowStats};
use crate::run::coordinator::PointStatus;

/// How the ranks share the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// perf_analyzer's: each rank profiles its own model and writes its own report; a level
    /// is done when every rank is stable.
    MultiModel,
    /// One model, the load split across ranks; rank 0 merges every window and writes the
    /// only report.
    ScaleOut,
}

/// Rounds of the clock-offset measurement (the median is kept).
const OFFSET_ROUNDS: usize = 5;

pub struct MpiCoord {
    world: Box<dyn Collective>,
    pub mode: Mode,
    pub timeout: Duration,
    /// Rank 0: each rank's clock minus rank 0's (ns); empty on the other ranks.
    pub offsets_ns: Vec<i64>,
    /// Rank 0: the host each rank runs on.
    pub hosts: Vec<String>,
    /// Records from ranks on other hosts are moved onto rank 0's clock.
    shift: bool,
    /// Why the session broke (a collective failed); no MPI call is made after that.
    broken: Option<String>,
    /// Wall time this rank spent in each window's coordination (ns).
    pub window_overhead_ns: Vec<u64>,
    /// The current window's coordination time so far (ns).
    pending_ns: u64,
}

impl MpiCoord {
    /// Sets up coordination over `world`: measures the ranks' clock offsets (rank 0 keeps
    /// them) against `now_ns`, the run's clock.
    pub fn new(
        world: Box<dyn Collective>,
        mode: Mode,
        timeout: Duration,
        now_ns: &dyn Fn() -> u64,
    ) -> Result<MpiCoord> {
        let mut c = MpiCoord {
            world,
            mode,
            timeout,
            offsets_ns: Vec::new(),
            hosts: Vec::new(),
            shift: false,
            broken: None,
            window_overhead_ns: Vec::new(),
            pending_ns: 0,
        };
        c.measure_offsets(now_ns)?;
        Ok(c)
    }

    pub fn rank(&self) -> usize {
        self.world.rank()
    }
    pub fn size(&self) -> usize {
        self.world.size()
    }
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }
    /// This rank writes the console report, CSV and profile export.
    pub fn reports(&self) -> bool {
        self.mode == Mode::MultiModel || self.is_root()
    }
    pub fn scale_out(&self) -> bool {
        self.mode == Mode::ScaleOut
    }

    /// This rank's part of `total` (requests, concurrency): an even split, the remainder to
    /// the lowest ranks. The whole of it in multi-model mode.
    pub fn share(&self, total: u64) -> u64 {
        if !self.scale_out() {
            return total;
        }
        let (n, r) = (self.size() as u64, self.rank() as u64);
        total / n + u64::from(r < total % n)
    }

    /// This rank's part of a request rate (per second).
    pub fn share_rate(&self, total: f64) -> f64 {
        if self.scale_out() {
            total / self.size() as f64
        } else {
            total
        }
    }

    /// Every rank waits for the others (`what` names the step in a failure).
    pub fn barrier(&mut self, what: &str) -> Result<()> {
        self.live()?;
        let res = self.world.barrier(self.timeout);
        self.check(res, what)
    }

    /// The session is usable: nothing has failed yet.
    fn live(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(Error::generic(why.clone())),
            None => Ok(()),
        }
    }

    fn check<T>(&mut self, res: Result<T>, what: &str) -> Result<T> {
        res.map_err(|e| {
            let msg = format!("MPI rank {}: {what}: {e}", self.rank());
            self.broken = Some(msg.clone());
            Error::generic(msg)
        })
    }

    /// Finalizes MPI, unless a collective failed (the others may never join).
    pub fn finish(self) -> Result<()> {
        if self.broken.is_some() {
            return Ok(());
        }
        self.world.finalize()
    }

    /// A session whose collectives failed must not call MPI again (not even Finalize).
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Median over a few barrier-aligned rounds of each rank's clock minus rank 0's, read
    /// right after the barrier. The error is the spread of the ranks' barrier exits (µs on
    /// one host, about one network latency across hosts).
    fn measure_offsets(&mut self, now_ns: &dyn Fn() -> u64) -> Result<()> {
        let mut rounds: Vec<Vec<i64>> = Vec::new();
        for _ in 0..OFFSET_ROUNDS {
            self.barrier("clock offset barrier")?;
            let t = now_ns();
            let res = self.world.gather(0, &t.to_le_bytes(), self.timeout);
            if let Some(all) = self.check(res, "clock offset gather")? {
                let times: Vec<u64> = all.iter().map(|b| first_u64(b)).collect();
                rounds.push(times.iter().map(|&x| x as i64 - times[0] as i64).collect());
            }
        }
        let host = host_name();
        let res = self.world.gather(0, host.as_bytes(), self.timeout);
        if let Some(all) = self.check(res, "host name gather")? {
            self.hosts = all
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect();
            self.shift = self.hosts.iter().any(|h| *h != self.hosts[0]);
            self.offsets_ns = (0..self.size())
                .map(|r| {
                    let mut v: Vec<i64> = rounds.iter().map(|round| round[r]).collect();
                    v.sort_unstable();
                    v[v.len() / 2]
                })
                .collect();
        }
        Ok(())
    }

    /// Scale-out, after a window: every rank sends its statistics (and records, for the
    /// export) to rank 0, which merges them into `stats` and `records` so the window reads
    /// like one process's. Other ranks keep theirs unchanged.
    pub fn merge_window(
        &mut self,
        stats: &mut WindowStats,
        records: &mut Option<WindowRecords>,
    ) -> Result<()> {
        self.live()?;
        let mut w = Writer::default();
        put_window_stats(&mut w, stats);
        w.u8(u8::from(records.is_some()));
        if let Some(r) = records.as_ref() {
            put_window_records(&mut w, r);
        }
        let res = self.world.gather(0, &w.buf, self.timeout);
        let Some(all) = self.check(res, "gather of window statistics")? else {
            return Ok(());
        };
        for (rank, bytes) in all.iter().enumerate().skip(1) {
            let (s, recs) = decode_report(bytes)
                .map_err(|e| Error::generic(format!("rank {rank}'s window: {e}")))?;
            add_window(stats, &s);
            if let (Some(mine), Some(mut theirs)) = (records.as_mut(), recs) {
                if self.shift {
                    shift_records(&mut theirs, self.offsets_ns[rank]);
                }
                mine.append_records(&theirs.records, &theirs.bodies);
                mine.sent += theirs.sent;
                mine.client_cpu_ns += theirs.client_cpu_ns;
                mine.workers += theirs.workers;
            }
        }
        Ok(())
    }

    /// After a window: agrees on whether the level goes on. `local` is this rank's verdict
    /// (`None`: measure another window). Returns the status this rank's level ends with, or
    /// `None` to go on. A failed exchange ends the level as failed.
    pub fn decide(&mut self, local: Option<PointStatus>) -> Option<PointStatus> {
        let vote = match (self.mode, self.is_root(), local) {
            // Scale-out: only rank 0 judges stability, on the merged windows.
            (
                Mode::ScaleOut,
                false,
                Some(s @ (PointStatus::Failed(_) | PointStatus::Interrupted)),
            ) => Some(s),
            (Mode::ScaleOut, false, _) => None,
            (_, _, local) => local,
        };
        match self.exchange_votes(&vote) {
            Ok(Decision::Continue) => None,
            Ok(Decision::Stop) => Some(vote.unwrap_or(PointStatus::Unstable)),
            Ok(Decision::Status(s)) => Some(s),
            Err(e) => Some(PointStatus::Failed(e.to_string())),
        }
    }

    fn exchange_votes(&mut self, vote: &Option<PointStatus>) -> Result<Decision> {
        self.live()?;
        let mut w = Writer::default();
        put_status(&mut w, vote.as_ref());
        let res = self.world.gather(0, &w.buf, self.timeout);
        let gathered = self.check(res, "gather of window verdicts")?;
        let mut out = Writer::default();
        if let Some(all) = gathered {
            let votes = all
                .iter()
                .map(|b| get_status(&mut Reader::new(b)))
                .collect::<Result<Vec<_>>>()?;
            put_decision(&mut out, &combine(self.mode, &votes));
        }
        let res = self.world.broadcast(0, &mut out.buf, self.timeout);
        self.check(res, "broadcast of the level decision")?;
        get_decision(&mut Reader::new(&out.buf))
    }

    /// Adds coordination time to the current window (ns).
    pub fn add_overhead(&mut self, since: Instant) {
        self.pending_ns += since.elapsed().as_nanos() as u64;
    }

    /// Closes the current window's coordination time, adding the time since `since`.
    pub fn note_overhead(&mut self, since: Instant) {
        self.add_overhead(since);
        self.window_overhead_ns
            .push(std::mem::take(&mut self.pending_ns));
    }

    /// One line on the ranks, their clocks and the coordination cost (rank 0, stderr).
    pub fn summary(&self) -> String {
        let n = self.window_overhead_ns.len().max(1) as u64;
        let avg = self.window_overhead_ns.iter().sum::<u64>() / n;
        let max = self.window_overhead_ns.iter().max().copied().unwrap_or(0);
        let offsets: Vec<String> = self
            .offsets_ns
            .iter()
            .enumerate()
            .skip(1)
            .map(|(r, o)| format!("rank {r} {:+.3} ms", *o as f64 / 1e6))
            .collect();
        let mode = match self.mode {
            Mode::MultiModel => "multi-model",
            Mode::ScaleOut => "scale-out",
        };
        format!(
            "MPI {mode}: {} ranks on {}; clock offsets vs rank 0: {} ({}); coordination per \
             window: avg {} us, max {} us over {} windows\n",
            self.size(),
            self.hosts.join(", "),
            if offsets.is_empty() {
                "none".to_string()
            } else {
                offsets.join(", ")
            },
            if self.shift {
                "applied to the merged records"
            } else {
                "one host, not applied"
            },
            avg / 1000,
            max / 1000,
            self.window_overhead_ns.len()
        )
    }
}

/// What rank 0 tells every rank after a window.
#[derive(Debug, PartialEq)]
enum Decision {
    Continue,
    /// Stop; each rank ends with its own verdict (unstable if it had none).
    Stop,
    /// Stop; every rank ends with this status.
    Status(PointStatus),
}

/// Rank 0's rule over every rank's verdict (index = rank).
fn combine(mode: Mode, votes: &[Option<PointStatus>]) -> Decision {
    for (rank, v) in votes.iter().enumerate() {
        if let Some(PointStatus::Failed(msg)) = v {
            let msg = if msg.starts_with("MPI rank") {
                msg.clone()
            } else {
                format!("rank {rank}: {msg}")
            };
            return Decision::Status(PointStatus::Failed(msg));
        }
    }
    if votes.contains(&Some(PointStatus::Interrupted)) {
        return Decision::Status(PointStatus::Interrupted);
    }
    match mode {
        Mode::ScaleOut => match votes.first().cloned().flatten() {
            Some(s) => Decision::Status(s),
            None => Decision::Continue,
        },
        Mode::MultiModel => {
            let all_stable = votes.iter().all(|v| *v == Some(PointStatus::Stable));
            let any_final = votes
                .iter()
                .any(|v| matches!(v, Some(s) if *s != PointStatus::Stable));
            if all_stable || any_final {
                Decision::Stop
            } else {
                Decision::Continue
            }
        }
    }
}

/// Adds another rank's window to `into`. The windows
/// are barrier-aligned, so the merged window spans the earliest start to the latest end and
/// lasts as long as the longest one.
fn add_window(into: &mut WindowStats, s: &WindowStats) {
    into.start_ns = into.start_ns.min(s.start_ns);
    into.end_ns = into.end_ns.max(s.end_ns);
    into.duration_ns = into.duration_ns.max(s.duration_ns);
    into.request_count += s.request_count;
    into.error_count += s.error_count;
    into.sent += s.sent;
    into.send_ns_sum = into.send_ns_sum.saturating_add(s.send_ns_sum);
    into.recv_ns_sum = into.recv_ns_sum.saturating_add(s.recv_ns_sum);
    into.request_ns_sum = into.request_ns_sum.saturating_add(s.request_ns_sum);
    into.response_count += s.response_count;
    into.first_response_ns_sum = into
        .first_response_ns_sum
        .saturating_add(s.first_response_ns_sum);
    into.response_gap_ns_sum = into
        .response_gap_ns_sum
        .saturating_add(s.response_gap_ns_sum);
    into.multi_response_count += s.multi_response_count;
    into.sequence_count += s.sequence_count;
    into.client_cpu_ns = into.client_cpu_ns.saturating_add(s.client_cpu_ns);
    into.workers += s.workers;
    into.latency.merge(&s.latency);
    into.lag.merge(&s.lag);
    into.corrected.merge(&s.corrected);
    into.late_count += s.late_count;
}

/// Moves a rank's records onto rank 0's clock (`offset_ns` = their clock - rank 0's).
fn shift_records(recs: &mut WindowRecords, offset_ns: i64) {
    let mv = |t: u64| {
        if t == 0 {
            0
        } else {
            (t as i64).saturating_sub(offset_ns).max(0) as u64
        }
    };
    for r in &mut recs.records {
        r.start_ns = mv(r.start_ns);
        r.send_end_ns = mv(r.send_end_ns);
        r.recv_start_ns = mv(r.recv_start_ns);
        r.end_ns = mv(r.end_ns);
        r.intended_ns = mv(r.intended_ns);
    }
}

fn put_status(w: &mut Writer, s: Option<&PointStatus>) {
    match s {
        None => w.u8(0),
        Some(PointStatus::Stable) => w.u8(1),
        Some(PointStatus::Unstable) => w.u8(2),
        Some(PointStatus::OverThreshold) => w.u8(3),
        Some(PointStatus::Interrupted) => w.u8(4),
        Some(PointStatus::NoValidRequests) => w.u8(5),
        Some(PointStatus::Failed(msg)) => {
            w.u8(6);
            w.bytes(msg.as_bytes());
        }
    }
}

fn get_status(r: &mut Reader) -> Result<Option<PointStatus>> {
    Ok(Some(match r.u8()? {
        0 => return Ok(None),
        1 => PointStatus::Stable,
        2 => PointStatus::Unstable,
        3 => PointStatus::OverThreshold,
        4 => PointStatus::Interrupted,
        5 => PointStatus::NoValidRequests,
        6 => PointStatus::Failed(String::from_utf8_lossy(r.bytes()?).into_owned()),
        t => return Err(Error::generic(format!("MPI verdict with unknown tag {t}"))),
    }))
}

fn put_decision(w: &mut Writer, d: &Decision) {
    match d {
        Decision::Continue => w.u8(0),
        Decision::Stop => w.u8(1),
        Decision::Status(s) => {
            w.u8(2);
            put_status(w, Some(s));
        }
    }
}

fn get_decision(r: &mut Reader) -> Result<Decision> {
    match r.u8()? {
        0 => Ok(Decision::Continue),
        1 => Ok(Decision::Stop),
        2 => get_status(r)?
            .map(Decision::Status)
            .ok_or_else(|| Error::generic("MPI decision without a status")),
        t => Err(Error::generic(format!("MPI decision with unknown tag {t}"))),
    }
}

fn first_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(a)
}

/// This machine's host name (for telling whether ranks share a clock).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
#[path = "coord_tests.rs"]
mod tests;
