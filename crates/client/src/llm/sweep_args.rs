//! The flags of load shapes beyond a list of levels: ramps, GuideLLM's sweep, the SLA
//! search, request cancellation and prefix prompts (AIPerf / GenAI-Perf / GuideLLM names
//! where those tools have them), and their validation into a [`Shape`].

use crate::run::kinds::codec::Input;
use clap::{Args, ValueEnum};

use super::cli::ProfileConfig;
use crate::error::{Error, Result};

/// Which load axis an SLA search moves along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SlaAxis {
    Concurrency,
    RequestRate,
}

/// Load shapes, sweeps, cancellation and prefix prompts.
#[derive(Args, Debug, Clone, Default)]
pub struct SweepArgs {
    /// Raise concurrency from 1 to each --concurrency level in even steps over this many
    /// seconds before measuring (AIPerf). Requests sent during the ramp are not measured.
    #[arg(long, value_name = "S")]
    pub concurrency_ramp_duration: Option<f64>,
    /// Raise the request rate linearly from rate x 0.1 s / S to each --request-rate level
    /// over S seconds before measuring (AIPerf). Requests sent during the ramp are not
    /// measured.
    #[arg(long, value_name = "S")]
    pub request_rate_ramp_duration: Option<f64>,
    /// GuideLLM's sweep with N profiles in all: synchronous (concurrency 1), throughput
    /// (closed loop at --concurrency, default 64, as fast as the server answers), then N-2
    /// constant rates evenly spaced above the synchronous rate up to the throughput rate.
    #[arg(long, value_name = "N")]
    pub sweep: Option<u32>,
    /// GuideLLM's spelling of the sweep: `--rate-type sweep --rate N` is `--sweep N`.
    #[arg(long, value_name = "TYPE")]
    pub rate_type: Option<String>,
    /// With `--rate-type sweep`: the number of profiles.
    #[arg(long, value_name = "N")]
    pub rate: Option<f64>,
    /// Search for the largest concurrency (or request rate) whose goodput fraction meets
    /// --sla-min-goodput-fraction under the --goodput limits, by bisection over --sla-range.
    #[arg(long, value_enum)]
    pub sla_search: Option<SlaAxis>,
    /// The range of the SLA search, `LOW,HIGH` (concurrencies or requests/s).
    #[arg(long, value_name = "LOW,HIGH", value_delimiter = ',')]
    pub sla_range: Vec<f64>,
    /// Share of requests (0..1] that must meet every --goodput limit for a level to pass.
    #[arg(long, default_value_t = 0.9, value_name = "F")]
    pub sla_min_goodput_fraction: f64,
    /// Rate search: stop when the passing and failing rates are this close (requests/s;
    /// default 5 % of LOW).
    #[arg(long, value_name = "REQ/S")]
    pub sla_rate_precision: Option<f64>,
    /// Percentage (0-100] of requests cancelled (connection closed) after
    /// --request-cancellation-delay; counted apart, not as errors nor in latency figures.
    #[arg(long, value_name = "PCT")]
    pub request_cancellation_rate: Option<f64>,
    /// Seconds after a cancelled request was sent before it is cancelled.
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub request_cancellation_delay: f64,
    /// GenAI-Perf: each prompt starts with one of N shared prefixes of
    /// --prefix-prompt-length tokens (the ISL grows by that length).
    #[arg(
        long,
        visible_alias = "prefix-prompt-pool-size",
        alias = "prompt-prefix-pool-size",
        default_value_t = 0
    )]
    pub num_prefix_prompts: u64,
    /// Tokens of each prefix prompt.
    #[arg(long, visible_alias = "prompt-prefix-length", default_value_t = 0)]
    pub prefix_prompt_length: u64,
    /// AIPerf: a system message of this many tokens, the same in every chat request (the
    /// ISL grows by that length).
    #[arg(long, value_name = "TOKENS")]
    pub shared_system_prompt_length: Option<u64>,
    /// AIPerf: each multi-turn conversation opens with its own user message of this many
    /// tokens (after the system message, before the first turn), which later turns carry in
    /// their history; the first turn's ISL grows by that length.
    #[arg(long, value_name = "TOKENS")]
    pub user_context_prompt_length: Option<u64>,
    /// AIPerf: this text, verbatim, as the system message of every chat request (the ISL
    /// grows by its tokens).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    /// AIPerf: the system message read from this UTF-8 file, verbatim.
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<std::path::PathBuf>,
}

