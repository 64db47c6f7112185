//! The libmpi bindings (`src/mpi/ffi.rs`, `src/mpi/world.rs`) in real processes: the hidden
//! `inferperf mpi-probe` (barrier, broadcast from rank 1, gather to rank 0, finalize) over
//! the stand-in libmpi (`tests/mpi_stub/`, needs gcc) and over Open MPI's `mpirun` when it is
//! installed. Each case is skipped with a message when its tool is missing.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::mpi::{build_stub, launch, mpirun, run_bounded};
use serde_json::Value;

const INFERPERF: &str = env!("CARGO_BIN_EXE_inferperf");

/// The stand-in built into a scratch directory, kept for as long as the returned value lives;
/// `None` (test skipped) without gcc.
fn stub(tag: &str) -> Option<(common::Scratch, PathBuf)> {
    let dir = common::Scratch::new(&format!("inferperf-test-mpistub-{tag}"));
    let lib = build_stub(&dir)?;
    Some((dir, lib))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The probe's one JSON line.
fn probe_line(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "no JSON line; stdout {stdout:?}, stderr {:?}",
                text(&out.stderr)
            )
        });
    serde_json::from_str(line).expect("the probe prints JSON")
}

/// What rank 0 of an `n`-rank probe must have gathered: rank r sent "rank{r}" r*1000 times.
fn expected_gather(n: usize) -> Vec<String> {
    (0..n)
        .map(|r| format!("rank{r}").repeat(r * 1000))
        .collect()
}

/// Checks the probe output of every rank of an `n`-rank world (n ≥ 2).
fn check_probe_outputs(outputs: &[Output], n: usize) {
    for (rank, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "rank {rank}: {:?}, stderr {}",
            out.status,
            text(&out.stderr)
        );
        let v = probe_line(out);
        assert_eq!(v["rank"], rank);
        assert_eq!(v["size"], n);
        assert!(!v["host"].as_str().unwrap().is_empty());
        assert_eq!(
            v["broadcast"],
            inferperf::mpi::world::probe_broadcast_text(1)
        );
        if rank == 0 {
            let gathered: Vec<String> = serde_json::from_value(v["gathered"].clone()).unwrap();
            let lens: Vec<usize> = gathered.iter().map(String::len).collect();
            assert_eq!(lens, [0, 5000, 10000][..n]);
            assert_eq!(gathered, expected_gather(n));
        } else {
            assert!(v["gathered"].is_null(), "rank {rank}: {v}");
        }
    }
}

#[test]
fn stub_ranks_see_the_broadcast_and_root_gets_every_string() {
    let Some((_dir, lib)) = stub("ok") else {
        return;
    };
    for n in [2, 3] {
        let outputs = launch(n, &lib, &[INFERPERF, "mpi-probe"], &[]);
        check_probe_outputs(&outputs, n);
    }
}

#[test]
fn stub_without_launcher_variables_is_a_world_of_one() {
    let Some((_dir, lib)) = stub("single") else {
        return;
    };
    let mut cmd = Command::new(INFERPERF);
    cmd.arg("mpi-probe").env("INFERPERF_MPI_LIB", &lib);
    for var in [
        "INFERPERF_MPISTUB_RANK",
        "INFERPERF_MPISTUB_SIZE",
        "INFERPERF_MPISTUB_DIR",
    ] {
        cmd.env_remove(var);
    }
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = probe_line(&out);
    assert_eq!((v["rank"].as_u64(), v["size"].as_u64()), (Some(0), Some(1)));
    assert_eq!(
        v["broadcast"],
        inferperf::mpi::world::probe_broadcast_text(0)
    );
    assert_eq!(v["gathered"], serde_json::json!([""]));
}

