//! Nothing measured is lost: a server that dies in the middle of a sweep still leaves the
//! CSV, the profile export and the console summary of the levels measured (and the run's
//! exit code); a second Ctrl-C exits at once, even while a request of the first one's ending
//! waits; a huge value for any numeric flag is a usage
//! error naming the flag, never a panic or a run that goes on with a wrapped number.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use inferperf::server;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inferperf"))
}

/// Waits for `child` for at most `limit`; a child still running then is killed and the
/// test fails (a run that never ends is the bug these tests look for).
pub(crate) fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Forwards the child's stdout lines to a channel (and keeps them all in the returned
/// thread's result).
fn follow_stdout(child: &mut Child) -> (mpsc::Receiver<String>, std::thread::JoinHandle<String>) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    (rx, t)
}

/// Waits (at most a minute) for a stdout line containing `needle`.
fn wait_line(rx: &mpsc::Receiver<String>, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains(needle) => return,
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("no stdout line with '{needle}'");
}

fn sigint(child: &Child) {
    // SAFETY: sending a signal to a child process this test spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
}

/// File names in `dir` (temporary report files start with a dot).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_server_gone_mid_sweep_keeps_the_levels_measured() {
    // 5 ms per request and 200 ms windows: a level lasts long enough for the server to be
    // stopped while the second one runs (at least three windows each).
    let delay = server::Delay::Fixed(Duration::from_millis(5));
    let server = common::start_server_with(vec![("simple".into(), delay)]);
    let addr = server.addr.to_string();
    let dir = common::temp_dir("nothing-lost-gone");
    let (csv, json) = (dir.join("out.csv"), dir.join("out.json"));
    let mut child = bin()
        .args([
            "-m",
            "simple",
            "-u",
            &addr,
            "--no-pin",
            "--ready-timeout",
            "2",
        ])
        .args(["--concurrency-range", "1:50", "-p", "200", "-s", "100"])
        .args(["-f", csv.to_str().unwrap()])
        .args(["--profile-export-file", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, reader) = follow_stdout(&mut child);
    wait_line(&rx, "Request concurrency: 2");
    // The first level is reported and its CSV row written before the second one starts.
    let early = std::fs::read_to_string(&csv).expect("the CSV exists after the first level");
    assert_eq!(early.lines().count(), 2, "{early}");
    server.stop();
    let o = wait_bounded(child, Duration::from_secs(60));
    let stdout = reader.join().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(99), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert!(text.starts_with("Concurrency,Inferences/Second,"), "{text}");
    // Rows are in throughput order; every level reported measured requests.
    assert!(rows.iter().any(|r| r.starts_with("1,")), "{text}");
    assert!(
        rows.iter().all(|r| !r.contains(",0,0,0,0,0,0,0,0,0,0,0,0")),
        "{text}"
    );
    // Every level in the CSV was reported on the console, and the summary lists them.
    for row in &rows {
        let c = row.split(',').next().unwrap();
        assert!(
            stdout.contains(&format!("Concurrency: {c}, throughput: ")),
            "{stdout}"
        );
    }
    let export: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let exps = export["experiments"].as_array().unwrap();
    assert_eq!(exps[0]["experiment"]["value"], 1, "{export}");
    assert!(!exps[0]["requests"].as_array().unwrap().is_empty());
    assert_eq!(
        names(&dir),
        vec!["out.csv", "out.json"],
        "no temporary file left"
    );
}

/// Model `m`'s statistics, all zero.
const STATS: &str = r#"{"model_stats":[{"name":"m","version":"1","last_inference":0,"inference_count":0,"execution_count":0,"inference_stats":{"success":{"count":0,"ns":0},"fail":{"count":0,"ns":0},"queue":{"count":0,"ns":0},"compute_input":{"count":0,"ns":0},"compute_infer":{"count":0,"ns":0},"compute_output":{"count":0,"ns":0}},"batch_stats":[]}]}"#;

