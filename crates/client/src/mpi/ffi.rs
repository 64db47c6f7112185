//! libmpi loaded at run time: the entry points inferperf calls,
//! resolved once into [`Mpi`], and the predefined handles they take.
//!
//! Only Open MPI's ABI is bound. Its handles are pointers to objects the library exports
//! (`MPI_COMM_WORLD` is `&ompi_mpi_comm_world`), so they are resolved like functions. MPICH's
//! handles are integer constants of another width, its `MPI_STATUS_IGNORE` is not null and its
//! request type differs; binding both ABIs blind (no MPICH here to test against) would risk
//! silent memory corruption, so an MPICH library is refused with a clear message instead.
//!
//! The library is opened `RTLD_NOW | RTLD_GLOBAL` (Open MPI's plugins resolve symbols of
//! libmpi itself) and never closed: Open MPI does not survive `dlclose` after `MPI_Init`.

use std::ffi::{c_char, c_int, c_void, OsString};
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

use crate::error::{Error, Result};

/// An Open MPI handle (`MPI_Comm`, `MPI_Datatype`, `MPI_Request`, ...): a pointer to an
/// opaque library object.
pub type Handle = *mut c_void;

/// `MPI_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `MPI_THREAD_FUNNELED`: only the thread that initialised MPI calls it.
pub const THREAD_FUNNELED: c_int = 1;
/// Open MPI's `MPI_MAX_PROCESSOR_NAME` and `MPI_MAX_ERROR_STRING` (bytes, NUL included).
const MAX_NAME: usize = 256;
/// Room for `MPI_Get_library_version`: MPICH's maximum (8192 bytes) is the larger one.
const MAX_LIBRARY_VERSION: usize = 8192;

/// Environment variable naming the libmpi to load instead of the search below (a path).
pub const LIB_ENV: &str = "INFERPERF_MPI_LIB";
/// Library names tried in order when [`LIB_ENV`] is not set: Open MPI's soname first.
pub const LIB_NAMES: [&str; 3] = ["libmpi.so.40", "libmpi.so", "libmpi.so.12"];

type IntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
type NoArgs = unsafe extern "C" fn() -> c_int;
type InitThread =
    unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int) -> c_int;
type CommInt = unsafe extern "C" fn(Handle, *mut c_int) -> c_int;
type Abort = unsafe extern "C" fn(Handle, c_int) -> c_int;
type SetErrhandler = unsafe extern "C" fn(Handle, Handle) -> c_int;
type Ibarrier = unsafe extern "C" fn(Handle, *mut Handle) -> c_int;
type Ibcast = unsafe extern "C" fn(*mut c_void, c_int, Handle, c_int, Handle, *mut Handle) -> c_int;
type Igather = unsafe extern "C" fn(
    *const c_void,
    c_int,
    Handle,
    *mut c_void,
    c_int,
    Handle,
    c_int,
    Handle,
    *mut Handle,
) -> c_int;
type Igatherv = unsafe extern "C" fn(
    *const c_void,
    c_int,
    Handle,
    *mut c_void,
    *const c_int,
    *const c_int,
    Handle,
    c_int,
    Handle,
    *mut Handle,
) -> c_int;
/// `MPI_Test(request, flag, status)`; status is always `MPI_STATUS_IGNORE` (null in Open MPI).
type Test = unsafe extern "C" fn(*mut Handle, *mut c_int, *mut c_void) -> c_int;
type NameOut = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int, *mut c_char, *mut c_int) -> c_int;

/// The resolved entry points and predefined handles of one libmpi.
pub struct Mpi {
    /// Which library this is (path or name), for messages.
    pub origin: String,
    pub initialized: IntOut,
    pub finalized: IntOut,
    pub init_thread: InitThread,
    pub finalize: NoArgs,
    pub comm_rank: CommInt,
    pub comm_size: CommInt,
    pub abort: Abort,
    pub comm_set_errhandler: SetErrhandler,
    pub ibarrier: Ibarrier,
    pub ibcast: Ibcast,
    pub igather: Igather,
    pub igatherv: Igatherv,
    pub test: Test,
    pub get_processor_name: Option<NameOut>,
    pub error_string: Option<ErrorString>,
    /// `MPI_COMM_WORLD`.
    pub comm_world: Handle,
    /// `MPI_BYTE`.
    pub byte: Handle,
    /// `MPI_UINT64_T`.
    pub uint64: Handle,
    /// `MPI_ERRORS_RETURN`: failures come back as codes instead of aborting the job.
    pub errors_return: Handle,
}

