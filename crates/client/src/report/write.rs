//! Every report replaces what is at its path in the way that path's kind allows:
//!
//! - A regular file (or no file yet) is replaced atomically: the report goes into a hidden
//!   temporary file in the same directory (`.NAME.tmp-PID-N[.EXT]`), created with the old
//!   file's permission bits (and owner, where the process may set it), flushed, then renamed
//!   over the final name. A reader (or a run killed while writing) sees the old file or the
//!   whole new one, never half of it. While a temporary file exists, a second Ctrl-C removes
//!   it before the process exits.
//! - A symbolic link is followed: its target is replaced by these rules, the link stays.
//! - A regular file with several hard links, a device, a FIFO or a socket is written through:
//!   opened in place (a regular file truncated) and written, so the links stay one file and
//!   a device stays a device. A FIFO that no process has open for reading is an error at
//!   once, not a wait.

use std::ffi::CString;
use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
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

/// Writes `bytes` to `path` (atomically where it is a regular file). `what` names the report
/// in the error (a flag such as `-f`, or empty), which always names the file: `-f: cannot
/// write out.csv: Permission denied`.
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

/// [`write_atomic`] for a writer that streams its report: `fill` writes into the file behind
/// a buffer of [`WRITE_PIECE`] bytes, which gets no larger `write`.
pub fn write_atomic_with(
    what: &str,
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let written = match target(path) {
        Ok(Target::Replace { path, like }) => replace(&path, like.as_ref(), |_, file| {
            stream(file, fill)?.sync_data()
        }),
        Ok(Target::Through { path, meta }) => open_through(&path, &meta)
            .and_then(|file| stream(file, fill))
            .and_then(|file| {
                if meta.is_file() {
                    file.sync_data()
                } else {
                    Ok(())
                }
            }),
        Err(e) => Err(e),
    };
    written.map_err(|e| failure(what, path, &e))
}

/// [`write_atomic`] for a writer that wants a path (an image encoder): `fill` writes a
/// temporary file, whose name keeps `path`'s extension, which then replaces `path` (or, for
/// a path written through, is copied into it).
pub fn write_atomic_via(
    what: &str,
    path: &Path,
    fill: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<()> {
    let written = match target(path) {
        Ok(Target::Replace { path, like }) => replace(&path, like.as_ref(), |tmp, file| {
            drop(file);
            fill(tmp)
        }),
        Ok(Target::Through { path, meta }) => copy_through(&path, &meta, fill),
        Err(e) => Err(e),
    };
    written.map_err(|e| failure(what, path, &e))
}

fn failure(what: &str, path: &Path, e: &io::Error) -> Error {
    let prefix = if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    };
    Error::generic(format!("{prefix}cannot write {}: {e}", path.display()))
}

/// How a report reaches its path.
enum Target {
    /// A temporary file renamed over `path`; `like` is the regular file it replaces.
    Replace {
        path: PathBuf,
        like: Option<Metadata>,
    },
    /// `path` opened and written in place.
    Through { path: PathBuf, meta: Metadata },
}

/// Where and how `path` is written: symbolic links followed, then by the kind of file.
fn target(path: &Path) -> io::Result<Target> {
    let path = follow_links(path)?;
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Target::Replace { path, like: None })
        }
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        return Err(io::Error::other("it is a directory"));
    }
    if meta.is_file() && meta.nlink() <= 1 {
        return Ok(Target::Replace {
            path,
            like: Some(meta),
        });
    }
    Ok(Target::Through { path, meta })
}

