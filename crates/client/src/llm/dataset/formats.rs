//! The dataset file formats `profile` reads (never downloads): ShareGPT JSON, AIPerf's
//! custom-dataset JSONL formats `single_turn`, `multi_turn`, `random_pool` and
//! `mooncake_trace`, and GenAI-Perf's payload file (`--input-file payload:FILE`). Each line
//! (or ShareGPT entry) becomes one or more [`Record`]s; a bad one is an error naming its
//! line (entry) and field.
//!
//! Field meanings follow AIPerf's loaders: times are milliseconds (`timestamp` from the
//! trace's zero, `delay` before the turn is sent), `output_length` is the turn's
//! `max_tokens`, `session_id` groups turns into a conversation, and a mooncake
//! `input_length` with `hash_ids` asks for a synthetic prompt whose i-th block of
//! `--isl-block-size` tokens is the same text wherever hash id i appears.
//!
//! GenAI-Perf's payload file differs in two ways: its `delay` is the pause after the turn's
//! answer before the session's next turn (here moved onto that next turn, so every format's
//! `delay` is the pause before its own turn), and fields it does not read itself go into
//! the request body as they are (`priority`, sampling parameters).

use std::io::BufRead;
use std::path::Path;

use serde_json::{Map, Value};

use crate::inputs::file;
use crate::inputs::lines::{self, Lines, MAX_JSONL_LINE};

/// What a record sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Prompt text.
    Text(String),
    /// A request body sent verbatim.
    Payload(Value),
    /// A synthetic prompt of `input_length` tokens built from hash-id blocks.
    Synthetic {
        input_length: u64,
        hash_ids: Vec<u64>,
    },
    /// A payload-file line without text or `input_length`: a synthetic prompt of
    /// `--synthetic-input-tokens-mean` tokens (drawn with the standard deviation when there
    /// are no hash ids, exactly the mean when there are).
    Sampled { hash_ids: Vec<u64> },
}

/// One request of a dataset, as the file gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub prompt: Prompt,
    /// `output_length` (or the ShareGPT reference reply's length, counted later).
    pub osl: Option<u64>,
    /// ShareGPT: the reference reply, whose token count becomes the OSL.
    pub reference: Option<String>,
    /// Milliseconds from the trace's zero.
    pub timestamp_ms: Option<f64>,
    /// Milliseconds to wait after the previous turn of its conversation.
    pub delay_ms: Option<f64>,
    /// The conversation it belongs to.
    pub session: Option<String>,
    /// 1-based line (JSONL) or 0-based entry index (ShareGPT) it came from.
    pub line: usize,
    /// Payload files: the line's other fields, put into the request body as they are.
    pub extra: Map<String, Value>,
}

impl Record {
    fn new(prompt: Prompt, line: usize) -> Record {
        Record {
            prompt,
            osl: None,
            reference: None,
            timestamp_ms: None,
            delay_ms: None,
            session: None,
            line,
            extra: Map::new(),
        }
    }
}

/// The formats, named as AIPerf's `--custom-dataset-type` (and vllm bench's
/// `--dataset-name sharegpt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A JSON list of `{"conversations": [{"from": "human"|"gpt", "value": ...}]}`.
    #[value(name = "sharegpt")]
    ShareGpt,
    #[value(name = "single_turn", alias = "single-turn")]
    SingleTurn,
    #[value(name = "multi_turn", alias = "multi-turn")]
    MultiTurn,
    #[value(name = "random_pool", alias = "random-pool")]
    RandomPool,
    #[value(name = "mooncake_trace", alias = "mooncake-trace")]
    MooncakeTrace,
    /// GenAI-Perf's payload file, named by `--input-file payload:FILE` only.
    #[value(skip)]
    Payload,
}

/// A parse error: the line (entry) and what is wrong, naming the field.
pub type ParseError = (usize, String);
type Parsed<T> = std::result::Result<T, ParseError>;

