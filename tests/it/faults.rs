//! The fault matrix: the built `inferperf` in perf_analyzer mode (`--request-count 20
//! --request-timeout 1000 -f CSV`) against a fault server (`inferperf serve --fault MODE`,
//! started in-process on ephemeral ports), over HTTP and gRPC where the mode applies. For each
//! case: the exit code, an error that names the cause, the run ends within its bound (the
//! child is killed after [`KILL_AFTER`], and that is a failure), peak memory under
//! [`MAX_RSS_KIB`], no file outside the output directory, no raw ESC, BEL or CR on the
//! terminal.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use inferperf::server::fault::{start, FaultConfig, FaultMode};

use crate::common::temp_dir;

/// A run still going after this is killed, and the case fails.
const KILL_AFTER: Duration = Duration::from_secs(60);
/// Peak resident memory a run may reach (KiB).
const MAX_RSS_KIB: i64 = 512 * 1024;
/// The child's data limit (RLIMIT_DATA, bytes): a client without limits fails its allocation
/// here instead of taking the machine's memory (a chunk-extension flood grows without bound).
const DATA_LIMIT: u64 = 1 << 30;

/// What a case must end with.
struct Expect {
    /// The exit code.
    code: i32,
    /// The output (stdout and stderr) must contain one of these, case-insensitive; empty:
    /// no check.
    words: &'static [&'static str],
}

fn expect(mode: FaultMode, grpc: bool) -> Expect {
    use FaultMode as F;
    let fail = |words| Expect { code: 99, words };
    match mode {
        F::None | F::NameDotdot | F::NameAbs => Expect {
            code: 0,
            words: &["throughput"],
        },
        F::Refuse => fail(&["refused", "connect", "closed"]),
        F::Reset | F::EveryNthResets => fail(&["reset"]),
        F::CloseMidBody => fail(&["closed", "Content-Length", "shorter"]),
        F::StallHead | F::StallBody | F::StallForever => fail(&["timed out", "no response"]),
        F::Drip => fail(&["timed out after 1 s in total (--request-timeout)"]),
        F::WrongContentLength if grpc => {
            fail(&["length", "prefix", "protobuf", "inside a message"])
        }
        F::WrongContentLength => fail(&["Content-Length", "length", "framing", "JSON"]),
        F::Garbage => fail(&[
            "framing",
            "malformed",
            "not HTTP",
            "HTTP/2 connection error",
            "garbage",
        ]),
        F::Status500 | F::EveryNthFails => fail(&["500", "status 13", "internal error", "failed"]),
        F::NotJson | F::NotProtobuf if grpc => fail(&["protobuf"]),
        F::NotJson | F::NotProtobuf => fail(&["JSON"]),
        F::InterimFlood => fail(&["limit", "interim", "1xx"]),
        F::ChunkExtensionFlood => fail(&["limit", "chunk"]),
        F::EndlessHeader | F::HugeHeaders => fail(&["limit", "header"]),
        F::HugeContentLength => fail(&["limit", "Content-Length", "too large", "length prefix"]),
        F::SettingsFlood => fail(&["limit", "SETTINGS", "ENHANCE_YOUR_CALM", "flood"]),
        F::PingFlood => fail(&["limit", "PING", "ENHANCE_YOUR_CALM", "flood"]),
        F::DimsHuge | F::DimsBig => fail(&["INPUT0"]),
        F::EscapeText => fail(&["red alert"]),
        F::PayloadTooLarge if grpc => fail(&["status 8: request exceeds"]),
        F::PayloadTooLarge => fail(&["HTTP 413", "limit of 1048576 bytes"]),
        F::WrongContentType => fail(&["content-type is 'text/html'"]),
        F::CompressedNoEncoding => fail(&["names no grpc-encoding"]),
        F::HugeNumber => fail(&["which FP32 cannot hold"]),
        // OpenAI modes (`tests/it/profile_faults.rs`): KServe requests stay healthy.
        F::TinyChunks | F::SseErrorEvent | F::SseOpenaiError | F::SseVllmError | F::SseNotJson => {
            Expect {
                code: 0,
                words: &["throughput"],
            }
        }
    }
}

/// This process's peak RSS so far (KiB).
fn own_peak_rss_kib() -> i64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss
}

