//! Decoding `Transfer-Encoding: chunked` request bodies incrementally, across reads.

use super::error::HttpError;
#[cfg(test)]
use super::error::MAX_BODY_BYTES;

/// Longest chunk-size or trailer line, in bytes.
const MAX_CHUNK_LINE: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    SizeLine,
    Data(usize),
    DataEnd,
    Trailer,
    Done,
}

/// Incremental decoder of a chunked body; it never consumes a partial line, so it can be
/// called again with the same unconsumed bytes plus whatever arrived since.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: ChunkState,
    /// Largest decoded body, bytes.
    max_body: usize,
}

impl ChunkedDecoder {
    /// A decoder refusing (413) a body that decodes to more than `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        ChunkedDecoder {
            state: ChunkState::SizeLine,
            max_body,
        }
    }
}

fn find_line(input: &[u8]) -> Result<Option<(&[u8], usize)>, HttpError> {
    match input.iter().position(|&b| b == b'\n') {
        Some(nl) if nl > MAX_CHUNK_LINE => Err(HttpError::bad("chunk line too long")),
        Some(nl) => {
            let line = &input[..nl];
            Ok(Some((line.strip_suffix(b"\r").unwrap_or(line), nl + 1)))
        }
        None if input.len() > MAX_CHUNK_LINE => Err(HttpError::bad("chunk line too long")),
        None => Ok(None),
    }
}

fn parse_chunk_size(line: &[u8]) -> Result<usize, HttpError> {
    let size = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or(&[])
        .trim_ascii();
    let bad = || HttpError::bad("invalid chunk size in chunked body");
    if size.is_empty() || size.len() > 15 {
        return Err(bad());
    }
    let text = std::str::from_utf8(size).map_err(|_| bad())?;
    usize::from_str_radix(text, 16).map_err(|_| bad())
}

impl ChunkedDecoder {
    /// Decodes from `input`, appending data to `out` (limited to the decoder's `max_body`).
    /// Returns the bytes consumed and whether the body (with its trailers) is complete.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), HttpError> {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            match self.state {
                ChunkState::Done => return Ok((pos, true)),
                ChunkState::SizeLine | ChunkState::Trailer => {
                    let Some((line, used)) = find_line(rest)? else {
                        return Ok((pos, false));
                    };
                    pos += used;
                    self.state = if self.state == ChunkState::Trailer {
                        if line.is_empty() {
                            ChunkState::Done
                        } else {
                            ChunkState::Trailer
                        }
                    } else {
                        match parse_chunk_size(line)? {
                            0 => ChunkState::Trailer,
                            n if out.len().saturating_add(n) > self.max_body => {
                                return Err(HttpError::too_large("request body", self.max_body))
                            }
                            n => ChunkState::Data(n),
                        }
                    };
                }
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok((pos, false));
                    }
                    let take = left.min(rest.len());
                    out.extend_from_slice(&rest[..take]);
                    pos += take;
                    self.state = if take == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - take)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.starts_with(b"\r\n") {
                        pos += 2;
                    } else if rest.starts_with(b"\n") {
                        pos += 1;
                    } else if rest.is_empty() || rest == b"\r" {
                        return Ok((pos, false));
                    } else {
                        return Err(HttpError::bad("missing CRLF after chunk data"));
                    }
                    self.state = ChunkState::SizeLine;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_decodes_byte_by_byte() {
        let wire =
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in [1, 2, 7, wire.len()] {
            let mut dec = ChunkedDecoder::new(MAX_BODY_BYTES);
            let (mut out, mut at, mut end) = (Vec::new(), 0, 0);
            let mut done = false;
            while !done {
                end = (end + step).min(wire.len());
                let (used, d) = dec.decode(&wire[at..end], &mut out).unwrap();
                at += used;
                done = d;
                assert!(done || end < wire.len(), "stalled at step {step}");
            }
            assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
            assert_eq!(&wire[at..], b"NEXT");
        }
    }

    #[test]
    fn chunked_errors() {
        for wire in [
            &b"zz\r\n"[..],
            b"4\r\nWikiXX",
            b"fffffffffffffffff\r\n",
            b"\r\n",
        ] {
            let mut out = Vec::new();
            assert!(
                ChunkedDecoder::new(MAX_BODY_BYTES)
                    .decode(wire, &mut out)
                    .is_err(),
                "{wire:?}"
            );
        }
        let mut out = Vec::new();
        let big = format!("{:x}\r\n", MAX_BODY_BYTES + 1);
        let err = ChunkedDecoder::new(MAX_BODY_BYTES)
            .decode(big.as_bytes(), &mut out)
            .unwrap_err();
        assert_eq!(err.status, 413);
        // The limit counts the decoded bytes of every chunk together.
        let mut out = Vec::new();
        let err = ChunkedDecoder::new(4)
            .decode(b"3\r\nabc\r\n2\r\nde\r\n", &mut out)
            .unwrap_err();
        assert_eq!((err.status, out.as_slice()), (413, &b"abc"[..]));
    }
}
