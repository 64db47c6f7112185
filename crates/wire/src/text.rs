//! Text that comes from a peer (a server's model names, versions, error messages, metric
//! labels) or from a command line made safe to print on a terminal and to use in file names.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;

/// The longest file stem [`safe_file_stem`] gives, in bytes (file names stop at 255).
pub const MAX_STEM_BYTES: usize = 128;

/// `s` with every control character (C0, DEL and C1) except `'\n'` written as `\xNN`, so
/// text from a server cannot move the cursor, recolour the terminal, ring the bell or
/// overwrite a line with `'\r'`. Borrows `s` when it holds none.
pub fn escape_control(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if needs_escape(c) {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\n'
}

/// A header line (`Name: value`) fit for a log: the value of a header that carries a
/// credential (`Authorization`, `Proxy-Authorization`, `api-key`, `x-api-key`, any name with
/// `auth`, `key`, `token`, `secret`, `cookie` or `password` in it) or that looks like one
/// (`Bearer ...`, `Basic ...`) is replaced by `<redacted>`.
pub fn redact_header(line: &str) -> Cow<'_, str> {
    let Some((name, value)) = line.split_once(':') else {
        return Cow::Borrowed(line);
    };
    let lower = name.trim().to_ascii_lowercase();
    let secret_name = ["auth", "key", "token", "secret", "cookie", "password"]
        .iter()
        .any(|w| lower.contains(w));
    let v = value.trim_start().to_ascii_lowercase();
    let secret_value = v.starts_with("bearer ") || v.starts_with("basic ");
    if secret_name || secret_value {
        Cow::Owned(format!("{name}: <redacted>"))
    } else {
        Cow::Borrowed(line)
    }
}

/// Why a URL with `user:password@` is refused (the flag's error adds the URL, redacted):
/// credentials are sent as a header, which `-v` prints redacted.
pub const URL_CREDENTIALS: &str = "Credentials in the URL (user:password@) are not supported; \
     send them with -H 'Authorization: Basic ...'";

/// A URL (or `host:port`) fit for a message: credentials before the host
/// (`user:password@`) keep the user name and lose the password (`user:<redacted>@`); a lone
/// `token@` becomes `<redacted>@`.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let Some(at) = url[start..end].rfind('@').map(|i| start + i) else {
        return Cow::Borrowed(url);
    };
    let keep = match url[start..at].find(':') {
        Some(colon) => &url[start..=start + colon],
        None => "",
    };
    Cow::Owned(format!("{}{keep}<redacted>{}", &url[..start], &url[at..]))
}

/// A name (a model, a version, a label) as one plain file name component: path separators
/// and control characters become `_`, leading dots become `_` (no `.`, `..` or hidden
/// file), an empty name becomes `_`, and the result is cut to [`MAX_STEM_BYTES`]. Joined to
/// a directory, it always names a file directly inside that directory.
pub fn safe_file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_STEM_BYTES));
    for c in name.chars() {
        let c = if c == '/' || c == '\\' || c.is_control() {
            '_'
        } else {
            c
        };
        if out.len() + c.len_utf8() > MAX_STEM_BYTES {
            break;
        }
        out.push(c);
    }
    let dots = out.len() - out.trim_start_matches('.').len();
    out.replace_range(..dots, &"_".repeat(dots));
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// Safe stems that never repeat within one set of files: a name whose stem is taken (two
/// names that differ only in characters [`safe_file_stem`] replaces) gets `-2`, `-3`, ...
#[derive(Debug, Default)]
pub struct UniqueStems {
    taken: HashSet<String>,
}

