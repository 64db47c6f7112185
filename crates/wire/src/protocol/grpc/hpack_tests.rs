//! HPACK tests: every RFC 7541 Appendix C example (with and without Huffman, checking the
//! dynamic table after each block), the encoder, and malformed input.

use super::hpack::{fuzz_hpack, static_index, static_name_index, Decoder, Encoder, HpackError};

/// Parses the RFC's hex dumps ("8286 8441 ..."), ignoring whitespace.
fn hex(dump: &str) -> Vec<u8> {
    let digits: Vec<u8> = dump.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(String, String)>;

pub(super) fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
    let mut fields = Vec::new();
    decoder.decode(block, |name, value| {
        fields.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    })?;
    Ok(fields)
}

pub(super) fn owned(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|&(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

pub(super) fn table_of(decoder: &Decoder) -> Fields {
    (0..decoder.dynamic_table_len())
        .map(|i| {
            let (n, v) = decoder.dynamic_entry(i).unwrap();
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

/// One block of an Appendix C sequence and the state the RFC shows after it.
struct Step {
    plain: &'static str,
    huffman: &'static str,
    headers: &'static [(&'static str, &'static str)],
    /// Dynamic table, newest first.
    table: &'static [(&'static str, &'static str)],
    /// Dynamic table size, bytes.
    table_size: usize,
}

/// C.3 (plain) and C.4 (Huffman): three requests on one connection.
const REQUESTS: &[Step] = &[
    Step {
        plain: "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        huffman: "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        headers: &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ],
        table: &[(":authority", "www.example.com")],
        table_size: 57,
    },
    Step {
        plain: "8286 84be 5808 6e6f 2d63 6163 6865",
        huffman: "8286 84be 5886 a8eb 1064 9cbf",
        headers: &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ],
        table: &[
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        table_size: 110,
    },
    Step {
        plain: "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        huffman: "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        headers: &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ],
        table: &[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        table_size: 164,
    },
];

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

/// C.5 (plain) and C.6 (Huffman): three responses with a 256-byte table, with evictions.
const RESPONSES: &[Step] = &[
    Step {
        plain: "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
                2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
                6c65 2e63 6f6d",
        huffman: "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
                  2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        headers: &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOCATION),
        ],
        table: &[
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        table_size: 222,
    },
    Step {
        plain: "4803 3330 37c1 c0bf",
        huffman: "4883 640e ffc1 c0bf",
        headers: &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOCATION),
        ],
        table: &[
            (":status", "307"),
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
        ],
        table_size: 222,
    },
    Step {
        plain: "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
                54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
                5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
                3d31",
        huffman: "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
                  77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
                  9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        headers: &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE2),
            ("location", LOCATION),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE),
        ],
        table: &[
            ("set-cookie", COOKIE),
            ("content-encoding", "gzip"),
            ("date", DATE2),
        ],
        table_size: 215,
    },
];

fn run_sequence(table_size: usize, steps: &[Step], huffman: bool) {
    let mut decoder = Decoder::with_limits(table_size, 64 * 1024);
    for (i, step) in steps.iter().enumerate() {
        let block = hex(if huffman { step.huffman } else { step.plain });
        let fields = decode(&mut decoder, &block).unwrap();
        assert_eq!(fields, owned(step.headers), "block {i} huffman={huffman}");
        assert_eq!(
            table_of(&decoder),
            owned(step.table),
            "table after block {i}"
        );
        assert_eq!(
            decoder.dynamic_table_size(),
            step.table_size,
            "size after block {i}"
        );
    }
}

#[test]
fn c3_requests_without_huffman() {
    run_sequence(4096, REQUESTS, false);
}

#[test]
fn c4_requests_with_huffman() {
    run_sequence(4096, REQUESTS, true);
}

#[test]
fn c5_responses_without_huffman() {
    run_sequence(256, RESPONSES, false);
}

#[test]
fn c6_responses_with_huffman() {
    run_sequence(256, RESPONSES, true);
}

/// (hex dump, decoded field, dynamic table after, table size in bytes).
type SingleCase = (
    &'static str,
    (&'static str, &'static str),
    &'static [(&'static str, &'static str)],
    usize,
);

/// C.2: one field per representation, each on a fresh decoder.
#[test]
fn c2_single_representations() {
    let cases: &[SingleCase] = &[
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            ("custom-key", "custom-header"),
            &[("custom-key", "custom-header")],
            55,
        ),
        (
            "040c 2f73 616d 706c 652f 7061 7468",
            (":path", "/sample/path"),
            &[],
            0,
        ),
        (
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            ("password", "secret"),
            &[],
            0,
        ),
        ("82", (":method", "GET"), &[], 0),
    ];
    for (dump, field, table, size) in cases {
        let mut decoder = Decoder::new();
        let fields = decode(&mut decoder, &hex(dump)).unwrap();
        assert_eq!(fields, owned(&[*field]), "{dump}");
        assert_eq!(table_of(&decoder), owned(table), "{dump}");
        assert_eq!(decoder.dynamic_table_size(), *size, "{dump}");
    }
}