/// `--user-context-prompt-length`, checked: from 1 to the prefix limit, not beside prefix
/// prompts (as in AIPerf), chat only.
pub fn user_context_length(cfg: &ProfileConfig) -> Result<Option<u64>> {
    let s = &cfg.args.sweep;
    let Some(len) = s.user_context_prompt_length else {
        return Ok(None);
    };
    if len == 0 || len > MAX_PREFIX_TOKENS {
        return usage(format!(
            "--user-context-prompt-length must be from 1 to {MAX_PREFIX_TOKENS}"
        ));
    }
    if s.num_prefix_prompts > 0 {
        return usage("--user-context-prompt-length and --num-prefix-prompts exclude each other (as in AIPerf)");
    }
    if cfg.endpoint_type.input() != Input::Messages {
        return usage(
            "--user-context-prompt-length applies to --endpoint-type chat (a user message)",
        );
    }
    Ok(Some(len))
}

/// The verbatim system message of `--system-prompt` or `--system-prompt-file`, checked
/// against the other prefix flags; None when neither is given.
pub fn system_text(cfg: &ProfileConfig) -> Result<Option<String>> {
    let s = &cfg.args.sweep;
    let text = match (&s.system_prompt, &s.system_prompt_file) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return usage("--system-prompt and --system-prompt-file exclude each other")
        }
        (Some(t), None) => t.clone(),
        (None, Some(path)) => std::fs::read_to_string(path).map_err(|e| {
            Error::usage(format!(
                "profile: --system-prompt-file {}: {e}",
                path.display()
            ))
        })?,
    };
    let flag = if s.system_prompt.is_some() {
        "--system-prompt"
    } else {
        "--system-prompt-file"
    };
    if text.trim().is_empty() {
        return usage(format!("{flag} is empty"));
    }
    if s.shared_system_prompt_length.is_some() || s.num_prefix_prompts > 0 {
        return usage(format!(
            "{flag} excludes --shared-system-prompt-length and --num-prefix-prompts"
        ));
    }
    if cfg.endpoint_type.input() != Input::Messages {
        return usage(format!(
            "{flag} applies to --endpoint-type chat (a system message)"
        ));
    }
    if cfg.args.input_file.is_some() {
        return usage(format!(
            "{flag} applies to synthetic prompts, not --input-file"
        ));
    }
    Ok(Some(text))
}

/// The GuideLLM sweep's closed-loop concurrency for its throughput profile by default.
pub const SWEEP_THROUGHPUT_CONCURRENCY: u64 = 64;
/// Prefix or system prompt tokens at most.
const MAX_PREFIX_TOKENS: u64 = 1_000_000;
/// Prefix prompts at most.
const MAX_PREFIXES: u64 = 100_000;
/// Profiles of a GuideLLM sweep at most.
const MAX_SWEEP: u32 = 1000;

/// How a run moves through its levels.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The `--concurrency` / `--request-rate` list, in order.
    List,
    /// GuideLLM's sweep: `profiles` in all, throughput at `concurrency`.
    Sweep { profiles: u32, concurrency: u64 },
    /// Bisection for the largest passing level in `[low, high]`.
    Sla {
        axis: SlaAxis,
        low: f64,
        high: f64,
        min_fraction: f64,
        precision: f64,
    },
}

/// The validated shape of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub plan: Plan,
    /// Ramp before each level (s); `None`: none.
    pub ramp_s: Option<f64>,
    /// Share of requests cancelled (0..1] and after how long (s).
    pub cancel: Option<(f64, f64)>,
}

