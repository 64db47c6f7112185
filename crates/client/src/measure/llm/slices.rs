//! Per-time-slice statistics (AIPerf's `--slice-duration`): the run is cut into windows of a
//! fixed length from the first request's start, each request belongs to the window its
//! start falls in, and TTFT, ITL and request latency are summarised per window. Windows
//! without requests are left out; the last one ends at the run's last response.

use super::record::LlmRequest;
use super::request::request_metrics;
use super::stats::{StatAcc, Stats};

/// One window of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// Position of the window (0 = the first), counting empty ones.
    pub index: u64,
    /// Window start and end from the first request's start (ns).
    pub start_ns: u64,
    pub end_ns: u64,
    /// Successful and failed requests that started in the window.
    pub request_count: u64,
    pub error_count: u64,
    /// Output tokens of the window's successful requests.
    pub total_osl: u64,
    /// In ns; `None` when no request of the window produced the value.
    pub ttft: Option<Stats>,
    pub itl: Option<Stats>,
    pub request_latency: Option<Stats>,
    /// The run's time-weighted metrics over this window (AIPerf's per-slice sweep metrics);
    /// filled in by [`super::compute`].
    pub sweeps: Option<super::sweeps::Sweeps>,
}

struct Acc {
    ok: u64,
    failed: u64,
    osl: u64,
    ttft: StatAcc,
    itl: StatAcc,
    e2e: StatAcc,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            ok: 0,
            failed: 0,
            osl: 0,
            ttft: StatAcc::new(),
            itl: StatAcc::new(),
            e2e: StatAcc::new(),
        }
    }
}

/// The slices of `reqs` for windows of `slice_ns` (at least 1 ns).
pub fn slices(reqs: &[LlmRequest], slice_ns: u64) -> Vec<Slice> {
    let slice_ns = slice_ns.max(1);
    let Some(first) = reqs.iter().map(|r| r.start_ns).min() else {
        return Vec::new();
    };
    let last_ns = reqs
        .iter()
        .map(|r| {
            r.chunks
                .last()
                .map_or(r.end_ns, |c| c.arrival_ns)
                .max(r.start_ns)
        })
        .max()
        .unwrap_or(first)
        - first;
    let mut windows: std::collections::BTreeMap<u64, Acc> = Default::default();
    for r in reqs {
        let acc = windows
            .entry((r.start_ns - first) / slice_ns)
            .or_insert_with(Acc::new);
        let Some(m) = request_metrics(r) else {
            acc.failed += 1;
            continue;
        };
        acc.ok += 1;
        acc.osl += m.osl;
        if let Some(t) = m.ttft_ns {
            acc.ttft.record(t as f64);
        }
        if let Some(itl) = m.itl_ns {
            acc.itl.record(itl);
        }
        acc.e2e.record(m.e2e_ns as f64);
    }
    windows
        .into_iter()
        .map(|(index, acc)| {
            let start_ns = index * slice_ns;
            Slice {
                index,
                start_ns,
                end_ns: (start_ns + slice_ns).min(last_ns.max(start_ns)),
                request_count: acc.ok,
                error_count: acc.failed,
                total_osl: acc.osl,
                ttft: acc.ttft.stats(),
                itl: acc.itl.stats(),
                request_latency: acc.e2e.stats(),
                sweeps: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::llm::{Chunk, RequestError};

    const MS: u64 = 1_000_000;

    /// A request starting at `start_ms` with chunks at the given ms offsets.
    fn req(start_ms: u64, offsets_ms: &[u64]) -> LlmRequest {
        let chunks: Vec<Chunk> = offsets_ms
            .iter()
            .map(|o| Chunk {
                arrival_ns: (start_ms + o) * MS,
                tokens: 1,
            })
            .collect();
        LlmRequest {
            start_ns: start_ms * MS,
            end_ns: (start_ms + offsets_ms.last().copied().unwrap_or(0)) * MS,
            osl: chunks.len() as u64,
            chunks,
            ..LlmRequest::default()
        }
    }

    #[test]
    fn requests_fall_in_the_window_of_their_start() {
        let mut failed = req(2500, &[]);
        failed.error = Some(RequestError {
            kind: "timeout".into(),
            message: String::new(),
            code: None,
        });
        let reqs = [
            req(1000, &[10, 12, 14]),
            req(1999, &[30, 31]),
            failed,
            // Window 1 (2000..3000) has no successful request; window 2 is empty.
            req(4000, &[50, 60, 70, 80, 90]),
        ];
        let s = slices(&reqs, 1000 * MS);
        assert_eq!(s.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!((s[0].request_count, s[0].error_count), (2, 0));
        assert_eq!((s[1].request_count, s[1].error_count), (0, 1));
        let ttft = s[0].ttft.as_ref().unwrap();
        assert_eq!((ttft.min, ttft.max), (10.0 * MS as f64, 30.0 * MS as f64));
        let itl = s[0].itl.as_ref().unwrap();
        assert_eq!((itl.min, itl.max), (1.0 * MS as f64, 2.0 * MS as f64));
        assert!(s[1].ttft.is_none());
        assert_eq!(s[2].ttft.as_ref().unwrap().avg, 50.0 * MS as f64);
        assert_eq!(s[2].itl.as_ref().unwrap().avg, 10.0 * MS as f64);
        assert_eq!(s[2].total_osl, 5);
        // The last window ends at the last response (4090 ms from the first start at 1000).
        assert_eq!((s[2].start_ns, s[2].end_ns), (3000 * MS, 3090 * MS));
        assert_eq!(s[0].end_ns, 1000 * MS);
        assert!(slices(&[], MS).is_empty());
    }
}