/// A server for model `m` with the statistics extension that never answers an infer request,
/// and answers only the first statistics request (`stats` counts them); later ones wait
/// until the client leaves.
fn serve_stalling_stats(stream: TcpStream, stats: &AtomicU64) {
    use common::scripted::{discovery_reply, read_request};
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    while let Some(req) = read_request(&mut reader) {
        let reply = if req.path == "/v2" {
            r#"{"name":"t","version":"1","extensions":["statistics"]}"#
        } else if req.path.ends_with("/stats") && stats.fetch_add(1, Ordering::SeqCst) == 0 {
            STATS
        } else if let Some(reply) = discovery_reply(&req.path) {
            reply
        } else {
            // An infer request, or a later statistics request: held until the client leaves.
            let mut buf = [0u8; 1024];
            while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
            return;
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        );
        if out.write_all(format!("{head}{reply}").as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    // The first Ctrl-C ends the window at once, but the server no longer answers statistics:
    // the request for the window's statistics holds the run for its own limit (2 s), and
    // only a second Ctrl-C ends the process before it.
    let (addr, _) = common::scripted::serve_each(serve_stalling_stats);
    let dir = common::temp_dir("nothing-lost-sigint");
    let csv = dir.join("out.csv");
    let mut child = bin()
        .args([
            "-m",
            "m",
            "-u",
            &addr.to_string(),
            "--no-pin",
            "-p",
            "60000",
        ])
        .args(["--concurrency-range", "2", "-f", csv.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, reader) = follow_stdout(&mut child);
    wait_line(&rx, "Request concurrency: 2");
    sigint(&child);
    std::thread::sleep(Duration::from_millis(200));
    sigint(&child);
    // The statistics request alone would hold the process for 2 s and then exit 99.
    let o = wait_bounded(child, Duration::from_secs(30));
    let _ = reader.join();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Nothing was measured: no CSV, and no temporary file either.
    assert!(names(&dir).is_empty(), "{:?}", names(&dir));
}

/// The values every numeric flag is tried with.
const HUGE: [&str; 4] = [
    "18446744073709551615",
    "1e30",
    "-1",
    "99999999999999999999999",
];

/// One numeric flag: the arguments before it, the flag, its value (`V` stands for the value
/// tried), the name the error must contain, and the values documented as accepted.
struct Case {
    before: &'static [&'static str],
    flag: &'static str,
    value: &'static str,
    named: &'static str,
    accepted: &'static [&'static str],
}

const fn case(flag: &'static str, value: &'static str, named: &'static str) -> Case {
    Case {
        before: &[],
        flag,
        value,
        named,
        accepted: &[],
    }
}

/// A flag whose whole value is the value tried, named as itself in the error.
const fn flag(name: &'static str) -> Case {
    case(name, "V", name)
}

/// A flag whose value holds the value tried as one part (`V` in `value`), named as itself.
const fn part(name: &'static str, value: &'static str) -> Case {
    case(name, value, name)
}

/// Every numeric flag of perf_analyzer mode (`inferperf --help`), range parts included.
const PA_FLAGS: &[Case] = &[
    flag("--concurrency-range"),
    part("--concurrency-range", "V:4"),
    part("--concurrency-range", "1:V"),
    part("--concurrency-range", "1:2:V"),
    flag("--request-rate-range"),
    part("--request-rate-range", "V:4"),
    part("--request-rate-range", "1:V"),
    part("--request-rate-range", "1:2:V"),
    part("--periodic-concurrency-range", "V:2:1"),
    part("--periodic-concurrency-range", "1:V:1"),
    part("--periodic-concurrency-range", "1:2:V"),
    flag("--request-period"),
    flag("--session-concurrency"),
    Case {
        before: &["--enable-mpi"],
        ..flag("--mpi-timeout")
    },
    // Any 64-bit seed is a seed.
    Case {
        accepted: &["18446744073709551615"],
        ..flag("--seed")
    },
    flag("--max-inflight"),
    flag("--num-of-sequences"),
    // perf_analyzer warns about a length <= 0 and uses 20.
    Case {
        accepted: &["-1"],
        ..flag("--sequence-length")
    },
    flag("--sequence-length-variation"),
    flag("--sequence-id-range"),
    part("--sequence-id-range", "V:5"),
    part("--sequence-id-range", "1:V"),
    flag("--max-threads"),
    case("-t", "V", "Failed to parse -t"),
    Case {
        before: &["-t", "2"],
        ..case("-c", "V", "Failed to parse -c")
    },
    case("-p", "V", "--measurement-interval"),
    flag("--measurement-request-count"),
    case("-s", "V", "--stability-percentage"),
    case("-r", "V", "--max-trials"),
    // -1: the average instead of a percentile.
    Case {
        accepted: &["-1"],
        ..flag("--percentile")
    },
    case("-l", "V", "--latency-threshold"),
    flag("--request-count"),
    flag("--warmup-request-count"),
    case("-b", "V", "-b (batch size)"),
    part("--shape", "INPUT0:V"),
    flag("--string-length"),
    flag("--cuda-device"),
    flag("--output-shared-memory-size"),
    flag("--ssl-https-verify-peer"),
    flag("--ssl-https-verify-host"),
    flag("--ready-timeout"),
    flag("--request-timeout"),
    flag("--request-idle-timeout"),
    flag("--trace-rate"),
    // -1: no limit on the traces (Triton's default).
    Case {
        accepted: &["-1"],
        ..flag("--trace-count")
    },
    flag("--log-frequency"),
    Case {
        before: &["--collect-metrics"],
        ..flag("--metrics-interval")
    },
];

/// Every numeric flag of `inferperf profile` (`inferperf profile --help`).
const PROFILE_FLAGS: &[Case] = &[
    flag("--concurrency"),
    part("--concurrency", "1,V"),
    flag("--request-rate"),
    flag("--max-inflight"),
    flag("--request-count"),
    flag("--warmup-request-count"),
    flag("--benchmark-duration"),
    flag("--request-timeout"),
    flag("--request-timeout-seconds"),
    flag("--request-idle-timeout"),
    flag("--synthetic-input-tokens-mean"),
    flag("--synthetic-input-tokens-stddev"),
    flag("--output-tokens-mean"),
    flag("--output-tokens-stddev"),
    flag("--num-prompts"),
    Case {
        accepted: &["18446744073709551615"],
        ..flag("--random-seed")
    },
    flag("--max-workers"),
    flag("--read-batch-us"),
];

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Runs the binary with `base`, the case's arguments and `value`; checks that a rejected
/// value is a usage error naming the flag and that an accepted one reaches `accepted_sign`
/// in stderr (or exit 0 when `accepted_sign` is empty). Returns the failures.
fn try_case(base: &[String], c: &Case, value: &str, accepted_sign: &str) -> Option<String> {
    let v = c.value.replace('V', value);
    let child = bin()
        .args(base)
        .args(c.before)
        .args([c.flag, v.as_str()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_bounded(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let code = o.status.code();
    let what = format!("{} {v}: exit {code:?}, stderr {stderr:?}", c.flag);
    if stderr.contains("panicked") {
        return Some(what);
    }
    let ok = if c.accepted.contains(&value) {
        if accepted_sign.is_empty() {
            code == Some(0)
        } else {
            code == Some(99) && stderr.contains(accepted_sign)
        }
    } else {
        code == Some(99) && stderr.contains(c.named)
    };
    (!ok).then_some(what)
}

#[test]
fn a_huge_value_for_any_numeric_flag_is_a_usage_error_naming_it() {
    let url = closed_port();
    let base: Vec<String> = ["-m", "simple", "-u", &url, "--ready-timeout", "0"]
        .map(String::from)
        .to_vec();
    let mut failures = Vec::new();
    for c in PA_FLAGS {
        for value in HUGE {
            // Accepted values get as far as connecting to the closed port.
            failures.extend(try_case(&base, c, value, "cannot connect"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_huge_value_for_any_numeric_profile_flag_is_a_usage_error_naming_it() {
    let server = crate::run_profile::start_llm(0, 0, 4);
    let dir = common::temp_dir("nothing-lost-profile-flags");
    let mut failures = Vec::new();
    for c in PROFILE_FLAGS {
        let mut base: Vec<String> = ["profile", "-m", crate::run_profile::MODEL, "--quiet"]
            .map(String::from)
            .to_vec();
        base.extend(["-u".into(), server.addr.to_string()]);
        base.extend(["--artifact-dir".into(), dir.display().to_string()]);
        base.extend(["--tokenizer".into(), "cl100k_base".into()]);
        if c.flag != "--request-count" {
            // An accepted value runs two requests.
            base.extend(["--request-count".into(), "2".into()]);
        }
        for value in HUGE {
            failures.extend(try_case(&base, c, value, ""));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A password in a URL flag is never printed: the URL is refused (credentials go in `-H`),
/// and the error shows it redacted, with and without `-v`.
#[test]
fn a_password_in_a_url_is_never_printed() {
    let runs: &[&[&str]] = &[
        &["-m", "simple", "-u", "http://user:s3cret@127.0.0.1:1"],
        &["-m", "simple", "-u", "user:s3cret@127.0.0.1:1", "-v", "-v"],
        &["-m", "simple", "-u", "https://user:s3cret@127.0.0.1:1/v2"],
        &[
            "-m",
            "simple",
            "-i",
            "grpc",
            "-u",
            "user:s3cret@127.0.0.1:1",
        ],
        &[
            "-m",
            "simple",
            "-i",
            "grpc",
            "-u",
            "https://user:s3cret@127.0.0.1:1",
        ],
        &[
            "-m",
            "simple",
            "-u",
            "127.0.0.1:1",
            "--collect-metrics",
            "--metrics-url",
            "http://user:s3cret@127.0.0.1:1/metrics",
        ],
        &[
            "profile",
            "-m",
            "x",
            "--url",
            "http://user:s3cret@127.0.0.1:1",
        ],
    ];
    for args in runs {
        let o = bin().args(*args).output().unwrap();
        let out = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&out);
        assert_eq!(o.status.code(), Some(99), "{args:?}: {text}");
        assert!(!text.contains("s3cret"), "{args:?}: {text}");
        assert!(
            text.contains("user:<redacted>@127.0.0.1:1"),
            "{args:?}: {text}"
        );
    }
}

/// Ctrl-C in the warm-up: nothing of the level was measured, so no CSV row of zeros is
/// written (no CSV at all: no level was measured) and the run exits 3, as one whose windows
/// held no valid request.
#[test]
fn ctrl_c_in_the_warm_up_reports_nothing_measured() {
    // 100 ms per request: 100,000 warm-up requests would take hours.
    let delay = server::Delay::Fixed(Duration::from_millis(100));
    let server = common::start_server_with(vec![("simple".into(), delay)]);
    let addr = server.addr.to_string();
    let dir = common::temp_dir("nothing-lost-warmup");
    let csv = dir.join("out.csv");
    let mut child = bin()
        .args(["-m", "simple", "-u", &addr, "--no-pin"])
        .args([
            "--warmup-request-count",
            "100000",
            "-f",
            csv.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, reader) = follow_stdout(&mut child);
    wait_line(&rx, "Request concurrency: 1");
    sigint(&child);
    let o = wait_bounded(child, Duration::from_secs(60));
    let stdout = reader.join().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("interrupted before any request was measured"),
        "{stderr}"
    );
    assert!(!stdout.contains("infer/sec"), "{stdout}");
    assert!(names(&dir).is_empty(), "{:?}", names(&dir));
    server.stop();
}

/// `-f` through a symbolic link replaces the link's target (the link stays, and so does the
/// target's mode); `-f` at a FIFO writes the CSV into it for its reader; `-f /dev/null`
/// leaves the device a device.
#[test]
fn reports_follow_links_and_write_through_fifos_and_devices() {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
    let server = common::start_server();
    let addr = server.addr.to_string();
    let dir = common::temp_dir("nothing-lost-kinds");
    let run = |csv: &Path| {
        let o = bin()
            .args([
                "-m",
                "simple",
                "-u",
                &addr,
                "--no-pin",
                "--ready-timeout",
                "2",
            ])
            // Any window counts as stable: the machine is shared.
            .args(["-p", "200", "-s", "10000"])
            .args(["-f", csv.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{stderr}");
    };
    let real = dir.join("real.csv");
    std::fs::write(&real, "old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("real.csv", dir.join("link.csv")).unwrap();
    run(&dir.join("link.csv"));
    let link = std::fs::symlink_metadata(dir.join("link.csv")).unwrap();
    assert!(link.file_type().is_symlink(), "the link stays a link");
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(text.starts_with("Concurrency,Inferences/Second,"), "{text}");
    let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let fifo = dir.join("fifo.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Opened without waiting for a writer, so the reader exists before the run starts; it
    // reads until the FIFO has no writer left after the run ended.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let read = {
        let ended = ended.clone();
        std::thread::spawn(move || {
            let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
            loop {
                let last = ended.load(std::sync::atomic::Ordering::SeqCst);
                match reader.read(&mut buf) {
                    Ok(0) if last => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    run(&fifo);
    ended.store(true, std::sync::atomic::Ordering::SeqCst);
    let got = String::from_utf8(read.join().unwrap()).unwrap();
    assert!(got.starts_with("Concurrency,Inferences/Second,"), "{got}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names(&dir), vec!["fifo.csv", "link.csv", "real.csv"]);

    run(Path::new("/dev/null"));
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device());
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
