//! Incremental decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1).
//!
//! The decoder keeps its position in the caller's buffer, so bytes already decoded are never
//! looked at again when more data arrives. Line endings may be CRLF or a bare LF.
//!
//! The raw body stays in the caller's buffer until the response is complete, so its framing
//! is bounded as a whole, not only per line: the chunk-size lines, their extensions and the
//! CRLFs together may take [`FRAMING_PER_BYTE`] bytes per data byte (what one-byte chunks
//! without extensions need, so every valid chunking passes) plus the head limit (64 KiB by
//! default), and never more than the body limit plus the head limit, so the raw body stays
//! within twice the body limit. Tiny chunks with long extensions, or endless empty
//! extensions, fail early instead of growing the buffer.

use super::error::ParseError;
use super::response::Limits;

/// Longest accepted chunk-size line, extensions included (bytes). Real servers send a few hex
/// digits; the limit stops a peer from making the parser buffer an endless extension.
const MAX_CHUNK_LINE: usize = 4096;
/// Framing bytes allowed per data byte: a one-byte chunk takes `1\r\n` before and `\r\n`
/// after its byte; a chunk of n bytes takes at most that per byte.
pub(crate) const FRAMING_PER_BYTE: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Expecting `hex-size [ext] CRLF`.
    Size,
    /// Inside chunk data; `remaining` bytes to go.
    Data,
    /// Expecting the CRLF that closes a chunk's data.
    DataEnd,
    /// After the last (zero) chunk: trailer fields until an empty line.
    Trailer,
}

#[derive(Debug, Clone)]
pub(crate) struct ChunkedDecoder {
    stage: Stage,
    /// Next unread byte, relative to the start of the chunked body.
    pos: usize,
    /// Where the search for the next LF resumes (relative), so a long line fed in many small
    /// reads is scanned once.
    line_scan: usize,
    /// Data bytes left in the current chunk.
    remaining: u64,
    /// Bytes of trailer section seen so far (counted against the head limit).
    trailer_bytes: usize,
    /// Framing bytes of complete size lines and chunk-ending CRLFs so far.
    framing: usize,
}

impl ChunkedDecoder {
    pub(crate) fn new() -> Self {
        ChunkedDecoder {
            stage: Stage::Size,
            pos: 0,
            line_scan: 0,
            remaining: 0,
            trailer_bytes: 0,
            framing: 0,
        }
    }

    pub(crate) fn reset(&mut self) {
        *self = Self::new();
    }

    /// Decodes what it can of `raw` (the body bytes received so far, starting at the first
    /// chunk-size line) into `out`. Returns `Some(n)` once the body and its trailers are complete,
    /// `n` being the raw bytes the body used; `None` if more bytes are needed.
    pub(crate) fn advance(
        &mut self,
        raw: &[u8],
        out: &mut Vec<u8>,
        limits: Limits,
    ) -> Result<Option<usize>, ParseError> {
        let max_body = limits.max_body_bytes;
        let max_trailer = limits.max_head_bytes;
        loop {
            match self.stage {
                Stage::Size => {
                    let (limit, too_long) = self.size_line_limit(out.len(), limits)?;
                    let start = self.pos;
                    let Some(line) = self.take_line(raw, limit, too_long)? else {
                        return Ok(None);
                    };
                    self.framing += self.pos - start;
                    let size = parse_chunk_size(line)?;
                    if size == 0 {
                        self.stage = Stage::Trailer;
                    } else {
                        let total = (out.len() as u64).saturating_add(size);
                        if total > max_body as u64 {
                            return Err(ParseError::BodyTooLarge { limit: max_body });
                        }
                        self.remaining = size;
                        self.stage = Stage::Data;
                    }
                }
                Stage::Data => {
                    let available = raw.len().saturating_sub(self.pos);
                    // `remaining` fits in usize here: it was checked against `max_body`.
                    let take = available.min(self.remaining as usize);
                    out.extend_from_slice(&raw[self.pos..self.pos + take]);
                    self.pos += take;
                    self.remaining -= take as u64;
                    if self.remaining > 0 {
                        return Ok(None);
                    }
                    self.stage = Stage::DataEnd;
                }
                Stage::DataEnd => {
                    let used = match (raw.get(self.pos), raw.get(self.pos + 1)) {
                        (None, _) | (Some(b'\r'), None) => return Ok(None),
                        (Some(b'\n'), _) => 1,
                        (Some(b'\r'), Some(b'\n')) => 2,
                        _ => return Err(ParseError::BadChunkEnd),
                    };
                    self.pos += used;
                    self.framing += used;
                    self.line_scan = self.pos;
                    self.stage = Stage::Size;
                }
                Stage::Trailer => {
                    let budget = max_trailer.saturating_sub(self.trailer_bytes);
                    let start = self.pos;
                    let Some(line) = self.take_line(raw, budget, ParseError::TrailersTooLarge)?
                    else {
                        return Ok(None);
                    };
                    if line.is_empty() {
                        return Ok(Some(self.pos));
                    }
                    if !line.contains(&b':') {
                        return Err(ParseError::BadTrailer);
                    }
                    self.trailer_bytes += self.pos - start;
                }
            }
        }
    }

