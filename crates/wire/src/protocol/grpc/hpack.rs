//! HPACK header compression (RFC 7541) for the hand-rolled HTTP/2 client.
//!
//! `Decoder` reads the response HEADERS blocks a server sends: static and dynamic table,
//! integers with overflow checks, plain and Huffman string literals, every representation, and
//! table size updates bounded by the client's SETTINGS_HEADER_TABLE_SIZE. It calls back with
//! borrowed name/value slices, so the only allocations are dynamic table inserts while the table
//! fills (afterwards an insert reuses the buffer of an evicted entry) and the reusable buffers
//! (Huffman scratch, replay cache) growing to their high-water marks. Repeated blocks are
//! replayed from the fields of their last decode where that provably gives the same result
//! (`cache`).
//!
//! `Encoder` is deliberately minimal: requests are encoded once, up front, with indexed fields
//! and literals that never touch the peer's dynamic table.

use std::collections::VecDeque;
use std::fmt;

use super::hpack_huffman;

mod cache;
mod encode;
mod fuzz;

pub use encode::{static_index, static_name_index, Encoder};
pub use fuzz::fuzz_hpack;

/// Default SETTINGS_HEADER_TABLE_SIZE (RFC 7540 §6.5.2), in bytes.
pub const DEFAULT_HEADER_TABLE_SIZE: usize = 4096;
/// Default bound on one decoded header list, in bytes counted as RFC 7540 §6.5.2 does
/// (name + value + 32 per field). Bounds memory spent on a hostile peer.
pub const DEFAULT_MAX_HEADER_LIST_SIZE: usize = 64 * 1024;
/// Per-entry overhead added to name + value lengths (RFC 7541 §4.1), in bytes.
const ENTRY_OVERHEAD: usize = 32;
/// Largest integer the decoder accepts; anything larger cannot be a valid index, length or size.
const MAX_INTEGER: u64 = u32::MAX as u64;

/// The static table, RFC 7541 Appendix A; index 1 is the first element.
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Why a header block could not be decoded. Every variant is a COMPRESSION_ERROR at the HTTP/2
/// level (RFC 7540 §4.3): the connection's decoding context is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended in the middle of a representation.
    Truncated,
    /// An integer does not fit in 32 bits (or uses more than 5 continuation bytes).
    IntegerOverflow,
    /// Index 0, or an index past the end of the static + dynamic table.
    InvalidIndex(usize),
    /// A Huffman string contains the EOS symbol.
    HuffmanEos,
    /// A Huffman string ends with more than 7 bits of padding, or padding that is not all ones.
    HuffmanPadding,
    /// A dynamic table size update asks for more than SETTINGS_HEADER_TABLE_SIZE allows.
    TableSizeTooLarge { requested: usize, limit: usize },
    /// A dynamic table size update after the first header field of the block (RFC 7541 §4.2).
    TableSizeUpdateNotFirst,
    /// A block that ends with a dynamic table size update (h2spec treats it as an error).
    TableSizeUpdateAtEnd,
    /// More than two dynamic table size updates at the start of one block (RFC 7541 §4.2
    /// needs at most two: the smallest size, then the final one).
    TooManyTableSizeUpdates,
    /// The decoded header list exceeds the configured bound, in bytes.
    HeaderListTooLarge { limit: usize },
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpackError::Truncated => f.write_str("HPACK: header block truncated"),
            HpackError::IntegerOverflow => f.write_str("HPACK: integer overflow"),
            HpackError::InvalidIndex(index) => write!(f, "HPACK: invalid table index {index}"),
            HpackError::HuffmanEos => f.write_str("HPACK: EOS symbol inside a Huffman string"),
            HpackError::HuffmanPadding => f.write_str("HPACK: invalid Huffman padding"),
            HpackError::TableSizeTooLarge { requested, limit } => write!(
                f,
                "HPACK: dynamic table size update to {requested} bytes exceeds \
                 SETTINGS_HEADER_TABLE_SIZE {limit}"
            ),
            HpackError::TableSizeUpdateNotFirst => {
                f.write_str("HPACK: dynamic table size update after a header field")
            }
            HpackError::TooManyTableSizeUpdates => f.write_str(
                "HPACK: more than 2 dynamic table size updates at the start of a header block",
            ),
            HpackError::TableSizeUpdateAtEnd => {
                f.write_str("HPACK: header block ends with a dynamic table size update")
            }
            HpackError::HeaderListTooLarge { limit } => {
                write!(f, "HPACK: decoded header list exceeds {limit} bytes")
            }
        }
    }
}

impl std::error::Error for HpackError {}

