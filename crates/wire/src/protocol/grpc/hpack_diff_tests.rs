//! Differential tests: inferperf's HPACK decoder against `loona-hpack` (a dev-dependency only) on
//! the RFC 7541 Appendix C blocks, on thousands of generated blocks (loona's encoder, and
//! inferperf's own generator covering Huffman, every representation and size updates), and on
//! mutated blocks.

use super::hpack::{Decoder, HpackError};
use super::hpack_huffman;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// inferperf's decoder and loona's, fed the same blocks of one connection.
struct Pair {
    ours: Decoder,
    theirs: loona_hpack::Decoder<'static>,
}

impl Pair {
    fn new(table_size: usize) -> Self {
        let mut theirs = loona_hpack::Decoder::new();
        theirs.set_max_table_size(table_size);
        theirs.set_max_allowed_table_size(table_size);
        Pair {
            ours: Decoder::with_limits(table_size, 1 << 20),
            theirs,
        }
    }

    fn ours(&mut self, block: &[u8]) -> Result<Fields, HpackError> {
        let mut fields = Vec::new();
        self.ours
            .decode(block, |n, v| fields.push((n.to_vec(), v.to_vec())))?;
        Ok(fields)
    }

    /// Decodes with both; returns (inferperf's, loona's) results.
    fn both(&mut self, block: &[u8]) -> (Result<Fields, HpackError>, Result<Fields, String>) {
        let ours = self.ours(block);
        let theirs = self.theirs.decode(block).map_err(|e| e.to_string());
        (ours, theirs)
    }

    /// Both must accept `block` with the same fields.
    fn agree_ok(&mut self, block: &[u8], what: &str) -> Fields {
        let (ours, theirs) = self.both(block);
        let ours = ours.unwrap_or_else(|e| panic!("{what}: ours failed: {e} on {block:02x?}"));
        let theirs = theirs.unwrap_or_else(|e| panic!("{what}: loona failed: {e} on {block:02x?}"));
        assert_eq!(ours, theirs, "{what}: fields differ on {block:02x?}");
        ours
    }
}

fn hex(dump: &str) -> Vec<u8> {
    let digits: Vec<u8> = dump.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn rfc_appendix_c_sequences_agree() {
    let sequences: &[(usize, &[&str])] = &[
        (
            4096,
            &[
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
            ],
        ),
        (
            4096,
            &[
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
            ],
        ),
        (
            256,
            &[
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
                 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                "4883 640e ffc1 c0bf",
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
                 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
                 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ],
        ),
    ];
    for (table_size, blocks) in sequences {
        let mut pair = Pair::new(*table_size);
        for (i, dump) in blocks.iter().enumerate() {
            let fields = pair.agree_ok(&hex(dump), &format!("RFC block {i}"));
            assert!(!fields.is_empty());
        }
    }
}

const NAMES: &[&str] = &[
    ":status",
    "content-type",
    "grpc-status",
    "grpc-message",
    "date",
    "server",
    "x-custom",
    "set-cookie",
    "te",
    "",
    "a-very-long-header-name-that-goes-on-and-on-for-a-while",
];

/// A header value: empty, short printable, arbitrary bytes, or long (multi-byte length).
fn random_value(rng: &mut Rng) -> Vec<u8> {
    match rng.below(5) {
        0 => Vec::new(),
        1 => (0..rng.below(150)).map(|_| rng.next() as u8).collect(),
        _ => (0..rng.below(40))
            .map(|_| b' ' + rng.below(95) as u8)
            .collect(),
    }
}

fn random_name(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(4) {
        (0..1 + rng.below(20))
            .map(|_| b'a' + rng.below(26) as u8)
            .collect()
    } else {
        NAMES[rng.below(NAMES.len())].as_bytes().to_vec()
    }
}

#[test]
fn loona_encoder_blocks_agree() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for table_size in [4096usize, 256] {
        let mut encoder = loona_hpack::Encoder::new();
        encoder.set_max_table_size(table_size);
        let mut pair = Pair::new(table_size);
        for block_number in 0..1500 {
            let headers: Fields = (0..1 + rng.below(12))
                .map(|_| (random_name(&mut rng), random_value(&mut rng)))
                .collect();
            let block = encoder.encode(headers.iter().map(|(n, v)| (&n[..], &v[..])));
            let fields = pair.agree_ok(&block, &format!("loona block {block_number}"));
            assert_eq!(fields, headers, "round trip of block {block_number}");
        }
    }
}