/// Reads the file `path` in `format` (a `random_pool` directory is read file by file by the
/// caller, each through this): ShareGPT whole, at most [`file::MAX_FILE_BYTES`], its syntax
/// checked first; the JSONL formats line by line, each line at most [`MAX_JSONL_LINE`].
pub fn read(format: Format, path: &Path) -> Parsed<Vec<Record>> {
    let Some(each) = per_line(format) else {
        let bytes = file::read_json(path, "not JSON").map_err(|e| (0, e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to() + 1;
            (0, format!("the file is not UTF-8 (at byte {at})"))
        })?;
        return sharegpt(&text);
    };
    let lines = lines::open(path, MAX_JSONL_LINE).map_err(|e| (0, e.to_string()))?;
    let mut records = jsonl(lines, each)?;
    if format == Format::Payload {
        payload_sessions(&mut records)?;
    }
    Ok(records)
}

/// Parses a whole file's text in `format`, as [`read`] reads it.
pub fn parse(format: Format, text: &str) -> Parsed<Vec<Record>> {
    match per_line(format) {
        None => sharegpt(text),
        Some(each) => {
            let mut records = jsonl(Lines::new(text.as_bytes(), MAX_JSONL_LINE), each)?;
            if format == Format::Payload {
                payload_sessions(&mut records)?;
            }
            Ok(records)
        }
    }
}

/// What one line of a JSONL format gives: its records, or what is wrong.
type LineParser = fn(&Map<String, Value>, usize) -> Field<Vec<Record>>;

/// The line parser of a JSONL format (`None`: ShareGPT, one JSON document).
fn per_line(format: Format) -> Option<LineParser> {
    Some(match format {
        Format::ShareGpt => return None,
        Format::SingleTurn => |v, line| single_turn(v, line).map(|r| vec![r]),
        Format::MultiTurn => multi_turn,
        Format::RandomPool => |v, line| random_pool(v, line).map(|r| vec![r]),
        Format::MooncakeTrace => |v, line| mooncake(v, line).map(|r| vec![r]),
        Format::Payload => |v, line| payload(v, line).map(|r| vec![r]),
    })
}

fn jsonl(mut lines: Lines<impl BufRead>, each: LineParser) -> Parsed<Vec<Record>> {
    let mut out = Vec::new();
    while let Some((n, line)) = lines.next_line()? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| (n, format!("not JSON: {e}")))?;
        let Some(obj) = v.as_object() else {
            return Err((n, "each line must be a JSON object".into()));
        };
        out.extend(each(obj, n).map_err(|m| (n, m))?);
    }
    if out.is_empty() {
        return Err((0, "no entries in the file".into()));
    }
    Ok(out)
}

type Field<T> = std::result::Result<T, String>;

/// Fails on a field outside `known` (a misspelt field would otherwise be ignored).
fn only(obj: &Map<String, Value>, known: &[&str], what: &str) -> Field<()> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) if MEDIA.contains(&k.as_str()) => Err(format!(
            "field '{k}': inferperf profile sends text only ({what} entries with images, audio \
             or video are not supported)"
        )),
        Some(k) => Err(format!(
            "field '{k}' is not a {what} field (known: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

const MEDIA: [&str; 7] = [
    "image",
    "images",
    "image_uuids",
    "audio",
    "audios",
    "video",
    "videos",
];

fn positive_int(obj: &Map<String, Value>, key: &str) -> Field<Option<u64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| format!("field '{key}' must be a positive integer (got {v})")),
    }
}

fn millis(obj: &Map<String, Value>, key: &str) -> Field<Option<f64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0 && *n <= MAX_MS)
            .map(Some)
            .ok_or_else(|| {
                format!("field '{key}' must be a number of milliseconds >= 0 (got {v})")
            }),
    }
}

/// A year in milliseconds: far past any trace, low enough that ns offsets fit a u64.
const MAX_MS: f64 = 3.2e10;

