//! The Server-Sent Events side of an HTTP/1.1 connection (`--service-kind openai` with
//! `"stream": true`): the decoded body of a `text/event-stream` response is fed to an
//! [`SseDecoder`] after every read, and each complete `data:` event becomes one response of
//! the request, stamped with the time of the read that completed it.
//!
//! One timestamp per read, taken before any parsing: events completed by the same read share
//! it, and an event split over two reads gets the second read's time (when its last byte
//! arrived). This is what a client can honestly know; perf_analyzer instead reports every
//! libcurl write callback as one "response", whatever event boundaries it cuts.

use crate::measure::record::push_framed_response;
use crate::measure::RequestRecord;
use crate::protocol::sse::{SseDecoder, SseError, SseEvent};

/// Per-connection SSE state; buffers keep their capacity across requests.
#[derive(Debug, Default)]
pub struct SseState {
    decoder: SseDecoder,
    /// Bytes of the current response's decoded body already given to the decoder.
    fed: usize,
    /// The current response is an event stream being decoded.
    pub active: bool,
    /// Framed responses of the current request (only when bodies are kept): one per `data:`
    /// event, `[DONE]` as an empty payload; an `event: error` packet's data is kept too.
    pub framed: Vec<u8>,
    /// Read time (ns since the epoch) of the last `data:` event that is not `[DONE]`: where
    /// the request's latency ends.
    pub last_event_ns: u64,
    /// The data of the first `event: error` packet, which makes the request fail.
    pub error: Option<String>,
    /// Prefill cap: the wait for the request's first output token (kept across `reset`;
    /// the pool sets it for each request).
    pub token: TokenWatch,
}

/// Prefill cap (see `prefill.rs`): whether the request in flight waits for its first output
/// token, and whether it has arrived.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokenWatch {
    /// While waiting: the test of an event's data for output text.
    pub test: Option<fn(&[u8]) -> bool>,
    /// An event with output text arrived.
    pub seen: bool,
}

impl TokenWatch {
    /// Waits for the first token with `test` (`None`: not watched).
    pub fn watch(test: Option<fn(&[u8]) -> bool>) -> TokenWatch {
        TokenWatch { test, seen: false }
    }
}

/// Capacity (bytes) the framed-response buffer may keep between requests; one huge stream
/// must not pin its memory for the rest of the run.
const RETAINED_FRAMED: usize = 1 << 20;

impl SseState {
    /// Ready for a new request's response.
    pub fn reset(&mut self) {
        self.decoder.reset();
        self.fed = 0;
        self.active = false;
        self.framed.clear();
        self.framed.shrink_to(RETAINED_FRAMED);
        self.last_event_ns = 0;
        self.error = None;
    }

    /// Feeds the body bytes not seen yet (`body` is the whole decoded body so far) as one
    /// read that happened at `read_ns`. Events go into `rec` (and `framed` when `keep`).
    pub fn feed(
        &mut self,
        body: &[u8],
        read_ns: u64,
        keep: bool,
        rec: &mut RequestRecord,
    ) -> Result<(), SseError> {
        let fresh = body.get(self.fed..).unwrap_or(&[]);
        self.fed = body.len().max(self.fed);
        if fresh.is_empty() {
            return Ok(());
        }
        let (decoder, mut sink) = self.split(read_ns, keep, rec);
        decoder.push(fresh, &mut |event| sink.on_event(event))
    }

    /// The body is complete: a last event lacking its blank line still counts, at `read_ns`.
    pub fn finish(
        &mut self,
        read_ns: u64,
        keep: bool,
        rec: &mut RequestRecord,
    ) -> Result<(), SseError> {
        let (decoder, mut sink) = self.split(read_ns, keep, rec);
        decoder.finish(&mut |event| sink.on_event(event))
    }

    /// The decoder, and where the events it completes go.
    fn split<'a>(
        &'a mut self,
        read_ns: u64,
        keep: bool,
        rec: &'a mut RequestRecord,
    ) -> (&'a mut SseDecoder, EventSink<'a>) {
        let sink = EventSink {
            read_ns,
            keep,
            rec,
            framed: &mut self.framed,
            last_event_ns: &mut self.last_event_ns,
            error: &mut self.error,
            token: &mut self.token,
        };
        (&mut self.decoder, sink)
    }
}

/// Where the events completed by one read go.
struct EventSink<'a> {
    read_ns: u64,
    keep: bool,
    rec: &'a mut RequestRecord,
    framed: &'a mut Vec<u8>,
    last_event_ns: &'a mut u64,
    error: &'a mut Option<String>,
    token: &'a mut TokenWatch,
}