// SAFETY: the handles are addresses of objects inside the library, which is never unloaded;
// sharing the addresses between threads is harmless (MpiWorld keeps the calls on one thread).
unsafe impl Send for Mpi {}
unsafe impl Sync for Mpi {}

/// The libmpi of this process, loaded on first use and kept for the process's lifetime.
pub fn mpi() -> Result<&'static Mpi> {
    static LOADED: OnceLock<Result<Mpi>> = OnceLock::new();
    LOADED
        .get_or_init(|| load(candidates(std::env::var_os(LIB_ENV))))
        .as_ref()
        .map_err(Clone::clone)
}

/// The libraries to try, in order. A path given in [`LIB_ENV`] is the only one tried: whoever
/// sets it wants that library, not a silent fallback to another MPI.
pub fn candidates(env: Option<OsString>) -> Vec<OsString> {
    match env {
        Some(path) if !path.is_empty() => vec![path],
        _ => LIB_NAMES.iter().map(OsString::from).collect(),
    }
}

/// The error when no candidate could be opened: every name tried with dlopen's reason.
pub fn not_found(tried: &[(String, String)]) -> Error {
    let list: Vec<String> = tried
        .iter()
        .map(|(n, why)| format!("{n} ({why})"))
        .collect();
    Error::usage(format!(
        "--enable-mpi needs Open MPI (libmpi.so.40): cannot load an MPI library, tried {}; \
         install openmpi-bin or set {LIB_ENV}",
        list.join("; ")
    ))
}

/// The loader's own words: libloading's message plus dlerror's text (its error source).
fn loader_reason(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(src) => format!("{e}: {src}"),
        None => e.to_string(),
    }
}

fn load(candidates: Vec<OsString>) -> Result<Mpi> {
    let mut tried = Vec::new();
    for name in candidates {
        let shown = name.to_string_lossy().into_owned();
        // SAFETY: opening runs the library's initialisers; libmpi has no requirement on the
        // loading thread, and MPI itself is only started later by MPI_Init_thread.
        match unsafe { Library::open(Some(&name), RTLD_NOW | RTLD_GLOBAL) } {
            Ok(lib) => return resolve(lib, shown),
            Err(e) => tried.push((shown, loader_reason(&e))),
        }
    }
    Err(not_found(&tried))
}

/// Resolves every entry point of `lib`; refuses libraries that are not Open MPI.
fn resolve(lib: Library, origin: String) -> Result<Mpi> {
    // SAFETY (all `get` calls below): the types are those of Open MPI's mpi.h for these
    // symbols; data symbols are resolved to their addresses only, never read.
    let object = |name: &str| -> Result<Handle> {
        unsafe { lib.get::<*mut c_void>(name) }
            .map(|s| s.into_raw())
            .map_err(|e| missing(&origin, name, &e))
    };
    if object("ompi_mpi_comm_world").is_err() {
        return Err(not_open_mpi(&lib, &origin));
    }
    macro_rules! function {
        ($name:literal) => {
            // SAFETY: see above; the field's type is the function's C signature.
            unsafe { symbol(&lib, $name) }.map_err(|e| missing(&origin, $name, &e))?
        };
    }
    macro_rules! optional {
        ($name:literal) => {
            // SAFETY: as for `function!`.
            unsafe { symbol(&lib, $name) }.ok()
        };
    }
    let mpi = Mpi {
        initialized: function!("MPI_Initialized"),
        finalized: function!("MPI_Finalized"),
        init_thread: function!("MPI_Init_thread"),
        finalize: function!("MPI_Finalize"),
        comm_rank: function!("MPI_Comm_rank"),
        comm_size: function!("MPI_Comm_size"),
        abort: function!("MPI_Abort"),
        comm_set_errhandler: function!("MPI_Comm_set_errhandler"),
        ibarrier: function!("MPI_Ibarrier"),
        ibcast: function!("MPI_Ibcast"),
        igather: function!("MPI_Igather"),
        igatherv: function!("MPI_Igatherv"),
        test: function!("MPI_Test"),
        get_processor_name: optional!("MPI_Get_processor_name"),
        error_string: optional!("MPI_Error_string"),
        comm_world: object("ompi_mpi_comm_world")?,
        byte: object("ompi_mpi_byte")?,
        uint64: object("ompi_mpi_uint64_t")?,
        errors_return: object("ompi_mpi_errors_return")?,
        origin,
    };
    // The library stays loaded for the process's lifetime (see the module comment).
    std::mem::forget(lib);
    Ok(mpi)
}

