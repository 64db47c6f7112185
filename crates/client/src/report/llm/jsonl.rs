//! `profile_export.jsonl`: one JSON line per request in AIPerf's record shape (`metadata`
//! with AIPerf's keys, `metrics` as `{"value", "unit"}` pairs, `error`), which `aiperf plot`
//! reads; `metadata` then adds inferperf's exact ns timestamps, each chunk's arrival offset
//! from the request start (ns), and how the response was timed with the client's own receive
//! delay (µs). Times in `metrics` are ms.

use serde_json::Value;

use super::json_text::{num, Node};
use crate::measure::llm::http::{phases, HTTP_METRICS};
use crate::measure::llm::request::{
    chunk_gaps, credit_issued_ns, last_response_ns, request_metrics,
};
use crate::measure::llm::LlmRequest;
use crate::measure::RxTime;

/// ns → ms.
const MS: f64 = 1e-6;

fn metric(value: Value, unit: &str) -> Node {
    let mut o = Node::obj();
    o.push("value", Node::Leaf(value));
    o.put("unit", unit);
    o
}

fn metadata(index: usize, r: &LlmRequest) -> Node {
    let mut md = Node::obj();
    // AIPerf's record metadata first (the keys `aiperf plot` reads), then inferperf's own.
    md.put("session_num", index as u64);
    for key in ["x_request_id", "x_correlation_id", "conversation_id"] {
        md.put(key, Value::Null);
    }
    md.put("turn_index", 0u64);
    md.put("credit_issued_ns", credit_issued_ns(r));
    md.put("request_start_ns", r.start_ns);
    md.put("request_ack_ns", r.chunks.first().map(|c| c.arrival_ns));
    // AIPerf's end is the last response's arrival (the request latency's end).
    md.put("request_end_ns", last_response_ns(r));
    md.put("worker_id", "inferperf");
    md.put("record_processor_id", "inferperf");
    md.put("benchmark_phase", "profiling");
    md.put("phase_index", 0u64);
    md.put("profiling_index", 0u64);
    md.put("phase_name", "profiling");
    md.put("phase_kind", "profiling");
    md.put(
        "was_cancelled",
        r.error.as_ref().is_some_and(|e| e.kind == "cancelled"),
    );
    md.put("context_overflow_skip", false);
    md.put("agent_depth", 0u64);
    md.put("root_correlation_id", Value::Null);
    md.put("request_index", index as u64);
    md.put("model_index", r.model);
    md.put(
        "intended_start_ns",
        (r.intended_ns != 0).then_some(r.intended_ns),
    );
    let offsets: Vec<u64> = r
        .chunks
        .iter()
        .map(|c| c.arrival_ns.saturating_sub(r.start_ns))
        .collect();
    md.put("chunk_arrival_offsets_ns", offsets);
    let tokens: Vec<u64> = r.chunks.iter().map(|c| c.tokens).collect();
    md.put("chunk_tokens", tokens);
    // How the response's end was timed, and the client's own delay in reading it (µs; not in
    // any of the times above).
    let timed_by = match r.rx {
        RxTime::Kernel => Some("kernel_stamp"),
        RxTime::Clock => Some("clock"),
        RxTime::NotStamped => None,
    };
    md.put("receive_timed_by", timed_by);
    md.put(
        "client_receive_delay_us",
        r.client_delay_ns().map(|ns| ns / 1000),
    );
    md.put("requested_output_tokens", r.requested_osl);
    match &r.usage {
        Some(u) => {
            let mut usage = Node::obj();
            usage.put("prompt_tokens", u.prompt_tokens);
            usage.put("completion_tokens", u.completion_tokens);
            usage.put("total_tokens", u.total_tokens);
            md.push("usage", usage);
        }
        None => md.put("usage", Value::Null),
    }
    md
}