impl EventSink<'_> {
    /// One complete event: a response of the request (`[DONE]`: the null final response),
    /// or the request's error.
    fn on_event(&mut self, event: SseEvent<'_>) {
        let (read_ns, keep) = (self.read_ns, self.keep);
        if event.is_error() {
            if let SseEvent::Data { data, .. } = event {
                if self.error.is_none() {
                    *self.error = Some(String::from_utf8_lossy(data).into_owned());
                }
                // Kept (not counted as a response) so a reader of the framed events sees the
                // server's error object, e.g. `{"error":{"message":..}}`.
                if keep {
                    push_framed_response(self.framed, read_ns, data);
                }
            }
            return;
        }
        let payload = match event {
            SseEvent::Data { data, .. } => {
                if self.rec.responses == 0 {
                    self.rec.recv_start_ns = read_ns;
                }
                self.rec.responses += 1;
                *self.last_event_ns = read_ns;
                if let Some(test) = self.token.test {
                    if test(data) {
                        *self.token = TokenWatch {
                            test: None,
                            seen: true,
                        };
                    }
                }
                data
            }
            SseEvent::Done => &[],
        };
        if keep {
            push_framed_response(self.framed, read_ns, payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::record::framed_responses;

    fn framed(state: &SseState) -> Vec<(u64, String)> {
        framed_responses(&state.framed)
            .map(|(t, p)| (t, String::from_utf8_lossy(p).into_owned()))
            .collect()
    }

    #[test]
    fn one_timestamp_per_read() {
        let mut state = SseState::default();
        let mut rec = RequestRecord::default();
        let mut body = Vec::new();
        // Read 1 at t=10: two whole events and the start of a third.
        body.extend_from_slice(b"data: a\n\ndata: b\n\ndata: c");
        state.feed(&body, 10, true, &mut rec).unwrap();
        // Read 2 at t=20: the rest of the third event.
        body.extend_from_slice(b"c\n\n");
        state.feed(&body, 20, true, &mut rec).unwrap();
        // Read 3 at t=30: nothing new (a chunk-size line only), then [DONE] at t=40.
        state.feed(&body, 30, true, &mut rec).unwrap();
        body.extend_from_slice(b"data: [DONE]\n\n");
        state.feed(&body, 40, true, &mut rec).unwrap();
        state.finish(50, true, &mut rec).unwrap();
        let want = vec![
            (10, "a".to_string()),
            (10, "b".to_string()),
            (20, "cc".to_string()),
            (40, String::new()),
        ];
        assert_eq!(framed(&state), want);
        assert_eq!(rec.responses, 3, "[DONE] is not a response with outputs");
        assert_eq!(rec.recv_start_ns, 10);
        assert_eq!(state.last_event_ns, 20);
        assert!(state.error.is_none());
    }

    #[test]
    fn split_at_every_byte_gives_the_completing_read_time() {
        let stream =
            b": ping\n\ndata: {\"x\":1}\r\n\r\nevent: message\ndata: y\n\ndata: [DONE]\n\n";
        for split in 0..=stream.len() {
            let mut state = SseState::default();
            let mut rec = RequestRecord::default();
            state.feed(&stream[..split], 1, true, &mut rec).unwrap();
            state.feed(stream, 2, true, &mut rec).unwrap();
            state.finish(3, true, &mut rec).unwrap();
            let got = framed(&state);
            let payloads: Vec<&str> = got.iter().map(|(_, p)| p.as_str()).collect();
            assert_eq!(payloads, ["{\"x\":1}", "y", ""], "split {split}");
            // The first event ends at the `\r` of its blank line (a lone CR ends a line; the
            // `\n` after it belongs to the same line end).
            let first_done = stream.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 3;
            let want_first = if split >= first_done { 1 } else { 2 };
            assert_eq!(got[0].0, want_first, "split {split}");
            assert_eq!(rec.responses, 2);
        }
    }

    #[test]
    fn error_event_fails_and_nothing_is_kept_without_keep() {
        let mut state = SseState::default();
        let mut rec = RequestRecord::default();
        let body =
            b"data: a\n\nevent: error\ndata: {\"error\":\"boom\"}\n\nevent: error\ndata: 2\n\n";
        state.feed(body, 7, false, &mut rec).unwrap();
        state.finish(8, false, &mut rec).unwrap();
        assert_eq!(state.error.as_deref(), Some("{\"error\":\"boom\"}"));
        assert_eq!(rec.responses, 1);
        assert!(state.framed.is_empty());
        state.reset();
        let mut rec = RequestRecord::default();
        state.feed(body, 7, true, &mut rec).unwrap();
        let kept: Vec<String> = framed(&state).into_iter().map(|(_, p)| p).collect();
        assert_eq!(kept, ["a", "{\"error\":\"boom\"}", "2"]);
        assert_eq!(rec.responses, 1, "error packets are not responses");
        state.reset();
        assert!(state.error.is_none() && !state.active && state.last_event_ns == 0);
    }

    #[test]
    fn the_first_event_with_output_text_ends_the_token_wait() {
        fn has_text(data: &[u8]) -> bool {
            data.windows(4).any(|w| w == b"text")
        }
        let mut state = SseState {
            token: TokenWatch::watch(Some(has_text)),
            ..SseState::default()
        };
        let mut rec = RequestRecord::default();
        let mut body = b"data: role\n\nevent: error\ndata: text\n\n".to_vec();
        state.feed(&body, 1, false, &mut rec).unwrap();
        assert!(
            !state.token.seen,
            "neither a role-only event nor an error is a token"
        );
        body.extend_from_slice(b"data: text 1\n\ndata: text 2\n\n");
        state.feed(&body, 2, false, &mut rec).unwrap();
        assert!(state.token.seen && state.token.test.is_none());
        // Not watched: nothing is tested.
        let mut plain = SseState::default();
        plain.feed(&body, 1, false, &mut rec).unwrap();
        assert!(!plain.token.seen);
        // The watch outlives the per-response reset; the pool sets it per request.
        state.reset();
        assert!(state.token.seen);
    }

    #[test]
    fn finish_emits_an_unterminated_last_event_and_reports_decoder_errors() {
        let mut state = SseState::default();
        let mut rec = RequestRecord::default();
        state.feed(b"data: tail", 5, true, &mut rec).unwrap();
        state.finish(9, true, &mut rec).unwrap();
        assert_eq!(framed(&state), vec![(9, "tail".to_string())]);

        let mut small = SseState {
            decoder: SseDecoder::with_limit(4),
            ..SseState::default()
        };
        let err = small.feed(b"data: too long\n", 1, true, &mut rec);
        assert!(err.is_err());
    }
}
