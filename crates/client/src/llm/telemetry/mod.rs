//! Server and GPU telemetry during `profile`: Prometheus endpoints (Triton, vLLM, the DCGM
//! exporter) scraped before, during and after each load point, summarised beside the LLM
//! metrics (console table, a `telemetry` section in the summary JSON, an HTML table).
//!
//! Each endpoint has its own thread: the first scrape happens before the point starts, then
//! one every `--server-metrics-interval` ms, and a last one after the point ends. The load
//! workers never wait for it. An endpoint that cannot be scraped is named in one warning per
//! run and left out; the run goes on. Memory is bounded per endpoint (series and points).
//! The scrape itself and the parser are the `--collect-metrics` ones
//! (`run::metrics::fetch_exposition`, `protocol::prometheus`).

pub mod catalog;
pub mod render;
pub mod series;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::ArgAction;
use crossbeam_channel::{bounded, RecvTimeoutError, Sender};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::protocol::http1::blocking::BlockingClient;
use crate::run::metrics::fetch_exposition;
pub use render::Report;
use series::Store;

/// Default scrape period (ms): AIPerf's and GenAI-Perf's 0.333 s.
pub const DEFAULT_INTERVAL_MS: u64 = 333;
/// Where AIPerf looks for DCGM exporters when `--gpu-telemetry` names none.
pub const DEFAULT_DCGM_URLS: [&str; 2] = ["localhost:9400/metrics", "localhost:9401/metrics"];
/// Connect / read timeout of one scrape.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// The telemetry flags of `inferperf profile`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TelemetryArgs {
    /// Prometheus endpoint to scrape during each profile (Triton, vLLM or a DCGM exporter),
    /// `[http://]host[:port][/path]` (path `/metrics` when none is given); several values or
    /// the flag repeated. GenAI-Perf's `--server-metrics-url(s)`, AIPerf's `--server-metrics`.
    #[arg(
        long = "server-metrics-url",
        visible_aliases = ["server-metrics-urls", "server-metrics"],
        num_args = 1..,
        action = ArgAction::Append,
        value_name = "URL"
    )]
    pub server_metrics_url: Vec<String>,
    /// AIPerf's GPU telemetry: DCGM exporter URLs to scrape as well; given alone,
    /// localhost:9400 and localhost:9401. `dashboard` is accepted (the summary table is
    /// printed); `pynvml`, `amdsmi` and metrics CSV files are refused.
    #[arg(long, num_args = 0.., action = ArgAction::Append, value_name = "URL")]
    pub gpu_telemetry: Option<Vec<String>>,
    /// Scrape no server metrics endpoint (the default unless one is given).
    #[arg(long)]
    pub no_server_metrics: bool,
    /// Scrape no DCGM exporter (the default unless `--gpu-telemetry` is given).
    #[arg(long)]
    pub no_gpu_telemetry: bool,
    /// Milliseconds between scrapes of each endpoint.
    #[arg(long, default_value_t = DEFAULT_INTERVAL_MS, value_name = "MS")]
    pub server_metrics_interval: u64,
}

/// One endpoint to scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// As the user wrote it, for messages and reports.
    pub url: String,
    /// `host:port`.
    pub address: String,
    /// `/path`.
    pub path: String,
}

/// The validated telemetry settings of a run, with its warnings given once per run.
#[derive(Debug)]
pub struct Telemetry {
    pub endpoints: Vec<Endpoint>,
    pub interval: Duration,
    warned: Vec<AtomicBool>,
}

