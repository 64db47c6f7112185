//! Reading a response header block: the few fields gRPC cares about (`:status`,
//! `content-type`, `grpc-encoding`, `grpc-status`, `grpc-message`), decoded without
//! allocating, and how trailers end a stream.

use super::StreamEnd;
use crate::protocol::grpc::hpack::{Decoder, HpackError};

/// The fields of one decoded header block that decide a stream's fate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    /// `:status`: None if absent, Some(Err) if not a 3-digit number.
    pub(super) status: Option<Result<u16, ()>>,
    /// `grpc-status`: None if absent, Some(Err) if not a decimal u32.
    pub(super) grpc_status: Option<Result<u32, ()>>,
    pub(super) content_type: ContentType,
    /// `grpc-encoding` names a compression (present, and not `identity`): messages may
    /// carry the compressed flag.
    pub(super) encoded: bool,
}

/// Longest piece of a wrong `content-type` kept for the message (bytes).
const SHOWN_TYPE: usize = 40;

/// A response's `content-type`, as far as gRPC cares.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContentType {
    #[default]
    Missing,
    /// `application/grpc`, alone or followed by `+format` or `;parameters`.
    Grpc,
    /// Anything else: its first [`SHOWN_TYPE`] bytes and their count.
    Other([u8; SHOWN_TYPE], u8),
}

impl ContentType {
    fn of(value: &[u8]) -> ContentType {
        let grpc = b"application/grpc";
        let prefix = value
            .get(..grpc.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(grpc));
        let end = matches!(value.get(grpc.len()), None | Some(b'+' | b';'));
        if prefix && end {
            return ContentType::Grpc;
        }
        let n = value.len().min(SHOWN_TYPE);
        let mut kept = [0; SHOWN_TYPE];
        kept[..n].copy_from_slice(&value[..n]);
        ContentType::Other(kept, n as u8)
    }

    /// Why a response with this content type is not a gRPC response (`None`: it is one).
    /// A trailers-only response (`trailers_only`) may leave the type out: its status says
    /// what happened.
    pub(super) fn problem(&self, trailers_only: bool) -> Option<String> {
        match self {
            ContentType::Grpc => None,
            ContentType::Missing if trailers_only => None,
            ContentType::Missing => {
                Some("response has no content-type (gRPC needs application/grpc)".into())
            }
            ContentType::Other(kept, n) => {
                let text = String::from_utf8_lossy(&kept[..usize::from(*n)]);
                let text = crate::text::escape_control(&text);
                Some(format!(
                    "response content-type is '{text}', not application/grpc"
                ))
            }
        }
    }
}

/// Decodes `block` (keeping the HPACK context in step even for streams the session has stopped
/// tracking); the raw `grpc-message` value lands in `grpc_message` (cleared first).
pub(super) fn decode_head(
    hpack: &mut Decoder,
    block: &[u8],
    grpc_message: &mut Vec<u8>,
) -> Result<Head, HpackError> {
    let mut head = Head::default();
    grpc_message.clear();
    hpack.decode(block, |name, value| match name {
        b":status" => {
            let status = parse_decimal(value)
                .filter(|_| value.len() == 3)
                .and_then(|s| u16::try_from(s).ok());
            head.status = Some(status.ok_or(()));
        }
        b"grpc-status" => head.grpc_status = Some(parse_decimal(value).ok_or(())),
        b"content-type" => head.content_type = ContentType::of(value),
        b"grpc-encoding" => head.encoded = !value.is_empty() && value != b"identity",
        b"grpc-message" => {
            grpc_message.clear();
            grpc_message.extend_from_slice(value);
        }
        _ => {}
    })?;
    Ok(head)
}

/// How trailers (or a trailers-only response) end a stream.
pub(super) fn trailers_end(head: &Head, grpc_message: &[u8]) -> StreamEnd {
    match head.grpc_status {
        None => StreamEnd::Protocol("response trailers without grpc-status".to_string()),
        Some(Err(())) => StreamEnd::Protocol("grpc-status is not a decimal number".to_string()),
        Some(Ok(0)) => StreamEnd::Ok,
        Some(Ok(code)) => StreamEnd::Grpc {
            code,
            message: percent_decode(grpc_message),
        },
    }
}

/// A non-empty run of ASCII digits as a u32 (None on anything else or overflow).
fn parse_decimal(text: &[u8]) -> Option<u32> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u32, |acc, &byte| {
        let digit = char::from(byte).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(digit)
    })
}