#[test]
fn malformed_blocks_are_rejected() {
    let too_large = HpackError::TableSizeTooLarge {
        requested: 4097,
        limit: 4096,
    };
    let cases: &[(&str, &str, HpackError)] = &[
        ("index 0", "80", HpackError::InvalidIndex(0)),
        ("empty dynamic table", "be", HpackError::InvalidIndex(62)),
        (
            "name index past the end",
            "7f 00 01 61",
            HpackError::InvalidIndex(63),
        ),
        ("index 1337", "ff ba 09", HpackError::InvalidIndex(1337)),
        ("integer cut short", "ff", HpackError::Truncated),
        (
            "integer continuation cut short",
            "ff 80",
            HpackError::Truncated,
        ),
        ("value cut short", "41 05 61", HpackError::Truncated),
        ("value length missing", "41", HpackError::Truncated),
        ("name cut short", "40 0a 63 75", HpackError::Truncated),
        (
            "huge string length",
            "41 7f ff ff ff ff 07",
            HpackError::Truncated,
        ),
        (
            "integer over u32",
            "ff ff ff ff ff 0f",
            HpackError::IntegerOverflow,
        ),
        (
            "six continuation bytes",
            "ff 80 80 80 80 80 00",
            HpackError::IntegerOverflow,
        ),
        (
            "huffman padding of 8 bits",
            "40 81 ff 00",
            HpackError::HuffmanPadding,
        ),
        (
            "huffman padding with a zero",
            "41 81 1d",
            HpackError::HuffmanPadding,
        ),
        ("huffman EOS", "41 84 ff ff ff ff", HpackError::HuffmanEos),
        (
            "size update after a field",
            "82 20",
            HpackError::TableSizeUpdateNotFirst,
        ),
        ("size update over the setting", "3f e2 1f 82", too_large),
        (
            "size update at the end",
            "20",
            HpackError::TableSizeUpdateAtEnd,
        ),
    ];
    for (what, dump, want) in cases {
        let mut decoder = Decoder::new();
        assert_eq!(decode(&mut decoder, &hex(dump)), Err(*want), "{what}");
    }
}

#[test]
fn header_list_size_is_bounded() {
    // ":method: GET" counts 7 + 3 + 32 = 42 bytes; two fit in 100, three do not.
    let mut decoder = Decoder::with_limits(4096, 100);
    assert_eq!(decode(&mut decoder, &hex("82 82")).unwrap().len(), 2);
    assert_eq!(
        decode(&mut decoder, &hex("82 82 82")),
        Err(HpackError::HeaderListTooLarge { limit: 100 })
    );
}

#[test]
fn size_updates_evict_and_are_bounded() {
    let mut decoder = Decoder::new();
    decode(&mut decoder, &hex(REQUESTS[0].plain)).unwrap();
    assert_eq!(decoder.dynamic_table_len(), 1);
    // Two updates at the start of a block are allowed: 0 (flush) then 4096 (3f e1 1f).
    let fields = decode(&mut decoder, &hex("20 3f e1 1f 82")).unwrap();
    assert_eq!(fields, owned(&[(":method", "GET")]));
    assert_eq!(decoder.dynamic_table_len(), 0);
    assert_eq!(decoder.dynamic_table_max_size(), 4096);
    // A block may not end with a size update.
    assert_eq!(
        decode(&mut decoder, &hex("3f 21")),
        Err(HpackError::TableSizeUpdateAtEnd)
    );
    assert_eq!(decode(&mut decoder, &[]).unwrap(), owned(&[]));
}

#[test]
fn lowering_the_setting_shrinks_the_table() {
    let mut decoder = Decoder::new();
    for step in REQUESTS {
        decode(&mut decoder, &hex(step.plain)).unwrap();
    }
    assert_eq!(decoder.dynamic_table_size(), 164);
    decoder.set_header_table_size(60);
    assert_eq!(table_of(&decoder), owned(&[("custom-key", "custom-value")]));
    assert_eq!(
        decode(&mut decoder, &hex("3f 1e 82")),
        Err(HpackError::TableSizeTooLarge {
            requested: 61,
            limit: 60
        })
    );
    decoder.set_header_table_size(4096);
    assert_eq!(
        decoder.dynamic_table_max_size(),
        60,
        "raising only lifts the ceiling"
    );
}

