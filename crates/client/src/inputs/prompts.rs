//! Seeded synthetic prompts of an exact token length (spec llm.md §3, §10.6).
//!
//! The built-in corpus is tokenized once per tokenizer and process. A prompt of N tokens is
//! a window of N corpus tokens at a random offset (wrapping at the end), as GenAI-Perf does,
//! but then checked: decode, re-encode, and trim or top up from the corpus until the
//! re-encoded length is exactly N. When a bounded number of fix-ups does not get there the
//! prompt is returned with its real count and `mismatch` set, so the caller can report it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::tokenizer::Tokenizer;

/// The built-in corpus file: Shakespeare's sonnets (public domain), ASCII, with a `#` header.
const CORPUS_FILE: &str = include_str!("corpus.txt");

/// Decode/re-encode rounds before a prompt is given up as a mismatch. One round is the
/// usual case; the rest cover merges at the window's edges.
const MAX_FIXUPS: usize = 8;

/// Salts that split one seed into two independent streams, so prompt offsets do not shift
/// when the length distribution changes (arbitrary odd constants).
const OFFSET_STREAM: u64 = 0x6F66_6673_6574_0001;
const LENGTH_STREAM: u64 = 0x6C65_6E67_7468_0003;

/// The built-in corpus text without its `#` header lines.
pub fn corpus_text() -> &'static str {
    let mut rest = CORPUS_FILE;
    while rest.starts_with('#') {
        rest = rest.split_once('\n').map_or("", |(_, tail)| tail);
    }
    rest
}

/// One generated prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// `tokenizer.count(&text)`: the requested length unless `mismatch`.
    pub tokens: usize,
    /// The fix-up loop gave up: `tokens` differs from what was asked.
    pub mismatch: bool,
}

/// Deterministic prompt source: the same tokenizer and seed give the same prompts and
/// lengths in the same call order.
#[derive(Debug, Clone)]
pub struct PromptGen {
    tokenizer: Tokenizer,
    /// The corpus as token ids (shared by every generator on this tokenizer).
    corpus: Arc<[u32]>,
    offsets: SplitMix64,
    lengths: SplitMix64,
}

