//! The MPI world over libmpi: [`Collective`] on `MPI_COMM_WORLD`.
//!
//! Every collective is started nonblocking (`MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Igather[v]`)
//! and polled with `MPI_Test`, so a rank that died or hangs costs at most `timeout` instead of
//! blocking forever. After a failed or timed-out call no MPI function but `MPI_Abort` is
//! called again, and the buffers a still-pending call may write into are leaked rather than
//! freed under it.

use std::cell::Cell;
use std::ffi::{c_int, c_void, OsString};
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::ffi::{self, Handle, Mpi, THREAD_FUNNELED};
use super::Collective;
use crate::error::{Error, Result};

/// Environment variables that launchers set in every rank: Open MPI's mpirun, PMIx and PMI
/// (MPICH, Slurm) and the tests' stand-in libmpi.
const LAUNCHER_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "PMI_SIZE",
    "PMI_RANK",
    "INFERPERF_MPISTUB_SIZE",
];

/// Whether this process was started by an MPI launcher (mpirun, srun, the test stand-in).
pub fn launched_by_mpirun() -> bool {
    launched_by(|name| std::env::var_os(name))
}

fn launched_by(var: impl Fn(&str) -> Option<OsString>) -> bool {
    LAUNCHER_VARS.iter().any(|name| var(name).is_some())
}

/// One rank's view of `MPI_COMM_WORLD`.
pub struct MpiWorld {
    mpi: &'static Mpi,
    rank: usize,
    size: usize,
    processor: String,
    /// Set once a collective failed or timed out: MPI is not called again (but Abort).
    broken: Cell<bool>,
    /// MPI was initialised `MPI_THREAD_FUNNELED`: keep the world on the thread that did it.
    _not_send: PhantomData<*const ()>,
}

impl MpiWorld {
    /// Loads libmpi, initialises MPI (unless something already did) with
    /// `MPI_THREAD_FUNNELED`, and makes MPI errors come back as return codes.
    pub fn init() -> Result<MpiWorld> {
        let mpi = ffi::mpi()?;
        let mut flag: c_int = 0;
        // SAFETY: MPI_Finalized and MPI_Initialized may be called at any time.
        mpi.check("MPI_Finalized", unsafe { (mpi.finalized)(&mut flag) })?;
        if flag != 0 {
            return Err(Error::generic(
                "MPI was already finalized in this process and cannot be initialised again",
            ));
        }
        mpi.check("MPI_Initialized", unsafe { (mpi.initialized)(&mut flag) })?;
        if flag == 0 {
            let mut provided: c_int = 0;
            // SAFETY: null argc/argv are allowed since MPI-2; `provided` is writable.
            let code = unsafe {
                (mpi.init_thread)(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    THREAD_FUNNELED,
                    &mut provided,
                )
            };
            mpi.check("MPI_Init_thread", code)
                .map_err(|e| Error::generic(format!("{e} (library {})", mpi.origin)))?;
        }
        // SAFETY: both handles are the library's predefined objects.
        let code = unsafe { (mpi.comm_set_errhandler)(mpi.comm_world, mpi.errors_return) };
        mpi.check("MPI_Comm_set_errhandler", code)?;
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: the out-pointers are writable; the communicator is predefined.
        mpi.check("MPI_Comm_rank", unsafe {
            (mpi.comm_rank)(mpi.comm_world, &mut rank)
        })?;
        mpi.check("MPI_Comm_size", unsafe {
            (mpi.comm_size)(mpi.comm_world, &mut size)
        })?;
        let (rank, size) = match (usize::try_from(rank), usize::try_from(size)) {
            (Ok(r), Ok(s)) if r < s => (r, s),
            _ => {
                return Err(Error::generic(format!(
                    "MPI reported rank {rank} of size {size}, which is not a valid world"
                )))
            }
        };
        Ok(MpiWorld {
            mpi,
            rank,
            size,
            processor: mpi.processor_name(),
            broken: Cell::new(false),
            _not_send: PhantomData,
        })
    }

    /// The name of the host this rank runs on (`MPI_Get_processor_name`).
    pub fn processor_name(&self) -> String {
        self.processor.clone()
    }

    /// Ends MPI cleanly. Refused after a failed collective: MPI_Finalize could block on a
    /// rank that is gone.
    pub fn finalize(self) -> Result<()> {
        if self.broken.get() {
            return Err(Error::generic(
                "MPI_Finalize skipped: an earlier collective failed",
            ));
        }
        let mut flag: c_int = 0;
        // SAFETY: MPI_Finalized may be called at any time.
        self.mpi
            .check("MPI_Finalized", unsafe { (self.mpi.finalized)(&mut flag) })?;
        if flag != 0 {
            return Ok(());
        }
        // SAFETY: no request of this rank is pending (every collective completed).
        self.mpi
            .check("MPI_Finalize", unsafe { (self.mpi.finalize)() })
    }