impl UniqueStems {
    /// The stem for `name`, distinct from every stem claimed before.
    pub fn claim(&mut self, name: &str) -> String {
        let stem = safe_file_stem(name);
        if self.taken.insert(stem.clone()) {
            return stem;
        }
        let mut n = 2u64;
        loop {
            let candidate = format!("{stem}-{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_except_newline() {
        assert!(matches!(escape_control("plain text"), Cow::Borrowed(_)));
        assert_eq!(escape_control("a\nb"), "a\nb");
        assert_eq!(
            escape_control("\x1b[31mred\x1b[0m\x07"),
            "\\x1b[31mred\\x1b[0m\\x07"
        );
        assert_eq!(
            escape_control("over\rwrite\t\0"),
            "over\\x0dwrite\\x09\\x00"
        );
        assert_eq!(escape_control("del\x7f c1\u{9b}2J"), "del\\x7f c1\\x9b2J");
        assert_eq!(escape_control("modèle ✓"), "modèle ✓");
        for s in ["\x1b]0;title\x07", "x\u{85}y"] {
            let e = escape_control(s);
            assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        }
    }

    #[test]
    fn credentials_in_headers_are_redacted() {
        for line in [
            "Authorization: Bearer sk-123",
            "authorization:Basic dXNlcjpwYXNz",
            "Proxy-Authorization: x",
            "api-key: abc",
            "X-API-Key: abc",
            "x-auth-token: t",
            "Cookie: session=1",
            "X-Custom: Bearer sk-123",
        ] {
            let out = redact_header(line);
            let name = line.split(':').next().unwrap();
            assert_eq!(out, format!("{name}: <redacted>"), "{line}");
            assert!(!out.contains("sk-") && !out.contains("abc"), "{out}");
        }
        for line in [
            "Content-Type: application/json",
            "Host: 127.0.0.1:8000",
            "POST / HTTP/1.1",
        ] {
            assert_eq!(redact_header(line), line);
        }
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        let cases = [
            (
                "http://user:pw@host:8000",
                "http://user:<redacted>@host:8000",
            ),
            ("user:p:w@h:1/x@y", "user:<redacted>@h:1/x@y"),
            ("https://tok@h", "https://<redacted>@h"),
            (
                "http://a:b@c@h:80/metrics",
                "http://a:<redacted>@h:80/metrics",
            ),
            ("http://h:8000", "http://h:8000"),
            ("h:8000/path@x", "h:8000/path@x"),
            ("", ""),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
        assert!(matches!(redact_url("h:1"), Cow::Borrowed(_)));
    }

    #[test]
    fn file_stems_stay_in_their_directory() {
        let cases = [
            ("simple", "simple"),
            ("../../x", "___.._x"),
            ("/abs/x", "_abs_x"),
            ("..", "__"),
            (".", "_"),
            (".hidden", "_hidden"),
            ("", "_"),
            ("a\\b", "a_b"),
            ("esc\x1b[31m\n", "esc_[31m_"),
            ("v1.2", "v1.2"),
            ("modèle", "modèle"),
        ];
        for (name, want) in cases {
            assert_eq!(safe_file_stem(name), want, "{name:?}");
        }
        let dir = std::path::Path::new("/out");
        for name in ["../../x", "/abs/x", "..", "a/../../b", "\0"] {
            let joined = dir.join(safe_file_stem(name));
            assert_eq!(joined.parent(), Some(dir), "{name:?}");
            assert_eq!(joined.components().count(), 3, "{name:?}");
        }
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        let long = "é".repeat(200);
        let stem = safe_file_stem(&long);
        assert!(stem.len() <= MAX_STEM_BYTES && stem.len() >= MAX_STEM_BYTES - 1);
        assert!(stem.chars().all(|c| c == 'é'));
    }

    #[test]
    fn clashing_stems_get_a_suffix() {
        let mut stems = UniqueStems::default();
        assert_eq!(stems.claim("a/b"), "a_b");
        assert_eq!(stems.claim("a_b"), "a_b-2");
        assert_eq!(stems.claim("a\\b"), "a_b-3");
        assert_eq!(stems.claim("a_b-2"), "a_b-2-2");
        assert_eq!(stems.claim("c"), "c");
    }
}
