//! The HPACK decoder's replay of repeated header blocks: identical blocks are decoded once, a
//! replayed block inserts into the dynamic table what a decode would, and a block whose fields
//! depend on the table is decoded again once the table changed.

use super::hpack::{Decoder, HpackError};
use super::hpack_tests::{decode, owned, table_of};

type Fields = Vec<(String, String)>;

/// nginx's gRPC response head (`:status`, `server`, `date`, `content-type`,
/// `content-length`) and trailers (`grpc-status`), as captured from its ModelInfer answers.
const NGINX_HEAD: &str = "887684aa6355e76197df3dbf4a09c5349fba82009c500fdc65db8d014c5a37ff\
                          5f8b1d75d0620d263d4c4d6564008a21ea496a4ad416a9933f82081a";
const NGINX_TRAILERS: &str = "00889acac8b21234da8f0130";

fn hex(digits: &str) -> Vec<u8> {
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// A literal field with incremental indexing and a new name, plain strings (RFC 7541 §6.2.1).
fn indexed_literal(name: &str, value: &str) -> Vec<u8> {
    let mut block = vec![0x40, name.len() as u8];
    block.extend_from_slice(name.as_bytes());
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
    block
}

#[test]
fn identical_blocks_are_decoded_once_and_replayed() {
    let (head, trailers) = (hex(NGINX_HEAD), hex(NGINX_TRAILERS));
    let mut decoder = Decoder::new();
    let first_head = decode(&mut decoder, &head).unwrap();
    let first_trailers = decode(&mut decoder, &trailers).unwrap();
    let names: Vec<&str> = first_head.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            ":status",
            "server",
            "date",
            "content-type",
            "content-length"
        ]
    );
    assert_eq!(first_head[0].1, "200");
    assert_eq!(first_head[3].1, "application/grpc");
    assert_eq!(first_trailers, owned(&[("grpc-status", "0")]));
    assert_eq!(decoder.full_decodes(), 2);
    for _ in 0..100 {
        assert_eq!(decode(&mut decoder, &head).unwrap(), first_head);
        assert_eq!(decode(&mut decoder, &trailers).unwrap(), first_trailers);
    }
    assert_eq!(
        decoder.full_decodes(),
        2,
        "head and trailers alternate, both kept"
    );
    // Each head adds its three incrementally indexed fields (server, date, content-type),
    // replayed or not: 101 heads fill the 4,096-byte table, the newest first.
    let newest: Fields = first_head[1..4].iter().rev().cloned().collect();
    assert_eq!(table_of(&decoder)[..3], newest[..]);
    assert_eq!(table_of(&decoder)[3..6], newest[..]);
    assert!(decoder.dynamic_table_size() > 4096 - 200);
}

#[test]
fn replayed_blocks_leave_the_table_a_decode_would() {
    let (head, trailers) = (hex(NGINX_HEAD), hex(NGINX_TRAILERS));
    // A 300-byte table holds two heads' entries; the values grow so evictions differ.
    let mut decoder = Decoder::with_limits(300, 64 * 1024);
    let mut reference = Decoder::with_limits(300, 64 * 1024);
    reference.set_replay(false);
    let grow = indexed_literal("x-grow", "0123456789");
    let use_newest = hex("be");
    for round in 0..20 {
        for block in [&head, &trailers, &head, &grow, &use_newest, &use_newest] {
            let ours = decode(&mut decoder, block);
            assert_eq!(ours, decode(&mut reference, block), "round {round}");
            assert_eq!(table_of(&decoder), table_of(&reference), "round {round}");
            assert_eq!(decoder.dynamic_table_size(), reference.dynamic_table_size());
        }
    }
    assert_eq!(reference.full_decodes(), 120);
    // The first round decodes the four distinct blocks; after that only the first 0xbe of a
    // round is decoded (the table changed since its last decode), the rest is replayed.
    assert_eq!(decoder.full_decodes(), 4 + 19);
}

#[test]
fn only_the_last_four_distinct_blocks_are_kept() {
    let statuses = ["200", "204", "206", "304", "400"];
    let blocks: Vec<Vec<u8>> = (0x88..=0x8c).map(|b| vec![b]).collect();
    let mut decoder = Decoder::new();
    for block in &blocks {
        decode(&mut decoder, block).unwrap();
    }
    assert_eq!(decoder.full_decodes(), 5);
    // The last four are kept, the first was replaced.
    for i in (1..5).rev() {
        let fields = decode(&mut decoder, &blocks[i]).unwrap();
        assert_eq!(fields, owned(&[(":status", statuses[i])]));
    }
    assert_eq!(decoder.full_decodes(), 5);
    assert_eq!(
        decode(&mut decoder, &blocks[0]).unwrap(),
        owned(&[(":status", "200")])
    );
    assert_eq!(decoder.full_decodes(), 6);
}

