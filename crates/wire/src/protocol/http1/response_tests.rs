use super::super::fuzz::{parse_stream, Outcome};
use super::*;

fn head(status: u16, keep_alive: bool, consumed: usize, framing: Framing) -> ResponseHead {
    let body_len = match framing {
        Framing::Length(n) => n,
        _ => 0,
    };
    ResponseHead {
        status,
        minor_version: 1,
        keep_alive,
        consumed,
        inference_header_len: None,
        framing,
        body_len,
        event_stream: false,
    }
}

fn ok(h: ResponseHead, body: &[u8]) -> Outcome {
    Outcome::Response {
        head: ResponseHead {
            body_len: body.len(),
            ..h
        },
        body: body.to_vec(),
    }
}

fn clone_outcome(o: &Outcome) -> Outcome {
    match o {
        Outcome::Response { head, body } => Outcome::Response {
            head: *head,
            body: body.clone(),
        },
        Outcome::Error(e) => Outcome::Error(*e),
    }
}

/// `consumed` 0 in an expected head stands for "the rest of the data".
type StreamCase = (&'static str, &'static [u8], Vec<Outcome>);

fn complete_response_cases() -> Vec<StreamCase> {
    let cl = Framing::Length(5);
    vec![
        (
            "content-length, then EOF",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            vec![ok(head(200, true, 0, cl), b"hello")],
        ),
        (
            "names are case-insensitive",
            b"HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 5\r\nCONNECTION: Close\r\n\r\nhello",
            vec![ok(head(200, false, 0, cl), b"hello")],
        ),
        (
            "chunked with extensions and trailers",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nhe\r\n3\r\nllo\r\n0\r\nX-T: 1\r\n\r\n",
            vec![ok(head(200, true, 0, Framing::Chunked), b"hello")],
        ),
        (
            "transfer-encoding list ending in chunked",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\n1\r\nz\r\n0\r\n\r\n",
            vec![ok(head(200, true, 0, Framing::Chunked), b"z")],
        ),
        (
            "interim 100 and 103 skipped",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            vec![ok(head(201, true, 0, Framing::Length(0)), b"")],
        ),
        (
            "close-delimited body ends at EOF",
            b"HTTP/1.1 200 OK\r\n\r\nuntil close",
            vec![ok(head(200, false, 0, Framing::UntilClose), b"until close")],
        ),
        (
            "HTTP/1.0 closes by default",
            b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
            vec![ok(ResponseHead { minor_version: 0, ..head(200, false, 0, Framing::Length(1)) }, b"x")],
        ),
        (
            "HTTP/1.0 keep-alive, pipelined",
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 204 No Content\r\n\r\n",
            vec![
                ok(ResponseHead { minor_version: 0, ..head(200, true, 63, Framing::Length(1)) }, b"x"),
                ok(head(204, true, 0, Framing::Empty), b""),
            ],
        ),
        (
            "pipelined, the last one incomplete",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
            vec![
                ok(head(200, true, 43, cl), b"hello"),
                ok(head(200, true, 58, Framing::Chunked), b"z"),
                Outcome::Error(ParseError::Truncated),
            ],
        ),
        (
            "leading blank line and bare LF endings",
            b"\r\nHTTP/1.1 200 OK\nContent-Length: 2\n\nok",
            vec![ok(head(200, true, 0, Framing::Length(2)), b"ok")],
        ),
        (
            "transfer-encoding wins over content-length, connection not reused",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\nrest",
            vec![ok(head(200, false, 78, Framing::Chunked), b"a")],
        ),
        (
            "repeated equal content-length",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\nContent-Length: 1\r\n\r\nx",
            vec![ok(head(200, true, 0, Framing::Length(1)), b"x")],
        ),
    ]
}

fn failing_stream_cases() -> Vec<StreamCase> {
    vec![
        (
            "nothing sent",
            b"",
            vec![Outcome::Error(ParseError::ClosedBeforeResponse)],
        ),
        (
            "truncated head",
            b"HTTP/1.1 200 OK\r\nCont",
            vec![Outcome::Error(ParseError::Truncated)],
        ),
        (
            "conflicting content-length",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            vec![Outcome::Error(ParseError::BadContentLength)],
        ),
        (
            "non-numeric content-length",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            vec![Outcome::Error(ParseError::BadContentLength)],
        ),
        (
            "content-length overflow",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            vec![Outcome::Error(ParseError::BadContentLength)],
        ),
        (
            "content-length over the body limit",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
            vec![Outcome::Error(ParseError::ContentLengthTooLarge {
                len: 99_999_999_999,
                limit: DEFAULT_MAX_RESPONSE_BYTES,
            })],
        ),
        (
            "bad chunk size",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",
            vec![Outcome::Error(ParseError::BadChunkSize)],
        ),
        (
            "huge chunk size",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n123456789abcdef01\r\n",
            vec![Outcome::Error(ParseError::ChunkSizeOverflow)],
        ),
        (
            "chunked body cut by EOF",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            vec![Outcome::Error(ParseError::Truncated)],
        ),
        (
            "switching protocols",
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            vec![Outcome::Error(ParseError::SwitchingProtocols)],
        ),
        (
            "bad status line",
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            vec![Outcome::Error(ParseError::Head(httparse::Error::Status))],
        ),
        (
            "bad inference header length",
            b"HTTP/1.1 200 OK\r\nInference-Header-Content-Length: x\r\n\r\n",
            vec![Outcome::Error(ParseError::BadInferenceHeaderLength)],
        ),
    ]
}