/// The value of symbol `name` of `lib` as a `T` (a function pointer).
///
/// # Safety
/// `T` must be the symbol's real type.
unsafe fn symbol<T: Copy>(lib: &Library, name: &str) -> std::result::Result<T, libloading::Error> {
    lib.get::<T>(name).map(|s| *s)
}

fn missing(origin: &str, symbol: &str, e: &libloading::Error) -> Error {
    Error::usage(format!(
        "{origin} has no symbol {symbol} ({e}); --enable-mpi needs Open MPI (libmpi.so.40)"
    ))
}

/// Why a library without Open MPI's objects is refused, naming MPICH when it is one.
fn not_open_mpi(lib: &Library, origin: &str) -> Error {
    // SAFETY: MPI_Get_library_version(char *, int *) may be called before MPI_Init; the buffer
    // holds the largest version string any implementation writes.
    let version = unsafe { lib.get::<NameOut>("MPI_Get_library_version") }
        .ok()
        .map(|f| read_string(MAX_LIBRARY_VERSION, |buf, len| unsafe { f(buf, len) }))
        .unwrap_or_default();
    Error::usage(flavour_message(origin, &version))
}

/// The refusal text for a non-Open MPI library whose version string is `version`.
pub fn flavour_message(origin: &str, version: &str) -> String {
    let first_line = version.lines().next().unwrap_or("").trim();
    if version.contains("MPICH") || version.contains("Intel(R) MPI") {
        format!(
            "{origin} is MPICH ({first_line}): MPICH is not supported, use Open MPI \
             (libmpi.so.40; install openmpi-bin or set {LIB_ENV})"
        )
    } else {
        format!(
            "{origin} is not Open MPI (no ompi_mpi_comm_world symbol{}): --enable-mpi needs \
             Open MPI (libmpi.so.40); install openmpi-bin or set {LIB_ENV}",
            if first_line.is_empty() {
                String::new()
            } else {
                format!("; it says \"{first_line}\"")
            }
        )
    }
}

/// Calls `f(buffer, &len)` on a buffer of `cap` bytes and returns what it wrote (lossy UTF-8,
/// empty when `f` fails).
pub fn read_string(cap: usize, f: impl FnOnce(*mut c_char, *mut c_int) -> c_int) -> String {
    let mut buf = vec![0u8; cap];
    let mut len: c_int = 0;
    if f(buf.as_mut_ptr().cast(), &mut len) != SUCCESS {
        return String::new();
    }
    // Implementations disagree on whether `len` counts the NUL: stop at the first NUL too.
    let len = usize::try_from(len).unwrap_or(0).min(cap);
    let text = &buf[..len];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    String::from_utf8_lossy(&text[..end]).into_owned()
}

impl Mpi {
    /// `Ok` for `MPI_SUCCESS`, else an error naming `call` and the library's text for `code`.
    pub fn check(&self, call: &str, code: c_int) -> Result<()> {
        if code == SUCCESS {
            return Ok(());
        }
        let text = self.error_text(code);
        Err(Error::generic(if text.is_empty() {
            format!("{call} failed with MPI error code {code}")
        } else {
            format!("{call} failed with MPI error code {code}: {text}")
        }))
    }

