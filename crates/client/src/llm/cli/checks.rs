//! Checks of `profile`'s numeric flags: request timeout, load, token lengths and the upper
//! bounds that keep everything derived from them in range.

use std::time::Duration;

use super::{EndpointType, ProfileArgs, MAX_READ_BATCH_US, MAX_RESPONSE_BYTES};
use crate::error::{Error, Result};

/// AIPerf's default request timeout.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest request timeout (one day).
const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(86_400);

/// `--request-timeout MS` or `--request-timeout-seconds S` (not both), within one day, and
/// the flag that set it (AIPerf's when neither did).
pub(super) fn request_timeout(args: &ProfileArgs) -> Result<(Duration, &'static str)> {
    let limit = match (&args.request_timeout, &args.request_timeout_seconds) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "profile: give --request-timeout (ms) or --request-timeout-seconds, not both",
            ))
        }
        (Some(ms), None) => (timeout_ms("--request-timeout", ms)?, "--request-timeout"),
        (None, Some(secs)) => match secs.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s <= MAX_REQUEST_TIMEOUT.as_secs_f64() => {
                (Duration::from_secs_f64(s), "--request-timeout-seconds")
            }
            _ => {
                return Err(Error::usage(format!(
                    "profile: --request-timeout-seconds must be a number of seconds above 0 \
                     and at most 86400 (got '{secs}')"
                )))
            }
        },
        (None, None) => (DEFAULT_REQUEST_TIMEOUT, "--request-timeout-seconds"),
    };
    Ok(limit)
}

/// `--request-idle-timeout MS`, within one day; `None` when not given.
pub(super) fn request_idle_timeout(args: &ProfileArgs) -> Result<Option<Duration>> {
    let flag = "--request-idle-timeout";
    args.request_idle_timeout
        .as_deref()
        .map(|ms| timeout_ms(flag, ms))
        .transpose()
}

/// A whole number of ms from 1 to a day given to `flag`.
fn timeout_ms(flag: &str, ms: &str) -> Result<Duration> {
    match ms.trim().parse::<u64>() {
        Ok(n) if n > 0 && n <= MAX_REQUEST_TIMEOUT.as_millis() as u64 => {
            Ok(Duration::from_millis(n))
        }
        _ => Err(Error::usage(format!(
            "profile: {flag} must be a whole number of ms from 1 to 86400000 (got '{ms}')"
        ))),
    }
}

/// The load flags: how much, how fast, on how many workers.
pub(super) fn check_load(args: &ProfileArgs) -> Result<()> {
    check_user_centric(args)?;
    if !args.request_rate.is_empty() || args.user_centric_rate.is_some() {
        // AIPerf: --concurrency with --request-rate is the cap on requests in flight.
        if args.concurrency.len() > 1 {
            return Err(Error::usage(
                "profile: with --request-rate, --concurrency is the cap on requests in flight \
                 (as in AIPerf) and takes one value",
            ));
        }
        if !args.concurrency.is_empty() && args.max_inflight.is_some() {
            return Err(Error::usage(
                "profile: with --request-rate, give --concurrency or --max-inflight as the cap \
                 on requests in flight, not both",
            ));
        }
    }
    if args.concurrency.contains(&0) {
        return Err(Error::usage(
            "profile: --concurrency values must be at least 1",
        ));
    }
    if args
        .request_rate
        .iter()
        .any(|r| !(r.is_finite() && *r > 0.0))
    {
        return Err(Error::usage(
            "profile: --request-rate values must be positive",
        ));
    }
    if args.request_count == Some(0) {
        return Err(Error::usage("profile: --request-count must be at least 1"));
    }
    if args
        .benchmark_duration
        .is_some_and(|d| !(d.is_finite() && d > 0.0))
    {
        return Err(Error::usage(
            "profile: --benchmark-duration must be positive",
        ));
    }
    if args.max_workers == Some(0) {
        return Err(Error::usage("profile: --max-workers must be at least 1"));
    }
    if !(1..=MAX_RESPONSE_BYTES).contains(&args.max_response_bytes) {
        return Err(Error::usage(format!(
            "profile: --max-response-bytes must be between 1 and {MAX_RESPONSE_BYTES} (16 GiB)"
        )));
    }
    if args.read_batch_us > MAX_READ_BATCH_US {
        return Err(Error::usage(format!(
            "profile: --read-batch-us must be at most {MAX_READ_BATCH_US} (100 ms)"
        )));
    }
    Ok(())
}

