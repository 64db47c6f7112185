//! `-u` and `-H` values: server address and extra HTTP headers.

use crate::error::{Error, Result};

/// Ports used when `-u` names a host without one (what curl, and so perf_analyzer, would use).
const DEFAULT_HTTP_PORT: u16 = 80;
const DEFAULT_HTTPS_PORT: u16 = 443;

/// A parsed `-u`: `host:port` and whether the scheme was `https://`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    pub authority: String,
    pub https: bool,
}

/// `Name:Value`, split at the first colon; leading spaces of the value are dropped.
pub fn parse_header(raw: &str) -> Result<(String, String)> {
    let shown = crate::text::redact_header(raw);
    let bad = |why: &str| Error::usage(format!("Failed to parse -H. {why} (got '{shown}')."));
    let (name, value) = raw
        .split_once(':')
        .ok_or_else(|| bad("Expected Name:Value"))?;
    if name.is_empty() {
        return Err(bad("The header name is empty"));
    }
    // A header name is an HTTP token; CR/LF anywhere would let a value inject extra headers.
    if name
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(bad(
            "The header name must not contain spaces or control characters",
        ));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(bad("The header value must not contain CR or LF"));
    }
    Ok((name.to_string(), value.trim_start_matches(' ').to_string()))
}

/// `host:port`, `http://host:port` or `https://host:port` (a trailing `/` is allowed); a missing
/// port is 80 (443 for https).
pub fn parse_url(raw: &str) -> Result<ParsedUrl> {
    let shown = crate::text::redact_url(raw);
    let bad = |why: &str| Error::usage(format!("Failed to parse -u. {why} (got '{shown}')."));
    let lower = raw.to_ascii_lowercase();
    let https = lower.starts_with("https://");
    let rest = if https {
        &raw["https://".len()..]
    } else if lower.starts_with("http://") {
        &raw["http://".len()..]
    } else {
        raw
    };
    if rest.contains("://") {
        return Err(bad("Only http:// and https:// URLs are supported"));
    }
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        return Err(bad("A path after host:port is not supported"));
    }
    if authority.contains('@') {
        return Err(bad(crate::text::URL_CREDENTIALS));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| bad("Expected host:port"))?;
    if host.is_empty() {
        return Err(bad("The host is empty"));
    }
    let port = match port {
        None if https => DEFAULT_HTTPS_PORT,
        None => DEFAULT_HTTP_PORT,
        Some(text) => match text.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad("The port must be an integer in 1..65535")),
        },
    };
    Ok(ParsedUrl {
        authority: format!("{host}:{port}"),
        https,
    })
}

/// The host of `host:port` (or a URL that `parse_url` accepts) is this machine's loopback:
/// `localhost`, 127.0.0.0/8 or `::1`. Names are not resolved.
pub fn is_loopback(url: &str) -> bool {
    let authority = parse_url(url).map_or_else(|_| url.to_string(), |u| u.authority);
    let Some((host, _)) = split_host_port(&authority) else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Splits `host[:port]`, with IPv6 hosts in brackets (`[::1]:8000`). `None` when malformed.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.starts_with('[') {
        let close = authority.find(']')?;
        let (host, after) = authority.split_at(close + 1);
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.split_once(':') {
        None => Some((authority, None)),
        Some((_, port)) if port.contains(':') => None,
        Some((host, port)) => Some((host, Some(port))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_forms() {
        let cases = [
            ("localhost:8000", "localhost:8000"),
            ("http://127.0.0.1:18090", "127.0.0.1:18090"),
            ("HTTP://host:9/", "host:9"),
            ("myhost", "myhost:80"),
            ("[::1]:8000", "[::1]:8000"),
            ("http://[::1]", "[::1]:80"),
            ("https://h", "h:443"),
            ("HTTPS://127.0.0.1:8443/", "127.0.0.1:8443"),
        ];
        for (raw, expected) in cases {
            let url = parse_url(raw).unwrap();
            assert_eq!(url.authority, expected, "{raw}");
            assert_eq!(
                url.https,
                raw.to_ascii_lowercase().starts_with("https"),
                "{raw}"
            );
        }
    }

    #[test]
    fn loopback_hosts() {
        let cases = [
            ("localhost:8000", true),
            ("LOCALHOST", true),
            ("127.0.0.1:8001", true),
            ("http://127.3.4.5:1", true),
            ("[::1]:8000", true),
            ("https://[::1]", true),
            ("10.0.0.1:8000", false),
            ("myhost:8000", false),
            ("[::2]:8000", false),
            ("", false),
        ];
        for (url, local) in cases {
            assert_eq!(is_loopback(url), local, "{url}");
        }
    }

    #[test]
    fn url_errors() {
        let cases = [
            ("grpc://h:1", "Only http://"),
            ("h:8000/v2", "path"),
            (":8000", "host is empty"),
            ("h:0", "port"),
            ("h:70000", "port"),
            ("h:x", "port"),
            ("::1:8000", "host:port"),
            ("[::1", "host:port"),
            ("[::1]x", "host:port"),
            ("http://user@h:8000", "Credentials"),
        ];
        for (raw, needle) in cases {
            let err = parse_url(raw).unwrap_err();
            assert!(err.msg.contains(needle), "{raw}: {}", err.msg);
            assert!(err.msg.contains("-u"), "{raw}: {}", err.msg);
            assert!(
                err.msg.contains(raw) || raw.contains('@'),
                "{raw}: {}",
                err.msg
            );
        }
    }

    #[test]
    fn url_errors_never_echo_a_password() {
        for raw in [
            "http://user:s3cret@h:8000",
            "user:s3cret@h:8000",
            "https://user:s3cret@h",
            "http://user:s3cret@h:8000/v2",
            "grpc://user:s3cret@h:1",
            "user:s3cret@h:x",
        ] {
            let err = parse_url(raw).unwrap_err();
            assert!(err.msg.contains("-u"), "{raw}: {}", err.msg);
            assert!(!err.msg.contains("s3cret"), "{raw}: {}", err.msg);
            assert!(err.msg.contains("user:<redacted>@h"), "{raw}: {}", err.msg);
        }
    }

    #[test]
    fn header_splits_at_first_colon() {
        let cases = [
            ("X-A:b", ("X-A", "b")),
            ("X-A:   b c", ("X-A", "b c")),
            ("Auth:Bearer a:b", ("Auth", "Bearer a:b")),
            ("X:", ("X", "")),
        ];
        for (raw, (name, value)) in cases {
            assert_eq!(
                parse_header(raw).unwrap(),
                (name.to_string(), value.to_string()),
                "{raw}"
            );
        }
        for raw in ["novalue", ":v", "X A:v", "X:a\r\nInjected: 1"] {
            let err = parse_header(raw).unwrap_err();
            assert!(err.msg.contains("-H"), "{raw}: {}", err.msg);
        }
    }
}