impl PromptGen {
    /// Tokenizes the corpus on first use of `tokenizer` in this process.
    pub fn new(tokenizer: Tokenizer, seed: u64) -> PromptGen {
        let corpus = corpus_ids(&tokenizer);
        PromptGen {
            tokenizer,
            corpus,
            offsets: SplitMix64(seed ^ OFFSET_STREAM),
            lengths: SplitMix64(seed ^ LENGTH_STREAM),
        }
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// A prompt whose text re-encodes to exactly `tokens` tokens (or `mismatch`).
    pub fn prompt(&mut self, tokens: usize) -> Prompt {
        if tokens == 0 {
            return Prompt {
                text: String::new(),
                tokens: 0,
                mismatch: false,
            };
        }
        if self.corpus.is_empty() {
            // A tokenizer that gives no ids for the corpus: nothing to build from.
            return Prompt {
                text: String::new(),
                tokens: 0,
                mismatch: true,
            };
        }
        let start = self.offsets.below(self.corpus.len());
        // Where top-up tokens come from: the corpus right after the window.
        let mut cursor = start + tokens;
        let mut ids = self.window(start, tokens);
        let mut best = Prompt {
            text: String::new(),
            tokens: 0,
            mismatch: true,
        };
        for _ in 0..MAX_FIXUPS {
            let text = self.tokenizer.decode_lossy(&ids);
            let encoded = self.tokenizer.encode(&text);
            if encoded.len() == tokens {
                return Prompt {
                    text,
                    tokens,
                    mismatch: false,
                };
            }
            best = Prompt {
                text,
                tokens: encoded.len(),
                mismatch: true,
            };
            ids = encoded;
            if ids.len() > tokens {
                ids.truncate(tokens);
            } else {
                let missing = tokens - ids.len();
                ids.extend(self.window(cursor, missing));
                cursor += missing;
            }
        }
        best
    }

    /// A length drawn from Normal(`mean`, `stddev`), rounded and clamped to at least 1.
    /// `stddev <= 0` (or not finite) gives `mean` itself; a mean that is not finite gives 1.
    pub fn sample_len(&mut self, mean: f64, stddev: f64) -> usize {
        if !mean.is_finite() {
            return 1;
        }
        let value = if stddev > 0.0 && stddev.is_finite() {
            mean + stddev * self.lengths.standard_normal()
        } else {
            mean
        };
        // `as` saturates, so a huge mean cannot wrap.
        value.round().max(1.0) as usize
    }

    /// `len` corpus ids from `start`, wrapping as many times as needed.
    fn window(&self, start: usize, len: usize) -> Vec<u32> {
        let n = self.corpus.len();
        (0..len).map(|i| self.corpus[(start + i) % n]).collect()
    }
}

/// The corpus ids for `tokenizer`, computed once per tokenizer name per process.
fn corpus_ids(tokenizer: &Tokenizer) -> Arc<[u32]> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<[u32]>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(ids) = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(tokenizer.name())
    {
        return ids.clone();
    }
    let ids: Arc<[u32]> = tokenizer.encode(corpus_text()).into();
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(tokenizer.name().to_string(), ids.clone());
    ids
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for offsets and
/// lengths; every seed, including 0, is fine.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n); `n` > 0. The modulo bias is below n / 2^64, negligible here.
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in (0, 1]: 53 random bits, never 0 so `ln` stays finite.
    fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// One N(0, 1) draw by Box-Muller (the cosine half; the sine half is not kept, which
    /// keeps the state one word and the sequence easy to reason about).
    fn standard_normal(&mut self) -> f64 {
        let radius = (-2.0 * self.unit_open0().ln()).sqrt();
        let angle = std::f64::consts::TAU * self.unit_open0();
        radius * angle.cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cl100k_base, built once per test binary.
    fn cl100k() -> &'static Tokenizer {
        static TK: OnceLock<Tokenizer> = OnceLock::new();
        TK.get_or_init(|| Tokenizer::load("cl100k_base").expect("cl100k_base is built in"))
    }

    #[test]
    fn corpus_is_ascii_public_domain_text_of_the_right_size() {
        assert!(
            CORPUS_FILE.starts_with('#'),
            "the file starts with its header"
        );
        let text = corpus_text();
        assert!(text.starts_with("THE SONNETS"), "{:?}", &text[..20]);
        assert!(!text.lines().any(|l| l.starts_with('#')));
        assert!(
            (20_000..=40_000).contains(&text.len()),
            "{} bytes",
            text.len()
        );
        assert!(text
            .bytes()
            .all(|b| b == b'\n' || (b' '..=b'~').contains(&b)));
    }

    /// Every length, for several seeds, re-encodes to exactly what was asked; the longest
    /// length is longer than the corpus, so the window wraps more than once.
    #[test]
    fn exact_input_lengths_cl100k() {
        let corpus_tokens = corpus_ids(cl100k()).len();
        assert!(corpus_tokens > 5_000, "{corpus_tokens}");
        let lengths = [
            1usize, 2, 3, 4, 5, 7, 10, 16, 31, 64, 100, 128, 257, 512, 1000, 2048,
        ];
        let mut mismatches = Vec::new();
        for seed in 0..6u64 {
            let mut gen = PromptGen::new(cl100k().clone(), seed);
            for &n in &lengths {
                let p = gen.prompt(n);
                assert_eq!(cl100k().count(&p.text), p.tokens, "seed {seed} n {n}");
                if p.mismatch || p.tokens != n {
                    mismatches.push((seed, n, p.tokens));
                }
            }
        }
        let mut gen = PromptGen::new(cl100k().clone(), 99);
        let long = gen.prompt(corpus_tokens * 2 + 17);
        assert_eq!(cl100k().count(&long.text), corpus_tokens * 2 + 17);
        assert!(!long.mismatch);
        assert_eq!(mismatches, vec![], "(seed, asked, got)");
    }

