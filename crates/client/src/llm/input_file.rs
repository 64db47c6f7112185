//! `--input-file`: prompts as JSONL, one object per line with `text_input`, `text` or
//! `input` (a string, or a list of strings joined with spaces), optional `output_length`
//! (`max_tokens` for that prompt), or a `payload` object sent verbatim.

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

use super::payload::Entry;
use crate::error::{Error, Result};
use crate::inputs::lines::{self, LineError, Lines, MAX_JSONL_LINE};

/// Reads the file line by line, each line at most [`MAX_JSONL_LINE`]; errors name the file
/// and the line.
pub fn read(path: &Path) -> Result<Vec<Entry>> {
    let lines = lines::open(path, MAX_JSONL_LINE)
        .map_err(|e| Error::usage(format!("--input-file {}: {e}", path.display())))?;
    parse_lines(lines).map_err(|(line, msg)| {
        Error::usage(format!(
            "--input-file {} line {line}: {msg}",
            path.display()
        ))
    })
}

/// Parses JSONL text; on error, the 1-based line and what is wrong.
pub fn parse(text: &str) -> std::result::Result<Vec<Entry>, LineError> {
    parse_lines(Lines::new(text.as_bytes(), MAX_JSONL_LINE))
}

fn parse_lines(mut lines: Lines<impl BufRead>) -> std::result::Result<Vec<Entry>, LineError> {
    let mut out = Vec::new();
    while let Some((n, line)) = lines.next_line()? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| (n, format!("not JSON: {e}")))?;
        out.push(entry(&v).map_err(|m| (n, m))?);
    }
    if out.is_empty() {
        return Err((0, "no prompts in the file".into()));
    }
    Ok(out)
}

fn entry(v: &Value) -> std::result::Result<Entry, String> {
    let Some(obj) = v.as_object() else {
        return Err("each line must be a JSON object".into());
    };
    let osl = match obj.get("output_length") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_u64()
                .filter(|n| *n > 0)
                .ok_or("output_length must be a positive integer")?,
        ),
    };
    if let Some(p) = obj.get("payload") {
        if !p.is_object() {
            return Err("payload must be a JSON object".into());
        }
        return Ok(Entry {
            text: String::new(),
            isl: 0,
            osl,
            payload: Some(p.clone()),
        });
    }
    let field = ["text_input", "text", "input"]
        .iter()
        .find_map(|k| obj.get(*k))
        .ok_or("needs one of text_input, text, input or payload")?;
    let text = match field {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| p.as_str().ok_or("text lists must hold strings"))
            .collect::<std::result::Result<Vec<_>, _>>()?
            .join(" "),
        _ => return Err("the text field must be a string or a list of strings".into()),
    };
    Ok(Entry {
        text,
        isl: 0,
        osl,
        payload: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_layout() {
        let text = concat!(
            "{\"text_input\": \"a b\", \"output_length\": 5}\n",
            "\n",
            "{\"text\": [\"x\", \"y\"]}\n",
            "{\"input\": \"z\"}\n",
            "{\"payload\": {\"model\": \"m\", \"prompt\": \"p\"}}\n",
        );
        let e = parse(text).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!((e[0].text.as_str(), e[0].osl), ("a b", Some(5)));
        assert_eq!(e[1].text, "x y");
        assert_eq!(e[2].text, "z");
        assert_eq!(e[3].payload.as_ref().unwrap()["prompt"], "p");
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("{\"text\": \"a\"}\n{oops\n", 2, "not JSON"),
            ("[1]\n", 1, "object"),
            ("{\"other\": 1}\n", 1, "needs one of"),
            ("{\"text\": 3}\n", 1, "string"),
            (
                "{\"text\": \"a\", \"output_length\": 0}\n",
                1,
                "output_length",
            ),
            ("{\"payload\": 3}\n", 1, "payload"),
            ("\n\n", 0, "no prompts"),
        ];
        for (text, line, needle) in cases {
            let (l, msg) = parse(text).unwrap_err();
            assert_eq!(l, line, "{text}");
            assert!(msg.contains(needle), "{text}: {msg}");
        }
    }

    #[test]
    fn a_line_over_the_bound_is_named_with_the_bound() {
        let long = format!("{{\"text\": \"{}\"}}\n", "a".repeat(MAX_JSONL_LINE));
        let text = format!("{{\"text\": \"a\"}}\n{long}");
        let (line, msg) = parse(&text).unwrap_err();
        assert_eq!(line, 2);
        assert_eq!(
            msg,
            "the line is longer than 16 MiB (the bound on one line)"
        );
        let ok = format!("{{\"text\": \"{}\"}}\n", "a".repeat(MAX_JSONL_LINE - 12));
        assert_eq!(parse(&ok).unwrap()[0].text.len(), MAX_JSONL_LINE - 12);
    }

    #[test]
    fn missing_file_names_the_flag_and_path() {
        let e = read(Path::new("/nonexistent/p.jsonl")).unwrap_err();
        assert!(
            e.msg.contains("--input-file /nonexistent/p.jsonl"),
            "{}",
            e.msg
        );
        assert_eq!(e.exit_code(), 99);
    }
}
