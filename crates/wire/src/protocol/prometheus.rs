//! The Prometheus text exposition format (version 0.0.4), as Triton's metrics endpoint serves
//! it: `# HELP` / `# TYPE` lines, other comments, and samples
//! `name{label="value",...} value [timestamp_ms]`.
//!
//! perf_analyzer reads its four GPU metrics with one regex each, which needs exactly one
//! label and a plain non-negative decimal; this parser takes labels
//! in any order, escaped label values, exponents, `NaN` and `±Inf`, timestamps, blank lines
//! and `\r\n` line ends. It never panics on peer bytes and every error names its line.

use std::fmt;

/// What a `# TYPE` line declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn from_name(name: &str) -> Option<MetricType> {
        Some(match name {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            _ => return None,
        })
    }
}

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Label (name, unescaped value) pairs in the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Milliseconds since the Unix epoch, when the line has one.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed exposition: the samples in order, and the metadata lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// `# HELP name text`: (metric name, unescaped text).
    pub help: Vec<(String, String)>,
    /// `# TYPE name type`.
    pub types: Vec<(String, MetricType)>,
}

impl Exposition {
    /// Every sample as (metric name, value of label `label` if it has one, value).
    pub fn samples_by_label<'a>(
        &'a self,
        label: &'a str,
    ) -> impl Iterator<Item = (&'a str, Option<&'a str>, f64)> + 'a {
        self.samples
            .iter()
            .map(move |s| (s.name.as_str(), s.label(label), s.value))
    }
}

/// Why a line could not be read; `line` is 1-based.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole exposition; the first bad line is an error.
pub fn parse(body: &[u8]) -> Result<Exposition, ParseError> {
    let mut exposition = Exposition::default();
    for (index, raw) in lines(body) {
        read_line(raw, index + 1, &mut exposition)?;
    }
    Ok(exposition)
}

/// Parses what can be read: bad lines are skipped, and the first error is returned beside
/// the result so the caller can warn once (one odd line must not hide every GPU metric).
pub fn parse_lossy(body: &[u8]) -> (Exposition, Option<ParseError>) {
    let mut exposition = Exposition::default();
    let mut first_error = None;
    for (index, raw) in lines(body) {
        if let Err(e) = read_line(raw, index + 1, &mut exposition) {
            first_error.get_or_insert(e);
        }
    }
    (exposition, first_error)
}

/// The body's lines (split at `\n`, a trailing `\r` dropped), numbered from 0.
fn lines(body: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    body.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .enumerate()
}

fn read_line(raw: &[u8], line: usize, out: &mut Exposition) -> Result<(), ParseError> {
    let err = |message: String| ParseError { line, message };
    let text = std::str::from_utf8(raw).map_err(|_| err("not valid UTF-8".into()))?;
    let text = text.trim_matches(is_blank);
    if text.is_empty() {
        return Ok(());
    }
    if let Some(comment) = text.strip_prefix('#') {
        return read_comment(comment, out).map_err(err);
    }
    let sample = read_sample(text).map_err(err)?;
    out.samples.push(sample);
    Ok(())
}

/// Blanks separate tokens: spaces and tabs.
fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// `# HELP name text`, `# TYPE name type`; any other comment is ignored.
fn read_comment(comment: &str, out: &mut Exposition) -> Result<(), String> {
    let comment = comment.trim_start_matches(is_blank);
    let (keyword, rest) = split_token(comment);
    match keyword {
        "HELP" => {
            let (name, text) = split_token(rest);
            check_metric_name(name)?;
            out.help.push((name.to_string(), unescape_help(text)));
        }
        "TYPE" => {
            let (name, rest) = split_token(rest);
            check_metric_name(name)?;
            let (kind, extra) = split_token(rest);
            let kind = MetricType::from_name(kind).ok_or_else(|| {
                format!("TYPE of '{name}' is '{kind}'; expected counter, gauge, histogram, summary or untyped")
            })?;
            if !extra.is_empty() {
                return Err(format!("unexpected text after the TYPE of '{name}'"));
            }
            if out.types.iter().any(|(n, _)| n == name) {
                return Err(format!("second TYPE line for '{name}'"));
            }
            out.types.push((name.to_string(), kind));
        }
        _ => {}
    }
    Ok(())
}

/// The first blank-separated token and the rest (leading blanks removed).
fn split_token(text: &str) -> (&str, &str) {
    let end = text.find(is_blank).unwrap_or(text.len());
    (&text[..end], text[end..].trim_start_matches(is_blank))
}

fn check_metric_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("missing metric name".into());
    }
    if metric_name_len(name) != name.len() {
        return Err(format!("invalid metric name '{name}'"));
    }
    Ok(())
}

/// Length of the metric name `[a-zA-Z_:][a-zA-Z0-9_:]*` at the start of `text` (0: none).
fn metric_name_len(text: &str) -> usize {
    let mut len = 0;
    for (i, b) in text.bytes().enumerate() {
        let ok = b.is_ascii_alphabetic() || b == b'_' || b == b':' || (i > 0 && b.is_ascii_digit());
        if !ok {
            break;
        }
        len = i + 1;
    }
    len
}

/// Length of the label name `[a-zA-Z_][a-zA-Z0-9_]*` at the start of `text` (0: none).
fn label_name_len(text: &str) -> usize {
    let mut len = 0;
    for (i, b) in text.bytes().enumerate() {
        let ok = b.is_ascii_alphabetic() || b == b'_' || (i > 0 && b.is_ascii_digit());
        if !ok {
            break;
        }
        len = i + 1;
    }
    len
}

