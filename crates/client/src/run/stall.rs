//! What a level with no valid request says besides perf_analyzer's "No valid requests
//! recorded within time interval": when requests went out and none came back, the server
//! stalled, and a larger time window would not help. The note names the requests sent, how
//! long the oldest has waited, and the limits that bound such a wait.

use std::time::Duration;

use crate::config::Config;

/// The requests of a level so far: sent, and ended (answered or failed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub sent: u64,
    pub ended: u64,
}

/// The note for a level whose requests were sent and none ended, the oldest `waited_ns`
/// ago; `None` when nothing was sent or something ended (then the window was too short or
/// the requests failed, and other messages say so).
pub fn note(cfg: &Config, level: Sent, waited_ns: u64) -> Option<String> {
    if level.sent == 0 || level.ended > 0 {
        return None;
    }
    let requests = match level.sent {
        1 => "1 request sent".to_string(),
        n => format!("{n} requests sent"),
    };
    let waited = Duration::from_nanos(waited_ns).as_secs_f64();
    let total = limit("--request-timeout", cfg.request_timeout, "10 min");
    let idle = limit("--request-idle-timeout", cfg.request_idle_timeout, "30 s");
    Some(format!(
        "{requests}, none answered; the oldest has waited {waited:.1} s; {total} and {idle} \
         bound how long a request may wait"
    ))
}

/// "--request-timeout (2000 ms)", or with its default "(default max(10 min, 10x the slowest
/// request))".
fn limit(flag: &str, given: Option<Duration>, floor: &str) -> String {
    match given {
        Some(d) => format!("{flag} ({} ms)", d.as_millis()),
        None => format!("{flag} (default max({floor}, 10x the slowest request))"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_named_with_the_limits_that_bound_it() {
        let cfg = Config::default();
        let stalled = Sent { sent: 4, ended: 0 };
        assert_eq!(
            note(&cfg, stalled, 1_540_000_000).as_deref(),
            Some(
                "4 requests sent, none answered; the oldest has waited 1.5 s; \
                 --request-timeout (default max(10 min, 10x the slowest request)) and \
                 --request-idle-timeout (default max(30 s, 10x the slowest request)) bound how \
                 long a request may wait"
            )
        );
        let given = Config {
            request_timeout: Some(Duration::from_millis(2000)),
            request_idle_timeout: Some(Duration::from_millis(250)),
            ..Config::default()
        };
        let one = note(&given, Sent { sent: 1, ended: 0 }, 0).unwrap();
        assert!(
            one.starts_with("1 request sent, none answered; the oldest has waited 0.0 s;"),
            "{one}"
        );
        assert!(
            one.contains("--request-timeout (2000 ms) and --request-idle-timeout (250 ms)"),
            "{one}"
        );
    }

    #[test]
    fn nothing_sent_or_something_answered_is_no_stall() {
        let cfg = Config::default();
        assert_eq!(note(&cfg, Sent { sent: 0, ended: 0 }, 5), None);
        assert_eq!(note(&cfg, Sent { sent: 9, ended: 1 }, 5), None);
    }
}