fn metrics(r: &LlmRequest) -> Node {
    let mut out = Node::obj();
    let Some(m) = request_metrics(r) else {
        // AIPerf keeps only the input length of a failed request.
        out.push("error_isl", metric(r.isl.into(), "tokens"));
        return out;
    };
    let ms = |ns: u64| num(ns as f64 * MS);
    let mut put = |tag: &str, v: Option<Value>, unit: &str| {
        if let Some(v) = v {
            out.push(tag, metric(v, unit));
        }
    };
    put("input_sequence_length", Some(m.isl.into()), "tokens");
    put("output_sequence_length", Some(m.osl.into()), "tokens");
    if m.reasoning_tokens == 0 {
        put("output_token_count", Some(m.osl.into()), "tokens");
    }
    put("time_to_first_token", m.ttft_ns.map(ms), "ms");
    put("time_to_second_token", m.ttst_ns.map(ms), "ms");
    put("request_latency", Some(ms(m.e2e_ns)), "ms");
    put("inter_token_latency", m.itl_ns.map(|v| num(v * MS)), "ms");
    put(
        "output_token_throughput_per_user",
        m.tps_per_user.map(num),
        "tokens/sec/user",
    );
    put(
        "time_per_output_token_guidellm",
        m.guidellm_tpot_ns.map(|v| num(v * MS)),
        "ms",
    );
    let gaps: Vec<Value> = chunk_gaps(r).map(ms).collect();
    put(
        "inter_chunk_latency",
        (!gaps.is_empty()).then_some(Value::Array(gaps)),
        "ms",
    );
    put("chunks_per_request", Some(m.chunks.into()), "chunks");
    put(
        "same_read_event_count",
        Some(m.same_read_events.into()),
        "count",
    );
    if m.reasoning_tokens > 0 {
        put(
            "reasoning_token_count",
            Some(m.reasoning_tokens.into()),
            "tokens",
        );
        put("time_to_first_output_token", m.ttfo_ns.map(ms), "ms");
    } else {
        put("time_to_first_output_token", m.ttft_ns.map(ms), "ms");
    }
    if let Some(u) = &r.usage {
        put(
            "usage_prompt_tokens",
            Some(u.prompt_tokens.into()),
            "tokens",
        );
        put(
            "usage_completion_tokens",
            Some(u.completion_tokens.into()),
            "tokens",
        );
        put(
            "usage_total_tokens",
            u.total_tokens.map(Value::from),
            "tokens",
        );
        put(
            "usage_reasoning_tokens",
            u.reasoning_tokens.map(Value::from),
            "tokens",
        );
        put(
            "usage_prompt_cache_read_tokens",
            u.cached_tokens.map(Value::from),
            "tokens",
        );
    }
    put(
        "usage_prompt_tokens_diff_pct",
        m.usage_prompt_diff_pct.map(num),
        "%",
    );
    put(
        "usage_completion_tokens_diff_pct",
        m.usage_completion_diff_pct.map(num),
        "%",
    );
    put(
        "usage_reasoning_tokens_diff_pct",
        m.usage_reasoning_diff_pct.map(num),
        "%",
    );
    put(
        "e2e_output_token_throughput",
        m.e2e_output_tps.map(num),
        "tokens/sec/user",
    );
    put(
        "prefill_throughput_per_user",
        m.prefill_tps_per_user.map(num),
        "tokens/sec/user",
    );
    put("decode_duration", m.decode_ns.map(ms), "ms");
    put(
        "osl_mismatch_diff_pct",
        m.osl_mismatch_diff_pct.map(num),
        "%",
    );
    put(
        "time_to_first_token_from_intended",
        m.ttft_from_intended_ns.map(ms),
        "ms",
    );
    put(
        "request_latency_from_intended",
        m.e2e_from_intended_ns.map(ms),
        "ms",
    );
    let [images, image_tput, image_lat, audio, rtfx] = crate::measure::llm::media::request_media(r);
    put("num_images", images.map(num), "images");
    put("image_throughput", image_tput.map(num), "images/sec");
    put("image_latency", image_lat.map(|v| num(v * MS)), "ms/image");
    put("audio_duration", audio.map(num), "sec");
    put("rtfx", rtfx.map(num), "ratio");
    if let Some(p) = phases(r) {
        for h in &HTTP_METRICS {
            let v = (h.value)(&p);
            let value = match h.unit {
                "count" | "ratio" => v.into(),
                _ => num(v as f64 * h.factor),
            };
            out.push(h.tag, metric(value, h.unit));
        }
    }
    out
}