/// HELP text escapes: `\\` and `\n`; any other backslash stays as written.
fn unescape_help(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `name[{labels}] value [timestamp]`.
fn read_sample(text: &str) -> Result<Sample, String> {
    let name_len = metric_name_len(text);
    if name_len == 0 {
        let shown: String = text.chars().take(20).collect();
        return Err(format!("expected a metric name, found '{shown}'"));
    }
    let name = &text[..name_len];
    let mut rest = &text[name_len..];
    let mut labels = Vec::new();
    let after_labels = rest.trim_start_matches(is_blank);
    if let Some(inner) = after_labels.strip_prefix('{') {
        rest = read_labels(inner, name, &mut labels)?;
    } else if !rest.is_empty() && !rest.starts_with(is_blank) {
        return Err(format!("unexpected character after metric name '{name}'"));
    }
    let rest = rest.trim_start_matches(is_blank);
    let (value_text, rest) = split_token(rest);
    if value_text.is_empty() {
        return Err(format!("missing value for '{name}'"));
    }
    let value = parse_value(value_text)
        .ok_or_else(|| format!("value '{value_text}' of '{name}' is not a number"))?;
    let (ts_text, extra) = split_token(rest);
    let timestamp_ms = if ts_text.is_empty() {
        None
    } else {
        Some(
            ts_text
                .parse::<i64>()
                .map_err(|_| format!("timestamp '{ts_text}' of '{name}' is not an integer (ms)"))?,
        )
    };
    if !extra.is_empty() {
        return Err(format!("unexpected text after the sample of '{name}'"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Reads `label="value",...}` (the text after `{`) into `labels`; returns the text after `}`.
fn read_labels<'t>(
    mut rest: &'t str,
    metric: &str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'t str, String> {
    loop {
        rest = rest.trim_start_matches(is_blank);
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let len = label_name_len(rest);
        if len == 0 {
            return Err(format!(
                "expected a label name or '}}' in the labels of '{metric}'"
            ));
        }
        let label = &rest[..len];
        rest = rest[len..].trim_start_matches(is_blank);
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("expected '=' after label '{label}' of '{metric}'"))?
            .trim_start_matches(is_blank);
        rest = rest.strip_prefix('"').ok_or_else(|| {
            format!("expected '\"' to open the value of label '{label}' of '{metric}'")
        })?;
        let (value, after) = read_label_value(rest)
            .map_err(|why| format!("label '{label}' of '{metric}': {why}"))?;
        if labels.iter().any(|(n, _)| n == label) {
            return Err(format!("label '{label}' given twice for '{metric}'"));
        }
        labels.push((label.to_string(), value));
        rest = after.trim_start_matches(is_blank);
        if let Some(after_comma) = rest.strip_prefix(',') {
            rest = after_comma;
        } else if !rest.starts_with('}') {
            return Err(format!(
                "expected ',' or '}}' after label '{label}' of '{metric}'"
            ));
        }
    }
}

/// A quoted label value after its opening quote: escapes `\\`, `\"` and `\n`. Returns the
/// value and the text after the closing quote.
fn read_label_value(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                Some((_, other)) => return Err(format!("invalid escape '\\{other}'")),
                None => return Err("unterminated value".into()),
            },
            _ => value.push(c),
        }
    }
    Err("unterminated value (no closing '\"')".into())
}

/// A sample value: a decimal float with optional exponent, `NaN`, `+Inf`, `-Inf`
/// (case-insensitive, as Prometheus's Go parser accepts them).
fn parse_value(text: &str) -> Option<f64> {
    let digits = text.trim_start_matches(['+', '-']);
    let lower = digits.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" || lower == "nan" {
        return text.parse::<f64>().ok();
    }
    // Only a number from here: Rust's parser would also take "infinity" spelled oddly or
    // nothing at all; require a digit, as the format does.
    let numeric = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'));
    if !numeric || !text.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<f64>().ok()
}

/// Fuzz entry point (`fuzz/fuzz_targets/prometheus.rs`, replayed by `tests/it/fuzz_corpus.rs`):
/// parsing must not panic, a strict success must agree with the lossy parse, and every sample
/// read must have a valid name and unique label names.
pub fn fuzz_prometheus(data: &[u8]) {
    let strict = parse(data);
    let (lossy, first_error) = parse_lossy(data);
    match &strict {
        Ok(exposition) => {
            assert!(same(exposition, &lossy), "strict and lossy parses differ");
            assert!(first_error.is_none(), "lossy parse reported an error");
        }
        Err(e) => {
            assert_eq!(first_error.as_ref(), Some(e), "first errors differ");
            assert!(e.line >= 1, "error lines are 1-based");
        }
    }
    for sample in &lossy.samples {
        assert_eq!(metric_name_len(&sample.name), sample.name.len());
        for (i, (name, _)) in sample.labels.iter().enumerate() {
            assert_eq!(label_name_len(name), name.len());
            assert!(sample.labels[..i].iter().all(|(n, _)| n != name));
        }
    }
}

/// Equality that treats two NaN values parsed from the same text as equal.
fn same(a: &Exposition, b: &Exposition) -> bool {
    let same_sample = |x: &Sample, y: &Sample| {
        x.name == y.name
            && x.labels == y.labels
            && x.timestamp_ms == y.timestamp_ms
            && x.value.to_bits() == y.value.to_bits()
    };
    a.help == b.help
        && a.types == b.types
        && a.samples.len() == b.samples.len()
        && a.samples
            .iter()
            .zip(&b.samples)
            .all(|(x, y)| same_sample(x, y))
}

#[cfg(test)]
#[path = "prometheus_tests.rs"]
mod tests;