/// Every case is checked fed whole, byte by byte, and in reads of 2, 3 and 7 bytes.
#[test]
fn parses_streams_however_they_are_split() {
    let cases: Vec<StreamCase> = complete_response_cases()
        .into_iter()
        .chain(failing_stream_cases())
        .collect();
    for (name, data, want) in &cases {
        let mut want: Vec<Outcome> = want.iter().map(clone_outcome).collect();
        let mut used = 0;
        for outcome in &mut want {
            if let Outcome::Response { head, .. } = outcome {
                if head.consumed == 0 {
                    head.consumed = data.len() - used;
                }
                used += head.consumed;
            }
        }
        let want = &want;
        for steps in [&[data.len()][..], &[1], &[2], &[3], &[7, 1]] {
            let got = parse_stream(data, steps, Limits::default());
            assert_eq!(&got, want, "case '{name}', reads of {steps:?}");
        }
    }
}

#[test]
fn reads_the_inference_header_length() {
    let data = b"HTTP/1.1 200 OK\r\nInference-Header-Content-Length: 2\r\nContent-Length: 6\r\n\r\n{}\x01\x02\x03\x04";
    let mut reader = ResponseReader::new();
    let Ok(Progress::Done(head)) = reader.advance(data) else {
        panic!("not done")
    };
    assert_eq!(head.inference_header_len, Some(2));
    assert_eq!(reader.body(data), b"{}\x01\x02\x03\x04");
}

#[test]
fn enforces_head_limits_regardless_of_splits() {
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    long.resize(70 * 1024, b'a');
    let small = Limits {
        max_head_bytes: 60,
        max_body_bytes: 4,
        max_interim: 2,
    };
    let cases: Vec<(&[u8], Limits, ParseError)> = vec![
        (&many, Limits::default(), ParseError::Head(httparse::Error::TooManyHeaders)),
        (&long, Limits::default(), ParseError::HeadTooLarge),
        (b"HTTP/1.1 200 OK\r\nX-Long-Header: 0123456789012345678901234567890123456789\r\n\r\n", small, ParseError::HeadTooLarge),
        (b"HTTP/1.1 200 OK\r\n\r\n12345", small, ParseError::BodyTooLarge { limit: 4 }),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\n",
            small,
            ParseError::BodyTooLarge { limit: 4 },
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 01234567890123456789012345678901234567890123456789012345678901234567890123456789\r\n\r\n",
            small,
            ParseError::TrailersTooLarge,
        ),
    ];
    for (data, limits, want) in cases {
        for steps in [&[data.len()][..], &[1], &[5]] {
            let got = parse_stream(data, steps, limits);
            assert_eq!(got, vec![Outcome::Error(want)], "reads of {steps:?}");
        }
    }
}

#[test]
fn does_not_rescan_a_parsed_head() {
    // After the head is parsed, corrupting its bytes must not matter: it is never read again.
    let mut buf = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab".to_vec();
    let mut reader = ResponseReader::new();
    assert_eq!(reader.advance(&buf), Ok(Progress::NeedMore));
    assert!(reader.head_parsed());
    assert_eq!(reader.bytes_needed_hint(), Some(42));
    buf[0] = b'X';
    buf.extend_from_slice(b"cd");
    let Ok(Progress::Done(head)) = reader.advance(&buf) else {
        panic!("not done")
    };
    assert_eq!((head.status, head.consumed), (200, 42));
    assert_eq!(reader.body(&buf), b"abcd");
    // Done is sticky until reset; reset keeps the reader usable.
    assert_eq!(reader.advance(&buf), Ok(Progress::Done(head)));
    reader.reset();
    assert_eq!(reader.body(&buf), b"");
    assert_eq!(
        reader
            .advance(b"HTTP/1.1 204 No Content\r\n\r\n")
            .map(|_| ()),
        Ok(())
    );
}

