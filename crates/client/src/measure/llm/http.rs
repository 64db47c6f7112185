//! AIPerf's HTTP trace metrics (k6's names, `http_req_*`): one value per successful
//! HTTP/1.1 request from its [`HttpTrace`], and their run statistics. gRPC requests carry no
//! trace, so a kserve run has none of these.

use super::record::LlmRequest;
use super::stats::{StatAcc, Stats};
use crate::measure::http_trace::HttpPhases;

/// One HTTP trace metric: AIPerf's tag, CSV label and display unit, the factor from the
/// base unit (ns, bytes, counts) to it, and the value of one request.
#[derive(Debug)]
pub struct HttpMetric {
    pub tag: &'static str,
    /// AIPerf's header (the CSV label without the unit).
    pub header: &'static str,
    pub unit: &'static str,
    pub factor: f64,
    pub value: fn(&HttpPhases) -> u64,
}

/// Metrics are told apart by their tag.
impl PartialEq for HttpMetric {
    fn eq(&self, other: &HttpMetric) -> bool {
        self.tag == other.tag
    }
}

/// ns → ms.
const MS: f64 = 1e-6;
/// bytes → KB (AIPerf's KILOBYTES: 1024 bytes).
const KB: f64 = 1.0 / 1024.0;

const fn m(
    tag: &'static str,
    header: &'static str,
    unit: &'static str,
    factor: f64,
    value: fn(&HttpPhases) -> u64,
) -> HttpMetric {
    HttpMetric {
        tag,
        header,
        unit,
        factor,
        value,
    }
}

/// Every HTTP trace metric, in AIPerf's display order.
pub const HTTP_METRICS: [HttpMetric; 14] = [
    m("http_req_blocked", "HTTP Blocked", "ms", MS, |p| {
        p.blocked_ns
    }),
    m("http_req_dns_lookup", "HTTP DNS Lookup", "ms", MS, |p| {
        p.dns_lookup_ns
    }),
    m("http_req_connecting", "HTTP Connecting", "ms", MS, |p| {
        p.connecting_ns
    }),
    m("http_req_sending", "HTTP Sending", "ms", MS, |p| {
        p.sending_ns
    }),
    m("http_req_waiting", "HTTP Waiting (TTFB)", "ms", MS, |p| {
        p.waiting_ns
    }),
    m("http_req_receiving", "HTTP Receiving", "ms", MS, |p| {
        p.receiving_ns
    }),
    m(
        "http_req_connection_reused",
        "HTTP Connection Reused",
        "ratio",
        1.0,
        |p| u64::from(p.reused),
    ),
    m("http_req_data_sent", "HTTP Data Sent", "KB", KB, |p| {
        p.bytes_sent
    }),
    m(
        "http_req_chunks_sent",
        "HTTP Chunks Sent",
        "count",
        1.0,
        |p| p.chunks_sent,
    ),
    m(
        "http_req_data_received",
        "HTTP Data Received",
        "KB",
        KB,
        |p| p.bytes_received,
    ),
    m(
        "http_req_chunks_received",
        "HTTP Chunks Received",
        "count",
        1.0,
        |p| p.chunks_received,
    ),
    m(
        "http_req_connection_overhead",
        "HTTP Connection Overhead",
        "ms",
        MS,
        |p| p.connection_overhead_ns,
    ),
    m(
        "http_req_duration",
        "HTTP Duration (excl. conn)",
        "ms",
        MS,
        |p| p.duration_ns,
    ),
    m("http_req_total", "HTTP Total Time", "ms", MS, |p| {
        p.total_ns
    }),
];

/// The phases of `r`, when it succeeded and its exchange was traced.
pub fn phases(r: &LlmRequest) -> Option<HttpPhases> {
    if !r.ok() {
        return None;
    }
    r.http.as_ref()?.phases()
}

/// One metric's run statistics, in its base unit.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpStat {
    pub metric: &'static HttpMetric,
    pub stats: Stats,
}

/// The statistics of every HTTP trace metric over the traced successful requests; empty
/// when none was traced (gRPC).
pub fn http_stats(reqs: &[LlmRequest]) -> Vec<HttpStat> {
    let mut accs: Vec<StatAcc> = HTTP_METRICS.iter().map(|_| StatAcc::new()).collect();
    for p in reqs.iter().filter_map(phases) {
        for (acc, metric) in accs.iter_mut().zip(&HTTP_METRICS) {
            acc.record((metric.value)(&p) as f64);
        }
    }
    accs.iter()
        .zip(&HTTP_METRICS)
        .filter_map(|(acc, metric)| {
            Some(HttpStat {
                metric,
                stats: acc.stats()?,
            })
        })
        .collect()
}
