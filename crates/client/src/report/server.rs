//! Server-side averages shared by the console "Server:" block and the CSV server columns.

use crate::measure::server_stats::{ComposingStats, ModelStats, ServerStats};
use crate::report::fmt::{escape_control, us};
use std::fmt::Write as _;

/// Mean durations (ns) derived from a server-stats delta; each is 0 when its count is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServerAverages {
    /// Whole request as the server saw it (success time / success count).
    pub request_ns: u64,
    pub queue_ns: u64,
    pub compute_input_ns: u64,
    pub compute_infer_ns: u64,
    pub compute_output_ns: u64,
    /// Input + infer + output time over the compute-input count.
    pub compute_ns: u64,
    pub cache_hit_ns: u64,
    pub cache_miss_ns: u64,
    /// (cache hit + cache miss + compute time) over (compute count + cache hit count).
    pub cache_compute_ns: u64,
}

impl ServerAverages {
    /// perf_analyzer fails when the three compute counts differ; this divides by the
    /// compute-input count (the same number whenever the server is consistent).
    pub(crate) fn of(s: &ServerStats) -> ServerAverages {
        Self::of_model(&s.model)
    }

    /// The averages of one model's statistics.
    pub(crate) fn of_model(m: &ModelStats) -> ServerAverages {
        let compute_total = m
            .compute_input
            .ns
            .saturating_add(m.compute_infer.ns)
            .saturating_add(m.compute_output.ns);
        let compute_count = m.compute_input.count;
        let cache_total = compute_total
            .saturating_add(m.cache_hit.ns)
            .saturating_add(m.cache_miss.ns);
        ServerAverages {
            request_ns: m.success.avg_ns(),
            queue_ns: m.queue.avg_ns(),
            compute_input_ns: m.compute_input.avg_ns(),
            compute_infer_ns: m.compute_infer.avg_ns(),
            compute_output_ns: m.compute_output.avg_ns(),
            compute_ns: compute_total.checked_div(compute_count).unwrap_or(0),
            cache_hit_ns: m.cache_hit.avg_ns(),
            cache_miss_ns: m.cache_miss.avg_ns(),
            cache_compute_ns: cache_total
                .checked_div(compute_count.saturating_add(m.cache_hit.count))
                .unwrap_or(0),
        }
    }
}

/// The console "  Server: " block, ending with perf_analyzer's blank line.
/// Averages are truncated to µs before the overhead subtraction, as perf_analyzer does.
///
/// For an ensemble (or a BLS model with `--bls-composing-models`):
/// the model's line shows queue and compute summed over its composing models (recursively),
/// then "Composing models:" lists each one's own block, 2 more spaces in per nesting level,
/// sorted by name and version as perf_analyzer's map orders them. With no composing models
/// this is the ordinary block. The response-cache lines follow the profiled model's config at
/// every level, as in perf_analyzer.
pub fn server_block_with_composing(s: &ServerStats, composing: &[ComposingStats]) -> String {
    let mut out = String::from("  Server: \n");
    model_block(&mut out, &s.model, composing, s.cache_enabled, 1);
    out
}

/// One model's lines at nesting `level` (1 = the profiled model).
fn model_block(
    out: &mut String,
    m: &ModelStats,
    composing: &[ComposingStats],
    cache_enabled: bool,
    level: usize,
) {
    let ident = " ".repeat(2 * level);
    if m.success.count == 0 {
        let _ = writeln!(out, "{ident}  Request count: 0");
        return;
    }
    let a = ServerAverages::of_model(m);
    let request = us(a.request_ns);
    let _ = writeln!(out, "{ident}  Inference count: {}", m.inference_count);
    let _ = writeln!(out, "{ident}  Execution count: {}", m.execution_count);
    if cache_enabled {
        let _ = writeln!(out, "{ident}  Cache hit count: {}", m.cache_hit.count);
        let _ = writeln!(out, "{ident}  Cache miss count: {}", m.cache_miss.count);
    }
    let _ = writeln!(
        out,
        "{ident}  Successful request count: {}",
        m.success.count
    );
    let _ = write!(out, "{ident}  Avg request latency: {request} usec");
    if composing.is_empty() {
        leaf_breakdown(out, &a, cache_enabled, &ident);
        out.push('\n');
        return;
    }
    let (queue, compute) = ensemble_parts_us(composing);
    let overhead = request.saturating_sub(queue).saturating_sub(compute);
    let _ = writeln!(
        out,
        " (overhead {overhead} usec + queue {queue} usec + compute {compute} usec)\n"
    );
    let _ = writeln!(out, "{ident}Composing models: ");
    let mut sorted: Vec<&ComposingStats> = composing.iter().collect();
    sorted
        .sort_by(|x, y| (&x.model.name, &x.model.version).cmp(&(&y.model.name, &y.model.version)));
    for c in sorted {
        let _ = writeln!(
            out,
            "{ident}{}, version: {}",
            escape_control(&c.model.name),
            escape_control(&c.model.version)
        );
        model_block(out, &c.model, &c.composing, cache_enabled, level + 1);
    }
}

