//! The metric dictionary: what every printed LLM figure means, its unit and direction, and
//! what vLLM bench, GenAI-Perf, AIPerf and GuideLLM call the same quantity. One table feeds
//! `profile --help-metrics`, `docs/llm-guide.md` and the console's tool-name line, so they agree.

/// Which way is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Times: smaller is better (goodput: value ≤ limit).
    Lower,
    /// Throughputs: larger is better (goodput: value ≥ limit).
    Higher,
    /// Counts and lengths: neither.
    Neutral,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::Neutral => "-",
        }
    }
}

/// One metric. Tool columns hold that tool's name for the same quantity, or "-".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    /// The key in `profile_export_genai_perf.json` (GenAI-Perf's where it has one).
    pub tag: &'static str,
    /// The console row name.
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
    /// One-line formula.
    pub definition: &'static str,
    pub vllm: &'static str,
    pub genai_perf: &'static str,
    pub aiperf: &'static str,
    pub guidellm: &'static str,
}

const fn def(
    tag: &'static str,
    name: &'static str,
    unit: &'static str,
    direction: Direction,
    definition: &'static str,
    names: [&'static str; 4],
) -> MetricDef {
    MetricDef {
        tag,
        name,
        unit,
        direction,
        definition,
        vllm: names[0],
        genai_perf: names[1],
        aiperf: names[2],
        guidellm: names[3],
    }
}

use Direction::{Higher, Lower, Neutral};

/// Every LLM metric reported. Per-request times are taken from the arrival time of the
/// network read that delivered each content chunk (ns), before any parsing.
#[rustfmt::skip]
pub const METRICS: &[MetricDef] = &[
    def("time_to_first_token", "Time To First Token", "ms", Lower,
        "first content chunk - request start",
        ["TTFT", "Time To First Token", "time_to_first_token", "time_to_first_token_ms"]),
    def("time_to_second_token", "Time To Second Token", "ms", Lower,
        "second content chunk - first content chunk (chunks, not tokens)",
        ["-", "Time To Second Token", "time_to_second_token", "-"]),
    def("request_latency", "Request Latency", "ms", Lower,
        "last content chunk - request start (no chunks, e.g. embeddings: response end - start)",
        ["E2EL", "Request Latency", "request_latency", "request_latency"]),
    def("inter_token_latency", "Inter Token Latency", "ms", Lower,
        "(request latency - TTFT) / (OSL - 1), per request; needs >= 2 chunks and OSL > 1",
        ["TPOT", "Inter Token Latency", "inter_token_latency", "inter_token_latency_ms"]),
    def("output_token_throughput_per_user", "Output Token Throughput Per User",
        "tokens/sec/user", Higher,
        "(OSL - 1) / (request latency - TTFT) = 1 / ITL, per request",
        ["- (1000/TPOT)", "Output Token Throughput Per User",
         "output_token_throughput_per_user", "-"]),
    def("output_sequence_length", "Output Sequence Length", "tokens", Neutral,
        "output tokens of a request (client tokenizer, or usage with --use-server-token-count)",
        ["output_lens", "Output Sequence Length", "output_sequence_length", "output tokens"]),
    def("input_sequence_length", "Input Sequence Length", "tokens", Neutral,
        "input tokens of a request (client tokenizer, or usage with --use-server-token-count)",
        ["input_lens", "Input Sequence Length", "input_sequence_length", "prompt tokens"]),
    def("inter_chunk_latency", "Per-Chunk Gap", "ms", Lower,
        "gap between consecutive content chunks, all gaps of all requests pooled",
        ["ITL", "- (plot only)", "inter_chunk_latency", "-"]),
    def("inter_token_gap", "Per-Token Gap", "ms", Lower,
        "each chunk gap divided by that chunk's tokens, one value per token, pooled",
        ["-", "- (plot only)", "-", "-"]),
    def("time_per_output_token_guidellm", "GuideLLM TPOT", "ms", Lower,
        "(last content chunk - request start) / OSL, per request (TTFT included)",
        ["-", "-", "-", "time_per_output_token_ms"]),
    def("chunks_per_request", "Chunks Per Request", "chunks", Neutral,
        "responses carrying output text in one request",
        ["-", "-", "-", "-"]),
    def("client_receive_delay", "Client Receive Delay", "ms", Lower,
        "per request, the longest a read of its response waited in the socket for the client \
         (kernel receive stamp to the read); no latency includes it",
        ["-", "-", "-", "-"]),
    def("time_to_first_output_token", "Time To First Output Token", "ms", Lower,
        "first chunk with answer text (not only reasoning_content) - request start; shown when \
         the server sent reasoning",
        ["-", "-", "time_to_first_output_token", "-"]),
    def("reasoning_token_count", "Reasoning Token Count", "tokens", Neutral,
        "tokens of a request's reasoning_content (client tokenizer); they are part of OSL",
        ["-", "-", "reasoning_token_count", "-"]),
    def("num_images", "Number of Images", "images", Neutral,
        "images a chat request carried; requests without images give no value",
        ["-", "-", "num_images", "-"]),
    def("image_throughput", "Image Throughput", "images/sec", Higher,
        "images of a request / its request latency, per request with images",
        ["-", "-", "image_throughput", "-"]),
    def("image_latency", "Image Latency", "ms/image", Lower,
        "request latency / images of the request, per request with images",
        ["-", "-", "image_latency", "-"]),
    def("audio_duration", "Audio Duration", "sec", Neutral,
        "seconds of input audio a chat request carried; requests without audio give no value",
        ["-", "-", "audio_duration", "-"]),
    def("rtfx", "Inverse Real-Time Factor (RTFx)", "ratio", Higher,
        "input audio seconds / request latency seconds, per request with audio",
        ["-", "-", "rtfx", "-"]),
    def("time_to_first_token_from_intended", "TTFT From Intended Send", "ms", Lower,
        "open loop: first content chunk - scheduled send time (queueing in the client counts)",
        ["-", "-", "-", "-"]),
    def("request_latency_from_intended", "Request Latency From Intended Send", "ms", Lower,
        "open loop: last content chunk - scheduled send time",
        ["-", "-", "-", "-"]),
    def("same_read_event_count", "Same-Read Events", "count", Neutral,
        "content chunks that arrived in the same network read as the previous chunk",
        ["-", "-", "-", "-"]),
    def("e2e_output_token_throughput", "E2E Output Token Throughput", "tokens/sec/user",
        Higher, "OSL / request latency, per request (TTFT included)",
        ["-", "-", "e2e_output_token_throughput", "-"]),
    def("prefill_throughput_per_user", "Prefill Throughput Per User", "tokens/sec/user",
        Higher, "ISL / TTFT, per request",
        ["-", "-", "prefill_throughput_per_user", "-"]),
    def("decode_duration", "Decode Duration", "ms", Lower,
        "request latency - TTFT, per request",
        ["-", "-", "decode_duration", "-"]),
    def("credit_to_start_latency", "Credit-to-Start Latency", "ms", Lower,
        "request start - credit issued, every request (failed too); the credit is the \
         scheduled send time in open loop, and in closed loop the moment the worker takes the \
         request, which is when it starts writing it (so 0)",
        ["-", "-", "credit_to_start_latency", "-"]),
    def("effective_latency", "Effective Latency (CO-aware)", "ms", Lower,
        "last response - credit issued, every request (failed too): request latency plus \
         credit-to-start latency",
        ["-", "-", "effective_latency", "-"]),
    def("usage_prompt_tokens", "Usage Prompt Tokens", "tokens", Neutral,
        "usage.prompt_tokens the server reported, per request that carried usage",
        ["-", "-", "usage_prompt_tokens", "-"]),
    def("usage_completion_tokens", "Usage Completion Tokens", "tokens", Neutral,
        "usage.completion_tokens the server reported, per request",
        ["-", "-", "usage_completion_tokens", "-"]),
    def("usage_total_tokens", "Usage Total Tokens", "tokens", Neutral,
        "usage.total_tokens the server reported, per request",
        ["-", "-", "usage_total_tokens", "-"]),
    def("usage_reasoning_tokens", "Usage Reasoning Tokens", "tokens", Neutral,
        "usage.completion_tokens_details.reasoning_tokens, per request that carried it",
        ["-", "-", "usage_reasoning_tokens", "-"]),
    def("usage_prompt_cache_read_tokens", "Usage Prompt Cache Read Tokens", "tokens",
        Neutral, "usage.prompt_tokens_details.cached_tokens, per request that carried it",
        ["-", "-", "usage_prompt_cache_read_tokens", "-"]),
    def("total_usage_prompt_tokens", "Total Usage Prompt Tokens", "tokens", Neutral,
        "sum of usage_prompt_tokens (likewise total_usage_completion_tokens, \
         total_usage_total_tokens, total_usage_reasoning_tokens, \
         total_usage_prompt_cache_read_tokens)",
        ["-", "-", "total_usage_prompt_tokens", "-"]),
    def("usage_prompt_tokens_diff_pct", "Usage Prompt Diff %", "%", Neutral,
        "|usage.prompt_tokens - ISL| / ISL * 100 (client tokenizer ISL), per request",
        ["-", "-", "usage_prompt_tokens_diff_pct", "-"]),
    def("usage_completion_tokens_diff_pct", "Usage Completion Diff %", "%", Neutral,
        "|usage.completion_tokens - OSL| / OSL * 100 (client tokenizer OSL), per request",
        ["-", "-", "usage_completion_tokens_diff_pct", "-"]),
    def("usage_reasoning_tokens_diff_pct", "Usage Reasoning Diff %", "%", Neutral,
        "|usage reasoning tokens - reasoning_token_count| / reasoning_token_count * 100",
        ["-", "-", "usage_reasoning_tokens_diff_pct", "-"]),
    def("osl_mismatch_diff_pct", "OSL Mismatch Diff %", "%", Neutral,
        "(OSL - max_tokens asked) / max_tokens asked * 100, signed, per request that asked",
        ["-", "-", "osl_mismatch_diff_pct", "-"]),
    def("output_token_throughput", "Output Token Throughput", "tokens/sec", Higher,
        "sum of OSL / benchmark duration",
        ["output_throughput", "Output Token Throughput", "output_token_throughput",
         "output tok/s"]),
    def("total_token_throughput", "Total Token Throughput", "tokens/sec", Higher,
        "sum of (ISL + OSL) / benchmark duration",
        ["total_token_throughput", "-", "total_token_throughput", "total tok/s"]),
    def("input_token_throughput", "Input Token Throughput", "tokens/sec", Higher,
        "sum of ISL / benchmark duration",
        ["-", "-", "input_token_throughput", "-"]),
    def("request_throughput", "Request Throughput", "requests/sec", Higher,
        "successful requests / benchmark duration",
        ["request_throughput", "Request Throughput", "request_throughput", "request rate"]),
    def("request_goodput", "Request Goodput", "requests/sec", Higher,
        "requests meeting every --goodput limit / benchmark duration",
        ["request_goodput", "Request Goodput", "goodput", "-"]),
    def("good_request_fraction", "Good Request Fraction", "fraction", Higher,
        "requests meeting every --goodput limit / (successful + failed requests)",
        ["-", "-", "good_request_fraction", "-"]),
    def("request_count", "Request Count", "count", Neutral,
        "successful requests",
        ["completed", "Request Count", "request_count", "-"]),
    def("error_request_count", "Error Count", "count", Neutral,
        "failed requests (also counted by error kind)",
        ["failed", "-", "error_request_count", "-"]),
    def("context_overflow_count", "Context Overflow Count", "count", Neutral,
        "failed requests whose error message names a context overflow (\"context length\", \
         \"maximum context\", \"context_length_exceeded\", \"prompt is too long\"); \
         written when a request failed",
        ["-", "-", "context_overflow_count", "-"]),
    def("usage_discrepancy_count", "Usage Discrepancy Count", "count", Neutral,
        "requests whose usage prompt, completion or (when reported) reasoning tokens differ \
         from the client's counts by more than 10%",
        ["-", "-", "usage_discrepancy_count", "-"]),
    def("osl_mismatch_count", "OSL Mismatch Count", "count", Neutral,
        "requests whose OSL differs from the max_tokens asked by more than min(5% of it, 50)",
        ["-", "-", "osl_mismatch_count", "-"]),
    def("benchmark_duration", "Benchmark Duration", "sec", Neutral,
        "latest response - earliest request start, over all requests",
        ["duration", "-", "benchmark_duration", "-"]),
    // HTTP/1.1 phases (k6's names, as AIPerf exports them), from the engine's event loop.
    def("http_req_blocked", "HTTP Blocked", "ms", Lower,
        "waiting for a connection: from when the request was due (its scheduled time in open \
         loop, else when its slot took it) to when a connection was taken or began opening for it",
        ["-", "-", "http_req_blocked", "-"]),
    def("http_req_dns_lookup", "HTTP DNS Lookup", "ms", Lower,
        "always 0: the server address is resolved once, before the run",
        ["-", "-", "http_req_dns_lookup", "-"]),
    def("http_req_connecting", "HTTP Connecting", "ms", Lower,
        "TCP connect + TLS handshake of the connection, on the first request it carries (a \
         closed loop opens its connections before the run); 0 on a reused connection",
        ["-", "-", "http_req_connecting", "-"]),
    def("http_req_sending", "HTTP Sending", "ms", Lower,
        "last request byte written - first request byte written",
        ["-", "-", "http_req_sending", "-"]),
    def("http_req_waiting", "HTTP Waiting (TTFB)", "ms", Lower,
        "first response byte read (head included) - last request byte written",
        ["-", "-", "http_req_waiting", "-"]),
    def("http_req_receiving", "HTTP Receiving", "ms", Lower,
        "last response byte read - first response byte read; 0 when one read brought it all",
        ["-", "-", "http_req_receiving", "-"]),
    def("http_req_connection_reused", "HTTP Connection Reused", "ratio", Neutral,
        "1 when the connection had carried a request before, else 0",
        ["-", "-", "http_req_connection_reused", "-"]),
    def("http_req_data_sent", "HTTP Data Sent", "KB", Neutral,
        "request bytes written, head and body (plaintext under TLS), / 1024",
        ["-", "-", "http_req_data_sent", "-"]),
    def("http_req_chunks_sent", "HTTP Chunks Sent", "count", Neutral,
        "socket writes that carried request bytes",
        ["-", "-", "http_req_chunks_sent", "-"]),
    def("http_req_data_received", "HTTP Data Received", "KB", Neutral,
        "response bytes read, head and body (plaintext under TLS), / 1024",
        ["-", "-", "http_req_data_received", "-"]),
    def("http_req_chunks_received", "HTTP Chunks Received", "count", Neutral,
        "socket reads that returned response bytes",
        ["-", "-", "http_req_chunks_received", "-"]),
    def("http_req_connection_overhead", "HTTP Connection Overhead", "ms", Lower,
        "blocked + dns_lookup + connecting",
        ["-", "-", "http_req_connection_overhead", "-"]),
    def("http_req_duration", "HTTP Duration (excl. conn)", "ms", Lower,
        "sending + waiting + receiving",
        ["-", "-", "http_req_duration", "-"]),
    def("http_req_total", "HTTP Total Time", "ms", Lower,
        "blocked + dns_lookup + connecting + sending + waiting + receiving",
        ["-", "-", "http_req_total", "-"]),
    def("effective_concurrency", "Effective Concurrency", "requests", Neutral,
        "time-weighted requests in flight (start to end, failed ones too) over the run window",
        ["-", "-", "effective_concurrency", "-"]),
    def("effective_prefill_concurrency", "Effective Prefill Concurrency", "requests", Neutral,
        "time-weighted requests between start and first content chunk, over the run window",
        ["-", "-", "effective_prefill_concurrency", "-"]),
    def("effective_decode_concurrency", "Effective Decode Concurrency", "requests", Neutral,
        "time-weighted requests between first content chunk and end, over the run window",
        ["-", "-", "effective_decode_concurrency", "-"]),
    def("effective_prefill_throughput", "Effective Prefill Throughput", "tokens/sec", Higher,
        "time-weighted sum of ISL / (first chunk - start) over each request's prefill, over \
         the run window",
        ["-", "-", "effective_prefill_throughput", "-"]),
    def("effective_decode_throughput", "Effective Decode Throughput", "tokens/sec", Higher,
        "time-weighted sum of decode rates: each non-zero chunk gap carries (OSL - 1) / \
         (non-zero gaps) tokens evenly; over the run window",
        ["-", "-", "effective_decode_throughput", "-"]),
    def("effective_total_throughput", "Effective Total Throughput", "tokens/sec", Higher,
        "time-weighted prefill rate + (OSL - 1) / (end - first chunk) over each decode, over \
         the run window",
        ["-", "-", "effective_total_throughput", "-"]),
    def("effective_prefill_throughput_per_user", "Effective Prefill Throughput Per User",
        "tokens/sec/user", Higher,
        "prefill throughput / prefill concurrency at each instant (0 when none), time-weighted \
         over the run window",
        ["-", "-", "effective_prefill_throughput_per_user", "-"]),
    def("effective_decode_throughput_per_user", "Effective Decode Throughput Per User",
        "tokens/sec/user", Higher,
        "decode throughput / decode concurrency at each instant (0 when none), time-weighted \
         over the run window",
        ["-", "-", "effective_decode_throughput_per_user", "-"]),
    def("tokens_in_flight", "Tokens In Flight", "tokens", Neutral,
        "time-weighted ISL from start, plus 1 token at the first chunk and (OSL - 1) / gaps at \
         each later chunk, until end",
        ["-", "-", "tokens_in_flight", "-"]),
    def("active_prefill_throughput", "Active Prefill Throughput", "tokens/sec", Higher,
        "effective prefill throughput weighted only over times with a request in prefill",
        ["-", "-", "active_prefill_throughput", "-"]),
    def("active_decode_throughput", "Active Decode Throughput", "tokens/sec", Higher,
        "effective decode throughput weighted only over times with a request in decode",
        ["-", "-", "active_decode_throughput", "-"]),
    def("active_total_throughput", "Active Total Throughput", "tokens/sec", Higher,
        "effective total throughput weighted only over times with a request in flight",
        ["-", "-", "active_total_throughput", "-"]),
    def("active_prefill_throughput_per_user", "Active Prefill Throughput Per User",
        "tokens/sec/user", Higher,
        "prefill throughput per user weighted only over times with a request in prefill",
        ["-", "-", "active_prefill_throughput_per_user", "-"]),
    def("active_decode_throughput_per_user", "Active Decode Throughput Per User",
        "tokens/sec/user", Higher,
        "decode throughput per user weighted only over times with a request in decode",
        ["-", "-", "active_decode_throughput_per_user", "-"]),
];

/// How the statistics columns are computed (said once, under the table).
pub const STATISTICS_NOTE: &str =
    "avg, min, max, std (population, numpy's ddof=0) and p1..p99 are exact, over every value \
(one per request; for the per-chunk gap one per chunk gap of every request): pN interpolates \
linearly between the two closest ranks, as numpy's default percentile does in AIPerf and \
GenAI-Perf (rank N/100 x (count-1) of the sorted values; p25 of 1,2,3,4 is 1.75). The \
time-weighted metrics (effective_*, active_*, tokens_in_flight) are step functions of time over \
the run window (first send to last reply): avg and std weighted by duration, pN the smallest \
value held at least N% of the time; they have no count, sum or p1..p25/p75.";

/// The entry for `tag`.
pub fn find(tag: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|d| d.tag == tag)
}

