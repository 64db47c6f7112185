//! One LLM request as measured: plain data that the LLM metrics, reports and plots read.
//!
//! The engine stores every streamed event with the time of the network read that delivered
//! it; the `profile` command parses those events afterwards, drops the ones without output
//! text (role-only chunks, usage-only chunks, `[DONE]`), counts tokens, and builds one
//! [`LlmRequest`] per request. All times are ns since the Unix epoch.

use crate::measure::{FailKind, RequestRecord, RxTime};

/// One response that carried output text (a content chunk of an SSE stream, one Triton
/// streaming response, or the whole body of a non-streaming request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Time of the read that delivered the chunk, taken before any parsing (ns since epoch).
    /// Chunks that arrived in the same read share this value exactly.
    pub arrival_ns: u64,
    /// Output tokens in the chunk's text (client tokenizer); 0 when the text did not tokenize
    /// to anything on its own.
    pub tokens: u64,
}

/// Token counts the server reported in `usage` (OpenAI's field names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// `prompt_tokens` (0 when absent).
    pub prompt_tokens: u64,
    /// `completion_tokens` (0 when absent).
    pub completion_tokens: u64,
    /// `total_tokens`, when the server sent it.
    pub total_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`, when the server sent it.
    pub reasoning_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens` (prompt tokens served from the prefix cache),
    /// when the server sent it.
    pub cached_tokens: Option<u64>,
}

/// Why a request failed, for the error count by kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestError {
    /// The [`FailKind::name`] of the failure: the engine's kind (`connect_failed`, `reset`,
    /// `closed_early`, `timeout`, `http_error`, `cancelled`, ...), `closed_early` for a
    /// stream that ended without `[DONE]` or a finish, and for a 2xx reply that carried an
    /// error: `sse_error_event` (an error event or object in the stream), `invalid_reply`
    /// (an error object as the whole reply), `not_json`, `not_protobuf`.
    pub kind: String,
    /// The detail shown to the user (server message, OS error).
    pub message: String,
    /// The HTTP status of a non-2xx reply (`http_error`), AIPerf's error `code`.
    pub code: Option<u16>,
}

impl RequestError {
    /// A failure of `kind` with `message`.
    pub fn new(kind: FailKind, message: impl Into<String>) -> RequestError {
        RequestError {
            kind: kind.name().to_string(),
            message: message.into(),
            code: None,
        }
    }

    /// The kind (`docs/faulty-servers.md`, "Failures by kind") the failure counts as in the run's tally.
    pub fn fail_kind(&self) -> FailKind {
        FailKind::from_name(&self.kind)
    }
}

/// One request of an LLM run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LlmRequest {
    /// The first request byte was written.
    pub start_ns: u64,
    /// Open loop: when the schedule meant the request to go; 0 in closed loop.
    pub intended_ns: u64,
    /// The response ended (stream closed or body complete).
    pub end_ns: u64,
    /// None for a successful request.
    pub error: Option<RequestError>,
    /// Input tokens (client tokenizer, or `usage.prompt_tokens` with
    /// `--use-server-token-count`).
    pub isl: u64,
    /// Output tokens (sum of the chunks' tokens, or `usage.completion_tokens` with
    /// `--use-server-token-count`).
    pub osl: u64,
    /// Output tokens the request asked for (`max_tokens`), when it asked.
    pub requested_osl: Option<u64>,
    /// Responses that carried output text, in arrival order. Empty for embeddings and
    /// rankings, and for failed requests that got no text.
    pub chunks: Vec<Chunk>,
    /// What the server said in `usage`, when it said it.
    pub usage: Option<Usage>,
    /// Index of the model the request went to (`-m` order), for multi-model runs.
    pub model: u32,
    /// Output tokens that were reasoning (`reasoning_content`); part of `osl`, as AIPerf
    /// counts them.
    pub reasoning_tokens: u64,
    /// Arrival of the first chunk that carried answer text (not only reasoning); `None`
    /// when none did.
    pub first_output_ns: Option<u64>,
    /// The client tokenizer's own (ISL, OSL) when `isl`/`osl` hold the server's `usage`
    /// counts (`--use-server-token-count`); the token-count checks compare the two.
    pub client_counts: Option<(u64, u64)>,
    /// HTTP/1.1 runs: the request's HTTP phase times and counts (`http_req_*` metrics).
    pub http: Option<crate::measure::HttpTrace>,
    /// Images the request carried (synthetic `--image-*` inputs).
    pub images: u32,
    /// Seconds of audio the request carried, in µs (synthetic `--audio-*` inputs).
    pub audio_us: u64,
    /// How the engine timed the response's end: by the kernel's receive stamp of the read
    /// that completed it, or by the clock (no stamp); `NotStamped` when none was asked for.
    pub rx: RxTime,
    /// The client's own receive delay (µs): the longest any read of the response waited in
    /// the socket for the worker, from the kernel's receive stamp to the read (the chunk
    /// times leave it out). 0 unless `rx` is [`RxTime::Kernel`].
    pub rx_delay_us: u32,
}

impl LlmRequest {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// The client's receive delay in ns, when the response was timed by a kernel stamp.
    pub fn client_delay_ns(&self) -> Option<u64> {
        (self.rx == RxTime::Kernel).then_some(u64::from(self.rx_delay_us) * 1000)
    }
}

/// Copies each engine record's receive timing (how its end was timed and the client's own
/// delay) onto its request; `requests` are the records' conversions, in the same order.
pub fn copy_receive_timing(requests: &mut [LlmRequest], records: &[RequestRecord]) {
    for (r, rec) in requests.iter_mut().zip(records) {
        r.rx = rec.rx;
        r.rx_delay_us = rec.rx_delay_us;
    }
}