/// What one run did.
struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    killed: bool,
    elapsed: Duration,
    max_rss_kib: i64,
    /// This test process's own peak RSS when the client was spawned: a forked child starts
    /// with its parent's high-water mark, so the child's figure is its own only above this.
    inherited_rss_kib: i64,
    output: Vec<u8>,
    /// Files created under the test's directory outside the output directory.
    stray: Vec<PathBuf>,
    /// Files in the output directory.
    reports: Vec<PathBuf>,
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Waits for `pid`, killing it after [`KILL_AFTER`]; returns its wait status and rusage.
fn wait_bounded(child: &mut std::process::Child) -> (i32, libc::rusage, bool) {
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let mut killed = false;
    loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is valid; wait4 writes the status and usage of our child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if killed { 0 } else { libc::WNOHANG };
        let got = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if got == pid {
            return (status, usage, killed);
        }
        assert!(
            got == 0,
            "wait4 failed: {}",
            std::io::Error::last_os_error()
        );
        if started.elapsed() > KILL_AFTER {
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the binary against a fresh fault server in `mode`.
fn run_case(mode: FaultMode, grpc: bool) -> Outcome {
    let proto = if grpc { "grpc" } else { "http" };
    let root = temp_dir(&format!("fault-{}-{proto}", mode.name()));
    let (out_dir, work, logs) = (
        root.join("a/b/out"),
        root.join("a/b/work"),
        root.join("logs"),
    );
    for d in [&out_dir, &work, &logs] {
        std::fs::create_dir_all(d).unwrap();
    }
    let local = "127.0.0.1:0".parse().unwrap();
    let cfg = FaultConfig {
        mode,
        http: local,
        grpc: Some(local),
        ttl: KILL_AFTER * 2,
    };
    let server = start(&cfg).expect("fault server starts");
    let url = if grpc {
        server.grpc_addr.unwrap()
    } else {
        server.addr
    }
    .to_string();
    let args = client_args(&url, grpc, &out_dir.join("r.csv"));
    let inherited_rss_kib = own_peak_rss_kib();
    let started = Instant::now();
    let mut child = spawn_limited(&args, &work, &logs);
    let (status, usage, killed) = wait_bounded(&mut child);
    let elapsed = started.elapsed();
    server.stop();
    let status = std::process::ExitStatus::from_raw(status);
    let mut output = std::fs::read(logs.join("stdout")).unwrap();
    output.extend(std::fs::read(logs.join("stderr")).unwrap());
    let (reports, stray) = files_written(&root, &out_dir, &logs);
    let _ = std::fs::remove_dir_all(&root);
    Outcome {
        code: status.code(),
        signal: status.signal(),
        killed,
        elapsed,
        max_rss_kib: usage.ru_maxrss,
        inherited_rss_kib,
        output,
        stray,
        reports,
    }
}

/// The client's arguments for one case: 20 requests to `url` with a 1 s request timeout, at
/// most 2 s of waiting for the server to say it is ready (a server that never answers is
/// given up on then, not after the default 10 s), the CSV report at `csv`.
fn client_args(url: &str, grpc: bool, csv: &Path) -> Vec<String> {
    let mut args = vec!["-m", "identity", "-u", url, "--request-count", "20"];
    args.extend(["--request-timeout", "1000", "--ready-timeout", "2"]);
    if grpc {
        args.extend(["-i", "grpc"]);
    }
    let mut args: Vec<String> = args.into_iter().map(String::from).collect();
    args.extend(["-f".to_string(), csv.to_string_lossy().into_owned()]);
    args
}

/// Starts the built `inferperf` with `args` in `work`, under the [`DATA_LIMIT`] data limit,
/// its stdout and stderr going to files of those names in `logs`.
fn spawn_limited(args: &[String], work: &Path, logs: &Path) -> std::process::Child {
    let log = |name: &str| std::fs::File::create(logs.join(name)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_inferperf"));
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DATA_LIMIT,
                rlim_max: DATA_LIMIT,
            };
            libc::setrlimit(libc::RLIMIT_DATA, &limit);
            Ok(())
        });
    }
    command
        .args(args)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log("stdout"))
        .stderr(log("stderr"))
        .spawn()
        .expect("inferperf starts")
}

