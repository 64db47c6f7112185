//! Line-oriented input files (`--request-intervals`, JSONL prompts and datasets), read as a
//! stream: one line in memory at a time, each at most a given number of bytes, so a file
//! with a huge line (or no line break at all) fails at the bound instead of being held
//! whole. Errors quote at most [`EXCERPT_CHARS`] characters of what they read, escaped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The longest line of a JSONL input file (a prompt, a request payload, a dataset entry):
/// 16 MiB, far above a million-token prompt.
pub const MAX_JSONL_LINE: usize = 16 << 20;

/// The most characters of an input an error message quotes.
pub const EXCERPT_CHARS: usize = 80;

/// A 1-based line number (0: the file as a whole) and what is wrong with it.
pub type LineError = (usize, String);

/// The lines of a reader, each at most `max` bytes (without its line break).
pub struct Lines<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
    number: usize,
}

/// Opens `path` for reading line by line, each line at most `max` bytes.
pub fn open(path: &Path, max: usize) -> std::io::Result<Lines<BufReader<File>>> {
    Ok(Lines::new(BufReader::new(File::open(path)?), max))
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, max: usize) -> Self {
        Lines {
            reader,
            max,
            buf: Vec::new(),
            number: 0,
        }
    }

    /// The next line and its 1-based number, without its `\n` or `\r\n`; `None` at the end.
    /// A line over the bound, a line that is not UTF-8 and a read error are errors naming
    /// the line; the reader stops at the bound, never holding more than `max + 1` bytes.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>, LineError> {
        self.buf.clear();
        self.number += 1;
        let n = self.number;
        let limit = self.max as u64 + 1;
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| (n, format!("cannot read: {e}")))?;
        if read == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        } else if self.buf.len() > self.max {
            return Err((
                n,
                format!(
                    "the line is longer than {} (the bound on one line)",
                    size_text(self.max as u64)
                ),
            ));
        }
        match std::str::from_utf8(&self.buf) {
            Ok(line) => Ok(Some((n, line))),
            Err(e) => Err((
                n,
                format!("the line is not UTF-8 (at byte {})", e.valid_up_to() + 1),
            )),
        }
    }
}

/// `n` bytes as a person writes it: `16 MiB`, `4 KiB`, `1000 bytes`.
pub fn size_text(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// At most [`EXCERPT_CHARS`] characters of `s`, control characters and line breaks
/// escaped, `...` where it was cut.
pub fn excerpt(s: &str) -> String {
    let head = match s.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => &s[..i],
        None => s,
    };
    let mut out = escape(head);
    if head.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// At most [`EXCERPT_CHARS`] bytes before the end of `bytes` (the text just before a parse
/// error), escaped as [`excerpt`] does, `...` where it was cut.
pub fn excerpt_tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(EXCERPT_CHARS);
    let out = escape(&String::from_utf8_lossy(&bytes[start..]));
    if start > 0 {
        format!("...{out}")
    } else {
        out
    }
}

fn escape(s: &str) -> String {
    crate::text::escape_control(s).replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], max: usize) -> Result<Vec<(usize, String)>, LineError> {
        let mut lines = Lines::new(text, max);
        let mut out = Vec::new();
        while let Some((n, line)) = lines.next_line()? {
            out.push((n, line.to_string()));
        }
        Ok(out)
    }

    #[test]
    fn lines_are_numbered_without_their_breaks() {
        let got = all(b"a\r\n\nbc\nd", 8).unwrap();
        let want = [(1, "a"), (2, ""), (3, "bc"), (4, "d")];
        assert_eq!(got, want.map(|(n, s)| (n, s.to_string())));
        assert!(all(b"", 8).unwrap().is_empty());
    }

    #[test]
    fn a_line_of_exactly_the_bound_passes_and_one_byte_more_fails() {
        assert_eq!(all(b"1234\n5678", 4).unwrap().len(), 2);
        let (n, msg) = all(b"12\n12345\n", 4).unwrap_err();
        assert_eq!(n, 2);
        assert_eq!(
            msg,
            "the line is longer than 4 bytes (the bound on one line)"
        );
    }

    #[test]
    fn a_huge_line_is_never_held_whole() {
        let big = vec![0u8; 1 << 20];
        let mut lines = Lines::new(&big[..], 1000);
        let (n, msg) = lines.next_line().unwrap_err();
        assert_eq!(n, 1);
        assert!(msg.contains("1000 bytes"), "{msg}");
        assert!(lines.buf.capacity() < 4096, "{}", lines.buf.capacity());
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named() {
        let (n, msg) = all(b"ok\nab\xffc\n", 16).unwrap_err();
        assert_eq!((n, msg.as_str()), (2, "the line is not UTF-8 (at byte 3)"));
    }

    #[test]
    fn sizes_are_written_in_their_unit() {
        assert_eq!(size_text(16 << 20), "16 MiB");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }

    #[test]
    fn excerpts_are_short_and_escaped() {
        assert_eq!(excerpt("12x"), "12x");
        assert_eq!(excerpt("a\u{1b}[31m\nb"), "a\\x1b[31m\\nb");
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert_eq!(e, format!("{}...", "é".repeat(EXCERPT_CHARS)));
        assert_eq!(excerpt_tail(b"{\"a\": x"), "{\"a\": x");
        let tail = excerpt_tail(&[b'y'; 500]);
        assert_eq!(tail, format!("...{}", "y".repeat(EXCERPT_CHARS)));
        assert_eq!(excerpt_tail(b"\0\0"), "\\x00\\x00");
    }
}