/// The rest of a non-ensemble model's "Avg request latency" line (and the cache lines).
fn leaf_breakdown(out: &mut String, a: &ServerAverages, cache_enabled: bool, ident: &str) {
    let (request, queue) = (us(a.request_ns), us(a.queue_ns));
    let (cin, cinf, cout) = (
        us(a.compute_input_ns),
        us(a.compute_infer_ns),
        us(a.compute_output_ns),
    );
    if cache_enabled {
        let cache_compute = us(a.cache_compute_ns);
        let overhead = request.saturating_sub(queue).saturating_sub(cache_compute);
        let (hit, miss) = (us(a.cache_hit_ns), us(a.cache_miss_ns));
        let _ = writeln!(
            out,
            " (overhead {overhead} usec + queue {queue} usec + cache hit/miss {cache_compute} usec)"
        );
        let _ = writeln!(out, "{ident}    Average Cache Hit Latency: {hit} usec");
        let _ = writeln!(
            out,
            "{ident}    Average Cache Miss Latency: {} usec (cache lookup/insertion {miss} usec + \
             compute input {cin} usec + compute infer {cinf} usec + compute output {cout} usec)",
            miss + us(a.compute_ns)
        );
    } else {
        let overhead = request
            .saturating_sub(queue)
            .saturating_sub(us(a.compute_ns));
        let _ = writeln!(
            out,
            " (overhead {overhead} usec + queue {queue} usec + compute input {cin} usec + \
             compute infer {cinf} usec + compute output {cout} usec)"
        );
    }
}

