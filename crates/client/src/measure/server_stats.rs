//! Triton server-side statistics (`GET /v2/models/<m>/stats`): parsing and window deltas.
//!
//! The server reports cumulative counters; a window's numbers are `end - start`. Counts come
//! as JSON numbers over HTTP but as strings when a gRPC response was converted to JSON
//! (protobuf's JSON mapping prints uint64 as a string), so both are accepted.

use crate::error::{Error, Result};
use serde_json::Value;

mod composing;
pub use composing::{
    bls_composing_models, composing_deltas, composing_tree, ensemble_steps, merge_composing,
    ComposingModel, ComposingStats,
};

/// One `StatisticDuration`: how many times a phase ran and its total time (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatDuration {
    pub count: u64,
    pub ns: u64,
}

impl StatDuration {
    fn delta(&self, earlier: &StatDuration) -> StatDuration {
        StatDuration {
            count: self.count.saturating_sub(earlier.count),
            ns: self.ns.saturating_sub(earlier.ns),
        }
    }

    fn add(&mut self, o: &StatDuration) {
        self.count = self.count.saturating_add(o.count);
        self.ns = self.ns.saturating_add(o.ns);
    }

    /// Mean duration in ns; 0 when the phase never ran.
    pub fn avg_ns(&self) -> u64 {
        self.ns.checked_div(self.count).unwrap_or(0)
    }
}

/// The statistics of one model version (cumulative, or a delta between two snapshots).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    pub name: String,
    pub version: String,
    pub inference_count: u64,
    pub execution_count: u64,
    pub success: StatDuration,
    pub fail: StatDuration,
    pub queue: StatDuration,
    pub compute_input: StatDuration,
    pub compute_infer: StatDuration,
    pub compute_output: StatDuration,
    pub cache_hit: StatDuration,
    pub cache_miss: StatDuration,
}

/// Server-side numbers of one window or point, as the reports need them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub model: ModelStats,
    /// The model config has `response_cache.enable`: reports add the cache lines/columns.
    pub cache_enabled: bool,
    /// Ensembles and `--bls-composing-models`: the composing models' deltas.
    pub composing: Vec<ComposingStats>,
}

impl ModelStats {
    /// `self - earlier`, field by field (a counter that went backwards, e.g. after a model
    /// reload, gives 0 rather than wrapping).
    pub fn delta(&self, earlier: &ModelStats) -> ModelStats {
        ModelStats {
            name: self.name.clone(),
            version: self.version.clone(),
            inference_count: self.inference_count.saturating_sub(earlier.inference_count),
            execution_count: self.execution_count.saturating_sub(earlier.execution_count),
            success: self.success.delta(&earlier.success),
            fail: self.fail.delta(&earlier.fail),
            queue: self.queue.delta(&earlier.queue),
            compute_input: self.compute_input.delta(&earlier.compute_input),
            compute_infer: self.compute_infer.delta(&earlier.compute_infer),
            compute_output: self.compute_output.delta(&earlier.compute_output),
            cache_hit: self.cache_hit.delta(&earlier.cache_hit),
            cache_miss: self.cache_miss.delta(&earlier.cache_miss),
        }
    }

    /// Adds another window's delta (merging the windows of a point).
    pub fn add(&mut self, o: &ModelStats) {
        if self.name.is_empty() {
            self.name = o.name.clone();
            self.version = o.version.clone();
        }
        self.inference_count = self.inference_count.saturating_add(o.inference_count);
        self.execution_count = self.execution_count.saturating_add(o.execution_count);
        self.success.add(&o.success);
        self.fail.add(&o.fail);
        self.queue.add(&o.queue);
        self.compute_input.add(&o.compute_input);
        self.compute_infer.add(&o.compute_infer);
        self.compute_output.add(&o.compute_output);
        self.cache_hit.add(&o.cache_hit);
        self.cache_miss.add(&o.cache_miss);
    }
}

/// Parses Triton's statistics JSON: `{"model_stats":[{"name","version","inference_count",
/// "execution_count","inference_stats":{"success":{"count","ns"},...}}]}`. Missing counters
/// (older servers have no cache stats) read as 0.
pub fn parse_stats(body: &[u8]) -> Result<Vec<ModelStats>> {
    let root: Value = serde_json::from_slice(body)
        .map_err(|e| Error::generic(format!("server statistics: invalid JSON: {e}")))?;
    let list = match root.get("model_stats") {
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(Error::generic(
                "server statistics: 'model_stats' is not an array",
            ))
        }
        None => return Err(Error::generic("server statistics: missing 'model_stats'")),
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| parse_model(i, v))
        .collect()
}