/// Appends an integer with a `prefix_bits` prefix (test-side copy, independent of the encoder).
fn put_integer(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, value: usize) {
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

fn put_string(out: &mut Vec<u8>, rng: &mut Rng, bytes: &[u8]) {
    if rng.chance(2) {
        let mut coded = Vec::new();
        hpack_huffman::encode(bytes, &mut coded);
        put_integer(out, 0x80, 7, coded.len());
        out.extend_from_slice(&coded);
    } else {
        put_integer(out, 0x00, 7, bytes.len());
        out.extend_from_slice(bytes);
    }
}

/// One literal field: with incremental indexing, without, or never indexed; name by static
/// index or literal.
fn put_literal(out: &mut Vec<u8>, rng: &mut Rng) {
    let (flags, prefix_bits) = [(0x40, 6), (0x00, 4), (0x10, 4)][rng.below(3)];
    if rng.chance(2) {
        put_integer(out, flags, prefix_bits, 1 + rng.below(61));
    } else {
        put_integer(out, flags, prefix_bits, 0);
        let name = random_name(rng);
        put_string(out, rng, &name);
    }
    let value = random_value(rng);
    put_string(out, rng, &value);
}

/// A valid block for a decoder whose dynamic table has `dynamic_len` entries: optional size
/// update, dynamic references first (before any insert can evict), then a mix of static
/// references and literals.
fn generated_block(rng: &mut Rng, dynamic_len: usize, table_size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut dynamic_len = dynamic_len;
    if rng.chance(8) {
        put_integer(&mut out, 0x20, 5, rng.below(table_size + 1));
        // The update may have evicted everything; do not reference the dynamic table.
        dynamic_len = 0;
    }
    for _ in 0..rng.below(dynamic_len.min(4) + 1) {
        put_integer(&mut out, 0x80, 7, 62 + rng.below(dynamic_len));
    }
    for _ in 0..1 + rng.below(10) {
        if rng.chance(3) {
            put_integer(&mut out, 0x80, 7, 1 + rng.below(61));
        } else {
            put_literal(&mut out, rng);
        }
    }
    out
}

fn dynamic_table(decoder: &Decoder) -> Fields {
    (0..decoder.dynamic_table_len())
        .filter_map(|i| decoder.dynamic_entry(i))
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

#[test]
fn generated_huffman_blocks_agree() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for table_size in [4096usize, 256, 64] {
        let mut pair = Pair::new(table_size);
        for block_number in 0..600 {
            let block = generated_block(&mut rng, pair.ours.dynamic_table_len(), table_size);
            pair.agree_ok(&block, &format!("generated block {block_number}"));
            assert!(pair.ours.dynamic_table_size() <= table_size);
        }
        // Same final table, checked through a field that indexes every entry.
        let mut refs = Vec::new();
        for index in 62..62 + pair.ours.dynamic_table_len() {
            put_integer(&mut refs, 0x80, 7, index);
        }
        let table = dynamic_table(&pair.ours);
        if !refs.is_empty() {
            assert_eq!(pair.agree_ok(&refs, "final table"), table);
        }
    }
}

/// Mutated blocks: whenever both decoders accept, they must agree on the fields. Outright
/// disagreement on acceptance is allowed only where inferperf's decoder is the stricter one by
/// design (size update position, integer width, header list bound), so it is counted, not asserted.
#[test]
fn mutated_blocks_agree_when_both_accept() {
    let mut rng = Rng(0xfeed_f00d_dead_beef);
    let mut both_accepted = 0;
    for round in 0..1000 {
        let mut pair = Pair::new(4096);
        let seed_block = generated_block(&mut rng, 0, 4096);
        pair.agree_ok(&seed_block, "seed block");
        let mut block = generated_block(&mut rng, pair.ours.dynamic_table_len(), 4096);
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(block.len());
            match rng.below(3) {
                0 => block[at] ^= 1 << rng.below(8),
                1 => block[at] = rng.next() as u8,
                _ => block.truncate(at),
            }
            if block.is_empty() {
                break;
            }
        }
        let (ours, theirs) = pair.both(&block);
        if let (Ok(ours), Ok(theirs)) = (&ours, &theirs) {
            assert_eq!(ours, theirs, "round {round}: {block:02x?}");
            both_accepted += 1;
        }
    }
    assert!(
        both_accepted > 300,
        "only {both_accepted} mutated blocks decoded"
    );
}
