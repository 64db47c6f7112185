//! Token counting for LLM mode: the built-in tiktoken encodings
//! `cl100k_base` and `o200k_base` (their BPE ranks are compiled into the binary), a local
//! HuggingFace `tokenizer.json`, or a Hugging Face Hub name `ORG/NAME` whose tokenizer.json
//! comes from the Hub cache, downloaded into it when missing ([`hub`]).
//!
//! Loading is once per process: the tiktoken tables live in `tiktoken-rs` statics
//! (`o200k_base` takes ~180 ms to build), and `tokenizer.json` files are cached by path, so
//! every later [`Tokenizer::load`] of the same spec is a cheap `Arc` clone. [`Tokenizer::load`]
//! builds the tables at once rather than on first use, so that cost falls before the run
//! starts and never inside a timed request.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tiktoken_rs::CoreBPE;

use crate::error::{Error, Result};

pub mod hub;

use hub::HubEnv;

/// The revision used when none is given (`--tokenizer-revision`).
pub const DEFAULT_REVISION: &str = "main";

/// The built-in encodings, by the name `load` accepts.
pub const BUILTIN_ENCODINGS: [&str; 2] = ["cl100k_base", "o200k_base"];

/// Text put before a streamed chunk by [`Tokenizer::count_chunk`], the same one GenAI-Perf uses.
const CHUNK_PREFIX: &str = "\n";

/// A loaded tokenizer; `Clone` is an `Arc`/`&'static` copy and it is `Send + Sync`, so one
/// instance can be shared by every worker thread.
#[derive(Clone)]
pub struct Tokenizer {
    name: Arc<str>,
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    /// A tiktoken-rs singleton: built once, lives for the process.
    Tiktoken(&'static CoreBPE),
    /// A tokenizer.json, with truncation and padding switched off.
    HuggingFace(Arc<tokenizers::Tokenizer>),
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish()
    }
}

impl Tokenizer {
    /// `spec` is `cl100k_base`, `o200k_base`, a `tokenizer.json` file, a directory that
    /// holds one, or a Hub name at revision `main`. See [`Tokenizer::load_from`].
    pub fn load(spec: &str) -> Result<Tokenizer> {
        Tokenizer::load_revision(spec, DEFAULT_REVISION)
    }

    /// [`Tokenizer::load_from`] with the Hub settings of the process environment.
    pub fn load_revision(spec: &str, revision: &str) -> Result<Tokenizer> {
        Tokenizer::load_from(spec, revision, &HubEnv::from_process())
    }

    /// `spec` is, in this order: a built-in encoding; an existing `tokenizer.json` file or a
    /// directory holding one; a Hub repository id (`ORG/NAME` or `NAME`) whose tokenizer.json
    /// at `revision` is taken from `env`'s cache or downloaded into it. Anything else, or a
    /// Hub name that cannot be had, is a one-line usage error naming `spec` and why.
    pub fn load_from(spec: &str, revision: &str, env: &HubEnv) -> Result<Tokenizer> {
        let backend = match spec {
            "cl100k_base" => Backend::Tiktoken(tiktoken_rs::cl100k_base_singleton()),
            "o200k_base" => Backend::Tiktoken(tiktoken_rs::o200k_base_singleton()),
            _ => Backend::HuggingFace(load_json_cached(spec, revision, env)?),
        };
        Ok(Tokenizer {
            name: Arc::from(spec),
            backend,
        })
    }

