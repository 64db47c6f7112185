//! `--goodput` service-level objectives: `metric:value` items (GenAI-Perf and vLLM style),
//! the value in the metric's display unit (ms for times, tokens/s for throughputs).
//!
//! A request is "good" when it meets every constraint: at most the value for times, at least
//! the value for throughputs. A request without the constrained value fails that constraint,
//! except ITL and per-user throughput on a request with a single output token or a single
//! chunk, which pass (vLLM counts TPOT as 0 there).

use super::request::RequestMetrics;
use crate::error::{Error, Result};

/// The metrics a goodput constraint can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SloMetric {
    TimeToFirstToken,
    TimeToSecondToken,
    InterTokenLatency,
    RequestLatency,
    OutputTokenThroughputPerUser,
}

/// Accepted names: GenAI-Perf/AIPerf tags first, then vLLM's aliases.
const NAMES: &[(&str, SloMetric)] = &[
    ("time_to_first_token", SloMetric::TimeToFirstToken),
    ("time_to_second_token", SloMetric::TimeToSecondToken),
    ("inter_token_latency", SloMetric::InterTokenLatency),
    ("request_latency", SloMetric::RequestLatency),
    (
        "output_token_throughput_per_user",
        SloMetric::OutputTokenThroughputPerUser,
    ),
    ("ttft", SloMetric::TimeToFirstToken),
    ("tpot", SloMetric::InterTokenLatency),
    ("e2el", SloMetric::RequestLatency),
];

impl SloMetric {
    /// The GenAI-Perf tag (what reports print).
    pub fn tag(self) -> &'static str {
        match self {
            SloMetric::TimeToFirstToken => "time_to_first_token",
            SloMetric::TimeToSecondToken => "time_to_second_token",
            SloMetric::InterTokenLatency => "inter_token_latency",
            SloMetric::RequestLatency => "request_latency",
            SloMetric::OutputTokenThroughputPerUser => "output_token_throughput_per_user",
        }
    }

    /// Throughputs must reach the value; times must stay at or under it.
    pub fn higher_is_better(self) -> bool {
        self == SloMetric::OutputTokenThroughputPerUser
    }

    /// The unit the value is given in.
    pub fn unit(self) -> &'static str {
        if self.higher_is_better() {
            "tokens/sec/user"
        } else {
            "ms"
        }
    }

    /// The request's value in the display unit; `Err(())` when the request has none and
    /// so fails, `Ok(None)` when it passes without a value (single-token output).
    fn value_of(self, m: &RequestMetrics) -> std::result::Result<Option<f64>, ()> {
        let ms = |ns: Option<u64>| ns.map(|v| v as f64 / 1e6).ok_or(());
        match self {
            SloMetric::TimeToFirstToken => ms(m.ttft_ns).map(Some),
            SloMetric::TimeToSecondToken => ms(m.ttst_ns).map(Some),
            SloMetric::RequestLatency => Ok(Some(m.e2e_ns as f64 / 1e6)),
            SloMetric::InterTokenLatency => match m.itl_ns {
                Some(v) => Ok(Some(v / 1e6)),
                None if m.ttft_ns.is_some() => Ok(None),
                None => Err(()),
            },
            SloMetric::OutputTokenThroughputPerUser => match (m.tps_per_user, m.itl_ns) {
                (Some(v), _) => Ok(Some(v)),
                // ITL 0 (every token in one read): infinitely fast per user.
                (None, Some(_)) => Ok(None),
                (None, None) if m.ttft_ns.is_some() => Ok(None),
                (None, None) => Err(()),
            },
        }
    }
}

/// One constraint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Goodput {
    pub metric: SloMetric,
    /// In the metric's display unit (ms, or tokens/s).
    pub value: f64,
}

impl Goodput {
    /// Whether the request with metrics `m` meets this constraint.
    pub fn met_by(&self, m: &RequestMetrics) -> bool {
        match self.metric.value_of(m) {
            Err(()) => false,
            Ok(None) => true,
            Ok(Some(v)) if self.metric.higher_is_better() => v >= self.value,
            Ok(Some(v)) => v <= self.value,
        }
    }
}

/// Parses `--goodput` values; each may hold several space-separated `metric:value` items.
/// Errors are usage errors naming the bad item.
pub fn parse(values: &[String]) -> Result<Vec<Goodput>> {
    values
        .iter()
        .flat_map(|v| v.split_whitespace())
        .map(parse_item)
        .collect()
}