impl From<hpack_huffman::HuffmanError> for HpackError {
    fn from(e: hpack_huffman::HuffmanError) -> Self {
        match e {
            hpack_huffman::HuffmanError::Eos => HpackError::HuffmanEos,
            hpack_huffman::HuffmanError::Padding => HpackError::HuffmanPadding,
        }
    }
}

impl From<HpackError> for crate::error::Error {
    fn from(e: HpackError) -> Self {
        crate::error::Error::generic(e.to_string())
    }
}

/// Buffers of evicted entries kept for reuse, at most.
const SPARE_BUFFERS: usize = 16;
/// Largest buffer kept for reuse, in bytes: spare buffers stay small whatever a server inserts.
const MAX_SPARE_CAPACITY: usize = 512;
/// Smallest buffer capacity of an entry, in bytes, so that the buffers of small entries (a
/// server's repeated `date`, `server`, `content-type`) fit each other.
const MIN_ENTRY_CAPACITY: usize = 64;

/// One dynamic table entry, name and value in one buffer.
struct Entry {
    bytes: Vec<u8>,
    name_len: usize,
}

impl Entry {
    /// A copy of `name` and `value`, in a buffer from `spare` when one is large enough: a
    /// table that evicts as many entries as it inserts reuses its buffers without allocating.
    fn new(name: &[u8], value: &[u8], spare: &mut Vec<Vec<u8>>) -> Self {
        let len = name.len() + value.len();
        let mut bytes = match spare.iter().position(|b| b.capacity() >= len) {
            Some(i) => spare.swap_remove(i),
            None => Vec::with_capacity(len.next_power_of_two().max(MIN_ENTRY_CAPACITY)),
        };
        bytes.clear();
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        Entry {
            bytes,
            name_len: name.len(),
        }
    }

    /// Gives the entry's buffer to `spare` (if it has room and the buffer is small).
    fn recycle(self, spare: &mut Vec<Vec<u8>>) {
        if spare.len() < SPARE_BUFFERS && self.bytes.capacity() <= MAX_SPARE_CAPACITY {
            spare.push(self.bytes);
        }
    }
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    /// Size as RFC 7541 §4.1 counts it, in bytes.
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The dynamic table: newest entry at the front (HPACK index 62).
struct DynamicTable {
    entries: VecDeque<Entry>,
    /// Sum of entry sizes, in bytes.
    size: usize,
    /// Current maximum size, in bytes, as last set by a size update (or the setting).
    max_size: usize,
    /// Bumped by every change of the table (insert, eviction, size change): two decodes at the
    /// same generation see the same table.
    generation: u64,
}

impl DynamicTable {
    fn new(max_size: usize) -> Self {
        DynamicTable {
            entries: VecDeque::new(),
            size: 0,
            max_size,
            generation: 0,
        }
    }

    /// Evicts the oldest entries until the table holds at most `limit` bytes; their buffers go
    /// to `spare`.
    fn evict_to(&mut self, limit: usize, spare: &mut Vec<Vec<u8>>) {
        while self.size > limit {
            match self.entries.pop_back() {
                Some(old) => {
                    self.size -= old.size();
                    old.recycle(spare);
                }
                None => break,
            }
        }
    }

    fn set_max_size(&mut self, max_size: usize, spare: &mut Vec<Vec<u8>>) {
        self.generation = self.generation.wrapping_add(1);
        self.max_size = max_size;
        self.evict_to(max_size, spare);
    }

    /// Adds an entry, evicting old ones; an entry larger than the table empties it and is
    /// not stored (RFC 7541 §4.4).
    fn insert(&mut self, entry: Entry, spare: &mut Vec<Vec<u8>>) {
        self.generation = self.generation.wrapping_add(1);
        let needed = entry.size();
        if needed > self.max_size {
            self.evict_to(0, spare);
            entry.recycle(spare);
            return;
        }
        self.evict_to(self.max_size - needed, spare);
        self.size += needed;
        self.entries.push_front(entry);
    }
}

/// Where a decoded string lives, resolved to a slice once all borrows are known.
#[derive(Clone, Copy)]
enum Text {
    /// A table entry's name (HPACK index, static or dynamic).
    TableName(usize),
    /// A plain literal: a range of the header block.
    Block(usize, usize),
    /// A Huffman literal: a range of the decoder's scratch buffer.
    Scratch(usize, usize),
}

/// How a literal field treats the dynamic table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Indexing {
    Incremental,
    None,
}