/// The most symbolic links followed in a row (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// `path` with its last component's symbolic links followed, a relative target taken from
/// the link's directory; a dangling link gives the path it points to.
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// Writes a temporary file beside `path` with `fill` (given its path and the file, open for
/// writing) and renames it over `path`; the temporary file is removed on failure.
fn replace(
    path: &Path,
    like: Option<&Metadata>,
    fill: impl FnOnce(&Path, File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temp_path(path).ok_or_else(|| io::Error::other("not a file name"))?;
    let guard = TempGuard::new(&tmp);
    let file = create_like(&tmp, like)?;
    fill(&tmp, file)?;
    std::fs::rename(&tmp, path)?;
    guard.renamed();
    Ok(())
}

/// Creates (or truncates) the temporary file `tmp` with the permission bits and owner of
/// `like`, set before any byte is written: a report replacing a file of mode 600 is never
/// readable by others, not even while it is written. Only root may give a file another
/// owner; otherwise the owner is the process's (and the group is kept where it may be).
fn create_like(tmp: &Path, like: Option<&Metadata>) -> io::Result<File> {
    let mut open = OpenOptions::new();
    open.write(true).create(true).truncate(true);
    let Some(like) = like else {
        return open.open(tmp);
    };
    let mode = like.permissions().mode() & 0o777;
    let file = open.mode(mode).open(tmp)?;
    if std::os::unix::fs::fchown(&file, Some(like.uid()), Some(like.gid())).is_err() {
        let _ = std::os::unix::fs::fchown(&file, None, Some(like.gid()));
    }
    file.set_permissions(Permissions::from_mode(mode))?;
    Ok(file)
}

/// Runs `fill` on `file` behind the report buffer and returns the file, flushed.
fn stream(file: File, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<File> {
    let mut w = BufWriter::with_capacity(WRITE_PIECE, Pieces(file));
    fill(&mut w)?;
    let Pieces(file) = w.into_inner().map_err(io::IntoInnerError::into_error)?;
    Ok(file)
}

/// Opens `path` (described by `meta`) to write through it: a regular file truncated; a
/// FIFO without a reader fails at once.
fn open_through(path: &Path, meta: &Metadata) -> io::Result<File> {
    let mut open = OpenOptions::new();
    open.write(true).truncate(meta.is_file());
    if !meta.file_type().is_fifo() {
        return open.open(path);
    }
    // Opening a FIFO for writing waits for a reader; with O_NONBLOCK it fails with ENXIO
    // instead. The descriptor is made blocking again for the writes.
    let file = open
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => io::Error::other("no process has the FIFO open for reading"),
            _ => e,
        })?;
    set_blocking(&file)?;
    Ok(file)
}