/// Undoes the percent-encoding gRPC applies to `grpc-message` (`%XX`, RFC 3986 style);
/// malformed escapes stay as they are and invalid UTF-8 is replaced, as the gRPC spec asks.
pub fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&byte, tail)) = rest.split_first() {
        let escaped = match (byte, tail) {
            (b'%', [hi, lo, ..]) => hex_digit(*hi).zip(hex_digit(*lo)),
            _ => None,
        };
        match escaped {
            Some((hi, lo)) => {
                out.push(hi << 4 | lo);
                rest = &tail[2..];
            }
            None => {
                out.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|v| u8::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grpc::hpack::Encoder;

    #[test]
    fn percent_decoding() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (b"plain text", "plain text"),
            (b"100%25 sure", "100% sure"),
            (b"caf%C3%A9", "café"),
            (b"%e2%82%ac", "€"),
            (b"bad %zz escape", "bad %zz escape"),
            (b"cut %4", "cut %4"),
            (b"trailing %", "trailing %"),
            (b"%FF", "\u{fffd}"),
        ];
        for &(raw, want) in cases {
            assert_eq!(percent_decode(raw), want, "input {raw:?}");
        }
    }

    #[test]
    fn content_types() {
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC;charset=x",
        ] {
            assert_eq!(
                ContentType::of(grpc.as_bytes()),
                ContentType::Grpc,
                "{grpc}"
            );
            assert_eq!(ContentType::of(grpc.as_bytes()).problem(false), None);
        }
        for (other, shown) in [
            ("text/html", "text/html"),
            ("application/grpcx", "application/grpcx"),
            ("application/grp", "application/grp"),
            ("", ""),
            ("x\x1b[31m", "x\\x1b[31m"),
        ] {
            let why = ContentType::of(other.as_bytes()).problem(false).unwrap();
            assert_eq!(
                why,
                format!("response content-type is '{shown}', not application/grpc")
            );
        }
        let long = ContentType::of("a".repeat(100).as_bytes())
            .problem(true)
            .unwrap();
        assert!(
            long.contains(&format!("'{}'", "a".repeat(SHOWN_TYPE))),
            "{long}"
        );
        assert_eq!(ContentType::Missing.problem(true), None);
        assert!(ContentType::Missing.problem(false).is_some());
    }

    #[test]
    fn decimal_parsing() {
        let cases: &[(&[u8], Option<u32>)] = &[
            (b"0", Some(0)),
            (b"14", Some(14)),
            (b"4294967295", Some(u32::MAX)),
            (b"4294967296", None),
            (b"", None),
            (b"-1", None),
            (b"1 ", None),
            (b"0x1", None),
        ];
        for &(raw, want) in cases {
            assert_eq!(parse_decimal(raw), want, "input {raw:?}");
        }
    }

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in fields {
            Encoder::new().encode_literal_without_indexing(
                &mut out,
                name.as_bytes(),
                value.as_bytes(),
            );
        }
        out
    }

    #[test]
    fn head_fields_and_trailer_outcomes() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<Result<u16, ()>>, StreamEnd);
        let cases: &[Case] = &[
            (
                &[(":status", "200")],
                Some(Ok(200)),
                StreamEnd::Protocol("response trailers without grpc-status".into()),
            ),
            (
                &[(":status", "20")],
                Some(Err(())),
                StreamEnd::Protocol("response trailers without grpc-status".into()),
            ),
            (&[("grpc-status", "0")], None, StreamEnd::Ok),
            (
                &[("grpc-status", "5"), ("grpc-message", "no%20model")],
                None,
                StreamEnd::Grpc {
                    code: 5,
                    message: "no model".into(),
                },
            ),
            (
                &[("grpc-status", "x")],
                None,
                StreamEnd::Protocol("grpc-status is not a decimal number".into()),
            ),
        ];
        let mut hpack = Decoder::new();
        let mut message = Vec::new();
        for (fields, status, end) in cases {
            let head = decode_head(&mut hpack, &block(fields), &mut message).unwrap();
            assert_eq!(head.status, *status, "fields {fields:?}");
            assert_eq!(&trailers_end(&head, &message), end, "fields {fields:?}");
        }
        assert!(decode_head(&mut hpack, &[0xff], &mut message).is_err());
    }
}