    /// `MPI_Error_string(code)`, empty when the library has none.
    pub fn error_text(&self, code: c_int) -> String {
        match self.error_string {
            // SAFETY: the buffer holds MPI_MAX_ERROR_STRING bytes.
            Some(f) => read_string(MAX_NAME, |buf, len| unsafe { f(code, buf, len) }),
            None => String::new(),
        }
    }

    /// `MPI_Get_processor_name`, empty when the library has none.
    pub fn processor_name(&self) -> String {
        match self.get_processor_name {
            // SAFETY: the buffer holds MPI_MAX_PROCESSOR_NAME bytes.
            Some(f) => read_string(MAX_NAME, |buf, len| unsafe { f(buf, len) }),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_is_the_env_path_alone_or_open_mpi_first() {
        let cases: [(Option<&str>, &[&str]); 3] = [
            (None, &["libmpi.so.40", "libmpi.so", "libmpi.so.12"]),
            (Some(""), &["libmpi.so.40", "libmpi.so", "libmpi.so.12"]),
            (Some("/opt/mpi/lib/libmpi.so"), &["/opt/mpi/lib/libmpi.so"]),
        ];
        for (env, want) in cases {
            let got = candidates(env.map(OsString::from));
            let want: Vec<OsString> = want.iter().map(OsString::from).collect();
            assert_eq!(got, want, "env {env:?}");
        }
    }

    #[test]
    fn missing_library_names_every_candidate_and_the_fix() {
        let err = load(
            candidates(None)
                .into_iter()
                .map(|n| {
                    let mut p = OsString::from("/nonexistent/");
                    p.push(n);
                    p
                })
                .collect(),
        )
        .err()
        .expect("nothing loads from /nonexistent");
        assert_eq!(err.kind, crate::error::ErrorKind::Usage);
        for name in LIB_NAMES {
            assert!(
                err.msg.contains(&format!("/nonexistent/{name} (")),
                "{}",
                err.msg
            );
        }
        assert!(err
            .msg
            .contains("install openmpi-bin or set INFERPERF_MPI_LIB"));
        assert!(err
            .msg
            .contains("--enable-mpi needs Open MPI (libmpi.so.40)"));
    }

    #[test]
    fn mpich_is_refused_by_name() {
        let cases = [
            (
                "MPICH Version:\t4.0\nMPICH Release date: x",
                "MPICH is not supported, use Open MPI",
            ),
            ("Intel(R) MPI Library 2021.6", "MPICH is not supported"),
            (
                "Some MPI 1.0",
                "is not Open MPI (no ompi_mpi_comm_world symbol; it says \"Some MPI 1.0\")",
            ),
            ("", "is not Open MPI (no ompi_mpi_comm_world symbol):"),
        ];
        for (version, want) in cases {
            let msg = flavour_message("libmpi.so.12", version);
            assert!(msg.contains(want), "{version:?}: {msg}");
            assert!(msg.starts_with("libmpi.so.12 "), "{msg}");
        }
    }

    #[test]
    fn strings_stop_at_the_reported_length_or_the_first_nul() {
        let write = |text: &'static [u8], reported: c_int| {
            move |buf: *mut c_char, len: *mut c_int| {
                // SAFETY: the test buffers are larger than every text written.
                unsafe {
                    std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast(), text.len());
                    *len = reported;
                }
                SUCCESS
            }
        };
        assert_eq!(read_string(16, write(b"node-1\0", 6)), "node-1");
        assert_eq!(read_string(16, write(b"node-1\0", 7)), "node-1");
        assert_eq!(read_string(16, write(b"node-1\0", 3)), "nod");
        assert_eq!(read_string(16, write(b"abc", 99)), "abc");
        assert_eq!(read_string(16, write(b"abc", -5)), "");
        assert_eq!(read_string(16, |_, _| 16), "");
    }
}
