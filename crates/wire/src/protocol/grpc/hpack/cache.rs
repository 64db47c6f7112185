//! Replay of repeated header blocks.
//!
//! Servers send the same header blocks over and over: nginx's gRPC response head and trailers
//! are byte-identical from one response to the next (the head changes with its `date` once a
//! second). Decoding such a block again, mostly Huffman strings, is wasted work when the result
//! is known, so the decoder keeps the last `SLOTS` distinct blocks it decoded with their fields
//! and replays a byte-identical block from them, in two cases where that provably gives what a
//! decode would:
//!
//! - The block reads nothing from the dynamic table (every index is a static one) and has no
//!   size update. Its fields then do not depend on the table's state, and its only effect on the
//!   table is inserting its incrementally indexed fields, which the replay does in the same
//!   order. nginx's response head is such a block: it adds `server`, `date`, `content-type` and
//!   `content-length` to the table each time.
//! - The block reads the table but does not change it, and the table has not changed since
//!   (same generation: every insert, eviction and size change bumps it).
//!
//! A block that reads the table and changes it, fails, or is longer than `MAX_BLOCK` is decoded
//! every time. A unary gRPC response alternates two blocks (head, trailers); the other slots
//! leave room for a few more variants (another status, a block that reads the table).
//! Once the buffers have grown to the blocks' sizes nothing here allocates (inserts into the
//! table reuse evicted entries' buffers, as in a decode).

use super::{Decoder, Entry, HpackError};

/// Distinct blocks kept per decoder.
const SLOTS: usize = 4;
/// Longest block kept, in bytes; longer ones are always decoded.
const MAX_BLOCK: usize = 1024;

/// One decoded block: its bytes and its fields.
#[derive(Default)]
pub(super) struct Decoded {
    /// The header block as received; meaningful only when `valid`.
    block: Vec<u8>,
    /// None: the fields do not depend on the table. Some(g): they hold at table generation g.
    generation: Option<u64>,
    /// Every field's name then value, back to back.
    text: Vec<u8>,
    /// (name length, value length, inserted into the table) of each field, in order.
    fields: Vec<(usize, usize, bool)>,
    valid: bool,
}

impl Decoded {
    fn push(&mut self, name: &[u8], value: &[u8], inserted: bool) {
        self.text.extend_from_slice(name);
        self.text.extend_from_slice(value);
        self.fields.push((name.len(), value.len(), inserted));
    }

    fn matches(&self, block: &[u8], generation: u64) -> bool {
        self.valid && self.generation.map_or(true, |g| g == generation) && self.block == block
    }
}

/// The kept blocks of one decoder, plus the buffer the next decode records into.
#[derive(Default)]
pub(super) struct BlockCache {
    slots: [Decoded; SLOTS],
    /// Records the block being decoded; swapped into a slot when it can be kept.
    spare: Decoded,
    /// Slot the next kept block replaces (the older one).
    next: usize,
}

impl Decoder {
    /// Decodes one complete header block (HEADERS + CONTINUATION payloads joined), calling
    /// `on_header(name, value)` for each field in order. After an error the connection's
    /// decoding context is unusable (a COMPRESSION_ERROR in HTTP/2 terms). A repeated block may
    /// be replayed from its last decode (see the module comment): same fields, same table.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut on_header: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let generation = self.table.generation;
        if self.replay {
            let cache = &self.cache;
            if let Some(kept) = cache.slots.iter().find(|d| d.matches(block, generation)) {
                let mut at = 0;
                for &(name_len, value_len, inserted) in &kept.fields {
                    let (name, rest) = kept.text[at..].split_at(name_len);
                    let value = &rest[..value_len];
                    on_header(name, value);
                    if inserted {
                        let entry = Entry::new(name, value, &mut self.spare_entries);
                        self.table.insert(entry, &mut self.spare_entries);
                    }
                    at += name_len + value_len;
                }
                return Ok(());
            }
        }
        self.full_decodes += 1;
        if !self.replay || block.len() > MAX_BLOCK {
            return self.decode_fields(block, |name, value, _| on_header(name, value));
        }
        let mut record = std::mem::take(&mut self.cache.spare);
        record.text.clear();
        record.fields.clear();
        record.valid = false;
        let result = self.decode_fields(block, |name, value, inserted| {
            record.push(name, value, inserted);
            on_header(name, value);
        });
        let inserts = record.fields.iter().any(|&(_, _, inserted)| inserted);
        let keep = match (self.reads_table, inserts) {
            (false, _) => Some(None),
            (true, false) if self.table.generation == generation => Some(Some(generation)),
            (true, _) => None,
        };
        match keep.filter(|_| result.is_ok()) {
            Some(generation) => self.cache.keep(record, block, generation),
            None => self.cache.spare = record,
        }
        result
    }

    /// Header blocks decoded field by field so far; blocks replayed from earlier decodes do not
    /// count.
    pub fn full_decodes(&self) -> u64 {
        self.full_decodes
    }

    /// Turns the replay of repeated blocks on (the default) or off (every block is decoded
    /// field by field, e.g. as the reference in a differential check).
    pub fn set_replay(&mut self, on: bool) {
        self.replay = on;
    }
}

impl BlockCache {
    /// Keeps `decoded`, the fields of `block`, in place of an older decode of the same block
    /// (kept at an earlier table generation), else of the oldest slot.
    fn keep(&mut self, mut decoded: Decoded, block: &[u8], generation: Option<u64>) {
        let same = self.slots.iter().position(|d| d.valid && d.block == block);
        let slot = same.unwrap_or_else(|| {
            let oldest = self.next;
            self.next = (self.next + 1) % SLOTS;
            oldest
        });
        decoded.block.clear();
        decoded.block.extend_from_slice(block);
        decoded.generation = generation;
        decoded.valid = true;
        self.spare = std::mem::replace(&mut self.slots[slot], decoded);
    }
}