    /// Ends every rank of the job with `code` (`MPI_Abort`); exits this process if the
    /// library returns.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI_Abort may be called in any state after MPI_Init, also after errors.
        unsafe { (self.mpi.abort)(self.mpi.comm_world, code) };
        std::process::exit(code)
    }

    fn check_root(&self, root: usize) -> Result<c_int> {
        match c_int::try_from(root) {
            Ok(r) if root < self.size => Ok(r),
            _ => Err(Error::generic(format!(
                "MPI root rank {root} is outside the world of {} ranks",
                self.size
            ))),
        }
    }

    /// Starts one nonblocking collective with `start(&mut buffers, &mut request)` and polls it
    /// to completion. `buffers` owns every buffer the call reads or writes (heap memory, so
    /// moving `B` does not move them); when the call fails or times out they are leaked, as
    /// MPI may still access them.
    fn run_op<B>(
        &self,
        op: &str,
        call: &str,
        timeout: Duration,
        mut buffers: B,
        start: impl FnOnce(&mut B, *mut Handle) -> c_int,
    ) -> Result<B> {
        if self.broken.get() {
            return Err(Error::generic(format!(
                "MPI {op} not attempted: an earlier collective failed"
            )));
        }
        let mut request: Handle = std::ptr::null_mut();
        let code = start(&mut buffers, &mut request);
        let result = self.mpi.check(call, code).and_then(|()| {
            poll_until(op, timeout, || {
                let mut flag: c_int = 0;
                // SAFETY: `request` came from the start call and is still active; Open MPI's
                // MPI_STATUS_IGNORE is a null pointer.
                let code =
                    unsafe { (self.mpi.test)(&mut request, &mut flag, std::ptr::null_mut()) };
                self.mpi.check(&format!("MPI_Test ({call})"), code)?;
                Ok(flag != 0)
            })
        });
        match result {
            Ok(()) => Ok(buffers),
            Err(e) => {
                self.broken.set(true);
                std::mem::forget(buffers);
                Err(e)
            }
        }
    }
}

