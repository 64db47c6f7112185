//! MPI test helpers: the stand-in libmpi (`tests/mpi_stub/mpi_stub.c`) built with gcc, a
//! launcher that starts N ranks over it, and the real `mpirun` when installed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`launch`] lets the ranks run before killing them.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds the stand-in as `<dir>/libmpi_stub.so`; `None` (with a message) without gcc.
pub fn build_stub(dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi_stub/mpi_stub.c");
    std::fs::create_dir_all(dir).expect("stub directory");
    let lib = dir.join("libmpi_stub.so");
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(lib),
        Ok(s) => panic!("gcc failed to build the MPI stand-in: {s}"),
        Err(e) => {
            eprintln!("skipped: gcc is not available ({e})");
            None
        }
    }
}

/// `mpirun` from PATH, if Open MPI is installed.
pub fn mpirun() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.is_file())
}

/// A fresh rendezvous directory for one launch (short: Unix socket paths are ≤ 107 bytes).
fn rendezvous_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ipmpi-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("rendezvous directory");
    dir
}

/// Starts `n` processes of `cmd` (program, then its arguments) as ranks 0..n of a stand-in
/// world over `stub`, with `envs` added, and waits for all of them; any still running after
/// [`LAUNCH_TIMEOUT`] is killed. Outputs are in rank order.
pub fn launch(n: usize, stub: &Path, cmd: &[&str], envs: &[(&str, &str)]) -> Vec<Output> {
    let dir = rendezvous_dir();
    let mut ranks: Vec<Rank> = (0..n)
        .map(|rank| {
            let mut c = Command::new(cmd[0]);
            c.args(&cmd[1..])
                .env("INFERPERF_MPI_LIB", stub)
                .env("INFERPERF_MPISTUB_RANK", rank.to_string())
                .env("INFERPERF_MPISTUB_SIZE", n.to_string())
                .env("INFERPERF_MPISTUB_DIR", &dir)
                .envs(envs.iter().copied())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            Rank::spawn(c)
        })
        .collect();
    let outputs = wait_all(&mut ranks, LAUNCH_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    outputs
}

/// Runs `command` to completion with output captured, killing it after `timeout`.
pub fn run_bounded(command: Command, timeout: Duration) -> Output {
    let mut one = vec![Rank::spawn(command)];
    wait_all(&mut one, timeout).remove(0)
}

/// A started process whose stdout and stderr are drained by threads (so a chatty process
/// cannot block on a full pipe while the test waits for it).
struct Rank {
    child: Child,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
}

impl Rank {
    fn spawn(mut command: Command) -> Rank {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("process starts");
        let stdout = drain(child.stdout.take().expect("piped stdout"));
        let stderr = drain(child.stderr.take().expect("piped stderr"));
        Rank {
            child,
            stdout,
            stderr,
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

fn wait_all(ranks: &mut Vec<Rank>, timeout: Duration) -> Vec<Output> {
    let deadline = Instant::now() + timeout;
    let mut statuses = vec![None; ranks.len()];
    while statuses.iter().any(Option::is_none) && Instant::now() < deadline {
        for (rank, status) in ranks.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = rank.child.try_wait().expect("try_wait");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (rank, status) in ranks.iter_mut().zip(statuses.iter_mut()) {
        if status.is_none() {
            eprintln!("killing pid {} after {timeout:?}", rank.child.id());
            let _ = rank.child.kill();
            *status = Some(rank.child.wait().expect("wait after kill"));
        }
    }
    ranks
        .drain(..)
        .zip(statuses)
        .map(|(rank, status)| Output {
            status: status.expect("every rank has ended"),
            stdout: rank.stdout.join().expect("stdout reader"),
            stderr: rank.stderr.join().expect("stderr reader"),
        })
        .collect()
}
