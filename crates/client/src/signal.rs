//! Ctrl-C handling as perf_analyzer does it: the first SIGINT asks the run to finish the
//! current window and report what it measured; a second one exits at once with code 130
//! (128 + SIGINT, the shell's code for a process ended by Ctrl-C). What was already written
//! stays: the console lines, and the CSV of every level measured (it is rewritten after each
//! level); a report file half written is removed, the previous version of it is kept.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The function the second Ctrl-C runs before exiting (null: none), stored as a pointer so
/// the handler can read it with one atomic load.
static EXIT_HOOK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// The report's temporary file being written now (null: none); a second Ctrl-C removes it.
static TEMP_FILE: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// The exit code of a second Ctrl-C.
pub const HARD_EXIT_CODE: i32 = 130;

extern "C" fn on_sigint(_: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: leave now, without destructors, so run the exit hook first (it
        // frees what destructors would, e.g. shared memory regions). _exit is
        // async-signal-safe.
        let hook = EXIT_HOOK.load(Ordering::Acquire);
        if !hook.is_null() {
            // SAFETY: only `on_hard_exit` stores here, and it stores a `fn()`.
            let hook: fn() = unsafe { std::mem::transmute::<*mut (), fn()>(hook) };
            hook();
        }
        let tmp = TEMP_FILE.load(Ordering::Acquire);
        if !tmp.is_null() {
            // SAFETY: `set_temp_file` stores only names that live forever; unlink is
            // async-signal-safe.
            unsafe { libc::unlink(tmp) };
        }
        // SAFETY: _exit never returns and touches no Rust state.
        unsafe { libc::_exit(HARD_EXIT_CODE) };
    }
}

/// Sets the function a second Ctrl-C runs before the process exits without destructors
/// (the last one set wins). It runs inside the signal handler, so it must be
/// async-signal-safe: no allocation, no locks.
pub fn on_hard_exit(hook: fn()) {
    EXIT_HOOK.store(hook as *mut (), Ordering::Release);
}

/// Names the temporary report file a second Ctrl-C removes (`None`: none is being written).
pub fn set_temp_file(path: Option<&'static CStr>) {
    let p = path.map_or(std::ptr::null_mut(), |c| c.as_ptr().cast_mut());
    TEMP_FILE.store(p, Ordering::Release);
}

/// Installs the SIGINT handler (idempotent).
pub fn install() {
    let handler = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: installing a handler that only touches an atomic and calls _exit.
    unsafe {
        libc::signal(libc::SIGINT, handler);
    }
}

/// Also treats SIGTERM as Ctrl-C: MPI launchers (mpirun) turn the user's Ctrl-C into SIGTERM
/// to every rank, and a rank must still report what it measured.
pub fn install_term() {
    let handler = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: as in `install`.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
    }
}

/// True once Ctrl-C was pressed (or `request_stop` was called).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Asks the run to stop as if Ctrl-C had been pressed (used by tests and the demo).
pub fn request_stop() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Clears a previous stop request (tests run several measurements in one process).
pub fn reset() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}
