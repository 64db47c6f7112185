//! Shared prompt prefixes: GenAI-Perf's `--num-prefix-prompts N --prefix-prompt-length L`
//! (each prompt starts with one of N prefixes of exactly L tokens, picked at random per
//! prompt by a generator seeded from `--random-seed`, as GenAI-Perf and AIPerf pick) and
//! AIPerf's `--shared-system-prompt-length L` (one system message of exactly L tokens in
//! every chat request), or a verbatim one (`--system-prompt TEXT`, `--system-prompt-file`).
//! All make a server's prefix cache hit; the ISL counts them.

use serde_json::{json, Value};

use super::cli::ProfileConfig;
use super::payload::{splitmix, Entry};
use crate::error::{Error, Result};
use crate::inputs::prompts::PromptGen;
use crate::inputs::tokenizer::Tokenizer;

/// Seeds the prefix generator apart from the prompts' own.
const PREFIX_STREAM: u64 = 0x7072_6566_6978;
/// Seeds the draws of which prefix each prompt gets (arbitrary, apart from the texts').
const PICK_STREAM: u64 = 0x7069_636b_7072_6566;
/// Fresh user prompts tried for one entry until prefix + prompt counts as the sum.
const JOIN_TRIES: usize = 8;

/// The shared text that goes before the prompts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prefixes {
    /// Prefix prompts (each `length` tokens), one drawn at random for each entry.
    pub prompts: Vec<String>,
    pub length: u64,
    /// The system message of every chat request and its tokens.
    pub system: Option<(String, u64)>,
}

/// Builds the prefixes the flags ask for and puts them in front of `entries` (synthetic
/// prompts), keeping every length exact: a user prompt that merges with its prefix into a
/// different token count is drawn again. Returns the system prompt for the bodies.
pub fn apply(cfg: &ProfileConfig, tok: &Tokenizer, entries: &mut [Entry]) -> Result<Prefixes> {
    let (n, len, system_len) = super::sweep_args::prefixes(cfg)?;
    let mut gen = PromptGen::new(tok.clone(), cfg.args.random_seed ^ PREFIX_STREAM);
    let mut exact = |len: u64, what: &str| -> Result<String> {
        let p = gen.prompt(len as usize);
        if p.mismatch {
            return Err(Error::generic(format!(
                "cannot make a {what} of exactly {len} tokens with this tokenizer (got {})",
                p.tokens
            )));
        }
        Ok(p.text)
    };
    let prompts = (0..n)
        .map(|_| exact(len, "prefix prompt"))
        .collect::<Result<Vec<_>>>()?;
    let system = match (system_len, super::sweep_args::system_text(cfg)?) {
        (Some(l), _) => Some((exact(l, "system prompt")?, l)),
        (None, Some(text)) => {
            let tokens = tok.count(&text) as u64;
            Some((text, tokens))
        }
        (None, None) => None,
    };
    let mut mismatches = 0;
    let mut pick = cfg.args.random_seed ^ PICK_STREAM;
    for e in entries.iter_mut() {
        let k = (splitmix(&mut pick) % prompts.len().max(1) as u64) as usize;
        if let Some(prefix) = prompts.get(k) {
            mismatches += usize::from(!join(prefix, len, e, &mut gen, tok));
        }
        if let Some((_, l)) = &system {
            e.isl += l;
        }
    }
    if mismatches > 0 {
        eprintln!(
            "warning: {mismatches} of {} prompts merged with their prefix into a different \
             token count; their true length is used as ISL",
            entries.len()
        );
    }
    Ok(Prefixes {
        prompts,
        length: len,
        system,
    })
}

/// `prefix` + the entry's prompt, counted as the sum of both; where the two merge at the
/// seam (a tokenizer without leading-space tokens joins the words), with a space between
/// them. False when no prompt of that length joined cleanly (the entry keeps the true
/// count).
fn join(prefix: &str, len: u64, e: &mut Entry, gen: &mut PromptGen, tok: &Tokenizer) -> bool {
    let want = len + e.isl;
    let mut prompt = std::mem::take(&mut e.text);
    for _ in 0..JOIN_TRIES {
        for seam in ["", " "] {
            let text = format!("{prefix}{seam}{prompt}");
            if tok.count(&text) as u64 == want {
                e.text = text;
                e.isl = want;
                return true;
            }
        }
        prompt = gen.prompt((want - len) as usize).text;
    }
    e.text = format!("{prefix}{prompt}");
    e.isl = tok.count(&e.text) as u64;
    false
}

