//! `--enable-mpi` end to end: inferperf processes as the ranks of an MPI job against the
//! in-process reference server. CI has no Open MPI (it must not download anything), so these
//! run over the stand-in libmpi that the tests build from C (`tests/mpi_stub/`); the last
//! test repeats the scale-out run under the real `mpirun` when Open MPI is installed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::mpi::{build_stub, launch, mpirun, run_bounded};
use common::{export_latencies, model_counters, start_server, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_inferperf");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The stand-in built into `dir`, or `None` (test skipped) without gcc.
fn stub(dir: &Path) -> Option<PathBuf> {
    build_stub(&dir.join("stub"))
}

/// The CSV's first data row as (header, value) pairs.
fn csv_row(path: &Path) -> Vec<(String, String)> {
    let csv = std::fs::read_to_string(path).unwrap();
    let mut lines = csv.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let row = lines.next().unwrap().split(',').map(String::from);
    head.into_iter().zip(row).collect()
}

fn csv_field(row: &[(String, String)], name: &str) -> u64 {
    let v = &row.iter().find(|(h, _)| h == name).unwrap().1;
    v.parse::<f64>().unwrap() as u64
}

#[test]
fn scale_out_over_two_ranks_reads_like_one_process() {
    let dir = temp_dir("mpi-scale");
    let Some(lib) = stub(&dir) else { return };
    let server = start_server();
    let (csv, export) = (dir.join("out.csv"), dir.join("export.json"));
    let url = server.addr.to_string();
    let args = [
        BIN,
        "--enable-mpi",
        "--mpi-scale-out",
        "-m",
        "simple",
        "-u",
        &url,
        "--concurrency-range",
        "4",
        "--request-count",
        "500",
        "--no-pin",
        "-f",
        csv.to_str().unwrap(),
        "--profile-export-file",
        export.to_str().unwrap(),
    ];
    let out = launch(2, &lib, &args, &[]);
    for o in &out {
        assert_eq!(o.status.code(), Some(0), "{}", show(o));
    }
    let served = model_counters(&server, "simple").infer_requests;
    assert_eq!(served, 500, "the ranks' shares add up to the total");
    let root = text(&out[0].stdout);
    assert!(root.contains("Request concurrency: 4"), "{root}");
    assert!(root.contains("    Request count: 500\n"), "{root}");
    assert!(text(&out[1].stdout).is_empty(), "{}", show(&out[1]));
    assert!(
        text(&out[0].stderr).contains("MPI scale-out: 2 ranks"),
        "{}",
        show(&out[0])
    );
    // One merged export; the merged percentiles are those of the union of both ranks'
    // requests (CSV in whole µs, truncated).
    let lat = export_latencies(&export);
    assert_eq!(lat.len(), 500);
    let row = csv_row(&csv);
    assert_eq!(csv_field(&row, "Concurrency"), 4);
    for p in [50u64, 90, 95, 99] {
        // perf_analyzer's rank: round(p/100 * (n - 1)).
        let nearest = lat[(p as f64 / 100.0 * (lat.len() - 1) as f64 + 0.5) as usize];
        assert_eq!(
            csv_field(&row, &format!("p{p} latency")),
            nearest / 1000,
            "p{p}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multi_model_ranks_profile_their_own_models_and_write_their_own_reports() {
    let dir = temp_dir("mpi-multi");
    let Some(lib) = stub(&dir) else { return };
    let server = start_server();
    // perf_analyzer's MPMD form gives each rank its own flags; a shell picks them by rank.
    // Stability is not what this checks: a wide threshold and many windows let a loaded
    // machine settle.
    let script = format!(
        "if [ \"$INFERPERF_MPISTUB_RANK\" = 0 ]; then m=simple; x=; \
         else m=identity_fp32; x='--shape INPUT0:16'; fi; \
         exec {BIN} --enable-mpi -m $m $x -u {} --concurrency-range 2 \
         --measurement-mode count_windows --measurement-request-count 60 -s 100 --max-trials 30 \
         --no-pin \
         -f {}/out$INFERPERF_MPISTUB_RANK.csv",
        server.addr,
        dir.display()
    );
    let out = launch(2, &lib, &["sh", "-c", &script], &[]);
    for (rank, o) in out.iter().enumerate() {
        let all: Vec<String> = out.iter().map(show).collect();
        assert_eq!(o.status.code(), Some(0), "rank {rank}: {all:?}");
        let report = text(&o.stdout);
        assert!(
            report.contains("Request concurrency: 2"),
            "rank {rank}: {report}"
        );
        assert!(dir.join(format!("out{rank}.csv")).exists(), "rank {rank}");
    }
    assert!(model_counters(&server, "simple").infer_requests >= 180);
    assert!(model_counters(&server, "identity_fp32").infer_requests >= 180);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_that_dies_ends_the_run_on_the_others_with_what_was_measured() {
    let dir = temp_dir("mpi-dies");
    let Some(lib) = stub(&dir) else { return };
    let server = start_server();
    // Rank 1 is killed (SIGKILL) 1.5 s into 0.5 s windows that can never all agree (-s 0.001):
    // rank 0 must notice at its next window exchange, not wait for its 60 s timeout.
    let script = format!(
        "{BIN} --enable-mpi -m simple -u {} --concurrency-range 1 -p 500 -s 0.001 -r 100 \
         --no-pin -f {}/out$INFERPERF_MPISTUB_RANK.csv & pid=$!; \
         if [ \"$INFERPERF_MPISTUB_RANK\" = 1 ]; then sleep 1.5; kill -9 $pid; fi; wait $pid",
        server.addr,
        dir.display()
    );
    let started = Instant::now();
    let out = launch(2, &lib, &["sh", "-c", &script], &[]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let root = &out[0];
    assert_eq!(root.status.code(), Some(99), "{}", show(root));
    let err = text(&root.stderr);
    assert!(err.contains("MPI rank 0"), "{err}");
    // The windows measured before the other rank died are reported and written.
    assert!(dir.join("out0.csv").exists(), "{}", show(root));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_libmpi_the_error_names_the_library() {
    let o = Command::new(BIN)
        .args(["--enable-mpi", "-m", "simple", "-u", "127.0.0.1:1"])
        .env("INFERPERF_MPI_LIB", "/nonexistent/libmpi.so")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(99), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(err.contains("/nonexistent/libmpi.so"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn scale_out_under_real_open_mpi() {
    let Some(mpirun) = mpirun() else {
        eprintln!("skipped: mpirun not found (apt-get install openmpi-bin to run this test)");
        return;
    };
    let dir = temp_dir("mpi-real");
    let server = start_server();
    let csv = dir.join("out.csv");
    let mut cmd = Command::new(mpirun);
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        "2",
        BIN,
        "--enable-mpi",
        "--mpi-scale-out",
        "-m",
        "simple",
        "-u",
    ])
    .arg(server.addr.to_string())
    .args([
        "--concurrency-range",
        "3",
        "--request-count",
        "300",
        "--no-pin",
        "-f",
    ])
    .arg(&csv);
    let o = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(model_counters(&server, "simple").infer_requests, 300);
    let stdout = text(&o.stdout);
    assert!(stdout.contains("Request concurrency: 3"), "{stdout}");
    assert!(stdout.contains("    Request count: 300\n"), "{stdout}");
    assert_eq!(
        stdout.matches("Request concurrency: 3").count(),
        1,
        "one report: {stdout}"
    );
    assert_eq!(csv_field(&csv_row(&csv), "Concurrency"), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multi_model_under_real_open_mpi_in_perf_analyzers_mpmd_form() {
    let Some(mpirun) = mpirun() else {
        eprintln!("skipped: mpirun not found (apt-get install openmpi-bin to run this test)");
        return;
    };
    let dir = temp_dir("mpi-real-mpmd");
    let server = start_server();
    let url = server.addr.to_string();
    let rank = |model: &str, extra: &[&str], csv: &str| -> Vec<String> {
        let mut a: Vec<String> = ["-n", "1", BIN, "--enable-mpi", "-m", model, "-u", &url]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(
            [
                "--concurrency-range",
                "2",
                "--request-count",
                "100",
                "--no-pin",
                "-f",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        a.push(dir.join(csv).display().to_string());
        a
    };
    let mut cmd = Command::new(mpirun);
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(rank("simple", &[], "a.csv"))
    .arg(":")
    .args(rank("identity_fp32", &["--shape", "INPUT0:16"], "b.csv"));
    let o = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Each rank measured its own model with its whole load and wrote its own report.
    assert_eq!(model_counters(&server, "simple").infer_requests, 100);
    assert_eq!(model_counters(&server, "identity_fp32").infer_requests, 100);
    assert_eq!(csv_field(&csv_row(&dir.join("a.csv")), "Concurrency"), 2);
    assert_eq!(csv_field(&csv_row(&dir.join("b.csv")), "Concurrency"), 2);
    let stdout = text(&o.stdout);
    assert_eq!(
        stdout.matches("Request concurrency: 2").count(),
        2,
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_on_every_rank_as_mpirun_sends_on_ctrl_c_still_writes_the_merged_report() {
    let dir = temp_dir("mpi-term");
    let Some(lib) = stub(&dir) else { return };
    let server = start_server();
    // mpirun turns Ctrl-C into SIGTERM to every rank; windows never stabilise (-s 0.001), so
    // only the signal ends the level.
    let script = format!(
        "{BIN} --enable-mpi --mpi-scale-out -m simple -u {} --concurrency-range 2 -p 300 \
         -s 0.001 -r 1000 --no-pin -f {}/out.csv & pid=$!; sleep 1.5; kill -TERM $pid; \
         wait $pid",
        server.addr,
        dir.display()
    );
    let out = launch(2, &lib, &["sh", "-c", &script], &[]);
    for o in &out {
        assert_eq!(o.status.code(), Some(0), "{}", show(o));
    }
    let root = text(&out[0].stdout);
    assert!(root.contains("Request concurrency: 2"), "{root}");
    assert!(root.contains("Throughput:"), "{root}");
    assert!(
        text(&out[1].stderr).is_empty(),
        "rank 1 is silent: {}",
        show(&out[1])
    );
    assert_eq!(csv_field(&csv_row(&dir.join("out.csv")), "Concurrency"), 2);
    let _ = std::fs::remove_dir_all(&dir);
}
