//! The `inferperf` binary: everything lives in the library; this only hands over argv and
//! turns the outcome into an exit code.

/// Allocations at least this large (bytes) get their own mapping, returned to the system when
/// freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;

fn main() {
    // glibc raises its mmap threshold each time a large block is freed, after which the
    // per-window latency vectors (megabytes, one set per window) come from the heap and its
    // high-water mark creeps up for minutes. A fixed threshold keeps memory flat over long
    // runs.
    // SAFETY: mallopt only changes allocator tuning; it is called before any thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
    // Thousands of connections (client streams, or the reference server's clients) need as
    // many descriptors: the soft limit goes up to the hard one. Failing that, the run goes
    // on, and a connect past the limit fails with its own error.
    let _ = inferperf::transport::fd_limit::raise_open_files();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    std::process::exit(inferperf::app::main_with_args(args));
}
