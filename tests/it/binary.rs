//! The `inferperf` binary as users run it: exit codes, one-line errors, `serve`, `demo`.

use crate::common;

use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inferperf"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_and_version() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--concurrency-range",
        "--measurement-mode",
        "--profile-export-file",
        "--percentile",
    ] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
    let o = run(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stderr(&o).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn usage_errors_exit_99_with_one_line() {
    for (args, needle) in [
        (vec!["-u", "127.0.0.1:1"], "-m"),
        (
            vec!["-m", "x", "--concurrency-range", "0"],
            "--concurrency-range",
        ),
        (vec!["-m", "x", "--no-such-flag"], "--no-such-flag"),
        (
            vec!["-m", "x", "--enable-mpi", "--concurrency-range", "1:4"],
            "--enable-mpi: measures one level",
        ),
        (vec!["-m", "x", "--mpi-scale-out"], "needs --enable-mpi"),
        (vec!["-m", "x", "--percentile", "100"], "--percentile"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(99), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(
            e.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {e}"
        );
    }
}

#[test]
fn server_down_exits_99_naming_the_address() {
    let o = run(&["-m", "simple", "-u", "127.0.0.1:1", "--ready-timeout", "0"]);
    assert_eq!(o.status.code(), Some(99));
    let e = stderr(&o);
    assert!(
        e.contains("127.0.0.1:1") && e.to_lowercase().contains("refused"),
        "{e}"
    );
}

#[test]
fn against_serve_process_with_reports() {
    let (mut child, addr) = common::spawn_serve();
    let dir = common::Scratch::new("inferperf-bin");
    let csv = dir.join("out.csv");
    let json = dir.join("out.json");
    let o = run(&[
        "-m",
        "simple",
        "-u",
        &addr,
        "--concurrency-range",
        "1:8:2",
        "-p",
        "300",
        "-s",
        "1000",
        "--no-pin",
        "-f",
        csv.to_str().unwrap(),
        "--profile-export-file",
        json.to_str().unwrap(),
    ]);
    let unknown = run(&["-m", "nope", "-u", &addr]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for c in [1, 3, 5, 7] {
        assert!(
            text.contains(&format!("Request concurrency: {c}\n")),
            "{text}"
        );
    }
    assert!(text.contains("  Server: \n"), "{text}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 5);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["experiments"].as_array().unwrap().len(), 4);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    // An existing export file is refused, as perf_analyzer does.
    let again = run(&[
        "-m",
        "simple",
        "-u",
        &addr,
        "--profile-export-file",
        json.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(99));

    assert_eq!(unknown.status.code(), Some(99));
    assert!(stderr(&unknown).contains("nope"), "{}", stderr(&unknown));
}

#[test]
fn demo_runs_end_to_end() {
    let o = run(&[
        "demo",
        "--concurrency-range",
        "1:2",
        "-p",
        "300",
        "-s",
        "1000",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("*** Measurement Settings ***"), "{text}");
    assert!(text.contains("Request concurrency: 2\n"), "{text}");
    assert!(text.contains("Concurrency: 2, throughput: "), "{text}");
}

#[test]
fn ctrl_c_ends_the_window_and_still_writes_reports() {
    let (mut server, addr) = common::spawn_serve();
    let dir = common::Scratch::new("inferperf-sigint");
    let csv = dir.join("out.csv");
    let child = bin()
        .args([
            "-m",
            "simple",
            "-u",
            &addr,
            "-p",
            "60000",
            "--no-pin",
            "-f",
            csv.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: sending a signal to a child process this test spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("    Request count: "), "{text}");
    assert!(text.contains("Concurrency: 1, throughput: "), "{text}");
    assert!(stderr(&o).contains("Interrupted"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 2);
}

#[test]
fn grpc_flags_against_serve_process() {
    let (mut child, _, grpc) = common::spawn_serve_grpc();
    let unary = run(&[
        "-m",
        "simple",
        "-i",
        "grpc",
        "-u",
        &grpc,
        "--request-count",
        "300",
        "--concurrency-range",
        "3",
        "--grpc-compression-algorithm",
        "gzip",
        "-H",
        "x-tenant:a",
        "--request-parameter",
        "tag:x:string",
        "--no-pin",
    ]);
    let streamed = run(&[
        "-m",
        "repeat_int32",
        "-i",
        "grpc",
        "--streaming",
        "--shape",
        "IN:3",
        "-u",
        &grpc,
        "--request-count",
        "50",
        "--no-pin",
    ]);
    let not_streamed = run(&["-m", "repeat_int32", "-i", "grpc", "-u", &grpc, "--no-pin"]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(unary.status.code(), Some(0), "{}", stderr(&unary));
    let text = String::from_utf8_lossy(&unary.stdout);
    assert!(text.contains("    Request count: 300\n"), "{text}");
    assert!(text.contains("    Avg gRPC time: "), "{text}");
    assert_eq!(streamed.status.code(), Some(0), "{}", stderr(&streamed));
    let text = String::from_utf8_lossy(&streamed.stdout);
    assert!(
        text.contains("Using asynchronous calls"),
        "--streaming implies --async: {text}"
    );
    assert!(text.contains("    Response Throughput: "), "{text}");
    assert_eq!(not_streamed.status.code(), Some(99));
    assert!(
        stderr(&not_streamed).contains("decoupled"),
        "{}",
        stderr(&not_streamed)
    );
}

/// perf_analyzer's columns through `Client Recv` on a server with the statistics extension.
const PA_SERVER_COLS: &str = "Client Send,Network+Server Send/Recv,Server Queue,\
    Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,\
    p50 latency,p90 latency,p95 latency,p99 latency";

#[test]
fn csv_header_is_perf_analyzers_unless_extra_columns_are_asked_for() {
    // Each flag set with the header perf_analyzer 2.50 writes for it (seen against
    // tritonserver 2.51); inferperf's own columns only with --csv-extra-columns, after its columns.
    let (mut child, http, grpc) = common::spawn_serve_grpc();
    let dir = common::temp_dir("bin-csv-header");
    let cases = csv_header_cases(&http, &grpc);
    // Each run writes its own CSV, so the runs go side by side.
    let results: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = cases
            .iter()
            .enumerate()
            .map(|(i, (args, _))| {
                let csv = dir.join(format!("{i}.csv"));
                s.spawn(move || run_with_csv(&csv, args))
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let _ = child.kill();
    let _ = child.wait();
    for ((args, want), (o, csv)) in cases.iter().zip(&results) {
        check_csv_header(args, want, o, csv);
    }
}

/// Flag sets (against the server's HTTP or gRPC address) and the header each must write.
fn csv_header_cases<'a>(http: &'a str, grpc: &'a str) -> Vec<(Vec<&'a str>, String)> {
    vec![
        (
            vec!["-m", "simple", "-u", &http],
            format!("Concurrency,Inferences/Second,{PA_SERVER_COLS}"),
        ),
        (
            vec!["-m", "simple", "-u", &http, "--verbose-csv"],
            format!(
                "Concurrency,Inferences/Second,{PA_SERVER_COLS},Avg latency,\
                 request/response,response wait"
            ),
        ),
        (
            vec![
                "-m",
                "simple",
                "-i",
                "grpc",
                "-u",
                &grpc,
                "--request-rate-range",
                "400",
            ],
            format!("Request Rate,Inferences/Second,{PA_SERVER_COLS}"),
        ),
        (
            vec![
                "-m",
                "simple",
                "-i",
                "grpc",
                "-u",
                &grpc,
                "--request-rate-range",
                "400",
                "--verbose-csv",
                "--percentile",
                "95",
            ],
            format!(
                "Request Rate,Inferences/Second,{PA_SERVER_COLS},request/response,\
                 response wait"
            ),
        ),
        (
            vec![
                "-m",
                "repeat_int32",
                "-i",
                "grpc",
                "-u",
                &grpc,
                "--streaming",
                "--shape",
                "IN:4",
                "--verbose-csv",
            ],
            format!(
                "Concurrency,Inferences/Second,Response Throughput,{PA_SERVER_COLS},\
                 Avg latency,request/response,response wait"
            ),
        ),
        (
            vec!["-m", "simple", "-u", &http, "--csv-extra-columns"],
            format!(
                "Concurrency,Inferences/Second,{PA_SERVER_COLS},Min latency,Max latency,\
                 Client Recv Delay p50,Client Recv Delay p99,Clock-timed responses %"
            ),
        ),
    ]
}

/// Runs one short count-window measurement with `args`, writing the CSV to `csv`: the
/// process output and the CSV text (empty when none was written).
fn run_with_csv(csv: &std::path::Path, args: &[&str]) -> (Output, String) {
    let mut all = args.to_vec();
    all.extend([
        "--measurement-mode",
        "count_windows",
        "--measurement-request-count",
        "40",
        "-s",
        "1000",
        "--no-pin",
        "-f",
        csv.to_str().unwrap(),
    ]);
    let o = run(&all);
    (o, std::fs::read_to_string(csv).unwrap_or_default())
}

/// The run succeeded, its CSV starts with `want` and one row of as many cells, led by the
/// load level the run was given.
fn check_csv_header(args: &[&str], want: &str, o: &Output, csv: &str) {
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(o));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(want), "{args:?}");
    let row = lines.next().expect("one row");
    assert_eq!(
        row.split(',').count(),
        want.split(',').count(),
        "{args:?}: {row}"
    );
    // The first cell is the load level the run was given.
    let level = if args.contains(&"--request-rate-range") {
        "400"
    } else {
        "1"
    };
    assert_eq!(row.split(',').next(), Some(level), "{args:?}: {row}");
}
