//! `--sequence-distribution`: AIPerf's mix of input and output sequence lengths. Each
//! synthetic prompt draws one bucket, with the buckets' relative weights, then its ISL and
//! OSL from that bucket's normal distributions (a fixed length when the standard deviation
//! is 0), clamped to at least 1. The three text forms of the AIPerf 0.13 docs
//! ("Sequence Length Distributions") are read:
//!
//! - `ISL[|SD],OSL[|SD]:WEIGHT;...` (e.g. `128,64:0.5;256|20,128:0.5`);
//! - `[(ISL[|SD],OSL[|SD]):WEIGHT,...]`;
//! - `{"pairs": [{"isl": N, "isl_stddev": SD, "osl": N, "osl_stddev": SD, "prob": W}, ...]}`.

use serde_json::Value;

/// Buckets at most (each is one ISL/OSL class).
const MAX_BUCKETS: usize = 1000;

/// One ISL/OSL class and its relative weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub isl: f64,
    pub isl_stddev: f64,
    pub osl: f64,
    pub osl_stddev: f64,
    pub weight: f64,
}

/// The parsed mix.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceDistribution {
    pub buckets: Vec<Bucket>,
}

impl SequenceDistribution {
    /// The bucket at `u` in [0, 1) of the cumulative weights.
    pub fn pick(&self, u: f64) -> &Bucket {
        let total: f64 = self.buckets.iter().map(|b| b.weight).sum();
        let mut left = u * total;
        for b in &self.buckets {
            if left < b.weight {
                return b;
            }
            left -= b.weight;
        }
        self.buckets.last().expect("at least one bucket")
    }
}

/// Reads `text` in any of the three forms; lengths and standard deviations at most
/// `max_tokens`. The error says what is wrong (the caller names the flag).
pub fn parse(text: &str, max_tokens: u64) -> Result<SequenceDistribution, String> {
    let text = text.trim();
    let buckets = if text.starts_with('{') {
        json_buckets(text)?
    } else if let Some(inner) = text.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("the bracket form must end with ']'")?;
        bracket_buckets(inner)?
    } else {
        text.split(';')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let (pair, weight) = s
                    .rsplit_once(':')
                    .ok_or_else(|| format!("'{}' has no ':WEIGHT'", s.trim()))?;
                bucket(pair, weight)
            })
            .collect::<Result<Vec<_>, String>>()?
    };
    if buckets.is_empty() {
        return Err("no ISL,OSL:WEIGHT entries".into());
    }
    if buckets.len() > MAX_BUCKETS {
        return Err(format!("at most {MAX_BUCKETS} entries"));
    }
    let max = max_tokens as f64;
    for b in &buckets {
        if !(b.isl >= 1.0 && b.isl <= max && b.osl >= 1.0 && b.osl <= max) {
            return Err(format!(
                "lengths must be from 1 to {max_tokens} (got ISL {}, OSL {})",
                b.isl, b.osl
            ));
        }
        let sd_ok = |sd: f64| (0.0..=max).contains(&sd);
        if !(sd_ok(b.isl_stddev) && sd_ok(b.osl_stddev)) {
            return Err(format!(
                "standard deviations must be from 0 to {max_tokens}"
            ));
        }
        if !(b.weight.is_finite() && b.weight > 0.0) {
            return Err(format!(
                "weights must be positive numbers (got {})",
                b.weight
            ));
        }
    }
    Ok(SequenceDistribution { buckets })
}

/// `(ISL[|SD],OSL[|SD]):WEIGHT,...` (the inside of the brackets).
fn bracket_buckets(inner: &str) -> Result<Vec<Bucket>, String> {
    let mut out = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let body = rest
            .strip_prefix('(')
            .ok_or_else(|| format!("expected '(' at '{rest}'"))?;
        let (pair, after) = body
            .split_once(')')
            .ok_or_else(|| format!("no ')' after '({body}'"))?;
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| format!("'({pair})' has no ':WEIGHT'"))?;
        let (weight, next) = after.split_once(',').unwrap_or((after, ""));
        out.push(bucket(pair, weight)?);
        rest = next.trim();
    }
    Ok(out)
}

