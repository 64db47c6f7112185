//! Limits on what a server controls: interim responses, head size and field count, chunk
//! framing, body size. Each hostile input fails with its own error, and the bytes the reader
//! needed to see before failing (what a connection buffer would hold) stay bounded.

use super::super::fuzz::{parse_stream, Outcome};
use super::*;
use crate::fail::FailKind;

/// Feeds `data` in reads of `step` bytes into one growing buffer, as a connection does,
/// dropping the interim responses the reader lets go of (`discard_interim`) when `compact`.
/// Returns the outcome and the largest buffer length seen.
fn feed(
    reader: &mut ResponseReader,
    data: &[u8],
    step: usize,
    compact: bool,
) -> (Result<Progress, ParseError>, usize) {
    let mut buf = Vec::new();
    let mut peak = 0;
    let mut sent = 0;
    loop {
        let end = (sent + step).min(data.len());
        buf.extend_from_slice(&data[sent..end]);
        sent = end;
        peak = peak.max(buf.len());
        let progress = if sent == data.len() {
            reader.on_eof(&buf)
        } else {
            reader.advance(&buf)
        };
        match progress {
            Ok(Progress::NeedMore) => {
                if compact {
                    let drop = reader.discard_interim();
                    buf.drain(..drop);
                }
            }
            other => return (other, peak),
        }
    }
}

fn interim_flood(count: usize) -> Vec<u8> {
    let mut data = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(count);
    data.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    data
}

#[test]
fn interim_responses_are_limited_in_count() {
    let ok = interim_flood(DEFAULT_MAX_INTERIM);
    let flood = interim_flood(10_000);
    let too_many = ParseError::TooManyInterim {
        limit: DEFAULT_MAX_INTERIM,
    };
    for step in [ok.len(), 1, 7, 100] {
        let (got, _) = feed(&mut ResponseReader::new(), &ok, step, false);
        let Ok(Progress::Done(head)) = got else {
            panic!("{got:?}")
        };
        assert_eq!((head.status, head.consumed), (200, ok.len()));
        let (got, peak) = feed(&mut ResponseReader::new(), &flood, step, false);
        assert_eq!(got, Err(too_many), "step {step}");
        // The 17th interim response ends the read: the buffer never held the rest.
        assert!(peak <= 17 * 25 + step, "buffer grew to {peak} bytes");
    }
    assert_eq!(too_many.kind(), FailKind::Limit);
    assert_eq!(
        too_many.to_string(),
        "server sent more than 16 interim (1xx) responses before the final one"
    );
}

#[test]
fn interim_responses_are_limited_in_bytes() {
    // Three 30 KB interim heads: each fits a head, together they exceed 64 KiB.
    let big = format!(
        "HTTP/1.1 103 Early Hints\r\nLink: {}\r\n\r\n",
        "x".repeat(30_000)
    );
    let mut data = big.repeat(3).into_bytes();
    data.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
    let want = ParseError::InterimTooLarge { limit: 64 * 1024 };
    for step in [data.len(), 1000] {
        let (got, _) = feed(&mut ResponseReader::new(), &data, step, false);
        assert_eq!(got, Err(want));
    }
    assert_eq!(want.kind(), FailKind::Limit);
}

#[test]
fn discarding_interim_responses_keeps_the_buffer_small() {
    let data = interim_flood(DEFAULT_MAX_INTERIM);
    for step in [1, 26, 60] {
        let mut reader = ResponseReader::new();
        let (got, peak) = feed(&mut reader, &data, step, true);
        let Ok(Progress::Done(head)) = got else {
            panic!("{got:?}")
        };
        // Offsets count from the compacted start: only the final response is left.
        let final_len = 40;
        assert_eq!((head.status, head.consumed), (200, final_len));
        assert_eq!(reader.body(&data[data.len() - final_len..]), b"ok");
        assert!(
            peak <= final_len + step + 25,
            "step {step}: buffer grew to {peak}"
        );
    }
    // Nothing to drop once the final head is parsed.
    let mut reader = ResponseReader::new();
    let whole = interim_flood(2);
    assert!(matches!(reader.advance(&whole), Ok(Progress::Done(_))));
    assert_eq!(reader.discard_interim(), 0);
}

