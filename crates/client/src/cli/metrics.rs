//! `--collect-metrics`, `--metrics-url`, `--metrics-interval`.

use super::args::RunArgs;
use crate::config::{Config, MetricsConfig, ServiceKind};
use crate::error::{Error, Result};

/// perf_analyzer's poll period (ms).
const DEFAULT_INTERVAL_MS: u64 = 1000;
/// Triton serves its metrics on this port, at this path.
const TRITON_METRICS_PORT: u16 = 8002;
const TRITON_METRICS_PATH: &str = "/metrics";
/// The port curl (so perf_analyzer) uses for a URL without one.
const DEFAULT_HTTP_PORT: u16 = 80;

/// Checks the three flags against each other and the service kind and fills
/// `config.metrics`. Runs after the transport flags (the default URL uses `-u`'s host).
pub fn apply_metrics(args: &RunArgs, config: &mut Config) -> Result<()> {
    if !args.collect_metrics {
        if args.metrics_url.is_some() {
            return Err(Error::usage(
                "Must specify --collect-metrics when using the --metrics-url option.",
            ));
        }
        if args.metrics_interval.is_some() {
            return Err(Error::usage(
                "Must specify --collect-metrics when using the --metrics-interval option.",
            ));
        }
        return Ok(());
    }
    if config.service_kind != ServiceKind::Triton {
        return Err(Error::usage(
            "Server-side metric collection is only supported with Triton client backend.",
        ));
    }
    let interval_ms = match args.metrics_interval.as_deref() {
        None => DEFAULT_INTERVAL_MS,
        Some(raw) => match raw.trim().parse::<u64>() {
            Ok(ms) if ms > super::number::MAX_MS => {
                return Err(Error::usage(format!(
                    "Failed to parse --metrics-interval. The value must be <= {} msecs (got \
                     '{raw}').",
                    super::number::MAX_MS
                )))
            }
            Ok(ms) if ms > 0 => ms,
            _ => {
                return Err(Error::usage(format!(
                    "Failed to parse --metrics-interval. The value must be > 0 msecs (got '{raw}')."
                )))
            }
        },
    };
    let url = match args.metrics_url.as_deref() {
        Some(raw) => normalize_metrics_url(raw)?,
        None => default_metrics_url(&config.url),
    };
    config.metrics = Some(MetricsConfig { url, interval_ms });
    Ok(())
}

/// `<host of -u>:8002/metrics`. `server` is `-u` after the transport flags (`host:port`, no
/// scheme). perf_analyzer keeps the text before the first ':', which turns
/// `http://h:8000` into `http:8002/metrics` and breaks IPv6 hosts; inferperf keeps the host.
pub fn default_metrics_url(server: &str) -> String {
    let host = match server.rfind(':') {
        // `[::1]:8000`: the colon after the bracket is the port's.
        Some(colon) if !server[colon..].contains(']') => &server[..colon],
        _ => server,
    };
    format!("{host}:{TRITON_METRICS_PORT}{TRITON_METRICS_PATH}")
}

