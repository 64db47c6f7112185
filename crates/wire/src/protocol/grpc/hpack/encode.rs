//! The request side of HPACK: static-table lookups and a stateless encoder.

use super::STATIC_TABLE;

/// HPACK encoder for request headers encoded once and replayed. It never inserts into the
/// peer's dynamic table, so it keeps no state and the bytes stay valid for the whole
/// connection.
#[derive(Debug, Default, Clone, Copy)]
pub struct Encoder;

impl Encoder {
    pub fn new() -> Self {
        Encoder
    }

    /// Appends an indexed field (RFC 7541 §6.1); `index` should be a static index 1..=61
    /// (see `static_index`), since this encoder never fills the dynamic table.
    pub fn encode_indexed(&self, out: &mut Vec<u8>, index: usize) {
        write_integer(out, 0x80, 7, index);
    }

    /// Appends a literal field without indexing, new name (RFC 7541 §6.2.2), plain strings.
    pub fn encode_literal_without_indexing(&self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.push(0x00);
        write_string(out, name);
        write_string(out, value);
    }

    /// Appends a literal field without indexing whose name is static entry `name_index`
    /// (see `static_name_index`), plain value.
    pub fn encode_literal_with_name_index(
        &self,
        out: &mut Vec<u8>,
        name_index: usize,
        value: &[u8],
    ) {
        write_integer(out, 0x00, 4, name_index);
        write_string(out, value);
    }
}

/// Static table index (1..=61) of the exact field `name: value`, if there is one.
pub fn static_index(name: &[u8], value: &[u8]) -> Option<usize> {
    STATIC_TABLE
        .iter()
        .position(|&(n, v)| n.as_bytes() == name && v.as_bytes() == value)
        .map(|i| i + 1)
}

/// Lowest static table index (1..=61) whose name is `name`, if any.
pub fn static_name_index(name: &[u8]) -> Option<usize> {
    STATIC_TABLE
        .iter()
        .position(|&(n, _)| n.as_bytes() == name)
        .map(|i| i + 1)
}

/// Appends `value` as an integer with a `prefix_bits`-bit prefix (RFC 7541 §5.1); `flags`
/// holds the representation bits above the prefix.
fn write_integer(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, value: usize) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a plain (non-Huffman) string literal.
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_integer(out, 0x00, 7, bytes.len());
    out.extend_from_slice(bytes);
}
