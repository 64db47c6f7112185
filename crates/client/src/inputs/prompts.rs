//! Seeded synthetic prompts of an exact token length.
//!
//! The built-in corpus is tokenized once per tokenizer and process. A prompt of N tokens is
//! the text of a window of N corpus tokens at a random offset (wrapping at the end), as
//! GenAI-Perf does, but then checked as AIPerf does: re-encode, and trim or top up from the
//! corpus until the re-encoded length is exactly N, for any tokenizer (also those whose
//! decoding does not give back the text). When a bounded number of fix-ups does not get
//! there the prompt is returned with its real count and `mismatch` set, so the caller can
//! report it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::tokenizer::Tokenizer;

/// The built-in corpus file: Shakespeare's sonnets (public domain), ASCII, with a `#` header.
const CORPUS_FILE: &str = include_str!("corpus.txt");

/// Decode/re-encode rounds before a prompt is given up as a mismatch. One round is the
/// usual case; the rest cover merges at the window's edges.
const MAX_FIXUPS: usize = 16;

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
    /// The corpus as token ids and spans (shared by every generator on this tokenizer).
    corpus: Arc<Corpus>,
    offsets: SplitMix64,
    lengths: SplitMix64,
}

/// The corpus tokenized once: its ids and, where the tokenizer gives usable ones, the byte
/// span of each token in [`corpus_text`].
#[derive(Debug)]
struct Corpus {
    ids: Vec<u32>,
    /// `None` when the spans do not run forward through the text (then prompts are built
    /// from decoded ids alone).
    spans: Option<Vec<(usize, usize)>>,
}

impl PromptGen {
    /// Tokenizes the corpus on first use of `tokenizer` in this process.
    pub fn new(tokenizer: Tokenizer, seed: u64) -> PromptGen {
        let corpus = corpus_of(&tokenizer);
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
    ///
    /// The text is the corpus text of a window of `tokens` corpus tokens (for a lossless
    /// tokenizer that is exactly what decoding the window's ids gives). It is re-encoded and,
    /// while the count is off, trimmed at the end of its `tokens`-th token or topped up with
    /// the corpus text that follows. A tokenizer whose decoding does not round-trip (a
    /// tokenizer.json with no decoder joins ids with spaces and writes `[UNK]` for unknown
    /// text) still gets exact lengths this way, since the text never passes through decode.
    /// Without usable spans the same loop runs on decoded ids instead.
    pub fn prompt(&mut self, tokens: usize) -> Prompt {
        if tokens == 0 {
            return Prompt {
                text: String::new(),
                tokens: 0,
                mismatch: false,
            };
        }
        if self.corpus.ids.is_empty() {
            // A tokenizer that gives no ids for the corpus: nothing to build from.
            return Prompt {
                text: String::new(),
                tokens: 0,
                mismatch: true,
            };
        }
        let start = self.offsets.below(self.corpus.ids.len());
        let from_text = self.corpus.spans.as_deref().map(|spans| {
            let text = TextWindow {
                spans,
                text: corpus_text(),
            };
            self.fit_text(&text, start, tokens)
        });
        match from_text {
            Some(p) if !p.mismatch => p,
            other => {
                let by_ids = self.fit_ids(start, tokens);
                match other {
                    Some(p) if by_ids.mismatch => p,
                    _ => by_ids,
                }
            }
        }
    }

    /// Fits corpus text to `tokens`: re-encode, trim at the `tokens`-th token's end, or top
    /// up with the corpus text after the window.
    fn fit_text(&self, corpus: &TextWindow<'_>, start: usize, tokens: usize) -> Prompt {
        let mut text = corpus.slice(corpus.start(start), corpus.end(start + tokens - 1));
        let mut cursor = start + tokens;
        for _ in 0..MAX_FIXUPS {
            let spans = self.tokenizer.encode_spans(&text);
            let got = spans.len();
            if got == tokens {
                return Prompt {
                    text,
                    tokens,
                    mismatch: false,
                };
            }
            if got > tokens {
                let mut cut = spans[tokens - 1].1.min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                if cut == 0 || cut >= text.len() {
                    break;
                }
                text.truncate(cut);
            } else {
                let missing = tokens - got;
                let more = corpus.slice(corpus.end(cursor - 1), corpus.end(cursor + missing - 1));
                text.push_str(&more);
                cursor += missing;
            }
        }
        Prompt {
            tokens: self.tokenizer.count(&text),
            text,
            mismatch: true,
        }
    }

    /// Fits decoded ids to `tokens`: decode, re-encode, truncate the ids or top them up from
    /// the corpus.
    fn fit_ids(&self, start: usize, tokens: usize) -> Prompt {
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
        // `as` saturates, so a huge mean cannot wrap.
        self.normal(mean, stddev).round().max(1.0) as usize
    }

    /// A value drawn from Normal(`mean`, `stddev`) on the lengths' stream, rounded and
    /// clamped to at least 0 (a pause, say); `stddev <= 0` gives `mean` itself, a mean that
    /// is not finite gives 0.
    pub fn sample_nonnegative(&mut self, mean: f64, stddev: f64) -> u64 {
        if !mean.is_finite() {
            return 0;
        }
        self.normal(mean, stddev).round().max(0.0) as u64
    }

    /// One Normal(`mean`, `stddev`) draw; `stddev <= 0` (or not finite) gives `mean` and
    /// draws nothing.
    fn normal(&mut self, mean: f64, stddev: f64) -> f64 {
        if stddev > 0.0 && stddev.is_finite() {
            mean + stddev * self.lengths.standard_normal()
        } else {
            mean
        }
    }

    /// `len` corpus ids from `start`, wrapping as many times as needed.
    fn window(&self, start: usize, len: usize) -> Vec<u32> {
        let ids = &self.corpus.ids;
        let n = ids.len();
        (0..len).map(|i| ids[(start + i) % n]).collect()
    }
}

/// The corpus text repeated without end, addressed by token: token `g` (any `g`, wrapping)
/// lies at `[start(g), end(g))` of the repeated text.
struct TextWindow<'a> {
    spans: &'a [(usize, usize)],
    text: &'a str,
}