/// Most users of `--num-users` (each holds a connection).
const MAX_USERS: u64 = 10_000;

/// `--user-centric-rate` and `--num-users`: both or neither, and no other rate.
fn check_user_centric(args: &ProfileArgs) -> Result<()> {
    let Some(rate) = args.user_centric_rate else {
        if args.num_users.is_some() {
            return Err(Error::usage(
                "profile: --num-users applies to --user-centric-rate",
            ));
        }
        return Ok(());
    };
    if !(rate.is_finite() && rate > 0.0) {
        return Err(Error::usage(
            "profile: --user-centric-rate must be positive",
        ));
    }
    match args.num_users {
        None => Err(Error::usage(
            "profile: --user-centric-rate needs --num-users N (the users sharing the rate)",
        )),
        Some(n) if n == 0 || n > MAX_USERS => Err(Error::usage(format!(
            "profile: --num-users must be from 1 to {MAX_USERS}"
        ))),
        Some(_) if !args.request_rate.is_empty() => Err(Error::usage(
            "profile: give --user-centric-rate or --request-rate, not both",
        )),
        Some(_) => Ok(()),
    }
}

/// The prompt and output length flags.
pub(super) fn check_tokens(args: &ProfileArgs) -> Result<()> {
    if args.num_prompts == 0 {
        return Err(Error::usage("profile: --num-prompts must be at least 1"));
    }
    if args.synthetic_input_tokens_mean == 0 {
        return Err(Error::usage(
            "profile: --synthetic-input-tokens-mean must be at least 1",
        ));
    }
    if args.output_tokens_mean == Some(0) {
        return Err(Error::usage(
            "profile: --output-tokens-mean must be at least 1",
        ));
    }
    if args.output_tokens_mean_deterministic && args.output_tokens_mean.is_none() {
        return Err(Error::usage(
            "profile: --output-tokens-mean-deterministic needs --output-tokens-mean",
        ));
    }
    for (name, sd) in [
        (
            "--synthetic-input-tokens-stddev",
            args.synthetic_input_tokens_stddev,
        ),
        ("--output-tokens-stddev", args.output_tokens_stddev),
    ] {
        if !(sd.is_finite() && sd >= 0.0) {
            return Err(Error::usage(format!("profile: {name} must be >= 0")));
        }
    }
    Ok(())
}

/// `--sequence-distribution`, parsed; it shapes synthetic prompts only.
pub(super) fn sequence_distribution(
    args: &ProfileArgs,
) -> Result<Option<crate::llm::sequence_dist::SequenceDistribution>> {
    let Some(text) = &args.sequence_distribution else {
        return Ok(None);
    };
    if args.input_file.is_some() || args.dataset.dataset_name.is_some() {
        return Err(Error::usage(
            "profile: --sequence-distribution shapes synthetic prompts; give it without \
             --input-file or --dataset-name",
        ));
    }
    crate::llm::sequence_dist::parse(text, MAX_TOKENS)
        .map(Some)
        .map_err(|why| Error::usage(format!("profile: --sequence-distribution '{text}': {why}")))
}

/// Tokens per prompt or answer at most (mean and standard deviation).
const MAX_TOKENS: u64 = 1_000_000;
/// `--num-prompts` at most.
const MAX_PROMPTS: u64 = 1_000_000;
/// `--max-workers` at most.
const MAX_WORKERS: u64 = 4096;
/// `--benchmark-duration` at most: a week, in seconds.
const MAX_DURATION_S: f64 = 604_800.0;