/// Polls `done` with a growing sleep in between (20 µs doubling to 1 ms: quick for the
/// common short wait, cheap for a long one) until it says true, fails, or `timeout` passes.
fn poll_until(op: &str, timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(20);
    loop {
        if done()? {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::generic(format!(
                "MPI {op} did not complete within {} s: a rank has stopped (died or hung)",
                timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

/// A byte count as MPI's `int` count, or an error naming what overflowed.
fn mpi_count(n: u64, what: &str) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        Error::generic(format!(
            "MPI {what}: {n} bytes is more than MPI's 2 GiB limit for one message"
        ))
    })
}

/// Receive counts and displacements (bytes, as MPI's `int`) for gathering blocks of `lens`
/// bytes back to back, and the total; fails beyond 2 GiB, which `int` displacements cannot
/// address.
fn gather_layout(lens: &[u64]) -> Result<(Vec<c_int>, Vec<c_int>, usize)> {
    let mut counts = Vec::with_capacity(lens.len());
    let mut displs = Vec::with_capacity(lens.len());
    let mut total: u64 = 0;
    for &len in lens {
        displs.push(mpi_count(total, "gather")?);
        counts.push(mpi_count(len, "gather")?);
        total = total.saturating_add(len);
    }
    mpi_count(total, "gather")?;
    Ok((counts, displs, total as usize))
}

/// `v`'s data pointer, or null when it is empty: an empty Vec's dangling pointer can equal
/// `MPI_IN_PLACE` (address 1), which changes what the call means.
fn send_ptr<T>(v: &[T]) -> *const c_void {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr().cast()
    }
}

/// As [`send_ptr`], for buffers MPI writes.
fn recv_ptr<T>(v: &mut [T]) -> *mut c_void {
    if v.is_empty() {
        std::ptr::null_mut()
    } else {
        v.as_mut_ptr().cast()
    }
}

/// Splits the gathered bytes into one entry per rank.
fn split_gathered(buf: &[u8], counts: &[c_int], displs: &[c_int]) -> Vec<Vec<u8>> {
    counts
        .iter()
        .zip(displs)
        .map(|(&n, &at)| buf[at as usize..][..n as usize].to_vec())
        .collect()
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self, timeout: Duration) -> Result<()> {
        let mpi = self.mpi;
        self.run_op("barrier", "MPI_Ibarrier", timeout, (), |_, req| {
            // SAFETY: `req` is writable; the communicator is predefined.
            unsafe { (mpi.ibarrier)(mpi.comm_world, req) }
        })
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>, timeout: Duration) -> Result<()> {
        let mpi = self.mpi;
        let root_c = self.check_root(root)?;
        // The length first, so every rank can size its buffer for the bytes.
        let len = vec![data.len() as u64];
        let len = self.run_op("broadcast", "MPI_Ibcast", timeout, len, |len, req| {
            // SAFETY: `len` holds one u64 and outlives the request (run_op owns it).
            unsafe {
                (mpi.ibcast)(
                    len.as_mut_ptr().cast(),
                    1,
                    mpi.uint64,
                    root_c,
                    mpi.comm_world,
                    req,
                )
            }
        })?;
        // Every rank got the same length, so every rank takes the same branch below.
        let count = mpi_count(len[0], "broadcast")?;
        if self.rank != root {
            data.clear();
            data.resize(count as usize, 0);
        }
        if count == 0 {
            return Ok(());
        }
        let bytes = std::mem::take(data);
        *data = self.run_op("broadcast", "MPI_Ibcast", timeout, bytes, |bytes, req| {
            let ptr = bytes.as_mut_ptr().cast::<c_void>();
            // SAFETY: `bytes` holds `count` bytes and outlives the request.
            unsafe { (mpi.ibcast)(ptr, count, mpi.byte, root_c, mpi.comm_world, req) }
        })?;
        Ok(())
    }

    fn gather(&self, root: usize, data: &[u8], timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        let mpi = self.mpi;
        let root_c = self.check_root(root)?;
        let is_root = self.rank == root;
        let size = self.size;
        // Every rank's length to root first, so root can lay out the receive buffer.
        let lens = (
            vec![data.len() as u64],
            vec![0u64; if is_root { size } else { 0 }],
        );
        let (_, lens) =
            self.run_op("gather", "MPI_Igather", timeout, lens, |(own, all), req| {
                // SAFETY: `own` holds 1 u64, `all` holds one per rank on root (ignored elsewhere).
                unsafe {
                    (mpi.igather)(
                        send_ptr(own),
                        1,
                        mpi.uint64,
                        recv_ptr(all),
                        1,
                        mpi.uint64,
                        root_c,
                        mpi.comm_world,
                        req,
                    )
                }
            })?;
        // Root checks every length and the total; the others their own (implied by root's
        // check, so both sides fail together when a block is too big).
        let (counts, displs, total) = if is_root {
            gather_layout(&lens)?
        } else {
            mpi_count(data.len() as u64, "gather")?;
            (Vec::new(), Vec::new(), 0)
        };
        // An owned copy of `data`: a timed-out send must not read memory the caller freed.
        let bufs = (data.to_vec(), vec![0u8; total], counts, displs);
        let (_, all, counts, displs) = self.run_op(
            "gather",
            "MPI_Igatherv",
            timeout,
            bufs,
            |(own, all, counts, displs), req| {
                // SAFETY: `own` holds its length in bytes (checked above to fit an int);
                // on root `all`, `counts` and `displs` describe `size` blocks inside `all`.
                unsafe {
                    (mpi.igatherv)(
                        send_ptr(own),
                        own.len() as c_int,
                        mpi.byte,
                        recv_ptr(all),
                        counts.as_ptr(),
                        displs.as_ptr(),
                        mpi.byte,
                        root_c,
                        mpi.comm_world,
                        req,
                    )
                }
            },
        )?;
        Ok(is_root.then(|| split_gathered(&all, &counts, &displs)))
    }

    fn finalize(self: Box<Self>) -> Result<()> {
        MpiWorld::finalize(*self)
    }
}

/// `inferperf mpi-probe [--die-after-barrier] [--hang-after-barrier] [--timeout-s N]`: a
/// small program over [`MpiWorld`] for the integration tests. Barrier; broadcast from rank 1
/// (rank 0 alone); gather to rank 0 of `"rank{r}"` repeated `r * 1000` times; finalize. Prints
/// one JSON line per rank: `{"rank","size","host","broadcast","gathered"}` (`gathered` is null
/// off root). Returns the exit code.
#[doc(hidden)]
pub fn probe_main(args: Vec<OsString>) -> i32 {
    let flag = |name: &str| args.iter().any(|a| a == name);
    let timeout_s = args
        .iter()
        .position(|a| a == "--timeout-s")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.to_str()?.parse::<f64>().ok())
        .unwrap_or(20.0);
    let timeout = Duration::from_secs_f64(timeout_s.max(0.001));
    let world = match MpiWorld::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit_code();
        }
    };
    match probe_steps(
        &world,
        timeout,
        flag("--die-after-barrier"),
        flag("--hang-after-barrier"),
    ) {
        Ok(line) => {
            println!("{line}");
            match world.finalize() {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: {e}");
                    e.exit_code()
                }
            }
        }
        Err(e) => {
            eprintln!("error: rank {}: {e}", world.rank);
            world.abort(e.exit_code())
        }
    }
}

