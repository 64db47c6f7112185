//! `<export stem>_timeslices.{json,csv}` (`--slice-duration`): TTFT, ITL and request latency
//! per time slice, as AIPerf splits its run. Times in ms, slice bounds in seconds from the
//! first request's start.

use super::json_text::{num, Node};
use crate::measure::llm::slices::Slice;
use crate::measure::llm::Stats;

/// ns → ms.
const MS: f64 = 1e-6;

fn stats_node(s: &Stats) -> Node {
    let s = s.scaled(MS);
    let mut o = Node::obj();
    o.put("unit", "ms");
    o.put("count", s.count);
    super::genai_perf::put_stats(&mut o, &s);
    o
}

/// `{"slice_duration": s, "timeslices": [{index, start, end, request_count, error_count,
/// total_osl, time_to_first_token, inter_token_latency, request_latency}, ..]}`.
pub fn json(slices: &[Slice], slice_duration_s: f64) -> String {
    let mut root = Node::obj();
    root.put("slice_duration", num(slice_duration_s));
    let list: Vec<Node> = slices
        .iter()
        .map(|s| {
            let mut o = Node::obj();
            o.put("index", s.index);
            o.put("start", num(s.start_ns as f64 / 1e9));
            o.put("end", num(s.end_ns as f64 / 1e9));
            o.put("request_count", s.request_count);
            o.put("error_count", s.error_count);
            o.put("total_osl", s.total_osl);
            for (tag, st) in [
                ("time_to_first_token", &s.ttft),
                ("inter_token_latency", &s.itl),
                ("request_latency", &s.request_latency),
            ] {
                if let Some(st) = st {
                    o.push(tag, stats_node(st));
                }
            }
            o
        })
        .collect();
    root.push("timeslices", Node::List(list));
    let mut text = root.pretty();
    text.push('\n');
    text
}

/// One row per slice and metric: `Slice,Start,End,Metric,count,avg,min,max,p50,p90,p99`.
pub fn csv(slices: &[Slice]) -> String {
    let mut out = String::from("Slice,Start (s),End (s),Metric,count,avg,min,max,p50,p90,p99\n");
    for s in slices {
        for (name, st) in [
            ("Time To First Token (ms)", &s.ttft),
            ("Inter Token Latency (ms)", &s.itl),
            ("Request Latency (ms)", &s.request_latency),
        ] {
            let Some(st) = st else { continue };
            let st = st.scaled(MS);
            let p = |q: u32| st.p(q).unwrap_or(f64::NAN);
            out.push_str(&format!(
                "{},{:.3},{:.3},{name},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}\n",
                s.index,
                s.start_ns as f64 / 1e9,
                s.end_ns as f64 / 1e9,
                st.count,
                st.avg,
                st.min,
                st.max,
                p(50),
                p(90),
                p(99)
            ));
        }
    }
    out
}