fn parse_item(item: &str) -> Result<Goodput> {
    let bad = |why: &str| Error::usage(format!("--goodput '{item}': {why}"));
    let (name, value) = item
        .split_once(':')
        .ok_or_else(|| bad("expected metric:value, e.g. time_to_first_token:200"))?;
    let metric = NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
            bad(&format!(
                "unknown metric '{name}' (one of: {})",
                known.join(", ")
            ))
        })?;
    let value: f64 = value
        .trim()
        .parse()
        .map_err(|_| bad(&format!("'{value}' is not a number")))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(bad("the value must be a finite number >= 0"));
    }
    Ok(Goodput { metric, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_tags_aliases_and_space_separated_items() {
        let got = parse(&strings(&[
            "time_to_first_token:75 inter_token_latency:19.75",
            "ttft:10",
            "tpot:2",
            "e2el:1000",
            "output_token_throughput_per_user:50",
            "time_to_second_token:30",
            "request_latency:500",
        ]))
        .unwrap();
        let want = [
            (SloMetric::TimeToFirstToken, 75.0),
            (SloMetric::InterTokenLatency, 19.75),
            (SloMetric::TimeToFirstToken, 10.0),
            (SloMetric::InterTokenLatency, 2.0),
            (SloMetric::RequestLatency, 1000.0),
            (SloMetric::OutputTokenThroughputPerUser, 50.0),
            (SloMetric::TimeToSecondToken, 30.0),
            (SloMetric::RequestLatency, 500.0),
        ];
        assert_eq!(got.len(), want.len());
        for (g, (m, v)) in got.iter().zip(want) {
            assert_eq!((g.metric, g.value), (m, v));
        }
        assert!(parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn bad_items_are_usage_errors_naming_the_item() {
        let cases = [
            ("nonsense:1", "nonsense"),
            ("time_to_first_token", "time_to_first_token"),
            ("ttft:abc", "ttft:abc"),
            ("ttft:-1", "ttft:-1"),
            ("ttft:inf", "ttft:inf"),
            ("ttft:1 itl:2", "itl:2"),
        ];
        for (input, needle) in cases {
            let e = parse(&strings(&[input])).unwrap_err();
            assert_eq!(e.exit_code(), 99, "{input}");
            assert!(e.msg.contains(needle), "{input}: {}", e.msg);
            assert!(e.msg.contains("--goodput"), "{input}: {}", e.msg);
        }
    }

    fn metrics(
        ttft_ms: u64,
        ttst_ms: Option<u64>,
        itl_ms: Option<f64>,
        e2e_ms: u64,
    ) -> RequestMetrics {
        RequestMetrics {
            ttft_ns: Some(ttft_ms * 1_000_000),
            ttst_ns: ttst_ms.map(|v| v * 1_000_000),
            e2e_ns: e2e_ms * 1_000_000,
            itl_ns: itl_ms.map(|v| v * 1e6),
            tps_per_user: itl_ms.filter(|v| *v > 0.0).map(|v| 1000.0 / v),
            ..RequestMetrics::default()
        }
    }

    #[test]
    fn judgement_follows_each_metric_direction() {
        let g = |m: SloMetric, v: f64| Goodput {
            metric: m,
            value: v,
        };
        let r = metrics(100, Some(20), Some(10.0), 1000);
        let cases = [
            (g(SloMetric::TimeToFirstToken, 100.0), true),
            (g(SloMetric::TimeToFirstToken, 99.9), false),
            (g(SloMetric::TimeToSecondToken, 20.0), true),
            (g(SloMetric::TimeToSecondToken, 19.0), false),
            (g(SloMetric::InterTokenLatency, 10.0), true),
            (g(SloMetric::InterTokenLatency, 9.0), false),
            (g(SloMetric::RequestLatency, 1000.0), true),
            (g(SloMetric::RequestLatency, 999.0), false),
            // 1/ITL = 100 tokens/s.
            (g(SloMetric::OutputTokenThroughputPerUser, 100.0), true),
            (g(SloMetric::OutputTokenThroughputPerUser, 101.0), false),
        ];
        for (goal, want) in cases {
            assert_eq!(goal.met_by(&r), want, "{goal:?}");
        }
    }

    #[test]
    fn missing_values_fail_except_single_token_itl() {
        let single = metrics(100, None, None, 100);
        let g = |m: SloMetric| Goodput {
            metric: m,
            value: 1e9,
        };
        assert!(!g(SloMetric::TimeToSecondToken).met_by(&single));
        assert!(g(SloMetric::InterTokenLatency).met_by(&single));
        assert!(g(SloMetric::OutputTokenThroughputPerUser).met_by(&single));
        // Every token in one read: ITL 0, per-user throughput unbounded.
        let burst = metrics(100, Some(0), Some(0.0), 100);
        assert!(g(SloMetric::OutputTokenThroughputPerUser).met_by(&burst));
        let no_chunks = RequestMetrics {
            e2e_ns: 5,
            ..RequestMetrics::default()
        };
        assert!(!g(SloMetric::TimeToFirstToken).met_by(&no_chunks));
        assert!(!g(SloMetric::InterTokenLatency).met_by(&no_chunks));
        assert!(!g(SloMetric::OutputTokenThroughputPerUser).met_by(&no_chunks));
        assert!(g(SloMetric::RequestLatency).met_by(&no_chunks));
    }
}