/// HPACK decoder for one HTTP/2 connection (one per connection: the dynamic table is
/// connection state).
pub struct Decoder {
    table: DynamicTable,
    /// The client's SETTINGS_HEADER_TABLE_SIZE, in bytes: the ceiling for size updates.
    settings_table_size: usize,
    /// Bound on one decoded header list, in bytes (name + value + 32 per field).
    max_header_list_size: usize,
    /// Reused buffer for Huffman-decoded strings of the current field.
    scratch: Vec<u8>,
    /// Buffers of evicted dynamic table entries, reused by later inserts.
    spare_entries: Vec<Vec<u8>>,
    /// Recently decoded blocks and their fields, for replay.
    cache: cache::BlockCache,
    /// Whether repeated blocks may be replayed from `cache`.
    replay: bool,
    /// Set while decoding a block that reads the dynamic table (an index past the static
    /// table) or updates its size: its fields depend on the table's state.
    reads_table: bool,
    /// Blocks decoded field by field (replays from `cache` not counted).
    full_decodes: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the protocol defaults: 4096-byte table, 64 KiB header lists.
    pub fn new() -> Self {
        Decoder::with_limits(DEFAULT_HEADER_TABLE_SIZE, DEFAULT_MAX_HEADER_LIST_SIZE)
    }

    /// A decoder for a connection that advertises SETTINGS_HEADER_TABLE_SIZE =
    /// `header_table_size` bytes, rejecting header lists over `max_header_list_size` bytes.
    pub fn with_limits(header_table_size: usize, max_header_list_size: usize) -> Self {
        Decoder {
            table: DynamicTable::new(header_table_size),
            settings_table_size: header_table_size,
            max_header_list_size,
            scratch: Vec::new(),
            spare_entries: Vec::with_capacity(SPARE_BUFFERS),
            cache: cache::BlockCache::default(),
            replay: true,
            reads_table: false,
            full_decodes: 0,
        }
    }

    /// Applies a new SETTINGS_HEADER_TABLE_SIZE of the client's, in bytes, once the peer has
    /// acknowledged it. A smaller value shrinks the table at once (the peer must follow with a
    /// size update anyway); a larger one only raises the ceiling for later size updates.
    pub fn set_header_table_size(&mut self, bytes: usize) {
        self.settings_table_size = bytes;
        self.table.generation = self.table.generation.wrapping_add(1);
        if self.table.max_size > bytes {
            self.table.set_max_size(bytes, &mut self.spare_entries);
        }
    }

    /// Current dynamic table size, in bytes as RFC 7541 §4.1 counts them.
    pub fn dynamic_table_size(&self) -> usize {
        self.table.size
    }

    /// Current dynamic table maximum size, in bytes (last size update or the setting).
    pub fn dynamic_table_max_size(&self) -> usize {
        self.table.max_size
    }

    /// Number of entries in the dynamic table.
    pub fn dynamic_table_len(&self) -> usize {
        self.table.entries.len()
    }

    /// Dynamic table entry `position` (0 = newest, i.e. HPACK index 62) as (name, value).
    pub fn dynamic_entry(&self, position: usize) -> Option<(&[u8], &[u8])> {
        self.table
            .entries
            .get(position)
            .map(|entry| (entry.name(), entry.value()))
    }

    /// Reads every representation of `block`, calling `on_header(name, value, inserted)` for
    /// each field, `inserted` telling whether the field was added to the dynamic table.
    fn decode_fields(
        &mut self,
        block: &[u8],
        mut on_header: impl FnMut(&[u8], &[u8], bool),
    ) -> Result<(), HpackError> {
        self.reads_table = false;
        let mut pos = 0;
        // Whether a field representation was read; size updates must all come before it.
        let mut field_seen = false;
        // Bytes of the header list so far, counted as name + value + 32 per field.
        let mut list_size = 0usize;
        let mut size_updates = 0;
        while let Some(&first) = block.get(pos) {
            if first & 0xe0 == 0x20 {
                // 001xxxxx: dynamic table size update, only before the first field.
                if field_seen {
                    return Err(HpackError::TableSizeUpdateNotFirst);
                }
                size_updates += 1;
                if size_updates > 2 {
                    return Err(HpackError::TooManyTableSizeUpdates);
                }
                self.reads_table = true;
                let requested = read_integer(block, &mut pos, 5)?;
                if requested > self.settings_table_size {
                    return Err(HpackError::TableSizeTooLarge {
                        requested,
                        limit: self.settings_table_size,
                    });
                }
                self.table.set_max_size(requested, &mut self.spare_entries);
                if pos == block.len() {
                    return Err(HpackError::TableSizeUpdateAtEnd);
                }
                continue;
            }
            field_seen = true;
            if first & 0x80 != 0 {
                // 1xxxxxxx: indexed field.
                let index = read_integer(block, &mut pos, 7)?;
                self.reads_table |= index > STATIC_TABLE.len();
                let (name, value) = table_entry(&self.table, index)?;
                list_size = add_field(list_size, name, value, self.max_header_list_size)?;
                on_header(name, value, false);
            } else if first & 0x40 != 0 {
                // 01xxxxxx: literal with incremental indexing.
                list_size = self.decode_literal(
                    block,
                    &mut pos,
                    6,
                    Indexing::Incremental,
                    list_size,
                    &mut on_header,
                )?;
            } else {
                // 0000xxxx without indexing, 0001xxxx never indexed: same decoding here.
                list_size = self.decode_literal(
                    block,
                    &mut pos,
                    4,
                    Indexing::None,
                    list_size,
                    &mut on_header,
                )?;
            }
        }
        Ok(())
    }

