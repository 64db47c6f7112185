//! HTTP/1.1 request writer.

use crate::error::{Error, Result};

/// Appends one HTTP/1.1 request to `out`.
///
/// Writes the request line, `Host` (unless `extra_headers` has one: the user's wins, as with
/// curl), `extra_headers` in order, and `Content-Length` (omitted only for a GET or HEAD with
/// no body). Connections stay open by HTTP/1.1's default, so no `Connection` field is sent.
/// Header names and values must have been checked with [`check_header`] (no CR/LF).
pub fn write_request(
    out: &mut Vec<u8>,
    method: &str,
    host: &str,
    path: &str,
    extra_headers: &[(String, String)],
    body: &[u8],
) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !extra_headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        push_field(out, "Host", host);
    }
    for (name, value) in extra_headers {
        push_field(out, name, value);
    }
    let bodiless_method = method == "GET" || method == "HEAD";
    if !body.is_empty() || !bodiless_method {
        out.extend_from_slice(b"Content-Length: ");
        push_decimal(out, body.len());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

fn push_field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn push_decimal(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Checks a user header (`-H name:value`): a valid token as name, no control characters in the
/// value, and not one of the fields that frame the message (the writer sets those itself).
pub fn check_header(name: &str, value: &str) -> Result<()> {
    const TOKEN_SPECIALS: &[u8] = b"!#$%&'*+-.^_`|~";
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || TOKEN_SPECIALS.contains(&b));
    if !name_ok {
        return Err(Error::usage(format!(
            "invalid HTTP header name '{name}' in -H"
        )));
    }
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(Error::usage(format!(
            "invalid HTTP header value for '{name}' in -H: control characters are not allowed"
        )));
    }
    // These frame the message (the last one frames a KServe binary body).
    const FRAMING: [&str; 4] = [
        "content-length",
        "transfer-encoding",
        "connection",
        "inference-header-content-length",
    ];
    if FRAMING.iter().any(|f| name.eq_ignore_ascii_case(f)) {
        return Err(Error::usage(format!(
            "HTTP header '{name}' in -H is set by inferperf and cannot be overridden"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn writes_exact_bytes() {
        type Case = (
            &'static str,
            &'static [(&'static str, &'static str)],
            &'static [u8],
            &'static str,
        );
        let cases: &[Case] = &[
            ("GET", &[], b"", "GET /v2 HTTP/1.1\r\nHost: h:1\r\n\r\n"),
            (
                "POST",
                &[("X-A", "b")],
                b"{}",
                "POST /v2 HTTP/1.1\r\nHost: h:1\r\nX-A: b\r\nContent-Length: 2\r\n\r\n{}",
            ),
            (
                "POST",
                &[],
                b"",
                "POST /v2 HTTP/1.1\r\nHost: h:1\r\nContent-Length: 0\r\n\r\n",
            ),
            (
                "GET",
                &[("host", "other")],
                b"",
                "GET /v2 HTTP/1.1\r\nhost: other\r\n\r\n",
            ),
        ];
        for (method, extra, body, want) in cases {
            let mut out = b"previous".to_vec();
            write_request(&mut out, method, "h:1", "/v2", &headers(extra), body);
            assert_eq!(String::from_utf8_lossy(&out[8..]), *want);
            assert_eq!(&out[..8], b"previous", "appends, does not clear");
        }
    }

    #[test]
    fn decimal_lengths() {
        for n in [0usize, 9, 10, 1234567, usize::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn checks_user_headers() {
        assert!(check_header("X-Trace", "a b\tc").is_ok());
        let bad = [
            ("", "v"),
            ("X Y", "v"),
            ("X:", "v"),
            ("X", "a\r\nB: c"),
            ("Content-Length", "1"),
            ("inference-header-content-length", "1"),
        ];
        for (name, value) in bad {
            let err = check_header(name, value).unwrap_err();
            assert!(err.msg.contains("-H"), "{}", err.msg);
        }
    }
}
