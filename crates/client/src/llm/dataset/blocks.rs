//! Prompts for trace entries given as `input_length` + `hash_ids` (mooncake traces): hash
//! id h stands for one block of `--isl-block-size` tokens, and every entry that lists h at
//! the same position gets the same block text, so entries sharing leading hash ids share a
//! byte-identical prompt prefix the server can cache. As in AIPerf, the last id may stand
//! for a partial block (`input_length` below ids x block size: its first tokens), and an
//! `input_length` beyond the ids' blocks is topped up with fresh tokens.
//!
//! A block is a window of the built-in corpus chosen from (seed, hash id) alone. Windows
//! start at a word (a token that decodes to a space and a letter) and end before one, so
//! joined blocks do not merge into other tokens at their seams; the prompt's length is then
//! checked by re-encoding, and only its last segment is trimmed or topped up until the
//! length is exact.

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

/// Block texts by hash id, for one tokenizer, block size and seed.
pub struct Blocks {
    tok: Tokenizer,
    corpus: Vec<u32>,
    /// Corpus positions whose token starts a word.
    word_starts: Vec<usize>,
    is_start: Vec<bool>,
    block: usize,
    seed: u64,
    cache: HashMap<u64, Vec<u32>>,
}

impl Blocks {
    pub fn new(tok: Tokenizer, block: usize, seed: u64) -> Blocks {
        let corpus = tok.encode(corpus_text());
        let is_start: Vec<bool> = corpus
            .iter()
            .map(|&id| {
                let t = tok.decode_lossy(&[id]);
                let mut c = t.chars();
                c.next() == Some(' ') && c.next().is_some_and(char::is_alphanumeric)
            })
            .collect();
        let mut word_starts: Vec<usize> = (0..corpus.len()).filter(|&i| is_start[i]).collect();
        if word_starts.is_empty() {
            word_starts = (0..corpus.len()).collect();
        }
        Blocks {
            tok,
            corpus,
            word_starts,
            is_start,
            block: block.max(1),
            seed,
            cache: HashMap::new(),
        }
    }

    /// `len` corpus ids from `start`, wrapping.
    fn window(&self, start: usize, len: usize) -> Vec<u32> {
        let n = self.corpus.len();
        (0..len).map(|i| self.corpus[(start + i) % n]).collect()
    }

    /// A word-aligned window of `len` tokens that re-encodes to `len` tokens, chosen by `key`.
    fn aligned(&self, key: u64, len: usize) -> Vec<u32> {
        let n = self.corpus.len();
        let mut state = self.seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut first = None;
        for _ in 0..TRIES {
            let k = (super::super::payload::splitmix(&mut state) % self.word_starts.len() as u64)
                as usize;
            let start = self.word_starts[k];
            let ends_at_word = self.is_start[(start + len) % n] || len >= n;
            let ids = self.window(start, len);
            if ends_at_word && self.tok.count(&self.tok.decode_lossy(&ids)) == len {
                return ids;
            }
            first.get_or_insert(ids);
        }
        first.unwrap_or_default()
    }

    /// The ids of hash id `h`'s block.
    fn block_ids(&mut self, h: u64) -> &[u32] {
        if !self.cache.contains_key(&h) {
            let ids = self.aligned(h, self.block);
            self.cache.insert(h, ids);
        }
        &self.cache[&h]
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
        let mut text = String::new();
        let last: Vec<u32> = if m > 0 && m * block >= input_length {
            // Full blocks, then the first tokens of the last id's block.
            for &h in &hash_ids[..m - 1] {
                let ids = self.block_ids(h).to_vec();
                text.push_str(&self.tok.decode_lossy(&ids));
            }
            let partial = input_length - (m - 1) * block;
            self.block_ids(hash_ids[m - 1])[..partial].to_vec()
        } else {
            for &h in hash_ids {
                let ids = self.block_ids(h).to_vec();
                text.push_str(&self.tok.decode_lossy(&ids));
            }
            let tail = input_length - m * block;
            // Fresh tokens: keyed apart from every hash id's block.
            self.aligned(!entry ^ 0x7461_696c, tail)
        };
        self.fix_last(text, last, input_length, entry)
    }

    /// Trims or tops up `last` (joined after `prefix`) until the whole re-encodes to `want`.
    fn fix_last(&self, prefix: String, mut last: Vec<u32>, want: usize, entry: u64) -> BlockPrompt {
        let n = self.corpus.len();
        let mut cursor = (entry as usize).wrapping_mul(7919) % n;
        let mut best = None;
        for _ in 0..FIXUPS {
            let text = format!("{prefix}{}", self.tok.decode_lossy(&last));
            let got = self.tok.count(&text);
            if got == want {
                return BlockPrompt {
                    text,
                    tokens: got,
                    mismatch: false,
                };
            }
            best = Some(BlockPrompt {
                text,
                tokens: got,
                mismatch: true,
            });
            if got > want {
                let cut = (got - want).min(last.len());
                last.truncate(last.len() - cut);
            } else {
                last.extend(self.window(cursor, want - got));
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
}