    /// What `load` was given: the encoding name or the path.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of `text`, with no special tokens added (no BOS/EOS). tiktoken treats
    /// special-token text such as `<|endoftext|>` as plain text; a tokenizer.json matches its
    /// own added tokens as the file defines. Empty if a tokenizer.json pipeline fails.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.backend {
            Backend::Tiktoken(bpe) => bpe.encode_ordinary(text),
            Backend::HuggingFace(tk) => hf_encoding(tk, text)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
        }
    }

    /// The byte span in `text` of each token of `encode(text)`: tiktoken's from the decoded
    /// bytes of each id laid end to end, a tokenizer.json's from its own offsets. A span may
    /// end inside a multi-byte character (tiktoken) and spans of a tokenizer.json may leave
    /// gaps (text its pre-tokenizer drops); empty if a tokenizer.json pipeline fails.
    pub fn encode_spans(&self, text: &str) -> Vec<(usize, usize)> {
        match &self.backend {
            Backend::Tiktoken(bpe) => {
                let mut end = 0usize;
                bpe.encode_ordinary(text)
                    .iter()
                    .map(|&id| {
                        let start = end;
                        end += bpe.decode_bytes(&[id]).map_or(0, |b| b.len());
                        (start, end)
                    })
                    .collect()
            }
            Backend::HuggingFace(tk) => hf_encoding(tk, text)
                .map(|e| e.get_offsets().to_vec())
                .unwrap_or_default(),
        }
    }

    /// `encode(text).len()`.
    pub fn count(&self, text: &str) -> usize {
        match &self.backend {
            Backend::Tiktoken(bpe) => bpe.count_ordinary(text),
            Backend::HuggingFace(tk) => hf_encoding(tk, text).map_or(0, |e| e.len()),
        }
    }

    /// Text of `ids`. Errors on ids outside the vocabulary (tiktoken) or bytes that are not
    /// UTF-8 (a window that cuts a multi-byte character); see [`Tokenizer::decode_lossy`].
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.backend {
            Backend::Tiktoken(bpe) => {
                let bytes = bpe.decode_bytes(ids).map_err(|e| {
                    Error::generic(format!("tokenizer {}: cannot decode ids: {e}", self.name))
                })?;
                String::from_utf8(bytes).map_err(|_| {
                    Error::generic(format!(
                        "tokenizer {}: the ids decode to bytes that are not UTF-8",
                        self.name
                    ))
                })
            }
            Backend::HuggingFace(tk) => tk.decode(ids, false).map_err(|e| {
                Error::generic(format!("tokenizer {}: cannot decode ids: {e}", self.name))
            }),
        }
    }

    /// Like [`Tokenizer::decode`], but bad UTF-8 becomes U+FFFD and unknown ids are skipped.
    pub fn decode_lossy(&self, ids: &[u32]) -> String {
        match &self.backend {
            Backend::Tiktoken(bpe) => {
                let mut bytes = Vec::with_capacity(ids.len() * 4);
                for &id in ids {
                    if let Ok(b) = bpe.decode_bytes(&[id]) {
                        bytes.extend_from_slice(&b);
                    }
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
            Backend::HuggingFace(tk) => tk.decode(ids, false).unwrap_or_default(),
        }
    }

    /// Tokens in one streamed chunk of output text, counted as if the chunk came in the
    /// middle of a longer text.
    ///
    /// Why not `count(text)`: a chunk alone is tokenized as the start of a text. Tokenizers
    /// with a SentencePiece-style `Metaspace`/`add_prefix_space` step then add a word-start
    /// marker before it, so its first word splits differently than it does mid-stream.
    /// GenAI-Perf prepends `"!"` and drops the first token. This prepends a newline instead and
    /// drops the leading tokens that lie wholly inside it (byte offsets for tokenizer.json,
    /// decoded token bytes for tiktoken); a token straddling the boundary holds chunk text
    /// and is counted. Why a newline: GPT-style pre-tokenizers glue `"!"` to a chunk that
    /// starts with punctuation (`"!'s"` → `"!'"`,`"s"`; `"!-t"` → `"!"`,`"-"`,`"t"`), which
    /// counted 6513 tokens for the built-in corpus streamed one token per chunk in
    /// cl100k_base, against 6394 real ones; a newline is a pre-token of its own there and gives
    /// exactly 6394 (a unit test checks this). Merges *across* two chunks cannot be seen from
    /// one chunk; the sum of chunk counts can then exceed `count` of the joined text. An
    /// empty chunk counts 0.
    pub fn count_chunk(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let joined = format!("{CHUNK_PREFIX}{text}");
        let prefix_len = CHUNK_PREFIX.len();
        match &self.backend {
            Backend::Tiktoken(bpe) => {
                let ids = bpe.encode_ordinary(&joined);
                let mut end = 0usize;
                let mut in_prefix = 0usize;
                for &id in &ids {
                    end += bpe.decode_bytes(&[id]).map_or(0, |b| b.len());
                    if end > prefix_len {
                        break;
                    }
                    in_prefix += 1;
                }
                ids.len() - in_prefix
            }
            Backend::HuggingFace(tk) => match hf_encoding(tk, &joined) {
                Some(enc) => enc
                    .get_offsets()
                    .iter()
                    .filter(|&&(_, end)| end > prefix_len)
                    .count(),
                None => 0,
            },
        }
    }
}

/// Encodes with no special tokens; `None` only if the tokenizer.json's pipeline fails.
fn hf_encoding(tk: &tokenizers::Tokenizer, text: &str) -> Option<tokenizers::Encoding> {
    tk.encode(text, false).ok()
}

/// tokenizer.json files already read by this process, by the spec they were loaded with.
fn json_cache() -> &'static Mutex<HashMap<String, Arc<tokenizers::Tokenizer>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<tokenizers::Tokenizer>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Reads the tokenizer.json `spec` names, once per process (keyed by spec and, for a Hub
/// name, revision).
fn load_json_cached(
    spec: &str,
    revision: &str,
    env: &HubEnv,
) -> Result<Arc<tokenizers::Tokenizer>> {
    let key = format!("{spec}@{revision}");
    if let Some(tk) = json_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
    {
        return Ok(tk.clone());
    }
    let file = json_path(spec, revision, env)?;
    let tk = Arc::new(load_json(spec, &file)?);
    json_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, tk.clone());
    Ok(tk)
}

