//! A JSON reader over a reply's bytes, in place: it checks the syntax (RFC 8259) and hands
//! out raw slices of strings and numbers, so a reply is validated without building values
//! and without allocating. Strings are compared to expected text through their escapes.

use super::reply_check::Bad;

/// Deepest nesting of arrays and objects a reply may have (serde_json's default too).
const MAX_DEPTH: u32 = 128;

/// A cursor over one JSON text.
pub(crate) struct Json<'a> {
    b: &'a [u8],
    pub(crate) pos: usize,
    depth: u32,
}

impl<'a> Json<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Json<'a> {
        Json {
            b,
            pos: 0,
            depth: 0,
        }
    }

    /// A syntax error at the cursor.
    pub(crate) fn err(&self, what: &str) -> Bad {
        Bad::not_json(format!("{what} at byte {}", self.pos))
    }

    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), Bad> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    /// The text from `start` to the cursor.
    pub(crate) fn slice(&self, start: usize) -> &'a [u8] {
        &self.b[start.min(self.pos)..self.pos]
    }

    /// Only whitespace remains.
    pub(crate) fn end(&mut self) -> Result<(), Bad> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err("unexpected data after the JSON value")),
        }
    }

    /// Skips one value, checking its syntax.
    pub(crate) fn value(&mut self) -> Result<(), Bad> {
        match self.peek() {
            Some(b'{') => self.object(|j, _| j.value()),
            Some(b'[') => self.array(|j, _| j.value()),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number().map(|_| ()),
            Some(_) => Err(self.err("expected a JSON value")),
            None => Err(self.err("JSON value missing")),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Bad> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn enter(&mut self) -> Result<(), Bad> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("JSON nested deeper than 128 levels"));
        }
        Ok(())
    }

    /// An object: `member` is called with each key (raw, escapes undecoded) and must consume
    /// the member's value.
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Result<(), Bad>,
    ) -> Result<(), Bad> {
        self.expect(b'{', "expected '{'")?;
        self.enter()?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a member name"));
            }
            let key = self.string()?;
            self.expect(b':', "expected ':'")?;
            member(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    /// An array: `element` is called with each index and must consume the element.
    pub(crate) fn array(
        &mut self,
        mut element: impl FnMut(&mut Self, usize) -> Result<(), Bad>,
    ) -> Result<(), Bad> {
        self.expect(b'[', "expected '['")?;
        self.enter()?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        let mut i = 0;
        loop {
            element(self, i)?;
            i += 1;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// A string: its raw content between the quotes (escapes checked, not decoded).
    pub(crate) fn string(&mut self) -> Result<&'a [u8], Bad> {
        self.expect(b'"', "expected a string")?;
        let start = self.pos;
        loop {
            let Some(&c) = self.b.get(self.pos) else {
                return Err(self.err("unterminated string"));
            };
            match c {
                b'"' => break,
                b'\\' => {
                    self.pos += 1;
                    match self.b.get(self.pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                        Some(b'u') => {
                            let hex = self.b.get(self.pos + 1..self.pos + 5);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return Err(self.err("invalid \\u escape"));
                            }
                            self.pos += 4;
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                0..=0x1f => return Err(self.err("control character in a string")),
                _ => {}
            }
            self.pos += 1;
        }
        let raw = &self.b[start..self.pos];
        if std::str::from_utf8(raw).is_err() {
            return Err(self.err("string is not UTF-8"));
        }
        self.pos += 1;
        Ok(raw)
    }

    /// A number (RFC 8259 grammar), raw.
    pub(crate) fn number(&mut self) -> Result<&'a [u8], Bad> {
        self.ws();
        let start = self.pos;
        if self.b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.b.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("invalid number")),
        }
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !self.b.get(self.pos).is_some_and(u8::is_ascii_digit) {
                return Err(self.err("invalid number"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.b.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.b.get(self.pos) {
                self.pos += 1;
            }
            if !self.b.get(self.pos).is_some_and(u8::is_ascii_digit) {
                return Err(self.err("invalid number"));
            }
            self.digits();
        }
        Ok(&self.b[start..self.pos])
    }

    fn digits(&mut self) {
        while self.b.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
    }
}

/// A raw number as a non-negative integer (`None`: negative, fractional, or over u64).
pub(crate) fn as_u64(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    raw.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A raw number as an integer (`None`: fractional or out of i64).
pub(crate) fn as_i64(raw: &[u8]) -> Option<i64> {
    match raw.strip_prefix(b"-") {
        Some(rest) => as_u64(rest).and_then(|n| 0i64.checked_sub_unsigned(n)),
        None => as_u64(raw).and_then(|n| i64::try_from(n).ok()),
    }
}

/// A raw (syntax-checked) JSON string equals `want` once its escapes are decoded.
pub(crate) fn str_eq(raw: &[u8], want: &str) -> bool {
    if !raw.contains(&b'\\') {
        return raw == want.as_bytes();
    }
    let mut want = want.as_bytes();
    let mut buf = [0u8; 4];
    let mut i = 0;
    while i < raw.len() {
        let piece: &[u8] = if raw[i] != b'\\' {
            i += 1;
            &raw[i - 1..i]
        } else {
            let (c, used) = unescape(&raw[i..]);
            i += used;
            c.encode_utf8(&mut buf).as_bytes()
        };
        match want.strip_prefix(piece) {
            Some(rest) => want = rest,
            None => return false,
        }
    }
    want.is_empty()
}

/// Decodes the escape at the start of `raw` (checked by [`Json::string`]): the character
/// and the bytes it took. A lone surrogate reads as U+FFFD.
fn unescape(raw: &[u8]) -> (char, usize) {
    let hex = |at: usize| {
        raw.get(at..at + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let simple = match raw.get(1) {
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => {
            let Some(hi) = hex(2) else {
                return ('\u{fffd}', raw.len());
            };
            if (0xd800..0xdc00).contains(&hi) && raw.get(6..8) == Some(b"\\u") {
                if let Some(lo @ 0xdc00..=0xdfff) = hex(8) {
                    let c = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                    return (char::from_u32(c).unwrap_or('\u{fffd}'), 12);
                }
            }
            return (char::from_u32(hi).unwrap_or('\u{fffd}'), 6);
        }
        Some(&c) => char::from(c),
        None => '\u{fffd}',
    };
    (simple, 2)
}

/// A raw JSON string decoded for a message (failure path only).
pub(crate) fn decoded(raw: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' {
            let (c, used) = unescape(&raw[i..]);
            out.push(c);
            i += used;
        } else {
            let end = raw[i..]
                .iter()
                .position(|&b| b == b'\\')
                .map_or(raw.len(), |p| i + p);
            out.push_str(&String::from_utf8_lossy(&raw[i..end]));
            i = end;
        }
    }
    out
}