/// Plain-text dictionary for `profile --help-metrics`.
pub fn definitions_text() -> String {
    let mut out = String::from("LLM metrics (tag: name [unit, better]):\n\n");
    for d in METRICS {
        out.push_str(&format!(
            "{}: {} [{}, {}]\n    {}\n    vLLM: {}; GenAI-Perf: {}; AIPerf: {}; GuideLLM: {}\n",
            d.tag,
            d.name,
            d.unit,
            d.direction.label(),
            d.definition,
            d.vllm,
            d.genai_perf,
            d.aiperf,
            d.guidellm
        ));
    }
    out.push_str("\nStatistics: ");
    out.push_str(STATISTICS_NOTE);
    out.push('\n');
    out
}

/// The same dictionary as a Markdown table for `docs/llm-guide.md`.
pub fn definitions_markdown() -> String {
    let mut out = String::from(
        "| tag | name | unit | better | definition | vLLM | GenAI-Perf | AIPerf | GuideLLM |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for d in METRICS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            d.tag,
            d.name,
            d.unit,
            d.direction.label(),
            d.definition.replace('|', "\\|"),
            d.vllm,
            d.genai_perf,
            d.aiperf,
            d.guidellm
        ));
    }
    out.push_str("\nStatistics: ");
    out.push_str(STATISTICS_NOTE);
    out.push('\n');
    out
}

