//! A structural reading of the pages [`super::html`] writes, for checks without a browser:
//! every element closed in order, which elements and ids the page holds, its text, and every
//! resource reference it makes (`src`, `href`, `url(..)`, `@import`). It reads the subset of
//! HTML those pages use (quoted attributes, `/>` or void elements, raw text in `<style>`), and
//! reports anything else as an error rather than guessing.

use std::collections::BTreeMap;

/// What a page holds.
#[derive(Debug, Default)]
pub struct Outline {
    /// Element name → how many.
    pub elements: BTreeMap<String, usize>,
    /// Every `id` attribute, in order.
    pub ids: Vec<String>,
    /// Every reference: `src`/`href`/`xlink:href`/`action`/`data`/`poster`/`srcset` values
    /// and CSS `url(..)` / `@import` targets.
    pub references: Vec<String>,
    /// The text outside tags (character references left as written).
    pub text: String,
}

impl Outline {
    pub fn count(&self, element: &str) -> usize {
        self.elements.get(element).copied().unwrap_or(0)
    }

    /// References that leave the page: anything with a scheme other than a fragment or a
    /// relative path (`http://`, `https://`, `//host`, `data:`, `file:`, ...).
    pub fn external_references(&self) -> Vec<&str> {
        self.references
            .iter()
            .map(String::as_str)
            .filter(|r| {
                let r = r.trim();
                r.starts_with("//") || r.contains(':')
            })
            .collect()
    }
}

/// Elements that never have a closing tag.
const VOID: [&str; 6] = ["meta", "br", "hr", "img", "link", "input"];
/// Attributes whose value is fetched or navigated to.
const REFERENCE_ATTRS: [&str; 7] = [
    "src",
    "href",
    "xlink:href",
    "action",
    "data",
    "poster",
    "srcset",
];

/// Reads `page`; an error says what is malformed and where.
pub fn scan(page: &str) -> Result<Outline, String> {
    let mut out = Outline::default();
    let mut stack: Vec<String> = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find('<') {
        out.text.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("<!--") {
            let end = after.find("-->").ok_or("an unclosed comment")?;
            rest = &after[end + 3..];
            continue;
        }
        if rest.starts_with("<!") || rest.starts_with("<?") {
            let end = rest.find('>').ok_or("an unclosed declaration")?;
            rest = &rest[end + 1..];
            continue;
        }
        let end = tag_end(rest).ok_or_else(|| format!("an unclosed tag at {:?}", head(rest)))?;
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let name = name.trim().to_ascii_lowercase();
            match stack.pop() {
                Some(open) if open == name => continue,
                open => return Err(format!("</{name}> closes {open:?}")),
            }
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let (name, attrs) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
        let name = name.to_ascii_lowercase();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!("a bad tag name in <{}>", head(tag)));
        }
        *out.elements.entry(name.clone()).or_default() += 1;
        for (key, value) in attributes(attrs)? {
            let key = key.to_ascii_lowercase();
            if key == "id" {
                out.ids.push(value.clone());
            }
            if REFERENCE_ATTRS.contains(&key.as_str()) {
                out.references.push(value.clone());
            }
            if key == "style" {
                css_references(&value, &mut out.references);
            }
        }
        if name == "style" || name == "script" {
            let close = format!("</{name}>");
            let end = rest
                .find(&close)
                .ok_or_else(|| format!("an unclosed <{name}>"))?;
            css_references(&rest[..end], &mut out.references);
            rest = &rest[end + close.len()..];
            continue;
        }
        if !self_closing && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    out.text.push_str(rest);
    match stack.last() {
        Some(open) => Err(format!("<{open}> is never closed")),
        None => Ok(out),
    }
}

/// The first characters of `s`, for error messages.
fn head(s: &str) -> String {
    s.chars().take(40).collect()
}

/// The index of the `>` that ends the tag starting `s` (quotes respected).
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

/// `key="value"` / `key='value'` / bare `key` pairs.
fn attributes(mut s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(out);
        }
        let key_end = s
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(s.len());
        let key = s[..key_end].to_string();
        s = s[key_end..].trim_start();
        let Some(after) = s.strip_prefix('=') else {
            out.push((key, String::new()));
            continue;
        };
        let after = after.trim_start();
        let q = after
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
            .ok_or_else(|| format!("attribute {key} has an unquoted value"))?;
        let body = &after[1..];
        let end = body
            .find(q)
            .ok_or_else(|| format!("attribute {key} is not closed"))?;
        out.push((key, body[..end].to_string()));
        s = &body[end + 1..];
    }
}

/// `url(..)` and `@import` targets in CSS text.
fn css_references(css: &str, out: &mut Vec<String>) {
    let lower = css.to_ascii_lowercase();
    for (at, _) in lower.match_indices("url(") {
        let tail = &css[at + 4..];
        let end = tail.find(')').unwrap_or(tail.len());
        out.push(tail[..end].trim().trim_matches(['"', '\'']).to_string());
    }
    for (at, _) in lower.match_indices("@import") {
        let tail = css[at + 7..].trim_start();
        let end = tail.find(';').unwrap_or(tail.len());
        out.push(tail[..end].trim().trim_matches(['"', '\'']).to_string());
    }
}