impl Telemetry {
    /// The run's telemetry, or `None` when no endpoint is asked for. Flag errors are usage
    /// errors naming the flag.
    pub fn from_args(args: &TelemetryArgs) -> Result<Option<Arc<Telemetry>>> {
        if args.no_server_metrics && !args.server_metrics_url.is_empty() {
            return Err(Error::usage(
                "--no-server-metrics cannot be combined with --server-metrics-url",
            ));
        }
        if args.no_gpu_telemetry && args.gpu_telemetry.is_some() {
            return Err(Error::usage(
                "--no-gpu-telemetry cannot be combined with --gpu-telemetry",
            ));
        }
        if args.server_metrics_interval == 0 || args.server_metrics_interval > 3_600_000 {
            return Err(Error::usage(format!(
                "--server-metrics-interval must be 1..3600000 ms (got {})",
                args.server_metrics_interval
            )));
        }
        let mut raw: Vec<(&str, String)> = args
            .server_metrics_url
            .iter()
            .map(|u| ("--server-metrics-url", u.clone()))
            .collect();
        if let Some(gpu) = &args.gpu_telemetry {
            raw.extend(gpu_urls(gpu)?.into_iter().map(|u| ("--gpu-telemetry", u)));
        }
        let mut endpoints: Vec<Endpoint> = Vec::new();
        for (flag, url) in raw {
            let endpoint = parse_endpoint(flag, &url)?;
            if !endpoints
                .iter()
                .any(|e| e.address == endpoint.address && e.path == endpoint.path)
            {
                endpoints.push(endpoint);
            }
        }
        if endpoints.is_empty() {
            return Ok(None);
        }
        Ok(Some(Arc::new(Telemetry {
            warned: endpoints.iter().map(|_| AtomicBool::new(false)).collect(),
            endpoints,
            interval: Duration::from_millis(args.server_metrics_interval),
        })))
    }

    /// Starts scraping every endpoint for one load point, each on its own thread: the first
    /// scrape of each is done when this returns (they run side by side, so a slow endpoint
    /// delays the start by one scrape timeout at most).
    pub fn start(self: &Arc<Self>, clock: Clock) -> Scraping {
        let (ready, first_done) = bounded::<()>(self.endpoints.len());
        let pollers: Vec<Poller> = (0..self.endpoints.len())
            .map(|i| Poller::start(Arc::clone(self), i, clock, ready.clone()))
            .collect();
        drop(ready);
        let deadline = Instant::now() + SCRAPE_TIMEOUT * 2;
        for _ in &pollers {
            let left = deadline.saturating_duration_since(Instant::now());
            if first_done.recv_timeout(left).is_err() {
                break;
            }
        }
        Scraping {
            telemetry: Arc::clone(self),
            pollers,
        }
    }

    /// One scrape of endpoint `i` into `store`; a failure is counted and warned about once.
    fn scrape(
        &self,
        i: usize,
        client: &mut Option<BlockingClient>,
        clock: &Clock,
        store: &mut Store,
    ) {
        let e = &self.endpoints[i];
        match fetch_exposition(&e.url, &e.address, &e.path, client, SCRAPE_TIMEOUT) {
            Ok((exposition, _)) => store.push(clock.now_ns(), catalog::readings(&exposition)),
            Err(err) => {
                store.failed += 1;
                if !self.warned[i].swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "WARNING: server metrics endpoint {} cannot be scraped ({}); the run \
                         goes on without its telemetry",
                        crate::text::escape_control(&e.url),
                        crate::text::escape_control(&err.to_string())
                    );
                }
            }
        }
    }
}

/// `--gpu-telemetry` values: URLs kept, `dashboard` noted, local-library modes refused.
fn gpu_urls(values: &[String]) -> Result<Vec<String>> {
    let mut urls = Vec::new();
    for v in values {
        match v.trim() {
            "dashboard" => eprintln!(
                "note: --gpu-telemetry dashboard: inferperf prints the GPU telemetry table after \
                 each profile instead of a live dashboard"
            ),
            mode @ ("pynvml" | "amdsmi") => {
                return Err(Error::usage(format!(
                    "--gpu-telemetry {mode}: inferperf does not load local GPU libraries; give \
                     the URL of a DCGM exporter (or the server's Prometheus endpoint) instead"
                )))
            }
            file if file.ends_with(".csv") => {
                return Err(Error::usage(format!(
                    "--gpu-telemetry {file}: custom metrics CSV files are not supported; \
                     inferperf reads the Triton, vLLM and DCGM names it knows"
                )))
            }
            url => urls.push(url.to_string()),
        }
    }
    if urls.is_empty() {
        urls.extend(DEFAULT_DCGM_URLS.iter().map(|u| u.to_string()));
    }
    Ok(urls)
}

