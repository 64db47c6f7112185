//! Fuzz entry point for the response parser, shared by `fuzz/` and `tests/it/fuzz_corpus.rs`.

use super::error::ParseError;
use super::response::{Limits, Progress, ResponseHead, ResponseReader};

/// What one connection's bytes turned into: responses in order, ending with an error or not.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Response { head: ResponseHead, body: Vec<u8> },
    Error(ParseError),
}

/// Feeds `data` to a reader the way a connection would receive it: successive reads of
/// `steps[i]` bytes (cycled; 0 counts as 1), every response handed back and dropped from the
/// buffer, until an error, a response that closes the connection, or the end of `data` (EOF).
pub(crate) fn parse_stream(data: &[u8], steps: &[usize], limits: Limits) -> Vec<Outcome> {
    let mut reader = ResponseReader::with_limits(limits);
    let mut outcomes = Vec::new();
    let mut start = 0; // first unconsumed byte
    let mut received = 0; // bytes read from the "socket" so far
    let mut reads = 0;
    loop {
        let pending = &data[start..received];
        let progress = if received == data.len() {
            reader.on_eof(pending)
        } else {
            reader.advance(pending)
        };
        match progress {
            Ok(Progress::Done(head)) => {
                assert!(
                    head.consumed > 0 && head.consumed <= pending.len(),
                    "bad consumed"
                );
                let body = reader.body(pending).to_vec();
                assert_eq!(body.len(), head.body_len, "body length");
                outcomes.push(Outcome::Response { head, body });
                reader.reset();
                start += head.consumed;
                if !head.keep_alive || start == data.len() && received == data.len() {
                    break;
                }
            }
            Ok(Progress::NeedMore) => {
                assert!(received < data.len(), "NeedMore after EOF");
                let step = steps
                    .get(reads % steps.len().max(1))
                    .copied()
                    .unwrap_or(1)
                    .max(1);
                received = (received + step).min(data.len());
                reads += 1;
            }
            Err(e) => {
                outcomes.push(Outcome::Error(e));
                break;
            }
        }
    }
    outcomes
}

/// Parses `data` as the bytes a server sent on one connection, fed whole, byte by byte and in
/// reads whose sizes come from the data itself, with default and with small limits. Panics
/// only if the ways of feeding disagree or an internal invariant breaks (a bug to report).
pub fn fuzz_response(data: &[u8]) {
    let small = Limits {
        max_head_bytes: 200,
        max_body_bytes: 300,
        max_interim: 2,
    };
    let split_steps: Vec<usize> = data
        .iter()
        .take(32)
        .map(|&b| usize::from(b % 23) + 1)
        .collect();
    for limits in [Limits::default(), small] {
        let whole = parse_stream(data, &[data.len()], limits);
        let split = parse_stream(data, &split_steps, limits);
        assert_eq!(whole, split, "split feeding differs from whole feeding");
        if data.len() <= 8192 {
            let bytewise = parse_stream(data, &[1], limits);
            assert_eq!(
                whole, bytewise,
                "byte-by-byte feeding differs from whole feeding"
            );
        }
    }
}
