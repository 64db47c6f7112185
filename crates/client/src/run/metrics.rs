//! The `--collect-metrics` poller: while a point is measured, a
//! thread GETs the metrics URL every `--metrics-interval` ms with the blocking setup client,
//! keeps each scrape's GPU metrics and the process CPU time, and at the end of the point
//! merges what fell inside the windows the point reports.
//!
//! Like perf_analyzer, an endpoint that cannot be reached or answers non-200 fails the run
//! (exit 99); it is checked once before any load, so a wrong URL fails at once instead of
//! after the first window. Missing metrics and a slow endpoint are one-time warnings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};

use crate::clock::Clock;
use crate::config::{Config, MetricsConfig};
use crate::error::{Error, Result};
use crate::measure::metrics::{
    cpu_pct_in_span, merge_gpu, samples_in_span, CpuMark, GpuMetrics, GpuSample, PointMetrics,
    GPU_LABEL,
};
use crate::protocol::http1::blocking::BlockingClient;
use crate::protocol::prometheus::{parse_lossy, Exposition, ParseError};

/// Connect/read timeout of one scrape: a hung endpoint must not hold the run for long.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how often to poll, and the warnings already given (once per run, as
/// perf_analyzer's metrics manager does).
#[derive(Debug)]
pub struct MetricsSource {
    /// `host:port/path`, for messages.
    url: String,
    address: String,
    path: String,
    interval: Duration,
    warned_missing: AtomicBool,
    warned_slow: AtomicBool,
    warned_syntax: AtomicBool,
}

impl MetricsSource {
    /// The run's source with `--collect-metrics` (checked now, before any load), else `None`.
    pub fn for_run(cfg: &Config) -> Result<Option<Arc<MetricsSource>>> {
        cfg.metrics.as_ref().map(MetricsSource::connect).transpose()
    }

    /// Checks the endpoint with one scrape, so a wrong URL fails before any load.
    pub fn connect(cfg: &MetricsConfig) -> Result<Arc<MetricsSource>> {
        let (address, path) = cfg.address_and_path();
        let source = Arc::new(MetricsSource {
            url: cfg.url.clone(),
            address: address.to_string(),
            path: path.to_string(),
            interval: Duration::from_millis(cfg.interval_ms.max(1)),
            warned_missing: AtomicBool::new(false),
            warned_slow: AtomicBool::new(false),
            warned_syntax: AtomicBool::new(false),
        });
        source.scrape(&mut None)?;
        Ok(source)
    }

    /// Starts polling (first scrape at once) until [`Collector::finish`].
    pub fn start(self: &Arc<Self>, clock: Clock) -> Collector {
        let (stop, stopped) = bounded::<()>(1);
        let source = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("inferperf-metrics".into())
            .spawn(move || source.poll(clock, |wait| stopped.recv_timeout(wait)));
        Collector {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Scrapes until `wait` says stop; each wait is the rest of the interval.
    fn poll(
        &self,
        clock: Clock,
        wait: impl Fn(Duration) -> std::result::Result<(), RecvTimeoutError>,
    ) -> Result<Polled> {
        let mut polled = Polled {
            samples: Vec::new(),
            cpu: vec![CpuMark::now(&clock)],
        };
        let mut client = None;
        loop {
            let started = Instant::now();
            let metrics = self.scrape(&mut client)?;
            let mark = CpuMark::now(&clock);
            polled.samples.push(GpuSample {
                at_ns: mark.at_ns,
                metrics,
            });
            polled.cpu.push(mark);
            let took = started.elapsed();
            if took > self.interval && !self.warned_slow.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "WARNING: Triton metrics endpoint latency ({}ms) is larger than the querying \
                     interval ({}ms). Please try a larger querying interval via \
                     `--metrics-interval`.",
                    took.as_millis(),
                    self.interval.as_millis()
                );
            }
            if wait(self.interval.saturating_sub(took)) != Err(RecvTimeoutError::Timeout) {
                break;
            }
        }
        polled.cpu.push(CpuMark::now(&clock));
        Ok(polled)
    }