#[test]
fn oversized_entry_empties_the_table() {
    let mut decoder = Decoder::with_limits(60, 4096);
    decode(&mut decoder, &hex(REQUESTS[0].plain)).unwrap();
    assert_eq!(decoder.dynamic_table_len(), 1);
    // custom-key: custom-header is 55 bytes, fits; then a 10 + 30 + 32 byte entry cannot.
    let mut block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    decode(&mut decoder, &block).unwrap();
    assert_eq!(
        table_of(&decoder),
        owned(&[("custom-key", "custom-header")])
    );
    block = hex("400a 6375 7374 6f6d 2d6b 6579 1e");
    block.extend_from_slice(&[b'x'; 30]);
    let fields = decode(&mut decoder, &block).unwrap();
    assert_eq!(fields[0].1.len(), 30, "the field is still reported");
    assert_eq!(decoder.dynamic_table_len(), 0);
    assert_eq!(decoder.dynamic_table_size(), 0);
}

#[test]
fn name_from_the_entry_being_evicted() {
    // Table of 57 bytes holds only ":authority: www.example.com"; inserting a field that uses
    // that entry's name (index 62) evicts it first (RFC 7541 §4.4).
    let mut decoder = Decoder::with_limits(57, 4096);
    decode(&mut decoder, &hex(REQUESTS[0].plain)).unwrap();
    let fields = decode(&mut decoder, &hex("7e 03 61 62 63")).unwrap();
    assert_eq!(fields, owned(&[(":authority", "abc")]));
    assert_eq!(table_of(&decoder), owned(&[(":authority", "abc")]));
}

#[test]
fn encoder_output_decodes_back() {
    let encoder = Encoder::new();
    let long_value = "v".repeat(300);
    let mut block = Vec::new();
    encoder.encode_indexed(&mut block, static_index(b":method", b"POST").unwrap());
    encoder.encode_indexed(&mut block, static_index(b":scheme", b"http").unwrap());
    let path_index = static_name_index(b":path").unwrap();
    encoder.encode_literal_with_name_index(
        &mut block,
        path_index,
        b"/inference.GRPCInferenceService/ModelInfer",
    );
    encoder.encode_literal_without_indexing(&mut block, b"te", b"trailers");
    encoder.encode_literal_without_indexing(&mut block, b"x-long", long_value.as_bytes());
    encoder.encode_literal_without_indexing(&mut block, b"", b"");
    let mut decoder = Decoder::new();
    let fields = decode(&mut decoder, &block).unwrap();
    let want = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/inference.GRPCInferenceService/ModelInfer"),
        ("te", "trailers"),
        ("x-long", long_value.as_str()),
        ("", ""),
    ];
    assert_eq!(fields, owned(&want));
    assert_eq!(decoder.dynamic_table_len(), 0, "the encoder never indexes");
}

#[test]
fn encoder_integers_match_rfc_c1() {
    // C.1.1/C.1.2 use a 5-bit prefix; the prefixes used here are 4- and 7-bit, so check the same
    // arithmetic on those: 1337 with a 7-bit prefix is 7f + (1337 - 127 = 1210 = 0x4ba) -> ba 09.
    let encoder = Encoder::new();
    let mut out = Vec::new();
    encoder.encode_indexed(&mut out, 1337);
    assert_eq!(out, hex("ff ba 09"));
    out.clear();
    encoder.encode_indexed(&mut out, 126);
    assert_eq!(out, hex("fe"));
    out.clear();
    encoder.encode_indexed(&mut out, 127);
    assert_eq!(out, hex("ff 00"));
    out.clear();
    encoder.encode_literal_with_name_index(&mut out, 15, b"");
    assert_eq!(out, hex("0f 00 00"));
}

#[test]
fn static_lookups() {
    assert_eq!(static_index(b":method", b"GET"), Some(2));
    assert_eq!(static_index(b":status", b"200"), Some(8));
    assert_eq!(static_index(b"www-authenticate", b""), Some(61));
    assert_eq!(static_index(b":method", b"PUT"), None);
    assert_eq!(static_name_index(b"content-type"), Some(31));
    assert_eq!(static_name_index(b"grpc-status"), None);
}

#[test]
fn fuzz_entry_survives_every_prefix_of_the_rfc_blocks() {
    for step in REQUESTS.iter().chain(RESPONSES) {
        for dump in [step.plain, step.huffman] {
            let block = hex(dump);
            for end in 0..=block.len() {
                fuzz_hpack(&block[..end]);
                fuzz_hpack(&block[end..]);
            }
        }
    }
}
