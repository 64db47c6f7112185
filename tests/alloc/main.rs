//! Tests that count heap allocations, in their own binary because they install a counting
//! global allocator. It counts every allocation twice: per process (for runs whose workers
//! are other threads) and per thread (for code driven on the test's own thread). Each test
//! holds [`counting::serial`] for its whole body, so no other test allocates meanwhile.

#[path = "../it/common/mod.rs"]
mod common;
mod h2_session;
mod hot_path;
mod seq_patch;

pub mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard};

    static PROCESS: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static THREAD: Cell<u64> = const { Cell::new(0) };
    }

    static SERIAL: Mutex<()> = Mutex::new(());

    /// Runs the calling test alone among the tests of this binary.
    pub fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocations (and reallocations) so far, all threads.
    pub fn process_allocs() -> u64 {
        PROCESS.load(Ordering::SeqCst)
    }

    /// Allocations (and reallocations) so far on the calling thread.
    pub fn thread_allocs() -> u64 {
        THREAD.with(Cell::get)
    }

    fn count() {
        PROCESS.fetch_add(1, Ordering::Relaxed);
        // `try_with`: the slot may be gone while the thread shuts down.
        let _ = THREAD.try_with(|n| n.set(n.get() + 1));
    }

    struct Counting;

    // SAFETY: forwards to the system allocator; only counts calls.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            count();
            System.alloc(l)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            count();
            System.realloc(p, l, n)
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;
}