impl TextWindow<'_> {
    fn start(&self, g: usize) -> usize {
        let n = self.spans.len();
        (g / n) * self.text.len() + self.spans[g % n].0
    }

    fn end(&self, g: usize) -> usize {
        let n = self.spans.len();
        (g / n) * self.text.len() + self.spans[g % n].1
    }

    /// The repeated text from `from` to `to` (both char boundaries: the corpus is ASCII).
    fn slice(&self, from: usize, to: usize) -> String {
        let len = self.text.len();
        let mut out = String::with_capacity(to.saturating_sub(from));
        let mut at = from;
        while at < to {
            let offset = at % len;
            let take = (len - offset).min(to - at);
            out.push_str(&self.text[offset..offset + take]);
            at += take;
        }
        out
    }
}

/// The corpus ids and spans for `tokenizer`, computed once per tokenizer name per process.
fn corpus_of(tokenizer: &Tokenizer) -> Arc<Corpus> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Corpus>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(c) = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(tokenizer.name())
    {
        return c.clone();
    }
    let text = corpus_text();
    let ids = tokenizer.encode(text);
    let spans = tokenizer.encode_spans(text);
    let forward = spans.len() == ids.len()
        && spans.iter().all(|&(s, e)| s <= e && e <= text.len())
        && spans
            .windows(2)
            .all(|w| w[0].1 <= w[1].1 && w[0].0 <= w[1].0)
        && spans.last().is_some_and(|&(_, e)| e > 0);
    let corpus = Arc::new(Corpus {
        ids,
        spans: forward.then_some(spans),
    });
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(tokenizer.name().to_string(), corpus.clone());
    corpus
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
        crate::random::unit_open0(self.next_u64())
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
        let corpus_tokens = corpus_of(cl100k()).ids.len();
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
    /// and decoding joins tokens with spaces, so decoded text differs from the corpus.
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
        // The prompt is corpus text, words outside the vocabulary included (decoding the ids
        // would have given `[UNK]` markers instead).
        let p = gen.prompt(200);
        assert!(
            !p.text.contains("[UNK]") && p.text.contains("the"),
            "{}",
            p.text
        );
        assert!(p.text.split_whitespace().any(|w| w.len() > 6), "{}", p.text);
    }

    /// A tokenizer.json with the property of the GuideLLM mock server's: whitespace is a
    /// pre-token of its own and not in the vocabulary (so it is `[UNK]`), and with no decoder
    /// ids are joined with spaces, so decoding never gives back a text of the same length
    /// (every `[UNK]` decodes to the text `[UNK]`, three tokens).
    fn whitespace_unk_tokenizer(tag: &str) -> Tokenizer {
        let split = r#"{"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]|\\s+"},
            "behavior": "Isolated", "invert": false}"#;
        crate::inputs::tokenizer::lossy_word_level(tag, split, false)
    }

    /// The mock-like tokenizer: every length asked, for many seeds, is met exactly, and the
    /// prompt is corpus text (no decoded `[UNK]` markers).
    #[test]
    fn exact_input_lengths_when_decoding_is_lossy() {
        let tk = whitespace_unk_tokenizer("lossy");
        let decoded = tk.decode_lossy(&tk.encode("the love of thee"));
        assert_ne!(
            tk.count(&decoded),
            7,
            "the decode round trip is lossy: {decoded:?}"
        );
        let lengths = [1usize, 2, 3, 5, 8, 13, 64, 100, 191, 256, 1000, 4000];
        let mut wrong = Vec::new();
        for seed in 0..24u64 {
            let mut gen = PromptGen::new(tk.clone(), seed);
            for &n in &lengths {
                let p = gen.prompt(n);
                assert_eq!(tk.count(&p.text), p.tokens, "seed {seed} n {n}");
                if p.mismatch || p.tokens != n {
                    wrong.push((seed, n, p.tokens));
                }
                assert!(!p.text.contains("[UNK]"), "{}", p.text);
            }
        }
        assert_eq!(wrong, vec![], "(seed, asked, got)");
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
