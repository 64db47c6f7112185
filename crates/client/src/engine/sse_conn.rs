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
        let SseState {
            decoder,
            framed,
            last_event_ns,
            error,
            ..
        } = self;
        let mut on =
            |event: SseEvent<'_>| on_event(event, read_ns, keep, rec, framed, last_event_ns, error);
        decoder.push(fresh, &mut on)
    }

    /// The body is complete: a last event lacking its blank line still counts, at `read_ns`.
    pub fn finish(
        &mut self,
        read_ns: u64,
        keep: bool,
        rec: &mut RequestRecord,
    ) -> Result<(), SseError> {
        let SseState {
            decoder,
            framed,
            last_event_ns,
            error,
            ..
        } = self;
        let mut on =
            |event: SseEvent<'_>| on_event(event, read_ns, keep, rec, framed, last_event_ns, error);
        decoder.finish(&mut on)
    }
}

/// One complete event: a response of the request (`[DONE]`: the null final response), or the
/// request's error.
fn on_event(
    event: SseEvent<'_>,
    read_ns: u64,
    keep: bool,
    rec: &mut RequestRecord,
    framed: &mut Vec<u8>,
    last_event_ns: &mut u64,
    error: &mut Option<String>,
) {
    if event.is_error() {
        if let SseEvent::Data { data, .. } = event {
            if error.is_none() {
                *error = Some(String::from_utf8_lossy(data).into_owned());
            }
            // Kept (not counted as a response) so a reader of the framed events sees the
            // server's error object, e.g. `{"error":{"message":..}}`.
            if keep {
                push_framed_response(framed, read_ns, data);
            }
        }
        return;
    }
    let payload = match event {
        SseEvent::Data { data, .. } => {
            if rec.responses == 0 {
                rec.recv_start_ns = read_ns;
            }
            rec.responses += 1;
            *last_event_ns = read_ns;
            data
        }
        SseEvent::Done => &[],
    };
    if keep {
        push_framed_response(framed, read_ns, payload);
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