    /// Decodes one literal field whose first byte is at `pos`, reports it, and inserts it into
    /// the dynamic table if asked. Returns the new header list size.
    fn decode_literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix_bits: u32,
        indexing: Indexing,
        list_size: usize,
        on_header: &mut impl FnMut(&[u8], &[u8], bool),
    ) -> Result<usize, HpackError> {
        let name_index = read_integer(block, pos, prefix_bits)?;
        self.reads_table |= name_index > STATIC_TABLE.len();
        self.scratch.clear();
        let name = if name_index == 0 {
            read_string(block, pos, &mut self.scratch)?
        } else {
            table_entry(&self.table, name_index)?;
            Text::TableName(name_index)
        };
        let value = read_string(block, pos, &mut self.scratch)?;
        let name = resolve(name, block, &self.scratch, &self.table)?;
        let value = resolve(value, block, &self.scratch, &self.table)?;
        let list_size = add_field(list_size, name, value, self.max_header_list_size)?;
        on_header(name, value, indexing == Indexing::Incremental);
        if indexing == Indexing::Incremental {
            // Copy before inserting: the name may live in an entry the insert evicts (§4.4).
            let entry = Entry::new(name, value, &mut self.spare_entries);
            self.table.insert(entry, &mut self.spare_entries);
        }
        Ok(list_size)
    }
}

/// (name, value) at HPACK `index`: 1..=61 static, 62.. dynamic (newest first).
fn table_entry(table: &DynamicTable, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
    if let Some(&(name, value)) = index.checked_sub(1).and_then(|i| STATIC_TABLE.get(i)) {
        return Ok((name.as_bytes(), value.as_bytes()));
    }
    index
        .checked_sub(STATIC_TABLE.len() + 1)
        .and_then(|position| table.entries.get(position))
        .map(|entry| (entry.name(), entry.value()))
        .ok_or(HpackError::InvalidIndex(index))
}

fn resolve<'a>(
    text: Text,
    block: &'a [u8],
    scratch: &'a [u8],
    table: &'a DynamicTable,
) -> Result<&'a [u8], HpackError> {
    match text {
        Text::TableName(index) => table_entry(table, index).map(|(name, _)| name),
        Text::Block(start, end) => Ok(&block[start..end]),
        Text::Scratch(start, end) => Ok(&scratch[start..end]),
    }
}

/// Adds one field to the running header list size, enforcing `limit` (bytes).
fn add_field(
    list_size: usize,
    name: &[u8],
    value: &[u8],
    limit: usize,
) -> Result<usize, HpackError> {
    let total = list_size
        .saturating_add(name.len())
        .saturating_add(value.len())
        .saturating_add(ENTRY_OVERHEAD);
    if total > limit {
        return Err(HpackError::HeaderListTooLarge { limit });
    }
    Ok(total)
}

/// Reads an integer with an N-bit prefix (RFC 7541 §5.1) starting at `*pos`; the bits above
/// the prefix in the first byte are the caller's. Values above `u32::MAX` are rejected.
fn read_integer(block: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<usize, HpackError> {
    let first = *block.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mask = ((1u16 << prefix_bits) - 1) as u8;
    let mut value = u64::from(first & mask);
    if value < u64::from(mask) {
        return Ok(value as usize);
    }
    // Five continuation bytes carry 35 bits, enough for any u32; more is an attack.
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += u64::from(byte & 0x7f) << shift;
        if value > MAX_INTEGER {
            return Err(HpackError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| HpackError::IntegerOverflow);
        }
    }
    Err(HpackError::IntegerOverflow)
}

/// Reads a string literal (RFC 7541 §5.2) at `*pos`. Huffman strings are decoded onto the end
/// of `scratch`; plain ones stay in the block.
fn read_string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Text, HpackError> {
    let huffman = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = read_integer(block, pos, 7)?;
    let start = *pos;
    let end = start
        .checked_add(len)
        .filter(|&end| end <= block.len())
        .ok_or(HpackError::Truncated)?;
    *pos = end;
    if !huffman {
        return Ok(Text::Block(start, end));
    }
    let scratch_start = scratch.len();
    hpack_huffman::decode(&block[start..end], scratch)?;
    Ok(Text::Scratch(scratch_start, scratch.len()))
}
