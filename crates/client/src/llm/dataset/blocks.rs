//! Prompts for trace entries given as `input_length` + `hash_ids` (mooncake traces): hash
//! id h stands for one block of `--isl-block-size` tokens, and every entry that lists h at
//! the same position gets the same block text, so entries sharing leading hash ids share a
//! byte-identical prompt prefix the server can cache. As in AIPerf, the last id may stand
//! for a partial block (`input_length` below ids x block size: its first tokens), and an
//! `input_length` beyond the ids' blocks is topped up with fresh tokens.
//!
//! A block is a window of the built-in corpus chosen from (seed, hash id) alone, addressed
//! by token. Its text is the corpus text of those tokens, up to where the next token starts
//! (so a tokenizer that drops whitespace between words keeps it), taken from the
//! tokenizer's own offsets; only a tokenizer whose offsets do not run forward through the
//! corpus gets decoded ids instead. Text never passes through decoding otherwise, so a
//! tokenizer.json whose decoding is lossy (no decoder: ids joined with spaces, `[UNK]` for
//! unknown words) still gets corpus text of the asked length. Windows start at a word and
//! end before one, so joined blocks do not merge into other tokens at their seams; the
//! prompt's length is then checked by re-encoding, and only its last segment is trimmed or
//! topped up until the length is exact.

use std::collections::HashMap;

use crate::inputs::prompts::corpus_text;
use crate::inputs::tokenizer::Tokenizer;

/// Windows tried for a block before the first one is taken as it is.
const TRIES: usize = 64;
/// Re-encode rounds on the last segment before a prompt is given up as a mismatch.
const FIXUPS: usize = 8;

/// One synthesized prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPrompt {
    pub text: String,
    /// Its length by the tokenizer (the requested one unless `mismatch`).
    pub tokens: usize,
    pub mismatch: bool,
}

/// Block windows by hash id, for one tokenizer, block size and seed.
pub struct Blocks {
    tok: Tokenizer,
    corpus: Vec<u32>,
    /// Byte start of each corpus token in [`corpus_text`], when the offsets run forward.
    starts: Option<Vec<usize>>,
    /// Corpus positions whose token starts a word.
    word_starts: Vec<usize>,
    is_start: Vec<bool>,
    block: usize,
    seed: u64,
    /// Window start in the corpus, by hash id.
    cache: HashMap<u64, usize>,
}

/// `len` corpus tokens from token `start` (wrapping).
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: usize,
    len: usize,
}

