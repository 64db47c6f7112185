//! Whole-file inputs (`--input-data` JSON files, data-directory tensor files, ShareGPT
//! datasets), read with a bound on their size: a regular file's size is checked before it
//! is read, any other file (a FIFO, a device) stops at the bound. A JSON file's syntax is
//! checked as a stream before the file is read whole, so a broken file fails at its first
//! bad byte without being held in memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::de::IgnoredAny;

use super::lines::{excerpt_tail, size_text, EXCERPT_CHARS};

/// The largest whole-file input: 1 GiB. JSON takes several times its file's size once
/// parsed (a file of small numbers about twenty times).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// Reads `path` whole, at most [`MAX_FILE_BYTES`]. The error says what is wrong, without
/// the path (the caller names the flag and the file).
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let (file, size) = open(path)?;
    read_rest(&file, size.unwrap_or(0))
}

/// Reads the JSON file `path` whole, at most [`MAX_FILE_BYTES`], its syntax checked first.
/// A regular file is checked as a stream before it is read, so a broken file is never held;
/// any other file (a FIFO) is checked as it is read. A syntax error reads `{what}: {serde's
/// error}, near '{the text up to and including the bad byte}'`.
pub fn read_json(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let (file, size) = open(path)?;
    let Some(size) = size else {
        return read_json_once(file, what);
    };
    let checked =
        serde_json::from_reader::<_, IgnoredAny>(BufReader::new((&file).take(MAX_FILE_BYTES)));
    match checked {
        Ok(_) => {}
        Err(e) if e.is_io() => return Err(format!("cannot read the file: {e}")),
        Err(e) => {
            let near = excerpt_at(&file, e.line(), e.column());
            return Err(format!("{what}: {e}, near '{near}'"));
        }
    }
    (&file)
        .seek(SeekFrom::Start(0))
        .map_err(|e| format!("cannot read the file: {e}"))?;
    read_rest(&file, size)
}

/// Reads what is left of `file`, at most [`MAX_FILE_BYTES`]; `size` reserves memory.
fn read_rest(file: &File, size: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(size);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    within_bound(out.len() as u64)?;
    Ok(out)
}

/// [`read_json`] for a file that can be read only once: its bytes are kept as they are
/// checked, up to the first bad one.
fn read_json_once(file: File, what: &str) -> Result<Vec<u8>, String> {
    let mut kept = Kept {
        inner: BufReader::new(file.take(MAX_FILE_BYTES + 1)),
        bytes: Vec::new(),
    };
    let checked = serde_json::from_reader::<_, IgnoredAny>(&mut kept);
    within_bound(kept.bytes.len() as u64)?;
    match checked {
        Ok(_) => Ok(kept.bytes),
        Err(e) if e.is_io() => Err(format!("cannot read the file: {e}")),
        Err(e) => Err(format!("{what}: {e}, near '{}'", excerpt_tail(&kept.bytes))),
    }
}

/// The text of `file` up to and including byte `column` of line `line` (1-based, where
/// serde_json places an error), as [`excerpt_tail`] quotes it.
fn excerpt_at(mut file: &File, line: usize, column: usize) -> String {
    if file.seek(SeekFrom::Start(0)).is_err() {
        return String::new();
    }
    let mut r = BufReader::new(file);
    for _ in 1..line {
        if !skip_line(&mut r) {
            return String::new();
        }
    }
    // One byte more than the excerpt shows when the line goes on before it, so that
    // `excerpt_tail` marks the cut.
    let first = column.saturating_sub(EXCERPT_CHARS + 1);
    let mut near = Vec::new();
    let skipped = io::copy(&mut (&mut r).take(first as u64), &mut io::sink());
    if skipped.is_err()
        || (&mut r)
            .take((column - first) as u64)
            .read_to_end(&mut near)
            .is_err()
    {
        return String::new();
    }
    excerpt_tail(&near)
}