fn string(obj: &Map<String, Value>, key: &str) -> Field<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        // Numeric session ids are common in traces; they name a session all the same.
        Some(Value::Number(n)) if key == "session_id" => Ok(Some(n.to_string())),
        Some(v) => Err(format!("field '{key}' must be a string (got {v})")),
    }
}

/// `text` (a string) or `texts` (strings, or `{"name", "contents": [...]}` objects), joined
/// with spaces.
fn text_of(obj: &Map<String, Value>) -> Field<Option<String>> {
    let text = string(obj, "text")?;
    let texts = match obj.get("texts") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut parts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => parts.push(s.clone()),
                    Value::Object(o) => match o.get("contents") {
                        Some(Value::Array(c)) => {
                            for s in c {
                                parts.push(s.as_str().map(str::to_string).ok_or_else(|| {
                                    format!("field 'texts[{i}].contents' must hold strings")
                                })?);
                            }
                        }
                        _ => return Err(format!("field 'texts[{i}].contents' must be a list")),
                    },
                    _ => {
                        return Err(format!(
                            "field 'texts[{i}]' must be a string or a {{\"name\", \"contents\"}} object"
                        ))
                    }
                }
            }
            Some(parts.join(" "))
        }
        Some(v) => return Err(format!("field 'texts' must be a list (got {v})")),
    };
    match (text, texts) {
        (Some(_), Some(_)) => Err("fields 'text' and 'texts' cannot be set together".into()),
        (t, ts) => Ok(t.or(ts)),
    }
}

const SINGLE_TURN_FIELDS: [&str; 10] = [
    "type",
    "text",
    "texts",
    "timestamp",
    "delay",
    "role",
    "session_id",
    "output_length",
    "max_tokens",
    "extra",
];

fn single_turn(obj: &Map<String, Value>, line: usize) -> Field<Record> {
    only(obj, &SINGLE_TURN_FIELDS, "single_turn")?;
    if obj.contains_key("extra") {
        return Err("field 'extra' is not supported; use --extra-inputs".into());
    }
    let text = text_of(obj)?.ok_or("needs field 'text' or 'texts'")?;
    let mut r = Record::new(Prompt::Text(text), line);
    r.osl = positive_int(obj, "output_length")?;
    r.timestamp_ms = millis(obj, "timestamp")?;
    r.delay_ms = millis(obj, "delay")?;
    if r.timestamp_ms.is_some() && r.delay_ms.is_some() {
        return Err("fields 'timestamp' and 'delay' cannot be set together".into());
    }
    r.session = string(obj, "session_id")?;
    Ok(r)
}

fn multi_turn(obj: &Map<String, Value>, line: usize) -> Field<Vec<Record>> {
    only(obj, &["type", "session_id", "turns"], "multi_turn")?;
    let session = string(obj, "session_id")?.unwrap_or_else(|| format!("line {line}"));
    let Some(Value::Array(turns)) = obj.get("turns") else {
        return Err("needs field 'turns', a list of turns".into());
    };
    if turns.is_empty() {
        return Err("field 'turns' must hold at least one turn".into());
    }
    let mut out = Vec::with_capacity(turns.len());
    for (i, t) in turns.iter().enumerate() {
        let Some(t) = t.as_object() else {
            return Err(format!("field 'turns[{i}]' must be an object"));
        };
        let mut r = single_turn(t, line).map_err(|m| format!("turns[{i}]: {m}"))?;
        if r.session.as_ref().is_some_and(|s| *s != session) {
            return Err(format!(
                "turns[{i}]: field 'session_id' differs from the conversation's"
            ));
        }
        r.session = Some(session.clone());
        out.push(r);
    }
    Ok(out)
}

fn random_pool(obj: &Map<String, Value>, line: usize) -> Field<Record> {
    only(obj, &["type", "text", "texts"], "random_pool")?;
    let text = text_of(obj)?.ok_or("needs field 'text' or 'texts'")?;
    Ok(Record::new(Prompt::Text(text), line))
}