fn parse_model(index: usize, v: &Value) -> Result<ModelStats> {
    let at = |field: &str| format!("server statistics: model_stats[{index}].{field}");
    let name = match v.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(Error::generic(format!(
                "{} is missing or not a string",
                at("name")
            )))
        }
    };
    let version = match v.get("version") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let mut m = ModelStats {
        name,
        version,
        inference_count: counter(v.get("inference_count"), || at("inference_count"))?,
        execution_count: counter(v.get("execution_count"), || at("execution_count"))?,
        ..ModelStats::default()
    };
    let stats = v.get("inference_stats");
    let durations: [(&str, &mut StatDuration); 8] = [
        ("success", &mut m.success),
        ("fail", &mut m.fail),
        ("queue", &mut m.queue),
        ("compute_input", &mut m.compute_input),
        ("compute_infer", &mut m.compute_infer),
        ("compute_output", &mut m.compute_output),
        ("cache_hit", &mut m.cache_hit),
        ("cache_miss", &mut m.cache_miss),
    ];
    for (key, slot) in durations {
        let d = stats.and_then(|s| s.get(key));
        let path = |f: &str| at(&format!("inference_stats.{key}.{f}"));
        slot.count = counter(d.and_then(|d| d.get("count")), || path("count"))?;
        slot.ns = counter(d.and_then(|d| d.get("ns")), || path("ns"))?;
    }
    Ok(m)
}

/// A non-negative integer counter given as a JSON number or a decimal string; absent is 0.
fn counter(v: Option<&Value>, field: impl Fn() -> String) -> Result<u64> {
    let parsed = match v {
        None | Some(Value::Null) => Some(0),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    parsed.ok_or_else(|| {
        let shown = v.map(Value::to_string).unwrap_or_default();
        Error::generic(format!(
            "{} is not a non-negative integer: {shown}",
            field()
        ))
    })
}

/// The window delta of the profiled model between two snapshots.
///
/// With an explicit `version`, that version is used (a version missing from `start` counts
/// from zero). Without one, the server picks: as in perf_analyzer, the highest version
/// whose queue count grew during the window is taken; if none grew (an idle window), the
/// highest version listed is used, where perf_analyzer would fail.
pub fn model_delta(
    start: &[ModelStats],
    end: &[ModelStats],
    name: &str,
    version: &str,
) -> Result<ModelStats> {
    let find = |list: &[ModelStats], ver: &str| -> Option<ModelStats> {
        list.iter()
            .find(|m| m.name == name && m.version == ver)
            .cloned()
    };
    let chosen = if !version.is_empty() {
        find(end, version)
    } else {
        pick_version(start, end, name).map(|(m, _)| m.clone())
    };
    let end_model = chosen.ok_or_else(|| {
        let shown = if version.is_empty() { "any" } else { version };
        Error::generic(format!(
            "server statistics have no entry for model '{name}' version {shown}"
        ))
    })?;
    let start_model = find(start, &end_model.version).unwrap_or_default();
    Ok(end_model.delta(&start_model))
}

/// The entry of `name` in `end` a window without an explicit version uses: the highest
/// version whose queue count grew since `start` (true when several grew), or, when none grew
/// (an idle window), the highest version listed.
pub fn pick_version<'a>(
    start: &[ModelStats],
    end: &'a [ModelStats],
    name: &str,
) -> Option<(&'a ModelStats, bool)> {
    let candidates: Vec<&ModelStats> = end.iter().filter(|m| m.name == name).collect();
    let grew = |m: &&ModelStats| {
        let before = start
            .iter()
            .find(|s| s.name == name && s.version == m.version)
            .map_or(0, |s| s.queue.count);
        m.queue.count > before
    };
    let grown: Vec<&ModelStats> = candidates.iter().copied().filter(grew).collect();
    let several = grown.len() > 1;
    let pool = if grown.is_empty() { candidates } else { grown };
    pool.into_iter()
        .max_by(|a, b| version_cmp(a, b))
        .map(|m| (m, several))
}

/// Orders versions numerically when both are numbers ("10" > "9"), else as text.
fn version_cmp(a: &ModelStats, b: &ModelStats) -> std::cmp::Ordering {
    match (a.version.parse::<u64>(), b.version.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.version.cmp(&b.version),
    }
}