/// The files under `root`: those in `out_dir` (the reports), and those outside both `out_dir`
/// and `logs` (stray files).
fn files_written(root: &Path, out_dir: &Path, logs: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut all = Vec::new();
    files_under(root, &mut all);
    let (mut reports, mut stray) = (Vec::new(), Vec::new());
    for f in all {
        if f.starts_with(out_dir) {
            reports.push(f);
        } else if !f.starts_with(logs) {
            stray.push(f);
        }
    }
    (reports, stray)
}

/// Every way `o` falls short of what `mode` over `grpc` must do.
fn problems(mode: FaultMode, grpc: bool, o: &Outcome) -> Vec<String> {
    let want = expect(mode, grpc);
    let text = String::from_utf8_lossy(&o.output);
    let mut bad = Vec::new();
    if o.killed {
        bad.push(format!("still running after {KILL_AFTER:?}: killed"));
    } else if let Some(sig) = o.signal {
        bad.push(format!("died of signal {sig}"));
    } else if o.code != Some(want.code) {
        bad.push(format!("exit code {:?}, want {}", o.code, want.code));
    }
    let lower = text.to_lowercase();
    if !want.words.is_empty() && !want.words.iter().any(|w| lower.contains(&w.to_lowercase())) {
        bad.push(format!("output names none of {:?}", want.words));
    }
    if o.max_rss_kib > MAX_RSS_KIB.max(o.inherited_rss_kib) {
        bad.push(format!("peak memory {} MiB", o.max_rss_kib / 1024));
    }
    if !o.stray.is_empty() {
        bad.push(format!("files outside the output directory: {:?}", o.stray));
    }
    if mode == FaultMode::NameAbs && Path::new("/abs/x_v1.r.csv").exists() {
        bad.push("wrote /abs/x_v1.r.csv".to_string());
    }
    if want.code == 0 && !o.reports.iter().any(|f| f.ends_with("r.csv")) {
        bad.push(format!(
            "no CSV written (output directory: {:?})",
            o.reports
        ));
    }
    for (byte, name) in [(0x1b, "ESC"), (0x07, "BEL"), (b'\r', "CR")] {
        if o.output.contains(&byte) {
            bad.push(format!("raw {name} in the output"));
        }
    }
    bad
}

/// Runs one case of the matrix and fails with every problem.
fn case(mode: FaultMode, grpc: bool) {
    let proto = if grpc { "grpc" } else { "http" };
    let name = mode.name();
    let o = run_case(mode, grpc);
    let bad = problems(mode, grpc, &o);
    assert!(
        bad.is_empty(),
        "{name} over {proto}: {}\n(exit {:?}, {:.1} s, {} MiB)\n--- output ---\n{}",
        bad.join("; "),
        o.code,
        o.elapsed.as_secs_f64(),
        o.max_rss_kib / 1024,
        String::from_utf8_lossy(&o.output).escape_debug()
    );
}

macro_rules! matrix {
    ($($test:ident: $mode:ident, $grpc:expr;)*) => {
        $(
            #[test]
            fn $test() {
                case(FaultMode::$mode, $grpc);
            }
        )*

        /// Every mode appears in the matrix once per protocol it applies to.
        #[test]
        fn the_matrix_covers_every_mode() {
            let listed = [$((FaultMode::$mode, $grpc)),*];
            for &mode in FaultMode::all() {
                for (grpc, applies) in [(false, mode.applies_to_http()), (true, mode.applies_to_grpc())] {
                    let on = listed.contains(&(mode, grpc));
                    assert!(on || !applies, "{} over grpc={grpc} is missing", mode.name());
                }
            }
        }
    };
}