#[test]
fn stub_rank_that_dies_ends_the_run_on_rank_0_quickly() {
    let Some((_dir, lib)) = stub("die") else {
        return;
    };
    let start = Instant::now();
    // A long MPI timeout: rank 0 must notice the death itself, not wait the timeout out.
    let args = [
        INFERPERF,
        "mpi-probe",
        "--die-after-barrier",
        "--timeout-s",
        "50",
    ];
    let outputs = launch(2, &lib, &args, &[]);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(outputs[1].status.code(), Some(1));
    let err = text(&outputs[0].stderr);
    assert_eq!(outputs[0].status.code(), Some(99), "stderr {err}");
    assert!(
        err.contains("error: rank 0: MPI_Ibcast failed with MPI error code 16"),
        "{err}"
    );
    assert!(err.contains("lost the connection to a peer rank"), "{err}");
    assert!(text(&outputs[0].stdout).is_empty());
}

#[test]
fn missing_library_is_named_in_the_error() {
    let mut cmd = Command::new(INFERPERF);
    cmd.arg("mpi-probe")
        .env("INFERPERF_MPI_LIB", "/nonexistent/libmpi.so.40");
    let out = run_bounded(cmd, Duration::from_secs(30));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{err}");
    assert!(err.contains("tried /nonexistent/libmpi.so.40 ("), "{err}");
    assert!(err.contains("No such file"), "the loader's reason: {err}");
    assert!(
        err.contains("--enable-mpi needs Open MPI (libmpi.so.40)")
            && err.contains("install openmpi-bin or set INFERPERF_MPI_LIB"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// `mpirun` with the flags this machine needs (root user, 2 cores shared by many) and
/// `mpirun_args`, running the probe with `extra`.
fn mpirun_probe(mpirun: &PathBuf, mpirun_args: &[&str], extra: &[&str]) -> Output {
    let mut cmd = Command::new(mpirun);
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        "2",
    ])
    .args(mpirun_args)
    .arg(INFERPERF)
    .arg("mpi-probe")
    .args(extra)
    .env_remove("INFERPERF_MPI_LIB");
    run_bounded(cmd, Duration::from_secs(60))
}

/// The files under `dir` (recursively) whose path ends with `tail`.
fn find_files(dir: &std::path::Path, tail: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            find_files(&path, tail, found);
        } else if path.ends_with(tail) {
            found.push(path);
        }
    }
}

#[test]
fn open_mpi_two_ranks_under_mpirun() {
    let Some(mpirun) = mpirun() else {
        eprintln!("skipped: mpirun is not installed (apt-get install openmpi-bin)");
        return;
    };
    // mpirun interleaves long lines of different ranks on its own stdout: each rank's output
    // goes to its own file instead (<dir>/<job>/rank.<r>/stdout).
    let dir = common::temp_dir("mpirun-probe");
    let dir_arg = dir.to_str().unwrap();
    let out = mpirun_probe(&mpirun, &["--output-filename", dir_arg], &[]);
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    let outputs: Vec<Output> = (0..2)
        .map(|rank| {
            let mut found = Vec::new();
            find_files(&dir, &format!("rank.{rank}/stdout"), &mut found);
            assert_eq!(found.len(), 1, "rank {rank}: {found:?}");
            Output {
                status: out.status,
                stdout: std::fs::read(&found[0]).unwrap(),
                stderr: Vec::new(),
            }
        })
        .collect();
    check_probe_outputs(&outputs, 2);
}

#[test]
fn open_mpi_hung_rank_times_out_with_the_clear_message() {
    let Some(mpirun) = mpirun() else {
        eprintln!("skipped: mpirun is not installed (apt-get install openmpi-bin)");
        return;
    };
    let start = Instant::now();
    let out = mpirun_probe(&mpirun, &[], &["--hang-after-barrier", "--timeout-s", "2"]);
    let took = start.elapsed();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(
        err.contains(
            "error: rank 0: MPI broadcast did not complete within 2 s: a rank has stopped \
             (died or hung)"
        ),
        "{err}"
    );
}
