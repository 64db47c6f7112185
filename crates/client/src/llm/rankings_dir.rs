//! `--input-file DIR` with `--endpoint-type rankings`: GenAI-Perf's rankings folder, a
//! `queries.jsonl` and a `passages.jsonl` (one `{"text": ...}` or `{"text_input": ...}`
//! object a line). Line i of each makes request i, its body built by the endpoint's kind
//! from the query and its passages (`run/kinds/rankings.rs`: GenAI-Perf's body, or TEI's
//! with `--extra-inputs rankings:tei`). With `--batch-size-text` B, a request carries the
//! B passages from its own line on (wrapping). GenAI-Perf's synthetic rankings files
//! (`--input-file synthetic:queries,passages`) are built by [`entries`] too.

use std::path::Path;

use serde_json::Value;

use super::cli::ProfileConfig;
use super::payload::Entry;
use crate::error::{Error, Result};
use crate::inputs::lines::{self, MAX_JSONL_LINE};
use crate::run::kinds::codec::Input;

/// The requests of the folder: one entry per query that has a passage line, each with its
/// body whole.
pub fn read(dir: &Path, cfg: &ProfileConfig) -> Result<Vec<Entry>> {
    if cfg.endpoint_type.input() != Input::QueryPassages {
        return Err(Error::usage(format!(
            "--input-file {}: a directory is read as GenAI-Perf's rankings folder \
             (queries.jsonl and passages.jsonl) with --endpoint-type rankings; give a JSONL \
             file for {}",
            dir.display(),
            cfg.endpoint_type.name()
        )));
    }
    let queries = texts(&dir.join("queries.jsonl"))?;
    let passages = texts(&dir.join("passages.jsonl"))?;
    let n = queries.len().min(passages.len());
    let batch = cfg.batch_size.max(1);
    let groups: Vec<Vec<String>> = (0..n)
        .map(|i| {
            (0..batch)
                .map(|k| passages[(i + k) % passages.len()].clone())
                .collect()
        })
        .collect();
    Ok(entries(cfg, &queries[..n], &groups))
}

/// One request per query: query i with the passages of `passages[i]`, its body whole (the
/// endpoint kind's query body).
pub fn entries(cfg: &ProfileConfig, queries: &[String], passages: &[Vec<String>]) -> Vec<Entry> {
    let n = queries.len().min(passages.len());
    let models = super::payload::pick_models(cfg, n);
    let codec = cfg.endpoint_type.service();
    (0..n)
        .map(|i| {
            let own = &passages[i];
            let model = &cfg.models[models[i] as usize];
            let body = codec.query_body(model, &queries[i], own, &cfg.extra);
            Entry {
                text: format!("{} {}", queries[i], own.join(" ")),
                isl: 0,
                osl: None,
                payload: body,
            }
        })
        .collect()
}

/// The `text` (or `text_input`) of every non-empty line; errors name the file and line.
fn texts(path: &Path) -> Result<Vec<String>> {
    let shown = path.display();
    let mut lines = lines::open(path, MAX_JSONL_LINE).map_err(|e| {
        Error::usage(format!(
            "--input-file {shown}: {e} (a rankings folder holds queries.jsonl and \
             passages.jsonl)"
        ))
    })?;
    let at = |(line, msg): (usize, String)| {
        Error::usage(format!("--input-file {shown} line {line}: {msg}"))
    };
    let mut out = Vec::new();
    while let Some((n, line)) = lines.next_line().map_err(at)? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| at((n, format!("not JSON: {e}"))))?;
        let text = match (v.get("text"), v.get("text_input")) {
            (Some(Value::String(t)), None) | (None, Some(Value::String(t))) => t.trim(),
            (Some(_), Some(_)) => return Err(at((n, "give text or text_input, not both".into()))),
            _ => return Err(at((n, "needs a string text (or text_input)".into()))),
        };
        out.push(text.to_string());
    }
    if out.is_empty() {
        return Err(Error::usage(format!(
            "--input-file {shown}: no lines with text"
        )));
    }
    Ok(out)
}
