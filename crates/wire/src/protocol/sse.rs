//! Streaming decoder for `text/event-stream` bodies (Server-Sent Events), as OpenAI-style
//! servers send streamed completions. It is fed the body bytes after HTTP/1 chunked decoding,
//! one network read at a time, and calls back once per complete event, in order, from inside
//! the `push` that completed it: the caller's read timestamp is the event's timestamp.
//!
//! Line and field rules follow the WHATWG event-stream grammar: `\n`, `\r\n` and `\r` line
//! ends (a `\r\n` split across two reads is one line end), `data:` lines joined with `\n`,
//! `event:` names, `id:`/`retry:`/unknown fields and `:` comment lines ignored, a leading
//! UTF-8 BOM dropped, an event without data dropped. `data: [DONE]` is reported as
//! [`SseEvent::Done`]. Unlike the WHATWG rule, [`SseDecoder::finish`] still emits a last event
//! that lacks its blank line, because some servers end the body that way.
//!
//! Memory is bounded: a line or an event's data longer than the limit is an error, and buffers
//! are reused, so steady-state decoding does not allocate.
//!
//! ```
//! use inferperf_wire::protocol::sse::{SseDecoder, SseEvent};
//! let mut decoder = SseDecoder::new();
//! let mut seen = Vec::new();
//! let mut on = |event: SseEvent<'_>| seen.push(format!("{event:?}"));
//! decoder.push(b"data: {\"a\":1}\n\nda", &mut on).unwrap();
//! decoder.push(b"ta: [DONE]\n\n", &mut on).unwrap();
//! decoder.finish(&mut on).unwrap();
//! assert_eq!(seen.len(), 2);
//! ```

use std::fmt;

/// Default bound on one line and on one event's joined data (bytes): 16 MiB, the size of
/// perf_analyzer's libcurl download buffer for the openai service kind.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

/// Capacity (bytes) a buffer may keep across [`SseDecoder::reset`]; one huge event must not pin
/// megabytes per connection for the rest of the run.
const RETAINED_CAPACITY: usize = 64 << 10;

/// The UTF-8 byte order mark, ignored at the very start of the stream.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// One complete event, borrowed from the decoder until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEvent<'a> {
    /// An event with at least one `data:` line.
    Data {
        /// The `event:` name; `None` when absent or empty (the default "message" type).
        event: Option<&'a [u8]>,
        /// The `data:` values joined with `\n` (no trailing `\n`).
        data: &'a [u8],
    },
    /// `data: [DONE]` (surrounding ASCII whitespace ignored) in an unnamed or `message`
    /// event: the OpenAI end-of-stream marker.
    Done,
}

impl SseEvent<'_> {
    /// True for an `event: error` packet, which servers send instead of a normal chunk.
    pub fn is_error(&self) -> bool {
        matches!(self, SseEvent::Data { event: Some(name), .. } if *name == b"error")
    }
}

/// Why a stream was refused; the decoder stays failed until `finish` or `reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// One line (not a comment) is longer than `limit` bytes.
    LineTooLong { limit: usize },
    /// One event's joined data is longer than `limit` bytes.
    EventTooLarge { limit: usize },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong { limit } => {
                write!(f, "SSE line in the response stream exceeds {limit} bytes")
            }
            SseError::EventTooLarge { limit } => {
                write!(
                    f,
                    "SSE event data in the response stream exceeds {limit} bytes"
                )
            }
        }
    }
}

impl SseError {
    /// Both errors are limits ([`crate::fail::FailKind::Limit`]).
    pub fn kind(&self) -> crate::fail::FailKind {
        crate::fail::FailKind::Limit
    }
}

impl std::error::Error for SseError {}