#[test]
fn a_replayed_block_with_incremental_indexing_inserts_again() {
    let block = indexed_literal("custom-key", "custom-header");
    let mut decoder = Decoder::new();
    for round in 1..=3 {
        assert_eq!(
            decode(&mut decoder, &block).unwrap(),
            owned(&[("custom-key", "custom-header")])
        );
        assert_eq!(
            decoder.full_decodes(),
            1,
            "static name, literal value: replayed"
        );
        assert_eq!(decoder.dynamic_table_len(), round, "inserted again");
    }
    assert_eq!(decoder.dynamic_table_size(), 3 * (10 + 13 + 32));
}

#[test]
fn a_block_that_reads_and_changes_the_table_is_decoded_every_time() {
    // 0xbe (the newest entry), then a literal with incremental indexing: each decode reads
    // the entry the previous one inserted.
    let mut block = hex("be");
    block.extend_from_slice(&indexed_literal("x-n", "1"));
    let mut decoder = Decoder::new();
    decode(&mut decoder, &indexed_literal("x-n", "0")).unwrap();
    for round in 1..=3 {
        let fields = decode(&mut decoder, &block).unwrap();
        let previous = if round == 1 { "0" } else { "1" };
        assert_eq!(fields, owned(&[("x-n", previous), ("x-n", "1")]));
        assert_eq!(decoder.full_decodes(), 1 + round);
    }
    assert_eq!(decoder.dynamic_table_len(), 4);
}

#[test]
fn a_table_change_between_identical_blocks_forces_a_real_decode() {
    // 0xbe: indexed field 62, the newest dynamic entry.
    let newest = hex("be");
    let mut decoder = Decoder::new();
    decode(&mut decoder, &indexed_literal("x-model", "first")).unwrap();
    assert_eq!(
        decode(&mut decoder, &newest).unwrap(),
        owned(&[("x-model", "first")])
    );
    assert_eq!(
        decode(&mut decoder, &newest).unwrap(),
        owned(&[("x-model", "first")])
    );
    assert_eq!(decoder.full_decodes(), 2, "second 0xbe replayed");

    decode(&mut decoder, &indexed_literal("x-model", "second")).unwrap();
    assert_eq!(
        decode(&mut decoder, &newest).unwrap(),
        owned(&[("x-model", "second")])
    );
    assert_eq!(decoder.full_decodes(), 4);

    // A size update to 0 in its own block empties the table: 0xbe is now an invalid index.
    assert_eq!(
        decode(&mut decoder, &hex("2088")).unwrap(),
        owned(&[(":status", "200")])
    );
    assert_eq!(decoder.dynamic_table_len(), 0);
    assert_eq!(
        decode(&mut decoder, &newest),
        Err(HpackError::InvalidIndex(62))
    );
}

#[test]
fn lowering_the_setting_invalidates_kept_blocks() {
    let newest = hex("be");
    let mut decoder = Decoder::new();
    decode(&mut decoder, &indexed_literal("x-model", "first")).unwrap();
    decode(&mut decoder, &newest).unwrap();
    decoder.set_header_table_size(0);
    assert_eq!(
        decode(&mut decoder, &newest),
        Err(HpackError::InvalidIndex(62))
    );
}

#[test]
fn size_updates_and_failed_blocks_are_not_kept() {
    let mut decoder = Decoder::new();
    let update = hex("3fe11f88"); // size update to 4096, then :status 200
    for round in 1..=2 {
        assert_eq!(
            decode(&mut decoder, &update).unwrap(),
            owned(&[(":status", "200")])
        );
        assert_eq!(decoder.full_decodes(), round);
    }
    // :status 200, then a truncated literal: the first field is reported, the block fails.
    let broken = hex("88400a");
    for round in 3..=4 {
        assert_eq!(decode(&mut decoder, &broken), Err(HpackError::Truncated));
        assert_eq!(decoder.full_decodes(), round);
    }
}

#[test]
fn long_blocks_are_always_decoded() {
    let value = "v".repeat(100);
    let mut block = Vec::new();
    for _ in 0..12 {
        // Literal without indexing, name `server` (static 54), plain 100-byte value.
        block.extend_from_slice(&[0x0f, 54 - 15, 100]);
        block.extend_from_slice(value.as_bytes());
    }
    assert!(block.len() > 1024);
    let mut decoder = Decoder::new();
    for round in 1..=2 {
        assert_eq!(decode(&mut decoder, &block).unwrap().len(), 12);
        assert_eq!(decoder.full_decodes(), round);
    }
}