/// `[http://]host[:port][/path]` → an endpoint (path `/metrics` when none is given).
pub fn parse_endpoint(flag: &str, raw: &str) -> Result<Endpoint> {
    let normalized = crate::cli::metrics::normalize_metrics_url(raw)
        .map_err(|e| Error::usage(e.msg.replace("--metrics-url", flag)))?;
    let (address, path) = match normalized.find('/') {
        Some(i) => (&normalized[..i], &normalized[i..]),
        None => (normalized.as_str(), "/"),
    };
    let text = raw.trim();
    let after_scheme = text.find("://").map_or(text, |i| &text[i + 3..]);
    let path = if after_scheme.contains('/') {
        path
    } else {
        "/metrics"
    };
    Ok(Endpoint {
        url: text.to_string(),
        address: address.to_string(),
        path: path.to_string(),
    })
}

/// One endpoint's scraping thread.
struct Poller {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Store>>,
}

impl Poller {
    /// Starts endpoint `i`'s thread, which scrapes at once and then tells `ready`.
    fn start(t: Arc<Telemetry>, i: usize, clock: Clock, ready: Sender<()>) -> Poller {
        let (stop, stopped) = bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("inferperf-telemetry".into())
            .spawn(move || {
                let (mut client, mut store) = (None, Store::default());
                let mut last = Instant::now();
                t.scrape(i, &mut client, &clock, &mut store);
                let _ = ready.send(());
                loop {
                    let wait = t.interval.saturating_sub(last.elapsed());
                    if stopped.recv_timeout(wait) != Err(RecvTimeoutError::Timeout) {
                        break;
                    }
                    last = Instant::now();
                    t.scrape(i, &mut client, &clock, &mut store);
                }
                // The scrape after the point.
                t.scrape(i, &mut client, &clock, &mut store);
                store
            });
        if let Err(e) = &thread {
            eprintln!("WARNING: cannot start a telemetry thread ({e}); no telemetry this profile");
        }
        Poller {
            stop: Some(stop),
            thread: thread.ok(),
        }
    }

    fn finish(mut self) -> Store {
        self.stop.take();
        match self.thread.take() {
            Some(handle) => handle.join().unwrap_or_default(),
            None => Store::default(),
        }
    }
}

/// The pollers of one load point.
pub struct Scraping {
    telemetry: Arc<Telemetry>,
    pollers: Vec<Poller>,
}

impl Scraping {
    /// Stops scraping (after one last scrape of each endpoint) and summarises the readings
    /// over the measured `span` (ns on the clock given to [`Telemetry::start`]).
    pub fn finish(self, span: (u64, u64)) -> Report {
        let stores: Vec<Store> = self.pollers.into_iter().map(Poller::finish).collect();
        Report::new(&self.telemetry.endpoints, &stores, span)
    }
}

/// Adds `report` as the `telemetry` section of the summary JSON at `path` (GenAI-Perf's
/// `*_genai_perf.json`, written just before), keeping the rest of the file as it is.
pub fn add_to_summary(path: &Path, report: &Report) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::generic(format!("cannot read {}: {e}", path.display())))?;
    let inner = text
        .trim_end()
        .strip_suffix('}')
        .ok_or_else(|| Error::generic(format!("{} is not a JSON object", path.display())))?
        .trim_end();
    let comma = if inner.ends_with('{') { "" } else { "," };
    let section = serde_json::to_string_pretty(&report.json())
        .map_err(|e| Error::generic(format!("telemetry JSON: {e}")))?
        .replace('\n', "\n  ");
    let out = format!("{inner}{comma}\n  \"telemetry\": {section}\n}}\n");
    crate::report::write::write_atomic("", path, out.as_bytes())
}

/// Fuzz entry point (`fuzz/fuzz_targets/telemetry_scrape.rs`, replayed by
/// `tests/it/fuzz_corpus.rs`): whatever a metrics endpoint serves, reading it, keeping it
/// and reporting it never panics and stays within the bounds.
pub fn fuzz_telemetry(data: &[u8]) {
    let (exposition, _) = crate::protocol::prometheus::parse_lossy(data);
    let readings = catalog::readings(&exposition);
    assert!(readings.len() <= catalog::MAX_SERIES);
    let mut store = Store::default();
    store.push(1, readings.clone());
    store.push(3, readings);
    let endpoint = Endpoint {
        url: "fuzz".into(),
        address: "fuzz:80".into(),
        path: "/metrics".into(),
    };
    let report = Report::new(&[endpoint], &[store], (2, 2));
    let _ = report.console();
    let _ = report.html();
    let json = report.json();
    assert!(serde_json::to_string(&json).is_ok());
}

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
