//! HPACK Huffman code (RFC 7541 Appendix B): the code table and a decoder that walks the code
//! tree four bits at a time. The nibble transition table is generated once, at first use, from
//! the code table, so no hand-written state table has to be trusted.

use std::sync::OnceLock;

/// Why a Huffman string could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HuffmanError {
    /// The string contains the EOS symbol.
    Eos,
    /// More than 7 bits of padding, or padding that is not all ones.
    Padding,
}

/// `(code, bit length)` for symbols 0..=255 and EOS (256), codes right-aligned (RFC 7541
/// Appendix B). Row comments give the first symbol of the row.
#[rustfmt::skip]
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), // 0..
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28), // 4..
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28), // 8..
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28), // 12..
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28), // 16..
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28), // 20..
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), // 24..
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28), // 28..
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12), // 32..
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), // 36..
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11), // 40..
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6), // 44..
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6), // 48..
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6), // 52..
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8), // 56..
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), // 60..
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7), // 64..
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7), // 68..
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7), // 72..
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7), // 76..
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7), // 80..
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), // 84..
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13), // 88..
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6), // 92..
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), // 96..
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6), // 100..
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7), // 104..
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5), // 108..
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5), // 112..
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7), // 116..
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), // 120..
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28), // 124..
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20), // 128..
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), // 132..
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23), // 136..
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23), // 140..
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), // 144..
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23), // 148..
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23), // 152..
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), // 156..
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22), // 160..
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21), // 164..
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24), // 168..
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23), // 172..
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21), // 176..
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23), // 180..
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22), // 184..
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23), // 188..
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), // 192..
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25), // 196..
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27), // 200..
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25), // 204..
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27), // 208..
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24), // 212..
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), // 216..
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27), // 220..
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21), // 224..
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23), // 228..
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25), // 232..
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23), // 236..
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), // 240..
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27), // 244..
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27), // 248..
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26), // 252..
    (0x3fffffff, 30), // 256..
];

/// Symbol number of EOS; it must never appear inside a string (RFC 7541 §5.2).
const EOS: u16 = 256;
/// Marks a child slot of the code tree as a leaf; the low bits hold the symbol.
const LEAF: u16 = 0x8000;
/// The transition emits `symbol`.
const EMIT: u8 = 1;
/// The transition completes the EOS code: the string is malformed.
const FAIL: u8 = 2;

/// One nibble's worth of tree walking from an internal node.
#[derive(Clone, Copy, Default)]
struct Step {
    /// Internal node reached after the four bits (0 = root).
    next: u8,
    /// Decoded byte, valid when `flags & EMIT`.
    symbol: u8,
    flags: u8,
}

/// The generated decoding automaton: one state per internal node of the code tree (256 of
/// them for 257 leaves, so a state fits in a `u8`).
struct Machine {
    steps: Vec<[Step; 16]>,
    /// States in which the string may end: the bits consumed since the last symbol are at most
    /// 7 and all ones, i.e. a valid padding (RFC 7541 §5.2).
    accepting: Vec<bool>,
}

/// Builds the binary code tree: `children[node][bit]` is an internal node index or
/// `LEAF | symbol`. Index 0 is the root and is never a child, so 0 means "not yet created".
fn build_tree() -> Vec<[u16; 2]> {
    let mut children: Vec<[u16; 2]> = vec![[0, 0]];
    for (symbol, &(code, len)) in CODES.iter().enumerate() {
        let mut node = 0usize;
        for depth in (0..len).rev() {
            let bit = ((code >> depth) & 1) as usize;
            if depth == 0 {
                children[node][bit] = LEAF | symbol as u16;
            } else {
                if children[node][bit] == 0 {
                    children.push([0, 0]);
                    children[node][bit] = (children.len() - 1) as u16;
                }
                node = usize::from(children[node][bit]);
            }
        }
    }
    children
}

/// Walks four bits (most significant first) from `state` through the tree.
fn walk_nibble(children: &[[u16; 2]], state: usize, nibble: u8) -> Step {
    let mut step = Step::default();
    let mut node = state;
    for shift in (0..4).rev() {
        let child = children[node][usize::from((nibble >> shift) & 1)];
        if child & LEAF == 0 {
            node = usize::from(child);
            continue;
        }
        let symbol = child & !LEAF;
        if symbol == EOS {
            step.flags = FAIL;
            return step;
        }
        // The shortest code is 5 bits, so a nibble completes at most one symbol.
        step.symbol = symbol as u8;
        step.flags = EMIT;
        node = 0;
    }
    step.next = node as u8;
    step
}

