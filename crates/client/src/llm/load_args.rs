//! AIPerf's load-shaping flags of `profile`: the arrival pattern of `--request-rate`, the
//! grace period after `--benchmark-duration`, a request-rate series, the failed-request
//! threshold and the prefill cap; parsed here into a [`LoadPlan`].

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::number::MAX_LEVEL;
use crate::error::{Error, Result};

/// AIPerf's load flags (values are read as text so a bad one gets a one-line error).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LoadArgs {
    /// Arrival process of `--request-rate`: constant (even gaps), poisson (exponential gaps)
    /// or gamma (gaps of shape --arrival-smoothness). Default constant, as perf_analyzer and
    /// GenAI-Perf send; `--arrival-pattern poisson` gives AIPerf's default.
    #[arg(long, visible_alias = "request-rate-mode", value_name = "PATTERN")]
    pub arrival_pattern: Option<String>,
    /// Gamma arrivals: the shape of the gaps (1 = Poisson, above 1 smoother, below 1
    /// burstier; vLLM's --burstiness). Alone it selects `--arrival-pattern gamma`.
    #[arg(
        long,
        visible_alias = "vllm-burstiness",
        value_name = "K",
        allow_negative_numbers = true
    )]
    pub arrival_smoothness: Option<String>,
    /// Seconds after `--benchmark-duration` to wait for requests in flight (default 30, as
    /// AIPerf; `inf`: until all finish); those still unanswered are left out.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub benchmark_grace_period: Option<String>,
    /// JSON file of `{"time_s": T, "qps": R}` points (a list, or `{"points": [...]}`): the
    /// request rate follows the line through them, then holds the last rate (instead of
    /// --request-rate).
    #[arg(long, value_name = "FILE")]
    pub request_rate_series: Option<PathBuf>,
    /// Stop the run when the share of failed requests exceeds RATIO (0 to 1), checked once
    /// max(concurrency, 10) requests have finished; results so far are written, exit 99.
    #[arg(long, value_name = "RATIO", allow_negative_numbers = true)]
    pub failed_request_threshold: Option<String>,
    /// At most N requests in their prefill phase at once (sent, first output token not yet
    /// received), over all workers; a request leaves prefill at the first streamed event that
    /// carries output text. Needs --streaming; at most --concurrency (or --max-inflight).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub prefill_concurrency: Option<String>,
}

/// How the sends of an open loop are spaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    Constant,
    Poisson,
    /// Gamma gaps of this shape.
    Gamma(f64),
}

impl Arrival {
    /// The pattern's name as AIPerf spells it.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Constant => "constant",
            Arrival::Poisson => "poisson",
            Arrival::Gamma(_) => "gamma",
        }
    }
}

/// The validated load flags.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    pub arrival: Arrival,
    /// Wait after the duration for requests in flight; `None`: until they all finish.
    pub grace: Option<Duration>,
    /// `(time_s, qps)` points, time strictly increasing.
    pub rate_series: Option<Vec<(f64, f64)>>,
    pub failed_request_threshold: Option<f64>,
    /// `--prefill-concurrency`: requests in prefill at once, at most.
    pub prefill_concurrency: Option<u64>,
}

impl Default for LoadPlan {
    fn default() -> Self {
        LoadPlan {
            arrival: Arrival::Constant,
            grace: Some(DEFAULT_GRACE),
            rate_series: None,
            failed_request_threshold: None,
            prefill_concurrency: None,
        }
    }
}

/// AIPerf's default grace period.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// The longest finite grace period (one day).
const MAX_GRACE_S: f64 = 86_400.0;

/// What `--request-distribution` (perf_analyzer's and GenAI-Perf's name) said, if given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Given {
    Constant,
    Poisson,
}