fn set_blocking(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor `file` owns and keeps open for the call.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// [`write_atomic_via`] for a path written through: `fill` writes a temporary file in the
/// system's temporary directory (a device's directory may take no files), which is then
/// copied into `path` and removed.
fn copy_through(
    path: &Path,
    meta: &Metadata,
    fill: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let name = path.file_name().unwrap_or(path.as_os_str());
    let tmp = temp_path(&std::env::temp_dir().join(name))
        .ok_or_else(|| io::Error::other("not a file name"))?;
    let _guard = TempGuard::new(&tmp);
    fill(&tmp)?;
    let mut to = open_through(path, meta)?;
    io::copy(&mut File::open(&tmp)?, &mut to)?;
    if meta.is_file() {
        to.sync_data()?;
    }
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

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_replaced_file_keeps_its_permission_bits() {
        let d = dir("mode");
        let path = d.join("secret.csv");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        write_atomic("-f", &path, b"new").unwrap();
        assert_eq!(
            (mode(&path), std::fs::read(&path).unwrap()),
            (0o600, b"new".to_vec())
        );
        std::fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
        write_atomic_via("", &path, |tmp| std::fs::write(tmp, "png")).unwrap();
        assert_eq!(
            (mode(&path), std::fs::read(&path).unwrap()),
            (0o640, b"png".to_vec())
        );
        assert_eq!(names(&d), vec!["secret.csv"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_symbolic_link_is_followed_and_stays_a_link() {
        use std::os::unix::fs::symlink;
        let d = dir("link");
        let real = d.join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("out.csv"), "old").unwrap();
        symlink("real/out.csv", d.join("link.csv")).unwrap();
        symlink("link.csv", d.join("chain.csv")).unwrap();
        symlink("real/new.json", d.join("dangling.json")).unwrap();
        write_atomic("-f", &d.join("chain.csv"), b"new").unwrap();
        write_atomic("", &d.join("dangling.json"), b"{}").unwrap();
        assert_eq!(
            std::fs::read_to_string(real.join("out.csv")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_to_string(real.join("new.json")).unwrap(),
            "{}"
        );
        for link in ["link.csv", "chain.csv", "dangling.json"] {
            let m = std::fs::symlink_metadata(d.join(link)).unwrap();
            assert!(m.file_type().is_symlink(), "{link}");
        }
        assert_eq!(names(&real), vec!["new.json", "out.csv"]);
        symlink("loop-b", d.join("loop-a")).unwrap();
        symlink("loop-a", d.join("loop-b")).unwrap();
        let err = write_atomic("", &d.join("loop-a"), b"x").unwrap_err();
        assert!(
            err.msg.ends_with("too many levels of symbolic links"),
            "{}",
            err.msg
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_hard_linked_file_is_written_in_place() {
        let d = dir("hard");
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        std::fs::write(&a, "old,longer,row\n").unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        let inode = std::fs::metadata(&a).unwrap().ino();
        write_atomic("-f", &a, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new\n");
        let m = std::fs::metadata(&a).unwrap();
        assert_eq!((m.ino(), m.nlink()), (inode, 2));
        assert_eq!(names(&d), vec!["a.csv", "b.csv"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    fn mkfifo(path: &Path) {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_is_written_through_to_its_reader() {
        let d = dir("fifo");
        let fifo = d.join("out.csv");
        mkfifo(&fifo);
        // More than a pipe holds: the writes wait for the reader.
        let bytes: Vec<u8> = (0..3 * WRITE_PIECE + 7).map(|i| i as u8).collect();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        // The reader opens the FIFO when its thread runs; until then there is none.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match write_atomic("-f", &fifo, &bytes) {
                Ok(()) => break,
                Err(e) if e.msg.contains("open for reading") => {
                    assert!(std::time::Instant::now() < deadline, "no reader came");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("{}", e.msg),
            }
        }
        // Checked first: a FIFO replaced by a file would leave the reader waiting for ever.
        let m = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(m.file_type().is_fifo());
        assert!(reader.join().unwrap() == bytes);
        assert_eq!(names(&d), vec!["out.csv"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_at_once() {
        let d = dir("fifo-alone");
        let fifo = d.join("out.csv");
        mkfifo(&fifo);
        let err = write_atomic("-f", &fifo, b"x").unwrap_err();
        let want = format!(
            "-f: cannot write {}: no process has the FIFO open for reading",
            fifo.display()
        );
        assert_eq!(err.msg, want);
        let err = write_atomic_via("plot", &fifo, |tmp| std::fs::write(tmp, "png")).unwrap_err();
        assert!(err.msg.ends_with("open for reading"), "{}", err.msg);
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        assert_eq!(names(&d), vec!["out.csv"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_device_is_written_through() {
        let null = Path::new("/dev/null");
        write_atomic("-f", null, b"report").unwrap();
        write_atomic_via("plot", null, |tmp| std::fs::write(tmp, "png")).unwrap();
        let m = std::fs::symlink_metadata(null).unwrap();
        assert!(m.file_type().is_char_device());
    }

    #[test]
    fn a_directory_is_refused_before_anything_is_written() {
        let d = dir("is-dir");
        std::fs::create_dir(d.join("out.csv")).unwrap();
        let err = write_atomic("-f", &d.join("out.csv"), b"x").unwrap_err();
        assert!(err.msg.ends_with(": it is a directory"), "{}", err.msg);
        assert_eq!(names(&d), vec!["out.csv"]);
        let _ = std::fs::remove_dir_all(&d);
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