#[test]
fn chunked_body_buffer_is_reused() {
    let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n0\r\n\r\n";
    let mut reader = ResponseReader::new();
    assert!(matches!(reader.advance(data), Ok(Progress::Done(_))));
    let capacity = reader.chunked_body.capacity();
    let first = reader.chunked_body.as_ptr();
    reader.reset();
    assert!(matches!(reader.advance(data), Ok(Progress::Done(_))));
    assert_eq!(reader.chunked_body.capacity(), capacity);
    assert_eq!(
        reader.chunked_body.as_ptr(),
        first,
        "no reallocation for the same size"
    );
}

#[test]
fn fuzz_entry_agrees_on_generated_inputs() {
    // A small deterministic generator mixing valid pieces and noise; the fuzz fn panics if
    // whole and split feeding disagree.
    let pieces: [&[u8]; 14] = [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.0 100 Continue\r\n\r\n",
        b"Content-Length: 3\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Connection: keep-alive\r\n",
        b"\r\n",
        b"\n",
        b"3\r\nabc\r\n",
        b"0\r\n",
        b"1;e\r\n",
        b"abc",
        b"X: y\r\n",
        b"ffffffffffffffffff\r\n",
        b"\r",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..400 {
        let mut data = Vec::new();
        if next() % 2 == 0 {
            data.extend_from_slice(pieces[0]); // reach past the status line more often
        }
        for _ in 0..(next() % 12) {
            data.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            if next() % 8 == 0 {
                // A random byte somewhere, to reach the error paths.
                let at = (next() as usize) % data.len();
                data[at] = next() as u8;
            }
        }
        crate::protocol::http1::fuzz_response(&data);
    }
}

#[test]
fn detects_event_stream_content_type() {
    let cases: &[(&str, bool)] = &[
        ("text/event-stream", true),
        ("Text/Event-Stream", true),
        ("text/event-stream; charset=utf-8", true),
        ("  text/event-stream  ;charset=utf-8", true),
        ("text/event-streams", false),
        ("application/json", false),
        ("text/plain; x=text/event-stream", false),
        ("", false),
    ];
    for &(value, want) in cases {
        let raw = format!("HTTP/1.1 200 OK\r\nContent-Type: {value}\r\nContent-Length: 0\r\n\r\n");
        let mut reader = ResponseReader::new();
        let Ok(Progress::Done(head)) = reader.advance(raw.as_bytes()) else {
            panic!("{value}: not parsed");
        };
        assert_eq!(head.event_stream, want, "{value:?}");
        assert_eq!(reader.is_event_stream(), want, "{value:?}");
    }
    let mut reader = ResponseReader::new();
    let partial = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
    assert_eq!(reader.advance(partial), Ok(Progress::NeedMore));
    assert!(
        !reader.is_event_stream(),
        "unknown until the head is complete"
    );
}

/// Feeds `raw` to a reader in pieces of `step` bytes and returns, after each piece, the
/// body received so far.
fn body_prefixes(raw: &[u8], step: usize) -> Vec<Vec<u8>> {
    let mut reader = ResponseReader::new();
    let mut out = Vec::new();
    let mut end = 0;
    while end < raw.len() {
        end = (end + step).min(raw.len());
        let buf = &raw[..end];
        let progress = reader.advance(buf).unwrap();
        out.push(reader.body_so_far(buf).to_vec());
        if let Progress::Done(_) = progress {
            assert_eq!(reader.body(buf), reader.body_so_far(buf));
            break;
        }
    }
    out
}

#[test]
fn body_so_far_grows_with_every_read() {
    let cases: &[(&str, &[u8], &[u8])] = &[
        (
            "chunked",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"abcde",
        ),
        (
            "content-length stops at the length",
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwxyzEXTRA",
            b"wxyz",
        ),
        (
            "close-delimited",
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
            b"until close",
        ),
        ("no body", b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ];
    for &(name, raw, body) in cases {
        for step in 1..=raw.len() {
            let prefixes = body_prefixes(raw, step);
            for pair in prefixes.windows(2) {
                assert!(pair[1].starts_with(&pair[0]), "{name}, step {step}: shrank");
            }
            for p in &prefixes {
                assert!(
                    body.starts_with(p),
                    "{name}, step {step}: {p:?} not a prefix"
                );
            }
            if name != "close-delimited" {
                assert_eq!(prefixes.last().unwrap(), body, "{name}, step {step}");
            }
        }
    }
    let reader = ResponseReader::new();
    assert!(reader.body_so_far(b"HTTP/1.1 200 OK\r\n").is_empty());
}
