//! Help headings, the honest notes printed after `--help`, and the table of perf_analyzer flags
//! that inferperf recognises but does not implement (empty: every flag is implemented).

/// Help headings, in the order of perf_analyzer's CLI reference
/// (<https://github.com/triton-inference-server/perf_analyzer/blob/main/docs/cli.md>).
pub const GENERAL: &str = "General";
pub const LOAD: &str = "Load";
pub const MEASUREMENT: &str = "Measurement";
pub const INPUT: &str = "Input";
pub const TRANSPORT: &str = "Transport";
pub const REPORTS: &str = "Reports";
pub const PLANNED: &str = "Not supported yet (recognised, rejected with an error)";

/// Usage lines shown at the top of `--help`: perf_analyzer mode, then the subcommands.
pub const USAGE: &str = "inferperf -m <MODEL> [OPTIONS]
       inferperf serve | demo | profile | compare [OPTIONS]  (each with --help)
       inferperf completions bash|zsh|fish | man [--out-dir DIR]";

/// Text before the option list.
pub const ABOUT: &str = "Load generator and profiler for inference servers: a drop-in for \
Triton's perf_analyzer (same flags, console report, CSV, profile export and exit codes).";

/// Where inferperf deliberately differs from perf_analyzer; printed after the option list.
pub const NOTES: &str = "\
Notes (where inferperf differs from perf_analyzer):
  1. -p/--measurement-interval: a time window lasts exactly the interval. perf_analyzer
     actually sleeps 1.2x the interval, so its windows are 20% longer than asked.
  2. --request-count: throughput uses the time from the first send to the last response.
     perf_analyzer's clamp to that span is dead code, so its window is rounded up to whole
     seconds and its throughput is understated.
  3. --sync/--async select the stability rule (latency and throughput vs throughput only) and
     the settings banner; the engine is event-driven in both. Worker threads =
     min(concurrency, --max-threads, cores), one per core, pinned to it when the server is on
     another machine (--pin / --no-pin to choose): a server on this machine shares the cores.
  4. Before measuring, inferperf waits until GET /v2/health/ready answers 200 (gRPC:
     ServerReady; 404 or UNIMPLEMENTED, i.e. no health endpoint, counts as ready), for at most
     --ready-timeout seconds (default 10, at most 86400; 0 checks once without retrying).
     A request that moves no byte for --request-idle-timeout ms (a connect that does not
     finish, likewise; default max(30 s, 10x the slowest request so far)), or that is not
     complete --request-timeout ms after its start (default max(10 min, 10x the slowest
     request so far)), fails as timed out and its connection is replaced. perf_analyzer
     waits forever.
  5. Decoupled models (-i grpc --streaming): latency runs to the last response with outputs,
     and the banner says so (perf_analyzer's says 'first response' but measures the last).
     Each point adds Response Throughput, the time to the first response and the time
     between responses; the export lists every response.
  6. TLS (https:// URLs, --ssl-grpc-use-ssl) verifies the server against the system CA
     bundle unless a CA file is given.
  7. Open-loop modes (--request-rate-range, --request-intervals, --fixed-schedule) send on
     schedule whatever is in flight (--max-inflight caps it) and report the send lag and the
     latency from the intended send time beside the usual figures. The Poisson schedule comes
     from --seed (drawn at start and printed when not given).
  8. --collect-metrics: the GPU metrics are matched by their gpu_uuid label with a real
     Prometheus parser; an unreachable metrics endpoint fails the run before any load
     (perf_analyzer fails after the first window); the default --metrics-url keeps the host
     of -u (perf_analyzer turns http://h:8000 into http:8002/metrics). Each point adds
     inferperf's own CPU use in % of one core (a CSV column with --csv-extra-columns).
  9. Limits on what a server sends, each failing its request with a message naming it: a
     response body or gRPC message above --max-response-bytes (default 64 MiB; a larger
     Content-Length fails as soon as the head arrives), more than 16 interim (1xx)
     responses, a 64 KiB head or more than 64 header fields, chunk framing more than 64 KiB
     beyond the data, HTTP/2 PING/SETTINGS floods (GOAWAY ENHANCE_YOUR_CALM).
 10. Replies are checked: an HTTP infer reply must be KServe JSON (or JSON and binary
     data), a gRPC reply a ModelInferResponse; a wrong model name, a missing output or a
     shape that contradicts its bytes fails the request (perf_analyzer counts them as
     successes). Server text reaches the terminal with control characters escaped, and
     file names made from server model names stay in the output directory.

Exit codes: 0 success, 2 first point never stabilised, 3 no valid requests, 99 other errors,
130 a second Ctrl-C (exits at once).";

/// One perf_analyzer flag that is parsed (so it is recognised and documented) but rejected.
pub struct PlannedFlag {
    /// Long name without the leading dashes.
    pub long: &'static str,
    /// `Some(name)` when the flag takes a value; `None` for a switch.
    pub value_name: Option<&'static str>,
    /// May be given more than once.
    pub repeatable: bool,
    pub help: &'static str,
}

/// perf_analyzer flags recognised but not implemented, in the order of its CLI reference
/// (empty: every perf_analyzer flag is implemented).
pub const PLANNED_FLAGS: &[PlannedFlag] = &[];

/// The error for a recognised flag (or flag value) that is not implemented.
pub fn not_supported(what: &str) -> crate::error::Error {
    crate::error::Error::usage(format!(
        "{what} is not supported yet by inferperf (planned)"
    ))
}