/// Queue and compute (µs) an ensemble's line shows: the sum over its composing models of
/// each one's truncated averages, recursing into nested ensembles.
pub(crate) fn ensemble_parts_us(composing: &[ComposingStats]) -> (u64, u64) {
    composing.iter().fold((0, 0), |(queue, compute), c| {
        let (q, k) = if c.composing.is_empty() {
            let a = ServerAverages::of_model(&c.model);
            (us(a.queue_ns), us(a.compute_ns))
        } else {
            ensemble_parts_us(&c.composing)
        };
        (queue + q, compute + k)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::server_stats::StatDuration;

    fn d(count: u64, ns: u64) -> StatDuration {
        StatDuration { count, ns }
    }

    /// A worked example: 5850 requests, 4500 us each (30 + 1200 + 50 + 3200 + 20).
    pub(crate) fn spec_example(cache_enabled: bool) -> ServerStats {
        ServerStats {
            model: ModelStats {
                name: "m".into(),
                version: "1".into(),
                inference_count: 5850,
                execution_count: 1470,
                success: d(5850, 5850 * 4_500_000),
                queue: d(5850, 5850 * 1_200_000),
                compute_input: d(1470, 1470 * 50_000),
                compute_infer: d(1470, 1470 * 3_200_000),
                compute_output: d(1470, 1470 * 20_000),
                ..ModelStats::default()
            },
            cache_enabled,
            composing: Vec::new(),
        }
    }

    #[test]
    fn block_matches_spec_example() {
        let want = "  Server: \n    Inference count: 5850\n    Execution count: 1470\n    \
            Successful request count: 5850\n    Avg request latency: 4500 usec (overhead 30 usec \
            + queue 1200 usec + compute input 50 usec + compute infer 3200 usec + compute output \
            20 usec)\n\n";
        assert_eq!(server_block_with_composing(&spec_example(false), &[]), want);
    }

    #[test]
    fn block_with_cache() {
        let mut s = spec_example(true);
        s.model.cache_hit = d(150, 150 * 10_000);
        s.model.cache_miss = d(1470, 1470 * 5_000);
        // cache/compute = (3270 us x 1470 + 10 us x 150 + 5 us x 1470) / (1470 + 150)
        let combined = (1470 * 3_270_000u64 + 150 * 10_000 + 1470 * 5_000) / 1620 / 1000;
        let text = server_block_with_composing(&s, &[]);
        let want = format!(
            "    Cache hit count: 150\n    Cache miss count: 1470\n    Successful request count: \
             5850\n    Avg request latency: 4500 usec (overhead {} usec + queue 1200 usec + \
             cache hit/miss {combined} usec)\n      Average Cache Hit Latency: 10 usec\n      \
             Average Cache Miss Latency: 3275 usec (cache lookup/insertion 5 usec + compute \
             input 50 usec + compute infer 3200 usec + compute output 20 usec)\n\n",
            4500 - 1200 - combined
        );
        assert!(text.ends_with(&want), "{text}");
    }

    #[test]
    fn zero_counts_and_negative_overhead() {
        let empty = ServerStats::default();
        assert_eq!(
            server_block_with_composing(&empty, &[]),
            "  Server: \n    Request count: 0\n"
        );
        assert_eq!(ServerAverages::of(&empty), ServerAverages::default());
        // Server parts larger than the request time: overhead is clamped to 0.
        let mut s = spec_example(false);
        s.model.queue = d(5850, 5850 * 9_000_000);
        assert!(server_block_with_composing(&s, &[]).contains("(overhead 0 usec + queue 9000 usec"));
    }

    /// A model with `n` requests of `request` µs, `queue` µs queued, and `execs` executions
    /// of (input, infer, output) µs.
    pub(crate) fn model(
        name: &str,
        version: &str,
        n: u64,
        (request, queue): (u64, u64),
        execs: u64,
        (cin, cinf, cout): (u64, u64, u64),
    ) -> ModelStats {
        ModelStats {
            name: name.into(),
            version: version.into(),
            inference_count: n,
            execution_count: execs,
            success: d(n, n * request * 1000),
            queue: d(n, n * queue * 1000),
            compute_input: d(execs, execs * cin * 1000),
            compute_infer: d(execs, execs * cinf * 1000),
            compute_output: d(execs, execs * cout * 1000),
            ..ModelStats::default()
        }
    }

    /// An ensemble of `tok` (v1) and `net` (v2), given out of name order.
    pub(crate) fn ensemble_example() -> (ServerStats, Vec<ComposingStats>) {
        let top = ServerStats {
            model: model("ens", "1", 100, (5000, 9), 100, (1, 1, 1)),
            cache_enabled: false,
            composing: Vec::new(),
        };
        let leaf = |m: ModelStats| ComposingStats {
            model: m,
            composing: Vec::new(),
        };
        let composing = vec![
            leaf(model("tok", "1", 100, (1000, 200), 100, (10, 700, 5))),
            leaf(model("net", "2", 100, (3500, 1000), 50, (20, 2400, 30))),
        ];
        (top, composing)
    }

    #[test]
    fn ensemble_block_is_byte_exact() {
        let (top, composing) = ensemble_example();
        // queue 200 + 1000, compute 715 + 2450, overhead 5000 - 1200 - 3165 (the ensemble's
        // own queue and compute are ignored).
        let want = "  Server: \n\
            \x20   Inference count: 100\n\
            \x20   Execution count: 100\n\
            \x20   Successful request count: 100\n\
            \x20   Avg request latency: 5000 usec (overhead 635 usec + queue 1200 usec + compute 3165 usec)\n\
            \n\
            \x20 Composing models: \n\
            \x20 net, version: 2\n\
            \x20     Inference count: 100\n\
            \x20     Execution count: 50\n\
            \x20     Successful request count: 100\n\
            \x20     Avg request latency: 3500 usec (overhead 50 usec + queue 1000 usec + compute input 20 usec + compute infer 2400 usec + compute output 30 usec)\n\
            \n\
            \x20 tok, version: 1\n\
            \x20     Inference count: 100\n\
            \x20     Execution count: 100\n\
            \x20     Successful request count: 100\n\
            \x20     Avg request latency: 1000 usec (overhead 85 usec + queue 200 usec + compute input 10 usec + compute infer 700 usec + compute output 5 usec)\n\
            \n";
        assert_eq!(server_block_with_composing(&top, &composing), want);
    }

    #[test]
    fn nested_ensemble_indents_and_sums_recursively() {
        let (top, mut composing) = ensemble_example();
        // `net` becomes an ensemble of `core`: its own compute no longer counts, so the top
        // sums tok (200 + 715) and core (900 + 2002).
        composing[1].composing = vec![ComposingStats {
            model: model("core", "1", 100, (3000, 900), 100, (1, 2000, 1)),
            composing: Vec::new(),
        }];
        let text = server_block_with_composing(&top, &composing);
        let want_top = "Avg request latency: 5000 usec (overhead 1183 usec + queue 1100 usec + \
                        compute 2717 usec)\n\n";
        assert!(text.contains(want_top), "{text}");
        let want_nested =
            "\x20     Avg request latency: 3500 usec (overhead 598 usec + queue 900 usec \
            + compute 2002 usec)\n\n    Composing models: \n    core, version: 1\n        \
            Inference count: 100\n";
        assert!(text.contains(want_nested), "{text}");
        assert!(text.ends_with("compute output 5 usec)\n\n"), "{text}");
        // A composing model idle in the window prints only its request count.
        composing[0].model = ModelStats {
            name: "tok".into(),
            version: "1".into(),
            ..ModelStats::default()
        };
        let text = server_block_with_composing(&top, &composing);
        assert!(
            text.ends_with("  tok, version: 1\n      Request count: 0\n"),
            "{text}"
        );
    }
}