    /// The tokenizer.json path: a WordLevel tokenizer where most corpus words are `[UNK]`
    /// and decoding joins tokens with spaces, so the text differs from the corpus.
    #[test]
    fn exact_input_lengths_tokenizer_json() {
        let dir = std::env::temp_dir().join(format!("inferperf-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = r#"{"version": "1.0", "truncation": null, "padding": null,
          "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
          "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0,
            "the": 1, "and": 2, "of": 3, "to": 4, "my": 5, ",": 6, ".": 7, "thy": 8}}}"#;
        std::fs::write(dir.join("tokenizer.json"), json).unwrap();
        let tk = Tokenizer::load(&dir.display().to_string()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let mut gen = PromptGen::new(tk.clone(), 4);
        for n in [1usize, 2, 9, 60, 333] {
            let p = gen.prompt(n);
            assert_eq!((p.tokens, p.mismatch), (n, false), "{n}");
            assert_eq!(tk.count(&p.text), n);
        }
        let p = gen.prompt(200);
        assert!(
            p.text.contains("[UNK]") && p.text.contains("the"),
            "{}",
            p.text
        );
    }

    #[test]
    fn zero_tokens_is_an_empty_prompt() {
        let mut gen = PromptGen::new(cl100k().clone(), 1);
        let p = gen.prompt(0);
        assert_eq!((p.text.as_str(), p.tokens, p.mismatch), ("", 0, false));
    }

    #[test]
    fn same_seed_same_prompts_other_seed_other_prompts() {
        let run = |seed: u64| {
            let mut gen = PromptGen::new(cl100k().clone(), seed);
            (0..5)
                .map(|_| {
                    let n = gen.sample_len(40.0, 10.0);
                    (n, gen.prompt(n).text)
                })
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        let b = run(8);
        assert_ne!(a, b);
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.1 != y.1),
            "every prompt differs"
        );
    }

    /// Offsets and lengths are separate streams: drawing lengths does not move the prompts.
    #[test]
    fn lengths_do_not_shift_prompts() {
        let mut plain = PromptGen::new(cl100k().clone(), 3);
        let mut with_lengths = PromptGen::new(cl100k().clone(), 3);
        for _ in 0..4 {
            let _ = with_lengths.sample_len(100.0, 20.0);
            assert_eq!(plain.prompt(20), with_lengths.prompt(20));
        }
    }

    #[test]
    fn sample_len_fixed_and_clamped() {
        let mut gen = PromptGen::new(cl100k().clone(), 5);
        let table: [(f64, f64, usize); 7] = [
            (100.0, 0.0, 100),
            (100.4, -3.0, 100),
            (0.2, 0.0, 1),
            (-50.0, 0.0, 1),
            (f64::NAN, 5.0, 1),
            (10.0, f64::INFINITY, 10),
            (-1e9, 1.0, 1),
        ];
        for (mean, stddev, want) in table {
            assert_eq!(gen.sample_len(mean, stddev), want, "{mean} {stddev}");
        }
    }

    #[test]
    fn sample_len_follows_the_normal() {
        let draw = |seed: u64| {
            let mut gen = PromptGen::new(cl100k().clone(), seed);
            (0..4000)
                .map(|_| gen.sample_len(200.0, 20.0) as f64)
                .collect::<Vec<_>>()
        };
        let xs = draw(11);
        assert_eq!(xs, draw(11));
        assert_ne!(xs, draw(12));
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((mean - 200.0).abs() < 1.5, "mean {mean}");
        assert!((sd - 20.0).abs() < 1.5, "sd {sd}");
        let within_one_sd = xs.iter().filter(|&&x| (x - 200.0).abs() <= 20.0).count() as f64;
        assert!(
            (within_one_sd / n - 0.68).abs() < 0.04,
            "{}",
            within_one_sd / n
        );
    }

    #[test]
    fn splitmix_known_values() {
        // Reference outputs of SplitMix64 seeded with 0.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut rng = SplitMix64(1);
        for _ in 0..1000 {
            let u = rng.unit_open0();
            assert!(u > 0.0 && u <= 1.0);
            assert!(rng.below(7) < 7);
        }
    }
}