/// `[http://]host[:port][/path]` → `host:port/path` (port 80 and path `/` when missing, as
/// curl does). Other schemes, https included, are rejected: the poller speaks plain HTTP
/// like Triton's metrics port.
pub fn normalize_metrics_url(raw: &str) -> Result<String> {
    let shown = crate::text::redact_url(raw);
    let bad = |why: &str| {
        Error::usage(format!(
            "Failed to parse --metrics-url. {why} (got '{shown}')."
        ))
    };
    let text = raw.trim();
    let rest = match text.find("://") {
        Some(i) if text[..i].eq_ignore_ascii_case("http") => &text[i + 3..],
        Some(_) => return Err(bad("Only http:// metrics URLs are supported")),
        None => text,
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(bad(crate::text::URL_CREDENTIALS));
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err(bad("The host is empty"));
    }
    if text.contains(char::is_whitespace) {
        return Err(bad("The URL must not contain spaces"));
    }
    let port_text = match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => Some(&authority[colon + 1..]),
        _ => None,
    };
    let authority = match port_text {
        None => format!("{authority}:{DEFAULT_HTTP_PORT}"),
        Some(p) => match p.parse::<u16>() {
            Ok(port) if port > 0 => authority.to_string(),
            _ => return Err(bad("The port must be an integer in 1..65535")),
        },
    };
    Ok(format!("{authority}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{parse_run_args, Parsed};
    use crate::error::ErrorKind;

    fn parse(line: &str) -> Result<Config> {
        let args = line.split_whitespace().map(Into::into).collect();
        match parse_run_args(args)? {
            Parsed::Run(config) => Ok(*config),
            Parsed::Exit { .. } => panic!("{line}: not a run"),
        }
    }

    #[test]
    fn flags_to_config() {
        let cases: &[(&str, Option<(&str, u64)>)] = &[
            ("inferperf -m x", None),
            (
                "inferperf -m x --collect-metrics",
                Some(("localhost:8002/metrics", 1000)),
            ),
            (
                "inferperf -m x -u 10.0.0.7:9000 --collect-metrics --metrics-interval 250",
                Some(("10.0.0.7:8002/metrics", 250)),
            ),
            (
                "inferperf -m x -u http://gpu-box:8000 --collect-metrics",
                Some(("gpu-box:8002/metrics", 1000)),
            ),
            (
                "inferperf -m x -u [::1]:8000 --collect-metrics",
                Some(("[::1]:8002/metrics", 1000)),
            ),
            (
                "inferperf -m x -i grpc --collect-metrics",
                Some(("localhost:8002/metrics", 1000)),
            ),
            (
                "inferperf -m x --collect-metrics --metrics-url http://127.0.0.1:9/m/x",
                Some(("127.0.0.1:9/m/x", 1000)),
            ),
        ];
        for (line, want) in cases {
            let config = parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let got = config.metrics.map(|m| (m.url, m.interval_ms));
            let want = want.map(|(u, i)| (u.to_string(), i));
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn usage_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "inferperf -m x --metrics-url h:1/m",
                "Must specify --collect-metrics when using the --metrics-url option.",
            ),
            (
                "inferperf -m x --metrics-interval 5",
                "Must specify --collect-metrics when using the --metrics-interval option.",
            ),
            (
                "inferperf -m x --collect-metrics --metrics-interval 0",
                "Failed to parse --metrics-interval. The value must be > 0 msecs",
            ),
            (
                "inferperf -m x --collect-metrics --metrics-interval -5",
                "The value must be > 0 msecs (got '-5')",
            ),
            (
                "inferperf -m x --collect-metrics --metrics-url https://h:1/m",
                "Only http:// metrics URLs are supported",
            ),
            (
                "inferperf -m x --collect-metrics --metrics-url h:99999/m",
                "The port must be an integer in 1..65535",
            ),
        ];
        for (line, part) in cases {
            let e = parse(line).expect_err(line);
            assert_eq!(e.kind, ErrorKind::Usage, "{line}");
            assert!(e.to_string().contains(part), "{line}: {e}");
        }
        // Any existing file passes the CLI's --input-data check.
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let openai = format!(
            "inferperf -m x --service-kind openai --endpoint v1/chat/completions --async \
             --input-data {data} --collect-metrics"
        );
        let e = parse(&openai).expect_err("openai");
        assert_eq!(
            e.to_string(),
            "Server-side metric collection is only supported with Triton client backend."
        );
    }

    #[test]
    fn url_forms() {
        let cases: &[(&str, &str)] = &[
            ("h", "h:80/"),
            ("h:8002", "h:8002/"),
            ("HTTP://h:8002/metrics", "h:8002/metrics"),
            ("h/metrics?x=1", "h:80/metrics?x=1"),
            ("[::1]:8002/metrics", "[::1]:8002/metrics"),
            ("[::1]/metrics", "[::1]:80/metrics"),
        ];
        for (raw, want) in cases {
            assert_eq!(normalize_metrics_url(raw).unwrap(), *want, "{raw}");
        }
        for raw in [
            "",
            "http://",
            ":80/m",
            "ftp://h/m",
            "h:0/m",
            "h:x/m",
            "h /m",
        ] {
            assert!(normalize_metrics_url(raw).is_err(), "{raw}");
        }
        for raw in [
            "http://u:s3cret@h:8002/metrics",
            "u:s3cret@h",
            "ftp://u:s3cret@h/m",
        ] {
            let e = normalize_metrics_url(raw).unwrap_err();
            assert!(e.msg.contains("u:<redacted>@h"), "{raw}: {e}");
            assert!(!e.msg.contains("s3cret"), "{raw}: {e}");
        }
    }
}