matrix! {
    http_none: None, false;
    grpc_none: None, true;
    http_refuse: Refuse, false;
    grpc_refuse: Refuse, true;
    http_reset: Reset, false;
    grpc_reset: Reset, true;
    http_close_mid_body: CloseMidBody, false;
    grpc_close_mid_body: CloseMidBody, true;
    http_stall_head: StallHead, false;
    grpc_stall_head: StallHead, true;
    http_stall_body: StallBody, false;
    grpc_stall_body: StallBody, true;
    http_stall_forever: StallForever, false;
    grpc_stall_forever: StallForever, true;
    http_drip: Drip, false;
    grpc_drip: Drip, true;
    http_wrong_content_length: WrongContentLength, false;
    grpc_wrong_content_length: WrongContentLength, true;
    http_garbage: Garbage, false;
    grpc_garbage: Garbage, true;
    http_status_500: Status500, false;
    grpc_status_500: Status500, true;
    http_every_nth_fails: EveryNthFails, false;
    grpc_every_nth_fails: EveryNthFails, true;
    http_every_nth_resets: EveryNthResets, false;
    grpc_every_nth_resets: EveryNthResets, true;
    http_not_json: NotJson, false;
    grpc_not_json: NotJson, true;
    http_not_protobuf: NotProtobuf, false;
    grpc_not_protobuf: NotProtobuf, true;
    http_interim_flood: InterimFlood, false;
    http_chunk_extension_flood: ChunkExtensionFlood, false;
    http_endless_header: EndlessHeader, false;
    grpc_endless_header: EndlessHeader, true;
    http_huge_content_length: HugeContentLength, false;
    grpc_huge_content_length: HugeContentLength, true;
    grpc_settings_flood: SettingsFlood, true;
    grpc_ping_flood: PingFlood, true;
    http_huge_headers: HugeHeaders, false;
    grpc_huge_headers: HugeHeaders, true;
    http_dims_huge: DimsHuge, false;
    grpc_dims_huge: DimsHuge, true;
    http_dims_big: DimsBig, false;
    grpc_dims_big: DimsBig, true;
    http_name_dotdot: NameDotdot, false;
    grpc_name_dotdot: NameDotdot, true;
    http_name_abs: NameAbs, false;
    grpc_name_abs: NameAbs, true;
    http_escape_text: EscapeText, false;
    grpc_escape_text: EscapeText, true;
    http_payload_too_large: PayloadTooLarge, false;
    grpc_payload_too_large: PayloadTooLarge, true;
    grpc_wrong_content_type: WrongContentType, true;
    grpc_compressed_no_encoding: CompressedNoEncoding, true;
    http_huge_number: HugeNumber, false;
    http_tiny_chunks: TinyChunks, false;
}

#[test]
fn serve_help_documents_every_fault_mode() {
    let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in ["--fault <MODE>", "--fault-ttl"] {
        assert!(help.contains(flag), "{flag}");
    }
    for mode in FaultMode::all() {
        assert!(
            help.contains(&format!("- {}:", mode.name())),
            "{}",
            mode.name()
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["serve", "--fault", "no-such-mode", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(99));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-mode"));
}

/// `serve --fault` as a child: it prints where it listens and ends by itself after its
/// lifetime, even with a connection it never answers.
#[test]
fn a_fault_server_child_ends_after_its_ttl() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args([
            "serve",
            "--fault",
            "stall-forever",
            "--port",
            "0",
            "--fault-ttl",
            "1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains("fault stall-forever on http://127.0.0.1:"),
        "{line}"
    );
    let http = line
        .split("http://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let _held = std::net::TcpStream::connect(http).unwrap();
    let (status, _, killed) = wait_bounded(&mut child);
    assert!(!killed);
    assert_eq!(std::process::ExitStatus::from_raw(status).code(), Some(0));
}

/// A request over the reference server's `--max-request-bytes`: the server answers 413 after
/// the head and closes while the client is still sending. The run names the server's answer
/// (as perf_analyzer does), not the broken pipe of the send cut short.
#[test]
fn a_request_refused_while_it_is_sent_names_the_refusal() {
    let cfg = inferperf::server::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        limits: inferperf::server::Limits {
            max_request_bytes: 1_000_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let server = inferperf::server::start(cfg).expect("reference server starts");
    let url = server.addr.to_string();
    // 16 MiB of FP32: the server stops reading after its lingering close (4 MiB).
    let args = [
        "-m",
        "identity_fp32",
        "-u",
        &url,
        "--shape",
        "INPUT0:4194304",
        "--request-count",
        "3",
    ];
    for _ in 0..3 {
        let o = Command::new(env!("CARGO_BIN_EXE_inferperf"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(99), "{stderr}");
        assert!(
            stderr.contains("request body exceeds the limit of 1000000 bytes"),
            "{stderr}"
        );
        assert!(!stderr.contains("Broken pipe"), "{stderr}");
    }
    server.stop();
}