fn usage<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::usage(format!("profile: {}", msg.into())))
}

fn positive(flag: &str, v: Option<f64>, max: f64) -> Result<()> {
    match v {
        Some(v) if !(v.is_finite() && v > 0.0 && v <= max) => usage(format!(
            "{flag} must be above 0 and at most {max} (got {v})"
        )),
        _ => Ok(()),
    }
}

impl Shape {
    /// Checks the flags against each other and the rest of the configuration.
    pub fn of(cfg: &ProfileConfig) -> Result<Shape> {
        let s = &cfg.args.sweep;
        let week = 604_800.0;
        positive(
            "--concurrency-ramp-duration",
            s.concurrency_ramp_duration,
            week,
        )?;
        positive(
            "--request-rate-ramp-duration",
            s.request_rate_ramp_duration,
            week,
        )?;
        let ramp_s = match (s.concurrency_ramp_duration, s.request_rate_ramp_duration) {
            (Some(_), _) if !cfg.args.request_rate.is_empty() => {
                return usage("--concurrency-ramp-duration needs --concurrency, not --request-rate")
            }
            (_, Some(_)) if cfg.args.request_rate.is_empty() => {
                return usage("--request-rate-ramp-duration needs --request-rate")
            }
            (c, r) => c.or(r),
        };
        let plan = plan(cfg)?;
        if ramp_s.is_some() && plan != Plan::List {
            return usage("a ramp applies to --concurrency or --request-rate levels, not to --sweep or --sla-search");
        }
        Ok(Shape {
            plan,
            ramp_s,
            cancel: cancel(cfg)?,
        })
    }
}

fn plan(cfg: &ProfileConfig) -> Result<Plan> {
    let s = &cfg.args.sweep;
    let sweep = match (s.rate_type.as_deref(), s.rate) {
        (None, None) => s.sweep,
        (Some("sweep"), Some(n)) if n.fract() == 0.0 && n >= 1.0 && s.sweep.is_none() => {
            Some(n.min(f64::from(u32::MAX)) as u32)
        }
        (Some("sweep"), None) => return usage("--rate-type sweep needs --rate N (the number of profiles)"),
        (Some(t), _) if t != "sweep" => {
            return usage(format!("--rate-type '{t}' is not supported; use --concurrency, --request-rate or --rate-type sweep"))
        }
        (None, Some(_)) => return usage("--rate needs --rate-type sweep (or use --request-rate)"),
        _ => return usage("--rate-type sweep --rate N needs a whole N and no --sweep"),
    };
    if let Some(axis) = s.sla_search {
        if sweep.is_some() {
            return usage("give --sweep or --sla-search, not both");
        }
        return sla_plan(cfg, axis);
    }
    if !s.sla_range.is_empty() {
        return usage("--sla-range needs --sla-search");
    }
    let Some(profiles) = sweep else {
        return Ok(Plan::List);
    };
    if !(3..=MAX_SWEEP).contains(&profiles) {
        return usage(format!(
            "--sweep must be from 3 to {MAX_SWEEP} (synchronous, throughput and at least one rate)"
        ));
    }
    if !cfg.args.request_rate.is_empty() || cfg.args.concurrency.len() > 1 {
        return usage("--sweep chooses its own levels: give at most one --concurrency (the throughput profile's) and no --request-rate");
    }
    let concurrency = cfg
        .args
        .concurrency
        .first()
        .copied()
        .unwrap_or(SWEEP_THROUGHPUT_CONCURRENCY);
    Ok(Plan::Sweep {
        profiles,
        concurrency,
    })
}