/// `ISL[|SD],OSL[|SD]` and its weight.
fn bucket(pair: &str, weight: &str) -> Result<Bucket, String> {
    let (isl, osl) = pair
        .split_once(',')
        .ok_or_else(|| format!("'{}' must be ISL,OSL", pair.trim()))?;
    let (isl, isl_stddev) = length(isl)?;
    let (osl, osl_stddev) = length(osl)?;
    Ok(Bucket {
        isl,
        isl_stddev,
        osl,
        osl_stddev,
        weight: number(weight)?,
    })
}

/// `N` or `N|SD`.
fn length(text: &str) -> Result<(f64, f64), String> {
    match text.split_once('|') {
        Some((mean, sd)) => Ok((number(mean)?, number(sd)?)),
        None => Ok((number(text)?, 0.0)),
    }
}

fn number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("'{}' is not a number", text.trim()))
}

/// `{"pairs": [...]}`.
fn json_buckets(text: &str) -> Result<Vec<Bucket>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let pairs = v["pairs"]
        .as_array()
        .ok_or("the JSON form needs a \"pairs\" list")?;
    pairs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let field = |name: &str, default: Option<f64>| match (
                p.get(name).and_then(Value::as_f64),
                default,
            ) {
                (Some(v), _) => Ok(v),
                (None, Some(d)) if p.get(name).is_none() => Ok(d),
                _ => Err(format!("pairs[{i}].{name} must be a number")),
            };
            Ok(Bucket {
                isl: field("isl", None)?,
                isl_stddev: field("isl_stddev", Some(0.0))?,
                osl: field("osl", None)?,
                osl_stddev: field("osl_stddev", Some(0.0))?,
                weight: field("prob", None)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(isl: f64, isl_sd: f64, osl: f64, osl_sd: f64, w: f64) -> Bucket {
        Bucket {
            isl,
            isl_stddev: isl_sd,
            osl,
            osl_stddev: osl_sd,
            weight: w,
        }
    }

    #[test]
    fn the_three_forms_read_alike() {
        let want = vec![
            b(256.0, 10.0, 128.0, 5.0, 60.0),
            b(512.0, 0.0, 256.0, 0.0, 40.0),
        ];
        for text in [
            "256|10,128|5:60;512,256:40",
            "[(256|10,128|5):60,(512,256):40]",
            r#"{"pairs": [{"isl": 256, "isl_stddev": 10, "osl": 128, "osl_stddev": 5, "prob": 60},
                {"isl": 512, "osl": 256, "prob": 40}]}"#,
        ] {
            assert_eq!(parse(text, 1000).unwrap().buckets, want, "{text}");
        }
    }

    #[test]
    fn weights_are_relative() {
        let d = parse("10,1:7;20,2:2;30,3:1", 1000).unwrap();
        assert_eq!(d.pick(0.0).isl, 10.0);
        assert_eq!(d.pick(0.69).isl, 10.0);
        assert_eq!(d.pick(0.71).isl, 20.0);
        assert_eq!(d.pick(0.95).isl, 30.0);
    }

    #[test]
    fn bad_text_says_why() {
        for (text, why) in [
            ("", "no ISL,OSL"),
            ("128,64", "no ':WEIGHT'"),
            ("128:1", "ISL,OSL"),
            ("x,64:1", "'x' is not a number"),
            ("0,64:1", "from 1 to"),
            ("128,64:0", "positive"),
            ("128,64:-1", "positive"),
            ("128|-2,64:1", "standard deviations"),
            ("[(128,64):1", "end with ']'"),
            ("[(128,64)]", "no ':WEIGHT'"),
            ("{\"pairs\": 3}", "\"pairs\" list"),
            ("{\"pairs\": [{\"isl\": 1}]}", "pairs[0].osl"),
            ("2000,64:1", "from 1 to 1000"),
        ] {
            let err = parse(text, 1000).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
