//! The fuzz entry point of the HPACK decoder (`fuzz/` and the seed-corpus test call it).

use super::{Decoder, HpackError, DEFAULT_MAX_HEADER_LIST_SIZE};

/// Fuzz entry point: decodes `data` as header blocks on one decoder (`data` twice, its two
/// halves twice in turn, `data` again: exercising the dynamic table left by earlier blocks and
/// the replay of repeated ones) beside a decoder that never replays, which must give the same
/// results, fields and table after every block; then once with a small 256-byte table to
/// exercise eviction. Must never panic.
pub fn fuzz_hpack(data: &[u8]) {
    let mut decoder = Decoder::new();
    let mut reference = Decoder::new();
    reference.set_replay(false);
    let mut small = Decoder::with_limits(256, 4096);
    let (a, b) = data.split_at(data.len() / 2);
    for block in [data, data, a, b, a, b, data] {
        let (result, fields) = fuzz_decode(&mut decoder, block);
        let (reference_result, reference_fields) = fuzz_decode(&mut reference, block);
        assert_eq!((result, &fields), (reference_result, &reference_fields));
        let bytes_seen: usize = fields.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(bytes_seen <= DEFAULT_MAX_HEADER_LIST_SIZE);
        assert!(decoder.dynamic_table_size() <= decoder.dynamic_table_max_size());
        assert_eq!(decoder.dynamic_table_size(), reference.dynamic_table_size());
        assert_eq!(decoder.dynamic_table_len(), reference.dynamic_table_len());
        for i in 0..decoder.dynamic_table_len() {
            assert_eq!(decoder.dynamic_entry(i), reference.dynamic_entry(i));
        }
    }
    let _ = small.decode(data, |_, _| {});
    assert!(small.dynamic_table_size() <= 256);
}

type FuzzFields = Vec<(Vec<u8>, Vec<u8>)>;

fn fuzz_decode(decoder: &mut Decoder, data: &[u8]) -> (Result<(), HpackError>, FuzzFields) {
    let mut fields = Vec::new();
    let result = decoder.decode(data, |name, value| {
        fields.push((name.to_vec(), value.to_vec()))
    });
    (result, fields)
}