fn sla_plan(cfg: &ProfileConfig, axis: SlaAxis) -> Result<Plan> {
    let s = &cfg.args.sweep;
    if cfg.args.goodput.is_empty() {
        return usage("--sla-search needs --goodput limits");
    }
    if !cfg.args.concurrency.is_empty() || !cfg.args.request_rate.is_empty() {
        return usage("--sla-search chooses its own levels from --sla-range: give no --concurrency or --request-rate");
    }
    let [low, high] = s.sla_range[..] else {
        return usage("--sla-search needs --sla-range LOW,HIGH");
    };
    let (max, whole) = match axis {
        SlaAxis::Concurrency => (crate::cli::number::MAX_LEVEL as f64, true),
        SlaAxis::RequestRate => (crate::cli::number::MAX_RATE, false),
    };
    let ok = |v: f64| v.is_finite() && v > 0.0 && v <= max && (!whole || v.fract() == 0.0);
    if !(ok(low) && ok(high) && low < high) {
        let what = if whole {
            "whole concurrencies"
        } else {
            "rates above 0"
        };
        return usage(format!(
            "--sla-range must be LOW,HIGH with LOW < HIGH, {what} at most {max}"
        ));
    }
    let f = s.sla_min_goodput_fraction;
    if !(f > 0.0 && f <= 1.0) {
        return usage(format!(
            "--sla-min-goodput-fraction must be in (0, 1] (got {f})"
        ));
    }
    let precision = match (axis, s.sla_rate_precision) {
        (SlaAxis::Concurrency, Some(_)) => {
            return usage("--sla-rate-precision applies to --sla-search request-rate")
        }
        (SlaAxis::Concurrency, None) => 1.0,
        (SlaAxis::RequestRate, Some(p)) if p.is_finite() && p > 0.0 => p,
        (SlaAxis::RequestRate, Some(p)) => {
            return usage(format!("--sla-rate-precision must be above 0 (got {p})"))
        }
        (SlaAxis::RequestRate, None) => low * 0.05,
    };
    Ok(Plan::Sla {
        axis,
        low,
        high,
        min_fraction: f,
        precision,
    })
}

fn cancel(cfg: &ProfileConfig) -> Result<Option<(f64, f64)>> {
    let s = &cfg.args.sweep;
    let delay = s.request_cancellation_delay;
    if !(delay.is_finite() && (0.0..=86_400.0).contains(&delay)) {
        return usage(format!(
            "--request-cancellation-delay must be from 0 to 86400 s (got {delay})"
        ));
    }
    let Some(pct) = s.request_cancellation_rate else {
        if delay > 0.0 {
            return usage("--request-cancellation-delay needs --request-cancellation-rate");
        }
        return Ok(None);
    };
    if !(pct > 0.0 && pct <= 100.0) {
        return usage(format!(
            "--request-cancellation-rate must be above 0 and at most 100 (got {pct})"
        ));
    }
    if cfg.endpoint_type.grpc() {
        return usage("--request-cancellation-rate applies to HTTP endpoints, not kserve (gRPC)");
    }
    Ok(Some((pct / 100.0, delay)))
}