impl From<SseError> for crate::error::Error {
    fn from(e: SseError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

/// The line being read when a read ends in its middle.
#[derive(Debug, Default)]
struct PartialLine {
    /// Bytes so far. A comment line keeps only its leading `:`, so a long ping costs nothing.
    bytes: Vec<u8>,
}

impl PartialLine {
    fn append(&mut self, segment: &[u8], limit: usize) -> Result<(), SseError> {
        match (self.bytes.first(), segment.first()) {
            (_, None) | (Some(b':'), _) => Ok(()),
            (None, Some(b':')) => {
                self.bytes.push(b':');
                Ok(())
            }
            _ if self.bytes.len() + segment.len() > limit => Err(SseError::LineTooLong { limit }),
            _ => {
                self.bytes.extend_from_slice(segment);
                Ok(())
            }
        }
    }
}

/// Fields of the event being assembled.
#[derive(Debug, Default)]
struct PendingEvent {
    /// `data:` values joined with `\n`.
    data: Vec<u8>,
    /// At least one `data:` line was seen (`data:` alone gives an event with empty data).
    has_data: bool,
    /// The last `event:` value; empty means the default type.
    name: Vec<u8>,
}

impl PendingEvent {
    /// Applies one complete line (without its line end).
    fn take_line(
        &mut self,
        line: &[u8],
        limit: usize,
        on: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        match line.first() {
            None => {
                self.dispatch(on);
                return Ok(());
            }
            Some(b':') => return Ok(()),
            Some(_) if line.len() > limit => return Err(SseError::LineTooLong { limit }),
            Some(_) => {}
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                let separator = usize::from(self.has_data);
                if self.data.len() + separator + value.len() > limit {
                    return Err(SseError::EventTooLarge { limit });
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.name.clear();
                self.name.extend_from_slice(value);
            }
            // `id`, `retry` and unknown fields do not matter to a load generator.
            _ => {}
        }
        Ok(())
    }

    /// Ends the event at a blank line: emits it if it had data, then starts a new one.
    fn dispatch(&mut self, on: &mut dyn FnMut(SseEvent<'_>)) {
        if self.has_data {
            let unnamed = self.name.is_empty() || self.name == b"message";
            if unnamed && self.data.trim_ascii() == b"[DONE]" {
                on(SseEvent::Done);
            } else {
                let event = (!self.name.is_empty()).then_some(&self.name[..]);
                on(SseEvent::Data {
                    event,
                    data: &self.data,
                });
            }
        }
        self.clear();
    }

    fn clear(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.name.clear();
    }
}

/// Incremental `text/event-stream` decoder; one per stream, reusable after `finish`/`reset`.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bound (bytes) on one line and on one event's joined data.
    limit: usize,
    line: PartialLine,
    event: PendingEvent,
    /// The last byte seen was `\r`, so a `\n` right after it (maybe in the next read) is
    /// part of the same line end.
    after_cr: bool,
    /// The start of the stream has been checked for a BOM.
    bom_checked: bool,
    /// BOM bytes matched so far at the start of the stream (0..=2 while unchecked).
    bom_matched: usize,
    /// Set by an error; every later call returns it until `finish` or `reset`.
    failed: Option<SseError>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the [`DEFAULT_MAX_EVENT_BYTES`] limit.
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder refusing lines or event data longer than `max_event_bytes` (at least 1).
    pub fn with_limit(max_event_bytes: usize) -> Self {
        SseDecoder {
            limit: max_event_bytes.max(1),
            line: PartialLine::default(),
            event: PendingEvent::default(),
            after_cr: false,
            bom_checked: false,
            bom_matched: 0,
            failed: None,
        }
    }

    /// Feeds one read of body bytes; calls `on` for every event it completes, in order.
    /// After an error the rest of the stream is refused (same error) until `finish`/`reset`.
    pub fn push(&mut self, bytes: &[u8], on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let result = self.push_checked(bytes, on);
        if let Err(e) = result {
            self.failed = Some(e);
        }
        result
    }

    /// Ends the body: a last line without its line end and a last event without its blank
    /// line are still emitted. The decoder is then reset for the next stream.
    pub fn finish(&mut self, on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        let result = match self.failed {
            Some(e) => Err(e),
            None => self.finish_checked(on),
        };
        self.reset();
        result
    }

    /// Forgets any partial line, event and error; keeps (bounded) buffer capacity.
    pub fn reset(&mut self) {
        self.line.bytes.clear();
        self.line.bytes.shrink_to(RETAINED_CAPACITY);
        self.event.clear();
        self.event.data.shrink_to(RETAINED_CAPACITY);
        self.event.name.shrink_to(RETAINED_CAPACITY);
        self.after_cr = false;
        self.bom_checked = false;
        self.bom_matched = 0;
        self.failed = None;
    }

    fn push_checked(
        &mut self,
        mut bytes: &[u8],
        on: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        if !self.bom_checked {
            bytes = self.skip_bom(bytes, on)?;
        }
        self.feed(bytes, on)
    }

    fn finish_checked(&mut self, on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        // A stream that ended inside a would-be BOM: those bytes were content after all.
        let held = self.bom_matched;
        if !self.bom_checked && held > 0 {
            self.bom_checked = true;
            self.feed(&BOM[..held], on)?;
        }
        if !self.line.bytes.is_empty() {
            self.event.take_line(&self.line.bytes, self.limit, on)?;
            self.line.bytes.clear();
        }
        self.event.dispatch(on);
        Ok(())
    }

    /// Consumes a leading BOM, which may arrive split across reads. Returns the rest of
    /// `bytes`; bytes that only looked like the start of a BOM are fed as content.
    fn skip_bom<'b>(
        &mut self,
        mut bytes: &'b [u8],
        on: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<&'b [u8], SseError> {
        while let Some((&first, rest)) = bytes.split_first() {
            if first != BOM[self.bom_matched] {
                self.bom_checked = true;
                let held = self.bom_matched;
                self.feed(&BOM[..held], on)?;
                return Ok(bytes);
            }
            bytes = rest;
            self.bom_matched += 1;
            if self.bom_matched == BOM.len() {
                self.bom_checked = true;
                return Ok(bytes);
            }
        }
        Ok(bytes)
    }

    /// Splits `bytes` into lines; whole lines inside one read are applied without copying.
    fn feed(&mut self, mut bytes: &[u8], on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let line = &bytes[..end];
            if self.line.bytes.is_empty() {
                self.event.take_line(line, self.limit, on)?;
            } else {
                self.line.append(line, self.limit)?;
                self.event.take_line(&self.line.bytes, self.limit, on)?;
                self.line.bytes.clear();
            }
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            bytes = &bytes[next..];
        }
        self.line.append(bytes, self.limit)
    }
}