/// Validates the flags. `distribution`: `--request-distribution`, when given.
pub fn plan(args: &LoadArgs, distribution: Option<Given>) -> Result<LoadPlan> {
    let smoothness = args
        .arrival_smoothness
        .as_deref()
        .map(|raw| positive("--arrival-smoothness", raw))
        .transpose()?;
    let pattern = match args.arrival_pattern.as_deref().map(str::trim) {
        None => None,
        Some(p) if p.eq_ignore_ascii_case("constant") => Some(Arrival::Constant),
        Some(p) if p.eq_ignore_ascii_case("poisson") => Some(Arrival::Poisson),
        Some(p) if p.eq_ignore_ascii_case("gamma") => Some(Arrival::Gamma(1.0)),
        Some(p) => {
            return Err(Error::usage(format!(
                "profile: --arrival-pattern must be constant, poisson or gamma (got '{p}')"
            )))
        }
    };
    let from_distribution = distribution.map(|d| match d {
        Given::Constant => Arrival::Constant,
        Given::Poisson => Arrival::Poisson,
    });
    if let (Some(p), Some(d)) = (pattern, from_distribution) {
        if p != d {
            return Err(Error::usage(format!(
                "profile: --arrival-pattern {} and --request-distribution {} disagree; give one",
                p.name(),
                d.name()
            )));
        }
    }
    let arrival = match (pattern.or(from_distribution), smoothness) {
        (None | Some(Arrival::Gamma(_)), Some(k)) => Arrival::Gamma(k),
        (Some(other), Some(_)) => {
            return Err(Error::usage(format!(
                "profile: --arrival-smoothness applies to --arrival-pattern gamma, not {}",
                other.name()
            )))
        }
        (p, None) => p.unwrap_or(Arrival::Constant),
    };
    let grace = match args.benchmark_grace_period.as_deref().map(str::trim) {
        None => Some(DEFAULT_GRACE),
        Some(s) if s.eq_ignore_ascii_case("inf") || s.eq_ignore_ascii_case("infinity") => None,
        Some(s) => match s.parse::<f64>() {
            Ok(g) if g.is_finite() && (0.0..=MAX_GRACE_S).contains(&g) => {
                Some(Duration::from_secs_f64(g))
            }
            _ => {
                return Err(Error::usage(format!(
                    "profile: --benchmark-grace-period must be seconds from 0 to 86400, or \
                     inf (got '{s}')"
                )))
            }
        },
    };
    let failed_request_threshold = args
        .failed_request_threshold
        .as_deref()
        .map(|raw| match raw.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
            _ => Err(Error::usage(format!(
                "profile: --failed-request-threshold must be a ratio from 0 to 1 (got '{raw}')"
            ))),
        })
        .transpose()?;
    let rate_series = args
        .request_rate_series
        .as_deref()
        .map(super::rate_series::read)
        .transpose()?;
    let prefill_concurrency = args
        .prefill_concurrency
        .as_deref()
        .map(|raw| match raw.trim().parse::<u64>() {
            Ok(n) if (1..=MAX_LEVEL).contains(&n) => Ok(n),
            _ => Err(Error::usage(format!(
                "profile: --prefill-concurrency must be a whole number from 1 to {MAX_LEVEL} \
                 (got '{raw}')"
            ))),
        })
        .transpose()?;
    Ok(LoadPlan {
        arrival,
        grace,
        rate_series,
        failed_request_threshold,
        prefill_concurrency,
    })
}

/// A finite number above 0 given to `flag`.
fn positive(flag: &str, raw: &str) -> Result<f64> {
    match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e6 => Ok(v),
        _ => Err(Error::usage(format!(
            "profile: {flag} must be a number above 0 (got '{raw}')"
        ))),
    }
}

/// The plan as the summary JSON's `input_config` shows it (AIPerf's names).
pub fn config_json(plan: &LoadPlan) -> Value {
    json!({
        "arrival_pattern": plan.arrival.name(),
        "arrival_smoothness": match plan.arrival {
            Arrival::Gamma(k) => Some(k),
            _ => None,
        },
        "benchmark_grace_period": plan.grace.map_or(json!("inf"), |g| json!(g.as_secs_f64())),
        "request_rate_series": plan.rate_series.as_ref().map(|points| {
            points
                .iter()
                .map(|(t, q)| json!({"time_s": t, "qps": q}))
                .collect::<Vec<_>>()
        }),
        "failed_request_threshold": plan.failed_request_threshold,
        "prefill_concurrency": plan.prefill_concurrency,
    })
}

#[cfg(test)]
#[path = "load_args_tests.rs"]
mod tests;