const MOONCAKE_FIELDS: [&str; 10] = [
    "type",
    "input_length",
    "text_input",
    "payload",
    "output_length",
    "hash_ids",
    "timestamp",
    "delay",
    "session_id",
    "messages",
];

fn mooncake(obj: &Map<String, Value>, line: usize) -> Field<Record> {
    only(obj, &MOONCAKE_FIELDS, "mooncake_trace")?;
    if obj.contains_key("messages") {
        return Err("field 'messages' is not supported; give 'text_input' or 'payload'".into());
    }
    let modes = ["input_length", "text_input", "payload"]
        .iter()
        .filter(|k| obj.get(**k).is_some_and(|v| !v.is_null()))
        .count();
    if modes != 1 {
        return Err(
            "needs exactly one of the fields 'input_length', 'text_input' or 'payload'".into(),
        );
    }
    let hash_ids = hash_ids(obj)?;
    let prompt = if let Some(n) = input_length(obj)? {
        Prompt::Synthetic {
            input_length: n,
            hash_ids,
        }
    } else if !hash_ids.is_empty() {
        return Err("field 'hash_ids' needs 'input_length'".into());
    } else if let Some(t) = string(obj, "text_input")? {
        Prompt::Text(t)
    } else {
        match obj.get("payload") {
            Some(p @ Value::Object(_)) => Prompt::Payload(p.clone()),
            _ => return Err("field 'payload' must be a JSON object".into()),
        }
    };
    let mut r = Record::new(prompt, line);
    r.osl = positive_int(obj, "output_length")?;
    r.timestamp_ms = millis(obj, "timestamp")?;
    r.delay_ms = millis(obj, "delay")?;
    r.session = string(obj, "session_id")?;
    Ok(r)
}

/// Longest synthetic prompt of a trace entry (tokens).
const MAX_INPUT_LENGTH: u64 = 1_000_000;

fn hash_ids(obj: &Map<String, Value>) -> Field<Vec<u64>> {
    match obj.get("hash_ids") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|v| {
                v.as_u64().ok_or_else(|| {
                    format!("field 'hash_ids' must hold non-negative integers (got {v})")
                })
            })
            .collect(),
        Some(v) => Err(format!("field 'hash_ids' must be a list (got {v})")),
    }
}

fn input_length(obj: &Map<String, Value>) -> Field<Option<u64>> {
    let n = positive_int(obj, "input_length")?;
    match n {
        Some(n) if n > MAX_INPUT_LENGTH => Err(format!(
            "field 'input_length' must be at most {MAX_INPUT_LENGTH} (got {n})"
        )),
        n => Ok(n),
    }
}

/// The fields of a payload-file line GenAI-Perf reads itself; any other goes into the body.
const PAYLOAD_FIELDS: [&str; 8] = [
    "text",
    "text_input",
    "input_length",
    "output_length",
    "hash_ids",
    "timestamp",
    "delay",
    "session_id",
];