/// An event copied out of the callback, for comparisons in tests and the fuzz target.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnedEvent {
    Data {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
    },
    Done,
}

impl From<SseEvent<'_>> for OwnedEvent {
    fn from(event: SseEvent<'_>) -> Self {
        match event {
            SseEvent::Data { event, data } => OwnedEvent::Data {
                event: event.map(<[u8]>::to_vec),
                data: data.to_vec(),
            },
            SseEvent::Done => OwnedEvent::Done,
        }
    }
}

/// Feeds `pieces` in order then finishes; the events up to the first error, and that error.
fn decode_pieces<'p>(
    decoder: &mut SseDecoder,
    pieces: impl IntoIterator<Item = &'p [u8]>,
) -> (Vec<OwnedEvent>, Result<(), SseError>) {
    let mut events = Vec::new();
    let mut on = |event: SseEvent<'_>| events.push(OwnedEvent::from(event));
    let mut result = Ok(());
    for piece in pieces {
        result = decoder.push(piece, &mut on);
        // Bounded memory: no buffer ever holds more than the limit.
        assert!(decoder.line.bytes.len() <= decoder.limit);
        assert!(decoder.event.data.len() <= decoder.limit);
        assert!(decoder.event.name.len() <= decoder.limit);
        if result.is_err() {
            break;
        }
    }
    let finished = decoder.finish(&mut on);
    (events, result.and(finished))
}

/// Cut points derived from the data itself (FNV-1a seed, then an LCG), sorted, in `1..len`.
fn derived_cuts(data: &[u8]) -> Vec<usize> {
    let mut state = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let len = data.len();
    let count = if len < 2 { 0 } else { (state as usize) % len };
    let mut cuts: Vec<usize> = (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            1 + ((state >> 33) as usize) % (len - 1)
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// `data` cut at `cuts` (sorted positions inside it).
fn split_at_cuts<'d>(data: &'d [u8], cuts: &[usize]) -> Vec<&'d [u8]> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &cut in cuts {
        pieces.push(&data[start..cut]);
        start = cut;
    }
    pieces.push(&data[start..]);
    pieces
}

/// Fuzz entry point: any bytes, fed whole, byte by byte and in data-derived pieces, with the
/// default and with a tiny limit, give the same events and error, bounded buffers, no panic.
pub fn fuzz_sse(data: &[u8]) {
    for limit in [DEFAULT_MAX_EVENT_BYTES, 16] {
        let mut decoder = SseDecoder::with_limit(limit);
        let whole = decode_pieces(&mut decoder, [data]);
        let bytewise = decode_pieces(&mut decoder, data.chunks(1));
        assert_eq!(whole, bytewise, "byte-by-byte feed differs (limit {limit})");
        let cuts = derived_cuts(data);
        let pieces = split_at_cuts(data, &cuts);
        let split = decode_pieces(&mut decoder, pieces);
        assert_eq!(whole, split, "split at {cuts:?} differs (limit {limit})");
    }
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