/// The prefix flags: `(count, length)` of shared prefixes and the system prompt length.
pub fn prefixes(cfg: &ProfileConfig) -> Result<(u64, u64, Option<u64>)> {
    let s = &cfg.args.sweep;
    let (n, len) = (s.num_prefix_prompts, s.prefix_prompt_length);
    if (n == 0) != (len == 0) {
        return usage("--num-prefix-prompts and --prefix-prompt-length go together (both above 0)");
    }
    if n > MAX_PREFIXES || len > MAX_PREFIX_TOKENS {
        return usage(format!("--num-prefix-prompts must be at most {MAX_PREFIXES} and --prefix-prompt-length at most {MAX_PREFIX_TOKENS}"));
    }
    let system = s.shared_system_prompt_length;
    match system {
        Some(l) if l == 0 || l > MAX_PREFIX_TOKENS => {
            return usage(format!("--shared-system-prompt-length must be from 1 to {MAX_PREFIX_TOKENS}"))
        }
        Some(_) if n > 0 => {
            return usage("--shared-system-prompt-length and --num-prefix-prompts exclude each other (as in AIPerf)")
        }
        Some(_) if cfg.endpoint_type.input() != Input::Messages => {
            return usage("--shared-system-prompt-length applies to --endpoint-type chat (a system message)")
        }
        _ => {}
    }
    if (n > 0 || system.is_some()) && cfg.args.input_file.is_some() {
        return usage("prefix and system prompts apply to synthetic prompts, not --input-file");
    }
    Ok((n, len, system))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(args: &[&str]) -> Result<Shape> {
        let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
        v.extend(args.iter().map(Into::into));
        Shape::of(&super::super::cli::parse(v).unwrap().unwrap())
    }

    #[test]
    fn shapes_from_flags() {
        assert_eq!(shape(&[]).unwrap().plan, Plan::List);
        let s = shape(&["--sweep", "5"]).unwrap();
        assert_eq!(
            s.plan,
            Plan::Sweep {
                profiles: 5,
                concurrency: 64
            }
        );
        let s = shape(&["--rate-type", "sweep", "--rate", "4", "--concurrency", "8"]).unwrap();
        assert_eq!(
            s.plan,
            Plan::Sweep {
                profiles: 4,
                concurrency: 8
            }
        );
        let s = shape(&[
            "--sla-search",
            "concurrency",
            "--sla-range",
            "1,16",
            "--goodput",
            "ttft:100",
        ])
        .unwrap();
        assert!(matches!(
            s.plan,
            Plan::Sla {
                low: 1.0,
                high: 16.0,
                precision: 1.0,
                ..
            }
        ));
        let s = shape(&["--request-rate", "5", "--request-rate-ramp-duration", "2"]).unwrap();
        assert_eq!(s.ramp_s, Some(2.0));
        let s = shape(&[
            "--request-cancellation-rate",
            "25",
            "--request-cancellation-delay",
            "0.5",
        ])
        .unwrap();
        assert_eq!(s.cancel, Some((0.25, 0.5)));
    }

    #[test]
    fn bad_shapes_are_usage_errors_naming_the_flag() {
        for (args, flag) in [
            (&["--sweep", "2"][..], "--sweep"),
            (&["--sweep", "4", "--request-rate", "3"], "--sweep"),
            (&["--rate-type", "poisson", "--rate", "3"], "--rate-type"),
            (&["--rate", "3"], "--rate"),
            (
                &["--sla-search", "concurrency", "--sla-range", "1,8"],
                "--goodput",
            ),
            (
                &["--sla-search", "concurrency", "--goodput", "ttft:1"],
                "--sla-range",
            ),
            (
                &[
                    "--sla-search",
                    "concurrency",
                    "--sla-range",
                    "8,2",
                    "--goodput",
                    "ttft:1",
                ],
                "--sla-range",
            ),
            (
                &[
                    "--sla-search",
                    "concurrency",
                    "--sla-range",
                    "1.5,2",
                    "--goodput",
                    "ttft:1",
                ],
                "--sla-range",
            ),
            (&["--sla-range", "1,2"], "--sla-range"),
            (
                &["--concurrency-ramp-duration", "0", "--concurrency", "4"],
                "--concurrency-ramp-duration",
            ),
            (
                &["--request-rate-ramp-duration", "2"],
                "--request-rate-ramp-duration",
            ),
            (
                &["--request-cancellation-rate", "0"],
                "--request-cancellation-rate",
            ),
            (
                &["--request-cancellation-rate", "101"],
                "--request-cancellation-rate",
            ),
            (
                &["--request-cancellation-delay", "1"],
                "--request-cancellation-delay",
            ),
            (
                &[
                    "--request-cancellation-rate",
                    "5",
                    "--endpoint-type",
                    "kserve",
                ],
                "--request-cancellation-rate",
            ),
        ] {
            let e = shape(args).unwrap_err();
            assert_eq!(e.exit_code(), 99, "{args:?}");
            assert!(e.to_string().contains(flag), "{args:?}: {e}");
        }
    }
}