/// `--export-http-trace`: the request's trace in the field names of AIPerf's aiohttp
/// `trace_data` (times in ns since the Unix epoch), with the TLS handshake's times added;
/// per-chunk lists and headers are not recorded (empty and null).
fn trace_data(r: &LlmRequest) -> Node {
    let Some(t) = &r.http else {
        return Node::Leaf(Value::Null);
    };
    let at = |ns: u64| (ns != 0).then_some(ns);
    let p = t.phases();
    let mut o = Node::obj();
    o.put("trace_type", "aiohttp");
    o.put("request_send_start_ns", at(t.send_start_ns));
    o.put("request_headers", Value::Null);
    o.put("request_headers_sent_ns", Value::Null);
    o.put("request_chunks", Value::Array(Vec::new()));
    o.put("request_send_end_ns", at(t.send_end_ns));
    o.put("request_chunks_count", t.writes);
    o.put("request_bytes_total", t.bytes_sent);
    o.put(
        "response_status_code",
        r.error.as_ref().and_then(|e| e.code),
    );
    o.put("response_reason", Value::Null);
    o.put("response_receive_start_ns", at(t.recv_start_ns));
    o.put("response_headers", Value::Null);
    o.put("response_headers_received_ns", Value::Null);
    o.put("response_chunks", Value::Array(Vec::new()));
    o.put("response_chunks_count", t.reads);
    o.put("response_bytes_total", t.bytes_received);
    o.put("response_receive_end_ns", at(t.recv_end_ns));
    o.put("error_timestamp_ns", Value::Null);
    o.put("sending_ns", p.map(|p| p.sending_ns));
    o.put("waiting_ns", p.map(|p| p.waiting_ns));
    o.put("receiving_ns", p.map(|p| p.receiving_ns));
    o.put("duration_ns", p.map(|p| p.duration_ns));
    let due = at(t.due_ns);
    o.put("connection_pool_wait_start_ns", due);
    o.put(
        "connection_pool_wait_end_ns",
        due.zip(p).map(|(d, p)| d + p.blocked_ns),
    );
    let fresh = !t.reused;
    o.put(
        "tcp_connect_start_ns",
        at(t.connect_start_ns).filter(|_| fresh),
    );
    o.put("tcp_connect_end_ns", at(t.connected_ns()).filter(|_| fresh));
    o.put(
        "tls_handshake_start_ns",
        at(t.tls_start_ns).filter(|_| fresh),
    );
    o.put("tls_handshake_end_ns", at(t.tls_end_ns).filter(|_| fresh));
    o.put(
        "connection_reused_ns",
        at(t.send_start_ns).filter(|_| t.reused),
    );
    for key in [
        "dns_cache_hit_ns",
        "dns_cache_miss_ns",
        "dns_lookup_start_ns",
        "dns_lookup_end_ns",
        "local_ip",
        "local_port",
        "remote_ip",
        "remote_port",
    ] {
        o.put(key, Value::Null);
    }
    o.put("blocked_ns", p.map(|p| p.blocked_ns));
    o.put("dns_lookup_ns", Value::Null);
    o.put("connecting_ns", p.map(|p| p.connecting_ns));
    o
}

fn error(r: &LlmRequest) -> Node {
    let Some(e) = &r.error else {
        return Node::Leaf(Value::Null);
    };
    super::error_details(e)
}

/// All requests, one compact JSON object per line, in the given order.
pub fn records(reqs: &[LlmRequest]) -> String {
    records_with(reqs, false)
}

/// `records`, each line with its `trace_data` (AIPerf's `--export-http-trace`) when
/// `http_trace`.
pub fn records_with(reqs: &[LlmRequest], http_trace: bool) -> String {
    let mut out = String::new();
    for (i, r) in reqs.iter().enumerate() {
        let mut line = Node::obj();
        line.push("metadata", metadata(i, r));
        line.push("metrics", metrics(r));
        if http_trace {
            line.push("trace_data", trace_data(r));
        }
        line.push("error", error(r));
        out.push_str(&line.compact());
        out.push('\n');
    }
    out
}