    /// The longest next size line (bytes, without its LF) and the error past it: the
    /// per-line cap, or what is left of the framing allowance (see [`framing_allowance`],
    /// the line's LF included) when that is smaller. Whichever bound a line crosses first is
    /// reported, however its bytes were split across reads.
    fn size_line_limit(
        &self,
        decoded: usize,
        limits: Limits,
    ) -> Result<(usize, ParseError), ParseError> {
        let framing_error = ParseError::ChunkFramingTooLarge {
            limit: limits.max_head_bytes,
        };
        let allowed = framing_allowance(decoded, limits);
        match allowed.checked_sub(self.framing + 1) {
            None => Err(framing_error),
            Some(left) if left < MAX_CHUNK_LINE => Ok((left, framing_error)),
            Some(_) => Ok((MAX_CHUNK_LINE, ParseError::ChunkLineTooLong)),
        }
    }

    /// The next line (without its CRLF/LF) if a whole one has arrived. A line longer than
    /// `limit` bytes is `too_long`, whether or not its end has arrived yet, so the outcome does
    /// not depend on how the bytes were split across reads.
    fn take_line<'a>(
        &mut self,
        raw: &'a [u8],
        limit: usize,
        too_long: ParseError,
    ) -> Result<Option<&'a [u8]>, ParseError> {
        let from = self.line_scan.max(self.pos);
        let found = raw
            .get(from..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'));
        let Some(offset) = found else {
            if raw.len().saturating_sub(self.pos) > limit {
                return Err(too_long);
            }
            self.line_scan = raw.len();
            return Ok(None);
        };
        let lf = from + offset;
        if lf - self.pos > limit {
            return Err(too_long);
        }
        let mut line = &raw[self.pos..lf];
        if let [head @ .., b'\r'] = line {
            line = head;
        }
        self.pos = lf + 1;
        self.line_scan = self.pos;
        Ok(Some(line))
    }
}

/// Framing bytes a chunked body with `decoded` data bytes so far may have used:
/// [`FRAMING_PER_BYTE`] per data byte, at most the body limit, plus the head limit.
fn framing_allowance(decoded: usize, limits: Limits) -> usize {
    decoded
        .saturating_mul(FRAMING_PER_BYTE)
        .min(limits.max_body_bytes)
        .saturating_add(limits.max_head_bytes)
}

