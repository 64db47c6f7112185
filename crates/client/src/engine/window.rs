//! One measurement window built up from small batches.
//!
//! The coordinator pulls finished records from the workers every `PULL_EVERY` and folds them
//! into the window's statistics at once: counts, exact sums and fixed-size latency
//! histograms (`measure::Dist`), so neither a window nor the windows kept for the stability
//! rule hold anything per request, and memory follows neither the window length nor the run
//! length. Only the profile export keeps records, because it must write every request.

use std::time::Duration;

use super::Engine;
use crate::error::Result;
use crate::measure::stats::{add_records, clamp_to_requests};
use crate::measure::{RequestRecord, WindowRecords, WindowStats};

/// Compares a request's response body with its expected outputs (`--input-data` validation
/// data); `Err` carries the mismatch.
pub type OutputCheck<'a> = dyn Fn(&RequestRecord, &[u8]) -> std::result::Result<(), String> + 'a;

/// How often records are pulled from the workers while a window runs.
pub const PULL_EVERY: Duration = Duration::from_millis(100);

pub struct WindowAcc {
    /// Reused buffer the workers' batches are gathered into.
    chunk: WindowRecords,
    stats: WindowStats,
    /// Every record of the window, for the profile export (None when the export is off).
    export: Option<WindowRecords>,
    /// Earliest start and latest end of the successful requests (for `--request-count`).
    span: Option<(u64, u64)>,
    /// Records pulled since the level started, and as of the current window's start.
    pulled: u64,
    pulled_at_start: u64,
}

impl WindowAcc {
    pub fn new(start_ns: u64, keep_records: bool) -> WindowAcc {
        let mut acc = WindowAcc {
            chunk: WindowRecords::default(),
            stats: WindowStats::default(),
            export: keep_records.then(WindowRecords::default),
            span: None,
            pulled: 0,
            pulled_at_start: 0,
        };
        acc.restart(start_ns);
        acc
    }

    fn restart(&mut self, start_ns: u64) {
        self.stats = WindowStats {
            start_ns,
            ..WindowStats::default()
        };
        self.span = None;
        self.pulled_at_start = self.pulled;
        if let Some(e) = &mut self.export {
            *e = WindowRecords {
                start_ns,
                ..WindowRecords::default()
            };
        }
    }

    /// Requests completed before the current window started (for count windows).
    pub fn pulled_before_window(&self) -> u64 {
        self.pulled_at_start
    }

    /// Takes every record that ended by `until_ns` from the workers into the window.
    pub fn pull(&mut self, engine: &mut Engine, until_ns: u64) -> Result<()> {
        engine.collect(until_ns, &mut self.chunk)?;
        self.pulled += self.chunk.records.len() as u64;
        add_records(&mut self.stats, &self.chunk);
        for r in self.chunk.records.iter().filter(|r| r.ok) {
            let (first, last) = self.span.get_or_insert((r.start_ns, r.end_ns));
            *first = (*first).min(r.start_ns);
            *last = (*last).max(r.end_ns);
        }
        if let Some(e) = &mut self.export {
            append(e, &self.chunk);
        }
        Ok(())
    }

    /// Checks the outputs of the last pulled batch's successful requests (validation data);
    /// the first mismatch's message, if any. Bodies are there when the engine keeps them.
    pub fn check_outputs(&self, check: &OutputCheck) -> Option<String> {
        let chunk = &self.chunk;
        chunk.records.iter().filter(|r| r.ok).find_map(|r| {
            let start = r.body_off as usize;
            let body = chunk.bodies.get(start..start + r.body_len as usize)?;
            check(r, body).err()
        })
    }

    /// Closes the window at `end_ns` (after a last `pull`) and starts the next one there.
    /// `clamp`: `--request-count`, whose window is first send to last response.
    pub fn finish(&mut self, end_ns: u64, clamp: bool) -> (WindowStats, Option<WindowRecords>) {
        let mut stats = std::mem::take(&mut self.stats);
        stats.end_ns = end_ns;
        stats.duration_ns = end_ns.saturating_sub(stats.start_ns);
        if let (true, Some((first, last))) = (clamp, self.span) {
            clamp_to_requests(&mut stats, first, last);
        }
        let export = self.export.as_mut().map(|e| {
            e.end_ns = end_ns;
            e.workers = stats.workers;
            std::mem::take(e)
        });
        self.restart(end_ns);
        (stats, export)
    }
}

/// Appends `chunk`'s records (and their response bodies) to `all`.
fn append(all: &mut WindowRecords, chunk: &WindowRecords) {
    all.append_records(&chunk.records, &chunk.bodies);
    all.sent += chunk.sent;
    all.client_cpu_ns += chunk.client_cpu_ns;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: u64, end: u64, ok: bool, body: (u32, u32)) -> RequestRecord {
        RequestRecord {
            start_ns: start,
            end_ns: end,
            ok,
            body_off: body.0,
            body_len: body.1,
            ..Default::default()
        }
    }

    #[test]
    fn appended_bodies_are_rebased() {
        let mut all = WindowRecords {
            bodies: b"xy".to_vec(),
            ..Default::default()
        };
        let chunk = WindowRecords {
            records: vec![rec(1, 2, true, (0, 3)), rec(3, 4, false, (0, 0))],
            bodies: b"abc".to_vec(),
            sent: 2,
            ..Default::default()
        };
        append(&mut all, &chunk);
        assert_eq!(all.records[0].body_off, 2);
        assert_eq!(&all.bodies[2..5], b"abc");
        assert_eq!(all.records[1].body_len, 0);
        assert_eq!(all.sent, 2);
    }
}
