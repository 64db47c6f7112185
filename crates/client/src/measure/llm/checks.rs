//! Token-count checks of a run, with AIPerf's thresholds: the server's `usage` against the
//! client tokenizer's counts (`usage_discrepancy_count`), and the output length a request
//! asked for (`max_tokens`) against the one it got (`osl_mismatch_count`).

use super::record::LlmRequest;

/// A request's `usage` counts differ from the client's when either differs by more than
/// this percentage of the client's count (AIPerf's `USAGE_PCT_DIFF_THRESHOLD`).
pub const USAGE_DIFF_PCT: f64 = 10.0;
/// A request got another output length than it asked for when the difference exceeds
/// `min(asked × OSL_DIFF_PCT %, OSL_DIFF_MAX_TOKENS)` (AIPerf's OSL mismatch thresholds).
pub const OSL_DIFF_PCT: f64 = 5.0;
pub const OSL_DIFF_MAX_TOKENS: f64 = 50.0;

/// Absolute differences in percent of the reference count, over the requests compared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffPct {
    pub avg: f64,
    pub max: f64,
}

impl DiffPct {
    fn of(values: &[f64]) -> DiffPct {
        if values.is_empty() {
            return DiffPct::default();
        }
        DiffPct {
            avg: values.iter().sum::<f64>() / values.len() as f64,
            max: values.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// What the checks found over the successful requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenChecks {
    /// Requests whose response carried `usage` (compared with the client's counts).
    pub usage_compared: u64,
    /// Of those, requests where the prompt, completion or (when reported) reasoning count
    /// differs beyond the threshold.
    pub usage_discrepancies: u64,
    /// |usage.prompt_tokens − ISL| / ISL.
    pub prompt_diff_pct: DiffPct,
    /// |usage.completion_tokens − OSL| / OSL.
    pub completion_diff_pct: DiffPct,
    /// Requests that asked for an output length.
    pub osl_compared: u64,
    /// Of those, requests whose OSL differs beyond the threshold.
    pub osl_mismatches: u64,
    /// |OSL − asked| / asked.
    pub osl_diff_pct: DiffPct,
    /// Mean asked and mean received output length over the requests compared.
    pub osl_asked_avg: f64,
    pub osl_got_avg: f64,
}

/// |got − reference| in percent of `reference`; `None` when the reference is 0.
fn diff_pct(got: u64, reference: u64) -> Option<f64> {
    (reference > 0).then(|| got.abs_diff(reference) as f64 * 100.0 / reference as f64)
}

impl TokenChecks {
    /// The checks over `reqs` (failed requests are left out). `usage` is compared with the
    /// client tokenizer's counts (kept apart under `--use-server-token-count`); the output
    /// length asked for with the one reported (the server's under that flag).
    pub fn of(reqs: &[LlmRequest]) -> TokenChecks {
        let mut c = TokenChecks::default();
        let (mut prompt, mut completion, mut osl) = (Vec::new(), Vec::new(), Vec::new());
        let (mut asked_sum, mut got_sum) = (0u64, 0u64);
        for r in reqs.iter().filter(|r| r.ok()) {
            if let Some(u) = r.usage {
                c.usage_compared += 1;
                let (isl, osl) = r.client_counts.unwrap_or((r.isl, r.osl));
                let p = diff_pct(u.prompt_tokens, isl);
                let q = diff_pct(u.completion_tokens, osl);
                prompt.extend(p);
                completion.extend(q);
                // Reasoning tokens count only when the server reported them.
                let rs = u
                    .reasoning_tokens
                    .and_then(|got| diff_pct(got, r.reasoning_tokens));
                let over = |d: Option<f64>| d.is_some_and(|d| d > USAGE_DIFF_PCT);
                c.usage_discrepancies += u64::from(over(p) || over(q) || over(rs));
            }
            if let Some(asked) = r.requested_osl.filter(|&a| a > 0) {
                c.osl_compared += 1;
                asked_sum += asked;
                got_sum += r.osl;
                osl.extend(diff_pct(r.osl, asked));
                let limit = (asked as f64 * OSL_DIFF_PCT / 100.0).min(OSL_DIFF_MAX_TOKENS);
                c.osl_mismatches += u64::from(r.osl.abs_diff(asked) as f64 > limit);
            }
        }
        c.prompt_diff_pct = DiffPct::of(&prompt);
        c.completion_diff_pct = DiffPct::of(&completion);
        c.osl_diff_pct = DiffPct::of(&osl);
        if c.osl_compared > 0 {
            c.osl_asked_avg = asked_sum as f64 / c.osl_compared as f64;
            c.osl_got_avg = got_sum as f64 / c.osl_compared as f64;
        }
        c
    }

    /// The console warnings, one line each (empty when every count agrees).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.usage_discrepancies > 0 {
            out.push(format!(
                "{} of {} requests: the server's usage token counts differ from the client \
                 tokenizer's by more than {USAGE_DIFF_PCT}% (prompt tokens: {:.1}% on average, \
                 up to {:.1}%; completion tokens: {:.1}% on average, up to {:.1}%)",
                self.usage_discrepancies,
                self.usage_compared,
                self.prompt_diff_pct.avg,
                self.prompt_diff_pct.max,
                self.completion_diff_pct.avg,
                self.completion_diff_pct.max,
            ));
        }
        if self.osl_mismatches > 0 {
            out.push(format!(
                "{} of {} requests got another output length than they asked for \
                 (max_tokens): {:.1} tokens asked and {:.1} received on average, \
                 {:.1}% apart on average, up to {:.1}%",
                self.osl_mismatches,
                self.osl_compared,
                self.osl_asked_avg,
                self.osl_got_avg,
                self.osl_diff_pct.avg,
                self.osl_diff_pct.max,
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::llm::{RequestError, Usage};

    fn req(isl: u64, osl: u64, usage: Option<(u64, u64)>, asked: Option<u64>) -> LlmRequest {
        LlmRequest {
            isl,
            osl,
            usage: usage.map(|(p, c)| Usage {
                prompt_tokens: p,
                completion_tokens: c,
                ..Usage::default()
            }),
            requested_osl: asked,
            ..LlmRequest::default()
        }
    }

    #[test]
    fn usage_differences_beyond_ten_percent_are_counted() {
        let reqs = [
            req(100, 10, Some((100, 10)), None),
            // 10 % exactly is within the tolerance.
            req(100, 10, Some((110, 10)), None),
            req(100, 10, Some((100, 12)), None),
            req(50, 10, Some((60, 10)), None),
            req(100, 10, None, None),
        ];
        let c = TokenChecks::of(&reqs);
        assert_eq!((c.usage_compared, c.usage_discrepancies), (4, 2));
        // A reported reasoning count 50 % off the client's is a discrepancy too.
        let mut reasoning = req(100, 10, Some((100, 10)), None);
        reasoning.reasoning_tokens = 4;
        reasoning.usage.as_mut().unwrap().reasoning_tokens = Some(6);
        assert_eq!(TokenChecks::of(&[reasoning]).usage_discrepancies, 1);
        assert_eq!(c.prompt_diff_pct.max, 20.0);
        assert_eq!(c.prompt_diff_pct.avg, 7.5);
        assert_eq!(c.completion_diff_pct.max, 20.0);
        let w = c.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("2 of 4 requests"), "{}", w[0]);
        assert!(w[0].contains("up to 20.0%"), "{}", w[0]);
    }

    #[test]
    fn output_length_mismatches_use_aiperf_thresholds() {
        let reqs = [
            req(1, 100, None, Some(100)),
            // 5 of 100 is within 5 %; 6 is not.
            req(1, 95, None, Some(100)),
            req(1, 94, None, Some(100)),
            // Large requests: at most 50 tokens apart.
            req(1, 1949, None, Some(2000)),
            req(1, 1950, None, Some(2000)),
            req(1, 7, None, None),
        ];
        let c = TokenChecks::of(&reqs);
        assert_eq!((c.osl_compared, c.osl_mismatches), (5, 2));
        assert_eq!(c.osl_asked_avg, 860.0);
        let w = c.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("2 of 5 requests got another output length"));
    }

    #[test]
    fn failed_requests_and_agreeing_counts_warn_of_nothing() {
        let mut failed = req(100, 1, Some((1, 1)), Some(100));
        failed.error = Some(RequestError {
            kind: "reset".into(),
            message: String::new(),
            code: None,
        });
        let c = TokenChecks::of(&[failed, req(8, 8, Some((8, 8)), Some(8))]);
        assert_eq!((c.usage_compared, c.osl_compared), (1, 1));
        assert!(c.warnings().is_empty());
        // Server counts in isl/osl: the client's own are what usage is compared with.
        let mut server = req(8, 8, Some((8, 8)), None);
        server.client_counts = Some((4, 8));
        let c = TokenChecks::of(&[server]);
        assert_eq!((c.usage_discrepancies, c.prompt_diff_pct.max), (1, 100.0));
    }
}