/// The console's one-line map from other tools' names to inferperf's rows (the quantities whose
/// names clash between tools).
pub fn tool_name_mapping() -> String {
    let name = |tag: &str| find(tag).map_or("?", |d| d.name);
    format!(
        "Tool names: vLLM TPOT = GuideLLM ITL = {itl}; vLLM ITL = AIPerf ICL = {gap}; \
         GuideLLM TPOT = {tpot} (TTFT included)",
        itl = name("inter_token_latency"),
        gap = name("inter_chunk_latency"),
        tpot = name("time_per_output_token_guidellm"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_unique_and_complete() {
        for (i, d) in METRICS.iter().enumerate() {
            assert!(
                METRICS[i + 1..].iter().all(|o| o.tag != d.tag),
                "duplicate {}",
                d.tag
            );
            assert!(!d.definition.is_empty() && !d.unit.is_empty(), "{}", d.tag);
        }
        for tag in [
            "time_to_first_token",
            "time_to_second_token",
            "request_latency",
            "inter_token_latency",
            "output_token_throughput_per_user",
            "output_sequence_length",
            "input_sequence_length",
            "output_token_throughput",
            "request_throughput",
            "request_goodput",
        ] {
            assert!(find(tag).is_some(), "{tag}");
        }
        // Every time-weighted metric, with AIPerf's unit and name.
        for s in crate::measure::llm::sweeps::SWEEP_METRICS {
            let d = find(s.tag).unwrap_or_else(|| panic!("{}", s.tag));
            assert_eq!((d.unit, d.name, d.aiperf), (s.unit, s.header, s.tag));
        }
    }

    #[test]
    fn goodput_directions_match_the_table() {
        use crate::measure::llm::goodput::SloMetric as S;
        for m in [
            S::TimeToFirstToken,
            S::TimeToSecondToken,
            S::InterTokenLatency,
            S::RequestLatency,
            S::OutputTokenThroughputPerUser,
        ] {
            let d = find(m.tag()).unwrap();
            let want = if m.higher_is_better() { Higher } else { Lower };
            assert_eq!(d.direction, want, "{}", m.tag());
            assert_eq!(d.unit, m.unit(), "{}", m.tag());
        }
    }

    #[test]
    fn text_markdown_and_mapping_name_every_metric() {
        let text = definitions_text();
        let md = definitions_markdown();
        for d in METRICS {
            assert!(text.contains(d.tag) && md.contains(d.tag), "{}", d.tag);
        }
        assert!(text.contains("interpolates linearly between the two closest ranks"));
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| `")).count(),
            METRICS.len()
        );
        assert_eq!(
            tool_name_mapping(),
            "Tool names: vLLM TPOT = GuideLLM ITL = Inter Token Latency; vLLM ITL = AIPerf ICL \
             = Per-Chunk Gap; GuideLLM TPOT = GuideLLM TPOT (TTFT included)"
        );
    }
}