/// One line of GenAI-Perf's payload file: `text` or `text_input` (the prompt, trimmed; not
/// both), else a synthetic prompt of `input_length` tokens (with `hash_ids`, from their
/// blocks), else of the synthetic length flags; `output_length` the `max_tokens`;
/// `timestamp` (ms from the start of the run), `session_id` and `delay` (ms after this
/// turn's answer before the session's next turn, moved by [`payload_sessions`]); every
/// other field goes into the body. Empty texts count as absent, as in GenAI-Perf.
fn payload(obj: &Map<String, Value>, line: usize) -> Field<Record> {
    let text = string(obj, "text")?.filter(|t| !t.trim().is_empty());
    let alt = string(obj, "text_input")?.filter(|t| !t.trim().is_empty());
    let hash_ids = hash_ids(obj)?;
    let input_length = input_length(obj)?;
    let prompt = match (text, alt) {
        (Some(_), Some(_)) => {
            return Err("fields 'text' and 'text_input' cannot be set together".into())
        }
        (Some(t), None) | (None, Some(t)) => Prompt::Text(t.trim().to_string()),
        (None, None) => match input_length {
            Some(n) => Prompt::Synthetic {
                input_length: n,
                hash_ids,
            },
            None => Prompt::Sampled { hash_ids },
        },
    };
    let mut r = Record::new(prompt, line);
    r.osl = positive_int(obj, "output_length")?;
    r.timestamp_ms = millis(obj, "timestamp")?;
    r.delay_ms = millis(obj, "delay")?;
    r.session = string(obj, "session_id")?;
    if r.session.is_some() && r.timestamp_ms.is_some() {
        return Err(
            "fields 'timestamp' and 'session_id' cannot be set together (a session's \
                    turns are paced by 'delay'; timestamps schedule single requests)"
                .into(),
        );
    }
    if r.delay_ms.is_some() && r.session.is_none() {
        return Err(
            "field 'delay' needs 'session_id' (it is the pause before the session's next turn)"
                .into(),
        );
    }
    r.extra = obj
        .iter()
        .filter(|(k, _)| !PAYLOAD_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(r)
}

/// Moves each payload `delay` from its turn onto the session's next turn (the pause before
/// it, as the other formats mean `delay`); every turn but a session's last needs one, as
/// GenAI-Perf requires.
fn payload_sessions(records: &mut [Record]) -> Parsed<()> {
    let own: Vec<Option<f64>> = records.iter().map(|r| r.delay_ms).collect();
    let mut last: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for i in 0..records.len() {
        let Some(session) = records[i].session.clone() else {
            continue;
        };
        records[i].delay_ms = match last.insert(session.clone(), i) {
            None => None,
            Some(prev) => Some(own[prev].ok_or_else(|| {
                (
                    records[prev].line,
                    format!(
                        "field 'delay' is needed on every turn of session '{session}' but \
                         its last (line {} follows)",
                        records[i].line
                    ),
                )
            })?),
        };
    }
    Ok(())
}

/// ShareGPT: a JSON list of conversations; the first `human` turn is the prompt and the `gpt`
/// turn right after it the reference reply. Conversations without such a pair are skipped,
/// as vllm bench and AIPerf skip them; a list with none at all is an error.
fn sharegpt(text: &str) -> Parsed<Vec<Record>> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| (e.line(), format!("not JSON (column {}): {e}", e.column())))?;
    let Value::Array(items) = v else {
        return Err((0, "a ShareGPT file is a JSON list of conversations".into()));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let err = |m: String| (0, format!("entry {i}: {m}"));
        let Some(conv) = item.get("conversations") else {
            return Err(err("needs field 'conversations'".into()));
        };
        let Value::Array(turns) = conv else {
            return Err(err("field 'conversations' must be a list".into()));
        };
        let mut prompt: Option<String> = None;
        let mut reply: Option<String> = None;
        for (k, t) in turns.iter().enumerate() {
            let from = t.get("from").and_then(Value::as_str);
            let value = t.get("value").and_then(Value::as_str);
            let (Some(from), Some(value)) = (from, value) else {
                return Err(err(format!(
                    "field 'conversations[{k}]' needs string fields 'from' and 'value'"
                )));
            };
            match (from, &prompt) {
                ("human" | "user", None) if !value.is_empty() => prompt = Some(value.into()),
                ("gpt" | "assistant" | "chatgpt" | "bing" | "bard", Some(_)) => {
                    reply = Some(value.into());
                    break;
                }
                _ => {}
            }
        }
        if let (Some(p), Some(reply)) = (prompt, reply) {
            let mut r = Record::new(Prompt::Text(p), i);
            r.reference = Some(reply);
            out.push(r);
        }
    }
    if out.is_empty() {
        return Err((
            0,
            "no conversation has a human turn followed by a gpt turn".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "formats_tests.rs"]
mod tests;