/// The file `spec` names: itself, `<dir>/tokenizer.json`, or the Hub cache's copy.
fn json_path(spec: &str, revision: &str, env: &HubEnv) -> Result<PathBuf> {
    let builtins = BUILTIN_ENCODINGS.join(", ");
    if spec.is_empty() {
        return Err(Error::usage(format!(
            "--tokenizer: empty value; give a built-in encoding ({builtins}), a path to a \
             tokenizer.json file or its directory, or a Hugging Face Hub name ORG/NAME"
        )));
    }
    let path = Path::new(spec);
    if path.is_dir() {
        let file = path.join("tokenizer.json");
        if !file.is_file() {
            return Err(Error::usage(format!(
                "--tokenizer {spec}: the directory has no tokenizer.json (looked for {})",
                file.display()
            )));
        }
        return Ok(file);
    }
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    if hub::is_repo_id(spec) {
        return hub::resolve(spec, revision, env)
            .map_err(|miss| Error::usage(hub::miss_message(spec, revision, env, &miss)));
    }
    Err(Error::usage(format!(
        "--tokenizer {spec}: not a built-in encoding ({builtins}), no such file or \
         directory, and not a Hugging Face Hub name ORG/NAME"
    )))
}

/// Reads and parses a tokenizer.json; truncation and padding from the file are switched off
/// so a count is never capped (some files ship `max_length: 128`).
fn load_json(spec: &str, file: &Path) -> Result<tokenizers::Tokenizer> {
    let mut tk = tokenizers::Tokenizer::from_file(file).map_err(|e| {
        Error::usage(format!(
            "--tokenizer {spec}: cannot read {} as a HuggingFace tokenizer.json: {e}",
            file.display()
        ))
    })?;
    tk.with_truncation(None).map_err(|e| {
        Error::usage(format!(
            "--tokenizer {spec}: cannot switch off truncation: {e}"
        ))
    })?;
    tk.with_padding(None);
    Ok(tk)
}