    /// One GET of the metrics URL, reusing `client`'s connection when it is still open.
    fn scrape(&self, client: &mut Option<BlockingClient>) -> Result<GpuMetrics> {
        let (exposition, syntax) =
            fetch_exposition(&self.url, &self.address, &self.path, client, SCRAPE_TIMEOUT)?;
        if let Some(e) = syntax {
            if !self.warned_syntax.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "WARNING: metrics endpoint {}: {}; lines that cannot be read are skipped.",
                    self.url,
                    crate::text::escape_control(&e.to_string())
                );
            }
        }
        let metrics = gpu_metrics(&exposition);
        let missing = metrics.missing();
        if !missing.is_empty() && !self.warned_missing.swap(true, Ordering::Relaxed) {
            for name in missing {
                eprintln!("WARNING: Unable to parse '{name}' metric.");
            }
        }
        Ok(metrics)
    }
}

/// One GET of a Prometheus endpoint (`address` = `host:port`, `path`; `url` names it in
/// messages), reusing `client`'s connection when it is still open, parsed leniently: the
/// exposition and the first line that could not be read. An endpoint that cannot be
/// reached or answers other than 200 is the error.
pub fn fetch_exposition(
    url: &str,
    address: &str,
    path: &str,
    client: &mut Option<BlockingClient>,
    timeout: Duration,
) -> Result<(Exposition, Option<ParseError>)> {
    let unreachable =
        |e: Error| Error::generic(format!("Unable to connect to Metrics endpoint {url}: {e}"));
    let mut conn = match client.take() {
        Some(c) => c,
        None => BlockingClient::connect(address, timeout).map_err(unreachable)?,
    };
    let (status, body) = conn.get(path).map_err(unreachable)?;
    if status != 200 {
        return Err(Error::generic(format!(
            "Metrics endpoint {url} answered HTTP {status} (expected 200)."
        )));
    }
    *client = Some(conn);
    Ok(parse_lossy(&body))
}

/// The four GPU metrics of one scrape, picked by their `gpu_uuid` label (other labels may be
/// present, in any order).
pub fn gpu_metrics(exposition: &Exposition) -> GpuMetrics {
    GpuMetrics::from_samples(exposition.samples_by_label(GPU_LABEL))
}

/// What one point's polling gathered.
struct Polled {
    samples: Vec<GpuSample>,
    /// Process CPU marks: at start, after every scrape, at stop.
    cpu: Vec<CpuMark>,
}

/// A running poller; dropping it stops the thread.
pub struct Collector {
    stop: Option<Sender<()>>,
    thread: Option<std::io::Result<JoinHandle<Result<Polled>>>>,
}

impl Collector {
    /// Stops polling and merges the scrapes of the windows in `span` (ns, see
    /// `PointOutcome::span_ns`). A scrape that failed during the point is the error.
    pub fn finish(mut self, span: Option<(u64, u64)>) -> Result<Option<PointMetrics>> {
        let polled = self.stop_and_join()?;
        let Some(span) = span else {
            return Ok(None);
        };
        Ok(Some(PointMetrics {
            gpu: merge_gpu(&samples_in_span(&polled.samples, span)),
            client_cpu_pct: cpu_pct_in_span(&polled.cpu, span),
        }))
    }

    fn stop_and_join(&mut self) -> Result<Polled> {
        // Dropping the sender wakes the poller at once (the channel disconnects).
        self.stop.take();
        match self.thread.take() {
            Some(Ok(handle)) => handle
                .join()
                .unwrap_or_else(|_| Err(Error::generic("the metrics poller thread panicked"))),
            Some(Err(e)) => Err(Error::generic(format!(
                "cannot start the metrics poller thread: {e}"
            ))),
            None => Err(Error::generic("the metrics poller was already stopped")),
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_and_join();
        }
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