impl Blocks {
    pub fn new(tok: Tokenizer, block: usize, seed: u64) -> Blocks {
        let text = corpus_text();
        let corpus = tok.encode(text);
        let spans = tok.encode_spans(text);
        let forward = spans.len() == corpus.len()
            && spans.iter().all(|&(s, e)| s <= e && e <= text.len())
            && spans
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].0);
        let starts: Option<Vec<usize>> = forward.then(|| spans.iter().map(|s| s.0).collect());
        let is_start: Vec<bool> = match &starts {
            Some(starts) => spans
                .iter()
                .zip(starts)
                .map(|(&(s, e), &at)| {
                    let piece = &text[s..e];
                    let mut c = piece.chars();
                    let first = c.next();
                    let spaced = first == Some(' ') && c.next().is_some_and(char::is_alphanumeric);
                    let after_gap = first.is_some_and(char::is_alphanumeric)
                        && (at == 0 || text[..at].ends_with(char::is_whitespace));
                    spaced || after_gap
                })
                .collect(),
            None => corpus
                .iter()
                .map(|&id| {
                    let t = tok.decode_lossy(&[id]);
                    let mut c = t.chars();
                    c.next() == Some(' ') && c.next().is_some_and(char::is_alphanumeric)
                })
                .collect(),
        };
        let mut word_starts: Vec<usize> = (0..corpus.len()).filter(|&i| is_start[i]).collect();
        if word_starts.is_empty() {
            word_starts = (0..corpus.len()).collect();
        }
        Blocks {
            tok,
            corpus,
            starts,
            word_starts,
            is_start,
            block: block.max(1),
            seed,
            cache: HashMap::new(),
        }
    }

    /// The text of `seg`: corpus text from its first token to where the token after its
    /// last one starts, or its decoded ids when the offsets are not usable.
    fn text_of(&self, seg: Segment, out: &mut String) {
        let n = self.corpus.len();
        if seg.len == 0 || n == 0 {
            return;
        }
        let Some(starts) = &self.starts else {
            let ids: Vec<u32> = (0..seg.len)
                .map(|i| self.corpus[(seg.start + i) % n])
                .collect();
            out.push_str(&self.tok.decode_lossy(&ids));
            return;
        };
        let text = corpus_text();
        // Position g of the corpus repeated without end, in bytes of the repeated text.
        let at = |g: usize| (g / n) * text.len() + starts[g % n];
        let (from, to) = (at(seg.start), at(seg.start + seg.len));
        let mut pos = from;
        while pos < to {
            let offset = pos % text.len();
            let take = (text.len() - offset).min(to - pos);
            out.push_str(&text[offset..offset + take]);
            pos += take;
        }
    }

    fn render(&self, segs: &[Segment]) -> String {
        let mut out = String::new();
        for &s in segs {
            self.text_of(s, &mut out);
        }
        out
    }

    /// A word-aligned window of `len` tokens whose text encodes to `len` tokens, chosen by
    /// `key`; its start.
    fn aligned(&self, key: u64, len: usize) -> usize {
        let n = self.corpus.len();
        let mut state = self.seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut first = None;
        for _ in 0..TRIES {
            let k = (super::super::payload::splitmix(&mut state) % self.word_starts.len() as u64)
                as usize;
            let start = self.word_starts[k];
            let ends_at_word = self.is_start[(start + len) % n] || len >= n;
            let seg = Segment { start, len };
            if ends_at_word && self.tok.count(&self.render(&[seg])) == len {
                return start;
            }
            first.get_or_insert(start);
        }
        first.unwrap_or_default()
    }

    /// Hash id `h`'s block.
    fn block_of(&mut self, h: u64) -> Segment {
        let block = self.block;
        let start = match self.cache.get(&h) {
            Some(&s) => s,
            None => {
                let s = self.aligned(h, block);
                self.cache.insert(h, s);
                s
            }
        };
        Segment { start, len: block }
    }

    /// A prompt of `input_length` tokens over `hash_ids`; `entry` seeds the fresh tail.
    pub fn prompt(&mut self, input_length: usize, hash_ids: &[u64], entry: u64) -> BlockPrompt {
        if self.corpus.is_empty() || input_length == 0 {
            return BlockPrompt {
                text: String::new(),
                tokens: 0,
                mismatch: input_length > 0,
            };
        }
        let block = self.block;
        let m = hash_ids.len();
        let mut prefix: Vec<Segment> = Vec::with_capacity(m);
        let last = if m > 0 && m * block >= input_length {
            // Full blocks, then the first tokens of the last id's block.
            for &h in &hash_ids[..m - 1] {
                prefix.push(self.block_of(h));
            }
            let partial = input_length - (m - 1) * block;
            Segment {
                len: partial,
                ..self.block_of(hash_ids[m - 1])
            }
        } else {
            for &h in hash_ids {
                prefix.push(self.block_of(h));
            }
            let tail = input_length - m * block;
            // Fresh tokens: keyed apart from every hash id's block.
            let start = self.aligned(!entry ^ 0x7461_696c, tail);
            Segment { start, len: tail }
        };
        let prefix = self.render(&prefix);
        self.fix_last(prefix, vec![last], input_length, entry)
    }

    /// Trims or tops up `last` (joined after `prefix`) until the whole re-encodes to `want`.
    fn fix_last(
        &self,
        prefix: String,
        mut last: Vec<Segment>,
        want: usize,
        entry: u64,
    ) -> BlockPrompt {
        let n = self.corpus.len();
        let mut cursor = (entry as usize).wrapping_mul(7919) % n;
        let mut best: Option<BlockPrompt> = None;
        for _ in 0..FIXUPS {
            let text = format!("{prefix}{}", self.render(&last));
            let got = self.tok.count(&text);
            if got == want {
                return BlockPrompt {
                    text,
                    tokens: got,
                    mismatch: false,
                };
            }
            let closer = match &best {
                None => true,
                Some(b) => got.abs_diff(want) < b.tokens.abs_diff(want),
            };
            if closer {
                best = Some(BlockPrompt {
                    text,
                    tokens: got,
                    mismatch: true,
                });
            }
            if got > want {
                let mut cut = got - want;
                while cut > 0 {
                    let Some(seg) = last.last_mut() else { break };
                    let take = cut.min(seg.len);
                    seg.len -= take;
                    cut -= take;
                    if seg.len == 0 {
                        last.pop();
                    }
                }
            } else {
                last.push(Segment {
                    start: cursor,
                    len: want - got,
                });
                cursor += want - got;
            }
        }
        best.unwrap_or(BlockPrompt {
            text: prefix,
            tokens: 0,
            mismatch: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(block: usize) -> Blocks {
        Blocks::new(Tokenizer::load("cl100k_base").unwrap(), block, 7)
    }

    #[test]
    fn shared_leading_ids_give_a_shared_prefix_and_exact_lengths() {
        let mut b = blocks(512);
        let tok = Tokenizer::load("cl100k_base").unwrap();
        let a = b.prompt(1100, &[1, 2, 3], 0);
        let c = b.prompt(1030, &[1, 2, 7], 1);
        let d = b.prompt(2000, &[1, 2], 2);
        for p in [&a, &c, &d] {
            assert!(!p.mismatch);
            assert_eq!(p.tokens, tok.count(&p.text));
        }
        assert_eq!((a.tokens, c.tokens, d.tokens), (1100, 1030, 2000));
        let two = {
            let mut x = blocks(512);
            let p = x.prompt(1024, &[1, 2], 9);
            assert_eq!(p.tokens, 1024);
            p.text
        };
        for p in [&a, &c, &d] {
            assert!(p.text.starts_with(&two), "blocks 1 and 2 lead every prompt");
        }
        assert_ne!(a.text[two.len()..], c.text[two.len()..]);
        // The same seed gives the same text in a fresh generator.
        assert_eq!(blocks(512).prompt(1100, &[1, 2, 3], 0), a);
    }

    #[test]
    fn a_partial_last_block_is_the_start_of_the_full_one() {
        let mut b = blocks(64);
        let full = b.prompt(128, &[5, 6], 0);
        let part = b.prompt(100, &[5, 6], 1);
        assert_eq!((full.tokens, part.tokens), (128, 100));
        let shared = full
            .text
            .bytes()
            .zip(part.text.bytes())
            .take_while(|(x, y)| x == y)
            .count();
        assert!(
            shared >= part.text.len() - 8,
            "{shared} of {}",
            part.text.len()
        );
        let none = b.prompt(40, &[], 3);
        assert_eq!(none.tokens, 40);
    }

    /// A tokenizer.json whose decoding is lossy, as the issue's: WordLevel over a few
    /// corpus words, words split on whitespace.
    fn word_level() -> Tokenizer {
        let whitespace = r#"{"type": "Whitespace"}"#;
        crate::inputs::tokenizer::lossy_word_level("blocks", whitespace, true)
    }

    /// With a tokenizer.json, every length is exact (short entries included: below one
    /// block they are a partial block, not an empty prompt), the text is corpus text (no
    /// decoded `[UNK]`), and shared leading hash ids give a shared prefix.
    #[test]
    fn exact_lengths_and_shared_prefixes_with_a_tokenizer_json() {
        let tok = word_level();
        let mut b = Blocks::new(tok.clone(), 512, 3);
        let cases: [(usize, &[u64]); 6] = [
            (7, &[1]),
            (300, &[1]),
            (512, &[1]),
            (700, &[1, 2]),
            (1100, &[1, 2, 3]),
            (1500, &[1, 2]),
        ];
        let mut prompts = Vec::new();
        for (i, &(n, ids)) in cases.iter().enumerate() {
            let p = b.prompt(n, ids, i as u64);
            assert_eq!((p.tokens, p.mismatch), (n, false), "{n} {ids:?}");
            assert_eq!(tok.count(&p.text), n, "{n} {ids:?}");
            assert!(
                !p.text.contains("[UNK]"),
                "{}",
                &p.text[..80.min(p.text.len())]
            );
            assert!(corpus_text().contains(p.text.split_whitespace().next().unwrap()));
            prompts.push(p.text);
        }
        // Entries within block 1 are its start; 700, 1100 and 1500 begin with blocks 1, 2.
        let common =
            |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let one = &prompts[2];
        for p in &prompts[..2] {
            assert!(
                common(p, one) + 64 >= p.len(),
                "{} of {}",
                common(p, one),
                p.len()
            );
        }
        let two = b.prompt(1024, &[1, 2], 99);
        assert_eq!(two.tokens, 1024);
        for p in &prompts[3..] {
            let want = p.len().min(two.text.len());
            assert!(
                common(p, &two.text) + 64 >= want,
                "{} of {want}",
                common(p, &two.text)
            );
            assert!(common(p, &two.text) > one.len());
        }
    }
}
