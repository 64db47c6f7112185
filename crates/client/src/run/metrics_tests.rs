use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicU64;

use super::*;
use crate::error::ErrorKind;
use crate::protocol::prometheus::parse;

/// A tiny metrics endpoint on 127.0.0.1: answers every request with `status` and a page
/// whose GPU utilization is `scrape number / 100` (first scrape 0.01). Stops when dropped.
struct FakeEndpoint {
    addr: String,
    scrapes: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeEndpoint {
    fn start(status: u16) -> FakeEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let scrapes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (Arc::clone(&scrapes), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            // Bounded: a test that forgets to stop the endpoint still ends within 30 s.
            let deadline = Instant::now() + Duration::from_secs(30);
            while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((conn, _)) => serve(conn, status, &count, &done),
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        FakeEndpoint {
            addr,
            scrapes,
            stop,
            thread: Some(thread),
        }
    }

    fn config(&self, interval_ms: u64) -> MetricsConfig {
        MetricsConfig {
            url: format!("{}/metrics", self.addr),
            interval_ms,
        }
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests on one keep-alive connection until it closes or the endpoint stops.
fn serve(mut conn: TcpStream, status: u16, count: &AtomicU64, done: &AtomicBool) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !done.load(Ordering::Relaxed) {
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let n = count.fetch_add(1, Ordering::Relaxed) + 1;
            let body = format!(
                "# TYPE nv_gpu_utilization gauge\n\
                 nv_gpu_utilization{{gpu_uuid=\"GPU-x\"}} {}\n\
                 nv_gpu_power_usage{{gpu_uuid=\"GPU-x\"}} 100\n\
                 nv_gpu_memory_used_bytes{{gpu_uuid=\"GPU-x\"}} {}\n\
                 nv_gpu_memory_total_bytes{{gpu_uuid=\"GPU-x\"}} 1000000\n",
                n as f64 / 100.0,
                n * 10
            );
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            if conn.write_all(head.as_bytes()).is_err() || conn.write_all(body.as_bytes()).is_err()
            {
                return;
            }
        }
    }
}

#[test]
fn unreachable_endpoint_fails_at_connect() {
    // A port nobody listens on: bind one, note it, close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = MetricsConfig {
        url: format!("127.0.0.1:{port}/metrics"),
        interval_ms: 10,
    };
    let e = MetricsSource::connect(&cfg).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Generic);
    assert_eq!(e.exit_code(), 99);
    assert!(
        e.msg.starts_with(&format!(
            "Unable to connect to Metrics endpoint 127.0.0.1:{port}/metrics"
        )),
        "{e}"
    );
}

#[test]
fn non_200_is_an_error() {
    let endpoint = FakeEndpoint::start(503);
    let e = MetricsSource::connect(&endpoint.config(10)).unwrap_err();
    assert!(e.msg.contains("answered HTTP 503 (expected 200)"), "{e}");
}

#[test]
fn polls_and_merges_the_span() {
    let endpoint = FakeEndpoint::start(200);
    let source = MetricsSource::connect(&endpoint.config(10)).unwrap();
    assert_eq!(endpoint.scrapes.load(Ordering::Relaxed), 1);
    let clock = Clock::new();
    let start = clock.now_ns();
    let collector = source.start(clock);
    std::thread::sleep(Duration::from_millis(120));
    let end = clock.now_ns();
    let m = collector.finish(Some((start, end))).unwrap().unwrap();
    let scrapes = endpoint.scrapes.load(Ordering::Relaxed);
    // The connect check was scrape 1; the poller took 2.. (at least a few in 120 ms).
    assert!(scrapes >= 4, "{scrapes} scrapes");
    let util = m.gpu.utilization["GPU-x"];
    // Mean of k/100 over the scrapes 2..=last that fell inside the span.
    assert!(util >= 0.02 && util <= scrapes as f64 / 100.0, "{util}");
    assert_eq!(m.gpu.power_watts["GPU-x"], 100.0);
    let used = m.gpu.memory_used_bytes["GPU-x"];
    assert!(used >= 30 && used <= scrapes * 10, "{used}");
    assert_eq!(used % 10, 0);
    assert_eq!(m.gpu.memory_total_bytes["GPU-x"], 1_000_000);
    let cpu = m.client_cpu_pct.expect("CPU use measured");
    assert!((0.0..=100.0 * 64.0).contains(&cpu), "{cpu}");
    // Polling stopped with finish: no more scrapes.
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(endpoint.scrapes.load(Ordering::Relaxed), scrapes);
}

#[test]
fn no_span_no_metrics_and_drop_stops_the_thread() {
    let endpoint = FakeEndpoint::start(200);
    let source = MetricsSource::connect(&endpoint.config(5)).unwrap();
    let collector = source.start(Clock::new());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(collector.finish(None).unwrap(), None);
    let dropped = source.start(Clock::new());
    drop(dropped);
    let after = endpoint.scrapes.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(endpoint.scrapes.load(Ordering::Relaxed), after);
}

#[test]
fn endpoint_going_away_mid_point_is_the_error_at_finish() {
    let endpoint = FakeEndpoint::start(200);
    let source = MetricsSource::connect(&endpoint.config(5)).unwrap();
    let clock = Clock::new();
    let collector = source.start(clock);
    std::thread::sleep(Duration::from_millis(20));
    drop(endpoint);
    std::thread::sleep(Duration::from_millis(40));
    let e = collector
        .finish(Some((0, clock.now_ns())))
        .expect_err("the endpoint is gone");
    assert!(
        e.msg.contains("Unable to connect to Metrics endpoint"),
        "{e}"
    );
}

fn map<T: Copy>(pairs: &[(&str, T)]) -> std::collections::BTreeMap<String, T> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn picks_the_four_metrics_by_gpu_uuid() {
    let body = "# TYPE nv_gpu_utilization gauge\n\
        nv_gpu_utilization{gpu_uuid=\"GPU-b\"} 0.25\n\
        nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 5e-1\n\
        nv_gpu_power_usage{node=\"n1\",gpu_uuid=\"GPU-a\"} 123.5\n\
        nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-a\"} 1.5e9 1712345678000\n\
        nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-a\"} 85899345920\n\
        nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-a\"} 7\n\
        nv_gpu_power_usage{gpu_uuid=\"GPU-c\"} NaN\n\
        nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-c\"} -1\n\
        nv_gpu_utilization 0.9\n\
        nv_inference_count{model=\"simple\",version=\"1\"} 42\n";
    let m = gpu_metrics(&parse(body.as_bytes()).unwrap());
    assert_eq!(m.utilization, map(&[("GPU-a", 0.5), ("GPU-b", 0.25)]));
    // Sorted by uuid, as perf_analyzer prints them.
    assert_eq!(m.utilization.keys().collect::<Vec<_>>(), ["GPU-a", "GPU-b"]);
    assert_eq!(m.power_watts, map(&[("GPU-a", 123.5)]));
    assert_eq!(m.memory_used_bytes, map(&[("GPU-a", 1_500_000_000)]));
    assert_eq!(m.memory_total_bytes, map(&[("GPU-a", 85_899_345_920)]));
    assert!(m.missing().is_empty());
}
