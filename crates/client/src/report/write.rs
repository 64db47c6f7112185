//! Every report file is written atomically: into a hidden temporary file in the same
//! directory (`.NAME.tmp-PID-N[.EXT]`), flushed, then renamed over the final name. A reader
//! (or a run killed while writing) sees the old file or the whole new one, never half of it.
//! While a temporary file exists, a second Ctrl-C removes it before the process exits.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The largest single `write` of a report. One `write` of tens of megabytes is several times
/// slower in the kernel than the same bytes in pieces of this size (a 74 MB export: 150-170
/// ms against 16 ms here); smaller pieces add system calls without gaining more.
pub const WRITE_PIECE: usize = 1 << 20;

/// Distinguishes temporary files of one process (reports may be written from several
/// threads in tests).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically. `what` names the report in the error (a flag such as
/// `-f`, or empty), which always names the file: `-f: cannot write out.csv: Permission denied`.
pub fn write_atomic(what: &str, path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(what, path, |w| w.write_all(bytes))
}

/// A writer that hands its inner writer at most [`WRITE_PIECE`] bytes per `write`, however
/// large the caller's slice (`BufWriter` passes a slice larger than its buffer straight on).
struct Pieces<W>(W);

impl<W: Write> Write for Pieces<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(&buf[..buf.len().min(WRITE_PIECE)])
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// [`write_atomic`] for a writer that streams its report: `fill` writes into a temporary
/// file behind a buffer of [`WRITE_PIECE`] bytes, which gets no larger `write`.
pub fn write_atomic_with(
    what: &str,
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    write_atomic_via(what, path, |tmp| {
        let mut w = BufWriter::with_capacity(WRITE_PIECE, Pieces(File::create(tmp)?));
        fill(&mut w)?;
        let Pieces(f) = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        f.sync_data()
    })
}

/// [`write_atomic`] for a writer that wants a path (an image encoder): `fill` writes the
/// temporary file, whose name keeps `path`'s extension.
pub fn write_atomic_via(
    what: &str,
    path: &Path,
    fill: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<()> {
    let fail = |e: &dyn std::fmt::Display| {
        let prefix = if what.is_empty() {
            String::new()
        } else {
            format!("{what}: ")
        };
        Error::generic(format!("{prefix}cannot write {}: {e}", path.display()))
    };
    let tmp = temp_path(path).ok_or_else(|| fail(&"not a file name"))?;
    let guard = TempGuard::new(&tmp);
    fill(&tmp).map_err(|e| fail(&e))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(&e))?;
    guard.renamed();
    Ok(())
}

/// `dir/.STEM.tmp-PID-N.EXT` beside `path` (`None` when `path` has no file name).
pub fn temp_path(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let p = Path::new(name);
    let stem = p.file_stem().unwrap_or(name).to_string_lossy();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut tmp = format!(".{stem}.tmp-{}-{n}", std::process::id());
    if let Some(ext) = p.extension() {
        tmp.push('.');
        tmp.push_str(&ext.to_string_lossy());
    }
    Some(path.with_file_name(tmp))
}

/// Removes the temporary file unless it was renamed, and lets a second Ctrl-C remove it
/// while it exists.
struct TempGuard<'a> {
    path: &'a Path,
    done: bool,
}

impl<'a> TempGuard<'a> {
    fn new(path: &'a Path) -> Self {
        if let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) {
            // The signal handler may read the name at any moment, so it is never freed.
            crate::signal::set_temp_file(Some(Box::leak(c.into_boxed_c_str())));
        }
        TempGuard { path, done: false }
    }

    fn renamed(mut self) {
        self.done = true;
    }
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        crate::signal::set_temp_file(None);
        if !self.done {
            let _ = std::fs::remove_file(self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("inferperf-write-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let d = dir("replace");
        let path = d.join("out.csv");
        std::fs::write(&path, "old").unwrap();
        write_atomic("-f", &path, b"new,row\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new,row\n");
        assert_eq!(names(&d), vec!["out.csv"]);
    }

    #[test]
    fn a_failed_fill_keeps_the_old_file_and_names_it() {
        let d = dir("fail");
        let path = d.join("out.json");
        std::fs::write(&path, "old").unwrap();
        let err = write_atomic_with("--profile-export-file", &path, |w| {
            w.write_all(b"{\"half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(
            err.msg,
            format!(
                "--profile-export-file: cannot write {}: disk full",
                path.display()
            )
        );
        assert_eq!(err.exit_code(), 99);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(names(&d), vec!["out.json"], "the temporary file is removed");
    }

    /// Records the size of every `write` it is given.
    struct Sizes(Vec<usize>);

    impl Write for Sizes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn large_reports_go_out_in_pieces() {
        let bytes = vec![7u8; 2 * WRITE_PIECE + 5];
        let mut sizes = BufWriter::with_capacity(WRITE_PIECE, Pieces(Sizes(Vec::new())));
        sizes.write_all(&bytes).unwrap();
        let Pieces(sizes) = sizes.into_inner().map_err(|e| e.into_error()).unwrap();
        assert_eq!(sizes.0, vec![WRITE_PIECE, WRITE_PIECE, 5]);
        let mut sizes = Pieces(Sizes(Vec::new()));
        sizes.write_all(b"").unwrap();
        assert!(sizes.0 .0.is_empty());
        let d = dir("pieces");
        let path = d.join("big.json");
        write_atomic("", &path, &bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let d = dir("missing");
        let path = d.join("nope").join("out.csv");
        let err = write_atomic("", &path, b"x").unwrap_err();
        assert!(
            err.msg
                .starts_with(&format!("cannot write {}: ", path.display())),
            "{}",
            err.msg
        );
    }

    #[test]
    fn temporary_names_are_hidden_beside_the_file_and_keep_the_extension() {
        let tmp = temp_path(Path::new("/a/b/plot.png")).unwrap();
        let name = tmp.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(tmp.parent(), Some(Path::new("/a/b")));
        let prefix = format!(".plot.tmp-{}-", std::process::id());
        assert!(
            name.starts_with(&prefix) && name.ends_with(".png"),
            "{name}"
        );
        let bare = temp_path(Path::new("report")).unwrap();
        assert!(
            bare.to_string_lossy().starts_with(".report.tmp-"),
            "{bare:?}"
        );
        assert_ne!(temp_path(Path::new("x")), temp_path(Path::new("x")));
        assert!(temp_path(Path::new("/")).is_none());
    }
}