/// The text rank `root` broadcasts in the probe.
#[doc(hidden)]
pub fn probe_broadcast_text(root: usize) -> String {
    format!("broadcast from rank {root};").repeat(100)
}

fn probe_steps(world: &MpiWorld, timeout: Duration, die: bool, hang: bool) -> Result<String> {
    let rank = world.rank;
    world.barrier(timeout)?;
    if rank == 1 && die {
        std::process::exit(1);
    }
    if rank == 1 && hang {
        std::thread::sleep(Duration::from_secs(600));
    }
    let root = 1.min(world.size - 1);
    let mut text = if rank == root {
        probe_broadcast_text(root).into_bytes()
    } else {
        b"not yet".to_vec()
    };
    world.broadcast(root, &mut text, timeout)?;
    let own = format!("rank{rank}").repeat(rank * 1000);
    let gathered = world.gather(0, own.as_bytes(), timeout)?;
    let gathered = gathered.map(|all| {
        all.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect::<Vec<_>>()
    });
    Ok(serde_json::json!({
        "rank": rank,
        "size": world.size,
        "host": world.processor_name(),
        "broadcast": String::from_utf8_lossy(&text),
        "gathered": gathered,
    })
    .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_recognised_by_their_variables() {
        for name in LAUNCHER_VARS {
            assert!(launched_by(|v| (v == name).then(|| "1".into())), "{name}");
        }
        assert!(!launched_by(|_| None));
        assert!(!launched_by(|v| (v == "OMPI_MCA_x").then(|| "1".into())));
    }

    #[test]
    fn gather_layout_packs_blocks_back_to_back() {
        let (counts, displs, total) = gather_layout(&[0, 5, 3, 0]).unwrap();
        assert_eq!(counts, [0, 5, 3, 0]);
        assert_eq!(displs, [0, 0, 5, 8]);
        assert_eq!(total, 8);
        let buf = b"aaaaabbb";
        let parts = split_gathered(buf, &counts, &displs);
        assert_eq!(parts, [&b""[..], b"aaaaa", b"bbb", b""]);
    }

    #[test]
    fn gather_layout_refuses_more_than_2_gib() {
        let max = i32::MAX as u64;
        assert!(gather_layout(&[max]).is_ok());
        for lens in [
            vec![max + 1],
            vec![max, 1],
            vec![max / 2 + 1, max / 2 + 1],
            vec![u64::MAX, u64::MAX],
        ] {
            let err = gather_layout(&lens).unwrap_err();
            assert!(
                err.msg.contains("more than MPI's 2 GiB limit"),
                "{lens:?}: {}",
                err.msg
            );
        }
    }

    #[test]
    fn poll_returns_when_done_and_passes_errors_on() {
        let mut calls = 0;
        poll_until("barrier", Duration::from_secs(5), || {
            calls += 1;
            Ok(calls == 4)
        })
        .unwrap();
        assert_eq!(calls, 4);
        let err = poll_until("barrier", Duration::from_secs(5), || {
            Err(Error::generic("MPI_Test failed"))
        })
        .unwrap_err();
        assert_eq!(err.msg, "MPI_Test failed");
    }

    #[test]
    fn poll_times_out_with_the_operation_named() {
        let start = Instant::now();
        let mut calls = 0u32;
        let err = poll_until("gather", Duration::from_millis(100), || {
            calls += 1;
            Ok(false)
        })
        .unwrap_err();
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        // Back-off: far fewer polls than a busy loop, but more than one per millisecond cap
        // would allow at the start (20 µs, 40 µs, ...).
        assert!((10..=200).contains(&calls), "{calls} polls");
        assert_eq!(
            err.msg,
            "MPI gather did not complete within 0.1 s: a rank has stopped (died or hung)"
        );
    }

    #[test]
    fn counts_beyond_int_are_refused() {
        assert_eq!(mpi_count(7, "x").unwrap(), 7);
        assert!(mpi_count(1 << 31, "broadcast")
            .unwrap_err()
            .msg
            .contains("MPI broadcast: 2147483648 bytes"));
    }
}