#[cfg(test)]
#[path = "server_stats_composing_tests.rs"]
mod composing_tests;

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP_BODY: &str = r#"{"model_stats":[{"name":"identity","version":"1",
        "last_inference":1700000000000,"inference_count":5850,"execution_count":1470,
        "inference_stats":{"success":{"count":5850,"ns":26325000000},
        "fail":{"count":2,"ns":1000},"queue":{"count":5850,"ns":7020000000},
        "compute_input":{"count":1470,"ns":73500000},"compute_infer":{"count":1470,"ns":4704000000},
        "compute_output":{"count":1470,"ns":29400000},
        "cache_hit":{"count":0,"ns":0},"cache_miss":{"count":0,"ns":0}},"batch_stats":[]}]}"#;

    #[test]
    fn parses_http_numbers() {
        let stats = parse_stats(HTTP_BODY.as_bytes()).unwrap();
        assert_eq!(stats.len(), 1);
        let m = &stats[0];
        assert_eq!((m.name.as_str(), m.version.as_str()), ("identity", "1"));
        assert_eq!((m.inference_count, m.execution_count), (5850, 1470));
        assert_eq!(
            m.success,
            StatDuration {
                count: 5850,
                ns: 26_325_000_000
            }
        );
        assert_eq!(m.fail, StatDuration { count: 2, ns: 1000 });
        assert_eq!(m.compute_infer.avg_ns(), 3_200_000);
    }

    #[test]
    fn parses_grpc_strings_and_missing_fields() {
        let body = r#"{"model_stats":[{"name":"m","version":"2","inference_count":"7",
            "inference_stats":{"success":{"count":"7","ns":"700"},"queue":{"count":"7"}}}]}"#;
        let m = &parse_stats(body.as_bytes()).unwrap()[0];
        assert_eq!(m.inference_count, 7);
        assert_eq!(m.execution_count, 0);
        assert_eq!(m.success, StatDuration { count: 7, ns: 700 });
        assert_eq!(m.queue, StatDuration { count: 7, ns: 0 });
        assert_eq!(m.cache_hit, StatDuration::default());
    }

    #[test]
    fn rejects_bad_input_with_field_names() {
        let cases: &[(&str, &str)] = &[
            ("not json", "invalid JSON"),
            ("{}", "missing 'model_stats'"),
            (r#"{"model_stats":{}}"#, "not an array"),
            (
                r#"{"model_stats":[{"version":"1"}]}"#,
                "model_stats[0].name",
            ),
            (
                r#"{"model_stats":[{"name":"m","inference_count":-1}]}"#,
                "inference_count",
            ),
            (
                r#"{"model_stats":[{"name":"m","inference_stats":{"queue":{"count":"x"}}}]}"#,
                "model_stats[0].inference_stats.queue.count",
            ),
            (
                r#"{"model_stats":[{"name":"m","execution_count":1.5}]}"#,
                "execution_count",
            ),
        ];
        for (body, want) in cases {
            let err = parse_stats(body.as_bytes()).unwrap_err();
            assert!(err.msg.contains(want), "{body}: {}", err.msg);
        }
    }

    fn model(version: &str, queue: u64, success_ns: u64) -> ModelStats {
        ModelStats {
            name: "m".into(),
            version: version.into(),
            inference_count: queue,
            queue: StatDuration {
                count: queue,
                ns: queue * 10,
            },
            success: StatDuration {
                count: queue,
                ns: success_ns,
            },
            ..ModelStats::default()
        }
    }

    #[test]
    fn delta_and_add() {
        let d = model("1", 10, 500).delta(&model("1", 4, 100));
        assert_eq!(d.inference_count, 6);
        assert_eq!(d.queue, StatDuration { count: 6, ns: 60 });
        assert_eq!(d.success.ns, 400);
        // A counter that went backwards (model reloaded) saturates at 0.
        assert_eq!(model("1", 1, 0).delta(&model("1", 4, 100)).queue.count, 0);
        let mut sum = ModelStats::default();
        sum.add(&d);
        sum.add(&d);
        assert_eq!(
            (sum.name.as_str(), sum.inference_count, sum.success.ns),
            ("m", 12, 800)
        );
    }

    #[test]
    fn model_delta_picks_version() {
        let start = vec![model("1", 5, 0), model("2", 5, 0), model("10", 5, 0)];
        let end = vec![model("1", 9, 0), model("2", 5, 0), model("10", 5, 0)];
        // Explicit version.
        assert_eq!(model_delta(&start, &end, "m", "2").unwrap().queue.count, 0);
        // Unspecified: the version that grew, even though "10" is higher.
        let d = model_delta(&start, &end, "m", "").unwrap();
        assert_eq!((d.version.as_str(), d.queue.count), ("1", 4));
        // Nothing grew: highest version, compared numerically.
        assert_eq!(model_delta(&start, &start, "m", "").unwrap().version, "10");
        // Version new since the start snapshot counts from zero.
        assert_eq!(model_delta(&[], &end, "m", "1").unwrap().queue.count, 9);
        assert!(model_delta(&start, &end, "other", "").is_err());
        assert!(model_delta(&start, &end, "m", "3").is_err());
    }
}