fn build_machine() -> Machine {
    let children = build_tree();
    let steps = (0..children.len())
        .map(|state| std::array::from_fn(|nibble| walk_nibble(&children, state, nibble as u8)))
        .collect();
    let mut accepting = vec![false; children.len()];
    let mut node = 0usize;
    accepting[0] = true;
    for _ in 0..7 {
        node = usize::from(children[node][1]);
        accepting[node] = true;
    }
    Machine { steps, accepting }
}

fn machine() -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(build_machine)
}

/// Appends the Huffman decoding of `src` to `out`. Rejects EOS inside the string and padding
/// longer than 7 bits or not all ones.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let machine = machine();
    let mut state = 0usize;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = machine.steps[state][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err(HuffmanError::Eos);
            }
            if step.flags & EMIT != 0 {
                out.push(step.symbol);
            }
            state = usize::from(step.next);
        }
    }
    if machine.accepting[state] {
        Ok(())
    } else {
        Err(HuffmanError::Padding)
    }
}

/// Huffman-encodes `src` onto `out`, padding the last byte with ones. Only tests need it: the
/// request encoder sends plain literals.
#[cfg(test)]
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    // Bits waiting to be written, right-aligned; at most 7 + 30 of them, so a u64 suffices.
    let mut pending: u64 = 0;
    let mut pending_bits = 0u32;
    for &byte in src {
        let (code, len) = CODES[usize::from(byte)];
        pending = (pending << len) | u64::from(code);
        pending_bits += u32::from(len);
        while pending_bits >= 8 {
            pending_bits -= 8;
            out.push((pending >> pending_bits) as u8);
        }
        pending &= (1u64 << pending_bits) - 1;
    }
    if pending_bits > 0 {
        let pad = 8 - pending_bits;
        out.push(((pending << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grpc::hpack::HpackError;

    fn decoded(src: &[u8]) -> Result<Vec<u8>, HpackError> {
        let mut out = Vec::new();
        decode(src, &mut out)
            .map(|()| out)
            .map_err(HpackError::from)
    }

    #[test]
    fn tree_is_complete_with_256_internal_nodes() {
        let children = build_tree();
        assert_eq!(children.len(), 256);
        assert!(children.iter().flatten().all(|&child| child != 0));
    }

    #[test]
    fn rfc_examples_decode() {
        let cases: &[(&[u8], &str)] = &[
            (
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
                "www.example.com",
            ),
            (&[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf], "no-cache"),
            (&[0x64, 0x02], "302"),
            (&[0xae, 0xc3, 0x77, 0x1a, 0x4b], "private"),
            (&[0x9b, 0xd9, 0xab], "gzip"),
            (&[], ""),
        ];
        for (src, want) in cases {
            assert_eq!(decoded(src).unwrap(), want.as_bytes(), "{want}");
            let mut encoded = Vec::new();
            encode(want.as_bytes(), &mut encoded);
            assert_eq!(&encoded, src, "encode {want}");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut encoded = Vec::new();
        encode(&all, &mut encoded);
        assert_eq!(decoded(&encoded).unwrap(), all);
        for byte in 0..=255u8 {
            encoded.clear();
            encode(&[byte, byte], &mut encoded);
            assert_eq!(decoded(&encoded).unwrap(), [byte, byte], "byte {byte}");
        }
    }

    #[test]
    fn bad_strings_are_rejected() {
        let cases: &[(&[u8], HpackError)] = &[
            // 30 ones then padding: EOS inside the string.
            (&[0xff, 0xff, 0xff, 0xff], HpackError::HuffmanEos),
            // '0' is 00000, then 3 zero bits of padding.
            (&[0x00], HpackError::HuffmanPadding),
            // '0' then 3 ones padding, then a whole byte of ones: 11 bits of padding.
            (&[0x07, 0xff], HpackError::HuffmanPadding),
            // 8 ones alone: padding of a full byte.
            (&[0xff], HpackError::HuffmanPadding),
            // 'a' (00011) followed by padding 101: not all ones.
            (&[0x1d], HpackError::HuffmanPadding),
        ];
        for (src, want) in cases {
            assert_eq!(decoded(src), Err(*want), "{src:02x?}");
        }
        // '0' + 111 padding is fine.
        assert_eq!(decoded(&[0x07]).unwrap(), b"0");
    }
}