/// Reads past the next line break without holding the line; `false` at the end.
fn skip_line(r: &mut impl BufRead) -> bool {
    loop {
        let buf = match r.fill_buf() {
            Ok(buf) if !buf.is_empty() => buf,
            _ => return false,
        };
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return true;
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Opens `path` and, for a regular file, checks its size against the bound and returns it
/// (`None` for any other file).
fn open(path: &Path) -> Result<(File, Option<usize>), String> {
    let file = File::open(path).map_err(|e| format!("cannot read the file: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if !meta.is_file() {
        return Ok((file, None));
    }
    within_bound(meta.len())?;
    Ok((file, Some(meta.len() as usize)))
}

fn within_bound(len: u64) -> Result<(), String> {
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "the file is larger than {} (the bound on an input file)",
            size_text(MAX_FILE_BYTES)
        ));
    }
    Ok(())
}

/// A reader that keeps every byte read through it.
struct Kept<R> {
    inner: R,
    bytes: Vec<u8>,
}

impl<R: Read> Read for Kept<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("inferperf-file-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn valid_json_is_read_whole() {
        let d = dir("valid");
        let path = d.join("a.json");
        let text = b"{\"data\": [1, 2, \"\xc3\xa9\"]}\n\n";
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_json(&path, "bad").unwrap(), text);
        assert_eq!(read_bounded(&path).unwrap(), text);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_syntax_error_quotes_the_text_up_to_the_bad_byte() {
        let d = dir("syntax");
        let path = d.join("a.json");
        let mut text = b"{\"data\": [".to_vec();
        text.extend(b"1,".repeat(100_000));
        text.extend(b"oops, and the rest of the file is never read");
        std::fs::write(&path, &text).unwrap();
        let msg = read_json(&path, "not JSON").unwrap_err();
        let want = format!(
            "not JSON: expected value at line 1 column 200011, near '...,{}o'",
            "1,".repeat(39)
        );
        assert_eq!(msg, want);
        std::fs::write(&path, b"{\n  \"a\": [1,\n  2, \x1b]}\n").unwrap();
        let msg = read_json(&path, "x").unwrap_err();
        assert_eq!(
            msg,
            "x: expected value at line 3 column 6, near '  2, \\x1b'"
        );
        std::fs::write(&path, [0u8; 4096]).unwrap();
        let msg = read_json(&path, "x").unwrap_err();
        assert_eq!(msg, "x: expected value at line 1 column 1, near '\\x00'");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_fifo_is_checked_as_it_is_read() {
        let d = dir("fifo");
        let fifo = d.join("data.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (text, want) in [
            (&b"{\"a\": [1, 2]}"[..], Ok(b"{\"a\": [1, 2]}".to_vec())),
            (
                b"{\"a\": [1, 2, x, 3]}",
                Err("x: expected value at line 1 column 14, near '{\"a\": [1, 2, x'".to_string()),
            ),
        ] {
            let writer = {
                let fifo = fifo.clone();
                std::thread::spawn(move || std::fs::write(fifo, text))
            };
            assert_eq!(read_json(&fifo, "x"), want);
            let _ = writer.join();
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_over_the_bound_is_refused_before_it_is_read() {
        let d = dir("big");
        let path = d.join("big.json");
        // A sparse file: its size counts, its bytes are never written.
        let f = File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let want = "the file is larger than 1 GiB (the bound on an input file)";
        assert_eq!(read_json(&path, "x").unwrap_err(), want);
        assert_eq!(read_bounded(&path).unwrap_err(), want);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_file_or_a_directory_is_a_read_error() {
        let d = dir("missing");
        let msg = read_json(&d.join("none.json"), "x").unwrap_err();
        assert!(msg.starts_with("cannot read the file: "), "{msg}");
        let msg = read_bounded(&d).unwrap_err();
        assert!(msg.starts_with("cannot read the file: "), "{msg}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