/// Parses `1a2b[ ;ext...]`: hex digits, optional blanks, optional extensions (ignored).
fn parse_chunk_size(line: &[u8]) -> Result<u64, ParseError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(ParseError::BadChunkSize);
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        // `is_ascii_hexdigit` above guarantees `to_digit` succeeds.
        let value = u64::from((b as char).to_digit(16).unwrap_or(0));
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(value))
            .ok_or(ParseError::ChunkSizeOverflow)?;
    }
    let rest = &line[digits..];
    let after_blanks = rest
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .map(|i| &rest[i..]);
    match after_blanks {
        None => Ok(size),
        Some([b';', ..]) => Ok(size),
        Some(_) => Err(ParseError::BadChunkSize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;
    const LIMITS: Limits = Limits {
        max_head_bytes: 1024,
        max_body_bytes: MAX,
        max_interim: 16,
    };

    fn decode_whole(raw: &[u8]) -> Result<Option<(usize, Vec<u8>)>, ParseError> {
        let mut dec = ChunkedDecoder::new();
        let mut out = Vec::new();
        Ok(dec.advance(raw, &mut out, LIMITS)?.map(|n| (n, out)))
    }

    #[test]
    fn chunk_size_lines() {
        let cases: &[(&[u8], Result<u64, ParseError>)] = &[
            (b"0", Ok(0)),
            (b"1a", Ok(26)),
            (b"FF", Ok(255)),
            (b"00000000000000000000010", Ok(16)),
            (b"5;name=value", Ok(5)),
            (b"5 ; name", Ok(5)),
            (b"5\t", Ok(5)),
            (b"ffffffffffffffff", Ok(u64::MAX)),
            (b"10000000000000000", Err(ParseError::ChunkSizeOverflow)),
            (b"", Err(ParseError::BadChunkSize)),
            (b";ext", Err(ParseError::BadChunkSize)),
            (b"5x", Err(ParseError::BadChunkSize)),
            (b"-5", Err(ParseError::BadChunkSize)),
            (b"5 6", Err(ParseError::BadChunkSize)),
        ];
        for (line, want) in cases {
            assert_eq!(
                parse_chunk_size(line),
                *want,
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn decodes_bodies() {
        type Want = Result<Option<(usize, &'static [u8])>, ParseError>;
        let cases: &[(&[u8], Want)] = &[
            (b"5\r\nhello\r\n0\r\n\r\n", Ok(Some((15, b"hello")))),
            (b"5\nhello\n0\n\nNEXT", Ok(Some((11, b"hello")))),
            (
                b"2;a=b\r\nhe\r\n3\r\nllo\r\n0;x\r\nT: v\r\n\r\n",
                Ok(Some((32, b"hello"))),
            ),
            (b"0\r\n\r\n", Ok(Some((5, b"")))),
            (b"5\r\nhel", Ok(None)),
            (b"5\r\nhello\r", Ok(None)),
            (b"5\r\nhello\r\n0\r\nT: v\r\n", Ok(None)),
            (b"5\r\nhelloXX", Err(ParseError::BadChunkEnd)),
            (b"5\r\nhello\rX", Err(ParseError::BadChunkEnd)),
            (b"zz\r\n", Err(ParseError::BadChunkSize)),
            (b"0\r\nno colon\r\n\r\n", Err(ParseError::BadTrailer)),
            (
                b"fffffffffff\r\n",
                Err(ParseError::BodyTooLarge { limit: MAX }),
            ),
        ];
        for (raw, want) in cases {
            let got = decode_whole(raw);
            let want = want.map(|o| o.map(|(n, b)| (n, b.to_vec())));
            assert_eq!(got, want, "raw {:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn limits_apply_before_the_line_ends() {
        let long_ext = [b"5;".as_slice(), &[b'x'; MAX_CHUNK_LINE]].concat();
        let mut out = Vec::new();
        let wide = Limits {
            max_head_bytes: 64 * 1024,
            ..LIMITS
        };
        let got = ChunkedDecoder::new().advance(&long_ext, &mut out, wide);
        assert_eq!(got, Err(ParseError::ChunkLineTooLong));
        // With less framing allowance left than a line may hold, the allowance binds.
        let framing = ParseError::ChunkFramingTooLarge { limit: 1024 };
        assert_eq!(decode_whole(&long_ext), Err(framing));
        let long_trailer = [b"0\r\nT: ".as_slice(), &[b'v'; 2000]].concat();
        assert_eq!(
            decode_whole(&long_trailer),
            Err(ParseError::TrailersTooLarge)
        );
    }

    /// Feeds `raw` in `step`-byte reads, as a connection buffer grows; the outcome and the
    /// raw bytes that had arrived when it came.
    fn feed_in_steps(raw: &[u8], step: usize) -> (Result<Option<usize>, ParseError>, usize) {
        let mut dec = ChunkedDecoder::new();
        let mut out = Vec::new();
        let mut end = 0;
        loop {
            end = (end + step).min(raw.len());
            match dec.advance(&raw[..end], &mut out, LIMITS) {
                Ok(None) if end < raw.len() => {}
                other => return (other, end),
            }
        }
    }

    #[test]
    fn framing_is_bounded_in_total_not_only_per_line() {
        let framing = ParseError::ChunkFramingTooLarge { limit: 1024 };
        // One data byte per chunk, each with a 200-byte extension (every line is short).
        let ext = [b"1;".as_slice(), &[b'e'; 200], b"\r\nx\r\n"].concat();
        // One-letter extensions forever: two framing bytes per data byte beyond the allowance.
        let short = b"1;e\r\nx\r\n".to_vec();
        for (name, unit) in [("extensions", &ext), ("short lines", &short)] {
            let raw = unit.repeat(1000);
            // The chunks that fit: each takes its framing minus the five bytes allowed.
            let fit = 1024 / (unit.len() - 1 - FRAMING_PER_BYTE);
            for step in [raw.len(), 1, 7, 100] {
                let (got, arrived) = feed_in_steps(&raw, step);
                assert_eq!(got, Err(framing), "{name}, step {step}");
                // Stopped within the allowance, plus one chunk and one read.
                assert!(
                    arrived <= (fit + 2) * unit.len() + step,
                    "{name}: read {arrived} bytes"
                );
            }
        }
        // Ordinary small chunks (framing a fraction of the data) pass whatever their number.
        let chunk = [b"20\r\n".as_slice(), &[b'd'; 32], b"\r\n"].concat();
        let fine = [chunk.repeat(5000), b"0\r\n\r\n".to_vec()].concat();
        let (got, _) = feed_in_steps(&fine, 4096);
        assert_eq!(got, Ok(Some(fine.len())));
    }

    #[test]
    fn one_byte_chunks_pass_up_to_the_body_limit() {
        // 150 KB of data in one-byte chunks: five framing bytes per data byte.
        let body = [b"1\r\nx\r\n".repeat(150_000), b"0\r\n\r\n".to_vec()].concat();
        let (got, _) = feed_in_steps(&body, 64 * 1024);
        assert_eq!(got, Ok(Some(body.len())));
        // Bare LFs take less.
        let lf = [b"1\nx\n".repeat(1000), b"0\n\n".to_vec()].concat();
        assert_eq!(feed_in_steps(&lf, 100).0, Ok(Some(lf.len())));
        // The framing never exceeds the body limit (1 MiB here) plus the head limit, so the
        // raw body stays within twice the body limit whatever the chunking.
        let huge = b"1\r\nx\r\n".repeat(300_000);
        let (got, arrived) = feed_in_steps(&huge, 64 * 1024);
        assert_eq!(got, Err(ParseError::ChunkFramingTooLarge { limit: 1024 }));
        assert!(
            arrived <= 2 * MAX + 1024 + 64 * 1024,
            "read {arrived} bytes"
        );
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let raw = b"3;e\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nA: b\r\nC: d\r\n\r\n";
        let mut dec = ChunkedDecoder::new();
        let mut out = Vec::new();
        let mut done = None;
        for end in 1..=raw.len() {
            if let Some(n) = dec.advance(&raw[..end], &mut out, LIMITS).unwrap() {
                done = Some((end, n));
                break;
            }
        }
        assert_eq!(done, Some((raw.len(), raw.len())));
        assert_eq!(out, b"abc0123456789abcdef");
    }
}