#[test]
fn content_length_above_the_limit_fails_with_the_head() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n";
    let mut reader = ResponseReader::new();
    // Not one body byte has arrived: the head alone decides.
    let err = reader.advance(head).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Content-Length 1000000000000000 exceeds the response size limit (67108864 bytes; \
         raise it with --max-response-bytes)"
    );
    assert_eq!(err.kind(), FailKind::Limit);
    // A raised limit admits what it names, and no more.
    let limits = Limits {
        max_body_bytes: 1 << 50,
        ..Limits::default()
    };
    let mut reader = ResponseReader::with_limits(limits);
    assert_eq!(reader.advance(head), Ok(Progress::NeedMore));
    assert_eq!(
        reader.bytes_needed_hint(),
        Some(head.len() + 1_000_000_000_000_000)
    );
    let exact = b"HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n";
    assert_eq!(ResponseReader::new().advance(exact), Ok(Progress::NeedMore));
}

#[test]
fn bodies_without_a_length_are_limited_too() {
    let limits = Limits {
        max_body_bytes: 1000,
        ..Limits::default()
    };
    let mut close = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    close.resize(close.len() + 5000, b'b');
    let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    chunked.extend_from_slice(
        &b"100\r\n"
            .iter()
            .chain(&[b'c'; 256])
            .chain(b"\r\n")
            .copied()
            .collect::<Vec<u8>>()
            .repeat(10),
    );
    for data in [&close, &chunked] {
        for step in [data.len(), 100] {
            let (got, peak) = feed(&mut ResponseReader::with_limits(limits), data, step, false);
            assert_eq!(got, Err(ParseError::BodyTooLarge { limit: 1000 }));
            assert!(peak <= 1000 + 300 + step + 100, "buffer grew to {peak}");
        }
    }
}

#[test]
fn an_endless_header_stops_at_the_head_limit() {
    let mut data = b"HTTP/1.1 200 OK\r\nX-Endless: ".to_vec();
    data.resize(1 << 20, b'a');
    for step in [data.len(), 4096, 1000] {
        let (got, peak) = feed(&mut ResponseReader::new(), &data, step, false);
        assert_eq!(got, Err(ParseError::HeadTooLarge), "step {step}");
        if step < data.len() {
            assert!(peak <= 64 * 1024 + step, "buffer grew to {peak}");
        }
    }
    assert_eq!(ParseError::HeadTooLarge.kind(), FailKind::Limit);
}

#[test]
fn too_many_header_fields_is_a_limit() {
    let mut data = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..1000 {
        data.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    data.extend_from_slice(b"\r\n");
    let got = parse_stream(&data, &[data.len()], Limits::default());
    let want = ParseError::Head(httparse::Error::TooManyHeaders);
    assert_eq!(got, vec![Outcome::Error(want)]);
    assert_eq!(want.kind(), FailKind::Limit);
    assert_eq!(
        want.to_string(),
        "HTTP response head has more than 64 header fields"
    );
}

#[test]
fn a_chunk_extension_flood_fails_early() {
    let mut data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let chunk = format!("1;{}\r\nx\r\n", "e".repeat(4000));
    data.extend_from_slice(chunk.repeat(1000).as_bytes());
    let want = ParseError::ChunkFramingTooLarge { limit: 64 * 1024 };
    for step in [data.len(), 16 * 1024, 999] {
        let (got, peak) = feed(&mut ResponseReader::new(), &data, step, false);
        assert_eq!(got, Err(want), "step {step}");
        if step < data.len() {
            // 64 KiB of framing (plus the data and head) and one read, not 4 MB.
            assert!(peak <= 70 * 1024 + step, "buffer grew to {peak}");
        }
    }
    assert_eq!(want.kind(), FailKind::Limit);
}

#[test]
fn failure_kinds() {
    let cases = [
        (ParseError::Truncated, FailKind::Closed),
        (ParseError::ClosedBeforeResponse, FailKind::Closed),
        (ParseError::BadContentLength, FailKind::Length),
        (ParseError::BadChunkSize, FailKind::Framing),
        (ParseError::Head(httparse::Error::Status), FailKind::Framing),
        (ParseError::ChunkLineTooLong, FailKind::Limit),
        (ParseError::TrailersTooLarge, FailKind::Limit),
    ];
    for (e, kind) in cases {
        assert_eq!(e.kind(), kind, "{e}");
    }
}