/// Test support: a WordLevel tokenizer.json over 15 corpus words and `,` `.` `[` `]`
/// (everything else `[UNK]`), lower-cased, with `pre_tokenizer` (its JSON) and no decoder, so
/// ids decode joined with spaces and unknown ones as the text `[UNK]` (itself three tokens):
/// decoding is lossy. `special_unk` adds `[UNK]` as a special token. Loaded from a file, as
/// `--tokenizer` loads one; `tag` keeps the files of concurrent tests apart.
#[cfg(test)]
pub(crate) fn lossy_word_level(tag: &str, pre_tokenizer: &str, special_unk: bool) -> Tokenizer {
    let added = if special_unk {
        r#"[{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true}]"#
    } else {
        "[]"
    };
    let json = format!(
        r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": {added},
          "normalizer": {{"type": "Lowercase"}}, "pre_tokenizer": {pre_tokenizer},
          "post_processor": null, "decoder": null,
          "model": {{"type": "WordLevel", "unk_token": "[UNK]", "vocab": {{"[UNK]": 0,
            "the": 1, "and": 2, "of": 3, "to": 4, "my": 5, ",": 6, ".": 7, "thy": 8,
            "[": 9, "]": 10, "i": 11, "in": 12, "that": 13, "thee": 14, "love": 15}}}}}}"#
    );
    let dir = std::env::temp_dir().join(format!("inferperf-tok-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokenizer.json");
    std::fs::write(&file, json).unwrap();
    let tk = Tokenizer::load(&file.display().to_string()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    tk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// cl100k_base, built once per test binary.
    pub(crate) fn cl100k() -> &'static Tokenizer {
        static TK: OnceLock<Tokenizer> = OnceLock::new();
        TK.get_or_init(|| Tokenizer::load("cl100k_base").expect("cl100k_base is built in"))
    }

    /// A WordLevel tokenizer.json written by the test. Its `truncation` of 2 tokens must be
    /// switched off by `load`.
    const WORD_LEVEL_JSON: &str = r#"{
      "version": "1.0",
      "truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst",
                     "stride": 0},
      "padding": null,
      "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null,
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null,
      "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "[UNK]",
                "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "!": 3, "the": 4, "sun": 5}}
    }"#;

    /// A fresh directory under the system temp dir, unique per test and process.
    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("inferperf-tok-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        dir
    }

    #[test]
    fn builtin_known_counts() {
        let table: [(&str, &str, usize); 7] = [
            ("cl100k_base", "hello world", 2),
            ("cl100k_base", "", 0),
            ("cl100k_base", "Hello, world!", 4),
            ("cl100k_base", "tiktoken is great!", 6),
            ("cl100k_base", "<|endoftext|>", 7),
            ("o200k_base", "hello world", 2),
            ("o200k_base", "", 0),
        ];
        for (spec, text, want) in table {
            let tk = if spec == "cl100k_base" {
                cl100k().clone()
            } else {
                Tokenizer::load(spec).unwrap()
            };
            assert_eq!(tk.name(), spec);
            assert_eq!(tk.count(text), want, "{spec} {text:?}");
            let ids = tk.encode(text);
            assert_eq!(ids.len(), want, "{spec} {text:?}");
            assert_eq!(tk.decode(&ids).unwrap(), text);
            assert_eq!(tk.decode_lossy(&ids), text);
        }
        assert_eq!(cl100k().encode("hello world"), vec![15339, 1917]);
    }

    #[test]
    fn builtin_decode_errors() {
        let tk = cl100k();
        assert!(tk.decode(&[u32::MAX]).is_err());
        assert_eq!(tk.decode_lossy(&[u32::MAX]), "");
        // A multi-byte character split over tokens: one token alone is not UTF-8.
        let ids = tk.encode("\u{1F600}");
        assert!(ids.len() > 1, "{ids:?}");
        assert!(tk.decode(&ids[..1]).is_err());
        assert!(tk.decode_lossy(&ids[..1]).contains('\u{FFFD}'));
    }

    #[test]
    fn tokenizer_json_file_and_dir() {
        let dir = temp_dir("json");
        let file = dir.join("tokenizer.json");
        std::fs::write(&file, WORD_LEVEL_JSON).unwrap();
        for spec in [file.display().to_string(), dir.display().to_string()] {
            let tk = Tokenizer::load(&spec).unwrap();
            assert_eq!(tk.name(), spec);
            // Five tokens although the file truncates to 2: truncation is off.
            assert_eq!(tk.encode("hello world ! the sun"), vec![1, 2, 3, 4, 5]);
            assert_eq!(tk.count("hello world ! the sun"), 5);
            assert_eq!(
                tk.count("hello moon"),
                2,
                "unknown words are one [UNK] each"
            );
            assert_eq!(tk.decode(&[1, 2, 5]).unwrap(), "hello world sun");
            assert_eq!(tk.count_chunk("hello"), 1);
            assert_eq!(tk.count_chunk(" world"), 1);
            assert_eq!(tk.count_chunk("the sun"), 2);
            assert_eq!(tk.count_chunk(""), 0);
            assert_eq!(tk.count_chunk("!"), 1);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn load_errors_name_the_value() {
        let dir = temp_dir("errors");
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{ not json").unwrap();
        let empty_dir = dir.join("empty");
        std::fs::create_dir_all(&empty_dir).unwrap();
        let missing = dir.join("missing.json");
        let cases: [(String, &str); 5] = [
            (
                "p50k_base_typo".into(),
                "not a built-in encoding (cl100k_base, o200k_base)",
            ),
            (missing.display().to_string(), "no such file or directory"),
            (empty_dir.display().to_string(), "has no tokenizer.json"),
            (bad.display().to_string(), "cannot read"),
            (String::new(), "empty value"),
        ];
        // Offline, with an empty cache: a name that is not a path never reaches the network.
        let env = HubEnv {
            cache: dir.join("hub"),
            endpoint: "http://127.0.0.1:9".into(),
            token: None,
            offline: Some("HF_HUB_OFFLINE"),
        };
        for (spec, want) in cases {
            let err = Tokenizer::load_from(&spec, DEFAULT_REVISION, &env).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Usage, "{spec}");
            assert_eq!(err.exit_code(), 99);
            assert!(err.msg.contains(want), "{spec}: {}", err.msg);
            assert!(err.msg.contains(&spec), "{spec}: {}", err.msg);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn spans_cover_each_token() {
        let text = "Hello world, again";
        let spans = cl100k().encode_spans(text);
        assert_eq!(spans.len(), cl100k().count(text));
        assert_eq!(spans[0], (0, 5));
        assert_eq!(spans.last().unwrap().1, text.len());
        assert!(spans.windows(2).all(|w| w[0].1 == w[1].0));
        let pieces: Vec<&str> = spans.iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(pieces.concat(), text);
    }

    #[test]
    fn count_chunk_single_tokens() {
        let tk = cl100k();
        let table: [(&str, usize); 8] = [
            ("hello", 1),
            (" world", 1),
            ("", 0),
            ("!", 1),
            ("Hello, world!", 4),
            ("\n\n", 1),
            ("'s", 1),
            ("-t", 1),
        ];
        for (text, want) in table {
            assert_eq!(tk.count_chunk(text), want, "{text:?}");
        }
    }

    /// A stream cut into chunks at token boundaries: the per-chunk counts add up to the
    /// token count of the whole text, for one-token and three-token chunks.
    #[test]
    fn count_chunk_sums_to_whole_text() {
        let tk = cl100k();
        let text = crate::inputs::prompts::corpus_text();
        let ids = tk.encode(text);
        for per_chunk in [1usize, 3] {
            let mut sum = 0usize;
            let mut plain_sum = 0usize;
            for chunk in ids.chunks(per_chunk) {
                let piece = tk.decode(chunk).unwrap();
                sum += tk.count_chunk(&piece);
                plain_sum += tk.count(&piece);
            }
            assert_eq!(sum, ids.len(), "chunks of {per_chunk}");
            assert_eq!(plain_sum, ids.len(), "chunks of {per_chunk}");
        }
    }

    #[test]
    fn load_is_cached_and_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Tokenizer>();
        let dir = temp_dir("cache");
        let file = dir.join("tokenizer.json");
        std::fs::write(&file, WORD_LEVEL_JSON).unwrap();
        let spec = file.display().to_string();
        let first = Tokenizer::load(&spec).unwrap();
        // The file is gone, but the second load comes from the process cache.
        std::fs::remove_dir_all(&dir).unwrap();
        let second = Tokenizer::load(&spec).unwrap();
        match (&first.backend, &second.backend) {
            (Backend::HuggingFace(a), Backend::HuggingFace(b)) => assert!(Arc::ptr_eq(a, b)),
            _ => panic!("expected tokenizer.json backends"),
        }
        // Once built, a built-in encoding loads again without rebuilding its tables.
        let _ = cl100k();
        let start = std::time::Instant::now();
        let again = Tokenizer::load("cl100k_base").unwrap();
        assert!(start.elapsed() < std::time::Duration::from_millis(50));
        assert_eq!(again.count("hello world"), 2);
    }
}