/// Upper bounds of the numeric flags: far above any real run, low enough that nothing
/// derived from them (buffers, schedules, durations) overflows or exhausts memory.
pub(super) fn check_bounds(args: &ProfileArgs) -> Result<()> {
    use crate::cli::number::{MAX_COUNT, MAX_LEVEL, MAX_RATE};
    let ints = [
        (
            "--concurrency",
            args.concurrency.iter().max().copied(),
            MAX_LEVEL,
        ),
        ("--max-inflight", args.max_inflight, MAX_LEVEL),
        ("--request-count", args.request_count, MAX_COUNT),
        (
            "--warmup-request-count",
            Some(args.warmup_request_count),
            MAX_COUNT,
        ),
        (
            "--synthetic-input-tokens-mean",
            Some(args.synthetic_input_tokens_mean),
            MAX_TOKENS,
        ),
        ("--output-tokens-mean", args.output_tokens_mean, MAX_TOKENS),
        ("--num-prompts", Some(args.num_prompts), MAX_PROMPTS),
        (
            "--max-workers",
            args.max_workers.map(|w| w as u64),
            MAX_WORKERS,
        ),
    ];
    for (flag, value, max) in ints {
        if let Some(v) = value.filter(|&v| v > max) {
            return Err(Error::usage(format!(
                "profile: {flag} must be at most {max} (got {v})"
            )));
        }
    }
    let floats = [
        (
            "--request-rate",
            args.request_rate.iter().copied().fold(0.0, f64::max),
            MAX_RATE,
        ),
        (
            "--benchmark-duration",
            args.benchmark_duration.unwrap_or(0.0),
            MAX_DURATION_S,
        ),
        (
            "--synthetic-input-tokens-stddev",
            args.synthetic_input_tokens_stddev,
            MAX_TOKENS as f64,
        ),
        (
            "--output-tokens-stddev",
            args.output_tokens_stddev,
            MAX_TOKENS as f64,
        ),
    ];
    for (flag, value, max) in floats {
        if value > max {
            return Err(Error::usage(format!(
                "profile: {flag} must be at most {max} (got {value})"
            )));
        }
    }
    Ok(())
}

/// AIPerf's load flags, checked against the rest of the load.
pub(super) fn load_plan(
    args: &ProfileArgs,
    endpoint_type: EndpointType,
) -> Result<super::super::load_args::LoadPlan> {
    use super::super::load_args::{self, Given};
    use super::Distribution;
    let given = args.request_distribution.map(|d| match d {
        Distribution::Constant => Given::Constant,
        Distribution::Poisson => Given::Poisson,
    });
    let plan = load_args::plan(&args.load, given)?;
    let l = &args.load;
    if l.benchmark_grace_period.is_some() && args.benchmark_duration.is_none() {
        return Err(Error::usage(
            "profile: --benchmark-grace-period applies after --benchmark-duration; give that too",
        ));
    }
    if plan.rate_series.is_some() && (!args.request_rate.is_empty() || !args.concurrency.is_empty())
    {
        return Err(Error::usage(
            "profile: --request-rate-series sets the rate; give it or --request-rate or \
             --concurrency, not two of them (--max-inflight caps requests in flight)",
        ));
    }
    let paced = !args.request_rate.is_empty() || plan.rate_series.is_some();
    if (l.arrival_pattern.is_some() || l.arrival_smoothness.is_some()) && !paced {
        return Err(Error::usage(
            "profile: --arrival-pattern and --arrival-smoothness shape --request-rate (or \
             --request-rate-series) arrivals; give one of those",
        ));
    }
    if let Some(n) = plan.prefill_concurrency {
        check_prefill(args, endpoint_type, n, paced)?;
    }
    Ok(plan)
}

/// `--prefill-concurrency N` against the rest of the load. As in AIPerf 0.13 it needs
/// `--streaming` (the first token is seen only in a stream) and may not exceed any
/// `--concurrency` value of a sweep; with `--request-rate` it may not exceed
/// `--max-inflight`, the cap on requests in flight there.
fn check_prefill(
    args: &ProfileArgs,
    endpoint_type: EndpointType,
    n: u64,
    paced: bool,
) -> Result<()> {
    if endpoint_type.grpc() || !endpoint_type.generates() {
        return Err(Error::usage(format!(
            "profile: --prefill-concurrency applies to the HTTP token streams (chat, \
             completions, generate), not --endpoint-type {}",
            endpoint_type.name()
        )));
    }
    if !args.streaming {
        return Err(Error::usage(
            "profile: --prefill-concurrency needs --streaming (a request leaves prefill at its \
             first streamed token)",
        ));
    }
    let (flag, cap) = if paced {
        ("--max-inflight", args.max_inflight)
    } else {
        ("--concurrency", args.concurrency.iter().min().copied())
    };
    match cap {
        Some(c) if n > c => Err(Error::usage(format!(
            "profile: --prefill-concurrency {n} cannot be greater than {flag} {c} (requests in \
             prefill are among those in flight)"
        ))),
        _ => Ok(()),
    }
}
