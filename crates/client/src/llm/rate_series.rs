//! `--request-rate-series FILE`: a request rate that follows a piecewise-linear line through
//! `(time_s, qps)` points (AIPerf's format: a JSON list of `{"time_s": T, "qps": R}`
//! objects, or an object whose one key `points` holds that list), holding the first rate
//! before the first point and the last rate after the last.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// Points at most.
const MAX_POINTS: usize = 100_000;
/// Sends at most in one generated schedule.
const MAX_SENDS: usize = 1 << 22;

/// Reads and checks the file: at least two points, time_s >= 0 and strictly increasing,
/// qps above 0, both finite.
pub fn read(path: &Path) -> Result<Vec<(f64, f64)>> {
    let shown = path.display();
    let bad = |why: String| Error::usage(format!("profile: --request-rate-series {shown}: {why}"));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let list = match &doc {
        Value::Array(list) => list,
        Value::Object(map) if map.len() == 1 && map.contains_key("points") => {
            match &map["points"] {
                Value::Array(list) => list,
                _ => return Err(bad("\"points\" must be a list".into())),
            }
        }
        _ => {
            return Err(bad(
                "must be a list of {\"time_s\", \"qps\"} points or {\"points\": [...]}".into(),
            ))
        }
    };
    if list.len() < 2 || list.len() > MAX_POINTS {
        return Err(bad(format!(
            "needs from 2 to {MAX_POINTS} points (got {})",
            list.len()
        )));
    }
    let mut points = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let field = |name: &str| p.get(name).and_then(Value::as_f64);
        let only_two = p.as_object().is_some_and(|o| o.len() == 2);
        match (field("time_s"), field("qps")) {
            (Some(t), Some(q))
                if only_two && t.is_finite() && t >= 0.0 && q.is_finite() && q > 0.0 =>
            {
                points.push((t, q))
            }
            _ => {
                return Err(bad(format!(
                    "point {i} must be {{\"time_s\": T >= 0, \"qps\": R > 0}} (got {p})"
                )))
            }
        }
    }
    if let Some(i) = points.windows(2).position(|w| w[1].0 <= w[0].0) {
        return Err(bad(format!(
            "time_s must increase strictly (point {} after point {i})",
            i + 1
        )));
    }
    Ok(points)
}

/// The rate at `t` seconds: the line through the points, flat outside them.
pub fn rate_at(points: &[(f64, f64)], t: f64) -> f64 {
    let (first, last) = (points[0], points[points.len() - 1]);
    if t <= first.0 {
        return first.1;
    }
    if t >= last.0 {
        return last.1;
    }
    let right = points.partition_point(|p| p.0 <= t);
    let (t0, q0) = points[right - 1];
    let (t1, q1) = points[right];
    q0 + (q1 - q0) * (t - t0) / (t1 - t0)
}

/// Send offsets (ns): the k-th send where the integral of the rate from 0 reaches k, for
/// `count` sends or until `until_s` seconds, whichever comes first (at most 4M sends).
pub fn offsets(points: &[(f64, f64)], count: Option<u64>, until_s: Option<f64>) -> Vec<u64> {
    let limit = count.map_or(MAX_SENDS, |c| (c as usize).min(MAX_SENDS));
    // Breakpoints: 0, every point time, then open-ended at the last rate.
    let mut edges: Vec<f64> = std::iter::once(0.0)
        .chain(points.iter().map(|p| p.0).filter(|t| *t > 0.0))
        .collect();
    edges.dedup();
    let mut out = Vec::new();
    let mut done = 0.0f64; // sends due by the start of the segment
    let mut next = 1.0f64;
    for seg in 0.. {
        let a = edges.get(seg).copied().unwrap_or(f64::INFINITY);
        if !a.is_finite() {
            break;
        }
        let b = edges.get(seg + 1).copied().unwrap_or(f64::INFINITY);
        let (ra, rb) = (
            rate_at(points, a),
            rate_at(points, b.min(points[points.len() - 1].0)),
        );
        let rb = if b.is_finite() { rb } else { ra };
        // Sends over [a, b]: ra (t - a) + slope (t - a)^2 / 2.
        let slope = if b.is_finite() {
            (rb - ra) / (b - a)
        } else {
            0.0
        };
        let total = if b.is_finite() {
            done + ra * (b - a) + slope * (b - a) * (b - a) / 2.0
        } else {
            f64::INFINITY
        };
        while next <= total && out.len() < limit {
            let k = next - done;
            let dt = if slope.abs() > 1e-12 {
                (-ra + (ra * ra + 2.0 * slope * k).max(0.0).sqrt()) / slope
            } else {
                k / ra
            };
            let t = a + dt;
            if until_s.is_some_and(|u| t > u) {
                return out;
            }
            out.push((t * 1e9) as u64);
            next += 1.0;
        }
        if out.len() >= limit {
            break;
        }
        done = total;
    }
    out
}

#[cfg(test)]
#[path = "rate_series_tests.rs"]
mod tests;