/// Puts the system message first in every chat body (bodies given whole are left alone).
pub fn add_system(bodies: &mut [Value], prefixes: &Prefixes) {
    let Some((text, _)) = &prefixes.system else {
        return;
    };
    for body in bodies {
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            messages.insert(0, json!({"role": "system", "content": text}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> ProfileConfig {
        let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
        v.extend(args.iter().map(Into::into));
        super::super::cli::parse(v).unwrap().unwrap()
    }

    fn entries(tok: &Tokenizer, n: usize, len: usize) -> Vec<Entry> {
        let mut gen = PromptGen::new(tok.clone(), 1);
        (0..n)
            .map(|_| {
                let p = gen.prompt(len);
                Entry {
                    text: p.text,
                    isl: p.tokens as u64,
                    osl: None,
                    payload: None,
                }
            })
            .collect()
    }

    #[test]
    fn prefixes_are_picked_at_random_by_the_seed_and_lengths_stay_exact() {
        let tok = Tokenizer::load("cl100k_base").unwrap();
        let run = |seed: &str| {
            let c = cfg(&[
                "--num-prefix-prompts",
                "3",
                "--prefix-prompt-length",
                "40",
                "--random-seed",
                seed,
            ]);
            let mut es = entries(&tok, 40, 20);
            let p = apply(&c, &tok, &mut es).unwrap();
            assert_eq!(p.prompts.len(), 3);
            for prefix in &p.prompts {
                assert_eq!(tok.count(prefix), 40);
            }
            let picks: Vec<usize> = es
                .iter()
                .map(|e| {
                    assert_eq!(e.isl, 60);
                    assert_eq!(tok.count(&e.text), 60);
                    p.prompts
                        .iter()
                        .position(|pre| e.text.starts_with(pre.as_str()))
                        .expect("every prompt starts with a prefix")
                })
                .collect();
            picks
        };
        let picks = run("7");
        assert_eq!(picks, run("7"), "the same seed picks the same prefixes");
        assert_ne!(picks, run("8"), "another seed picks others");
        for k in 0..3 {
            assert!(picks.contains(&k), "prefix {k} never picked: {picks:?}");
        }
        let dealt: Vec<usize> = (0..picks.len()).map(|i| i % 3).collect();
        assert_ne!(picks, dealt, "not dealt round robin");
    }

    #[test]
    fn the_system_prompt_goes_first_and_counts_in_the_isl() {
        let tok = Tokenizer::load("cl100k_base").unwrap();
        let c = cfg(&["--shared-system-prompt-length", "25"]);
        let mut es = entries(&tok, 2, 10);
        let p = apply(&c, &tok, &mut es).unwrap();
        assert!(es.iter().all(|e| e.isl == 35));
        let mut bodies = vec![json!({"messages": [{"role": "user", "content": "x"}]})];
        add_system(&mut bodies, &p);
        let text = bodies[0]["messages"][0]["content"].as_str().unwrap();
        assert_eq!(bodies[0]["messages"][0]["role"], "system");
        assert_eq!(tok.count(text), 25);
        assert_eq!(bodies[0]["messages"][1]["content"], "x");
    }

    /// AIPerf's verbatim system prompt, typed or from a file: sent as given, its tokens
    /// added to every ISL.
    #[test]
    fn a_verbatim_system_prompt_is_sent_as_given() {
        let tok = Tokenizer::load("cl100k_base").unwrap();
        let text = "You are a terse assistant. Answer in one line.";
        let file =
            std::env::temp_dir().join(format!("inferperf-system-{}.txt", std::process::id()));
        std::fs::write(&file, text).unwrap();
        let from_file = ["--system-prompt-file", file.to_str().unwrap()];
        for args in [&["--system-prompt", text][..], &from_file] {
            let mut es = entries(&tok, 2, 10);
            let p = apply(&cfg(args), &tok, &mut es).unwrap();
            let n = tok.count(text) as u64;
            assert!(n > 5);
            assert!(es.iter().all(|e| e.isl == 10 + n), "{args:?}");
            let mut bodies = vec![json!({"messages": [{"role": "user", "content": "x"}]})];
            add_system(&mut bodies, &p);
            assert_eq!(
                bodies[0]["messages"][0],
                json!({"role": "system", "content": text})
            );
        }
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn bad_prefix_flags_are_usage_errors() {
        let tok = Tokenizer::load("cl100k_base").unwrap();
        for args in [
            &["--num-prefix-prompts", "3"][..],
            &["--prefix-prompt-length", "3"],
            &["--shared-system-prompt-length", "0"],
            &[
                "--shared-system-prompt-length",
                "5",
                "--endpoint-type",
                "completions",
            ],
            &[
                "--shared-system-prompt-length",
                "5",
                "--num-prefix-prompts",
                "1",
                "--prefix-prompt-length",
                "2",
            ],
            &["--system-prompt", " "],
            &["--system-prompt", "a", "--system-prompt-file", "f"],
            &["--system-prompt", "a", "--shared-system-prompt-length", "5"],
            &["--system-prompt", "a", "--endpoint-type", "completions"],
            &["--system-prompt-file", "/nonexistent/system.txt"],
        ] {
            let e = apply(&cfg(args), &tok, &mut []).unwrap_err();
            assert_eq!(e.exit_code(), 99, "{args:?}: {e}");
        }
    }
}
