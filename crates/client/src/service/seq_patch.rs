//! Sequence fields written into a pre-encoded infer request in place.
//!
//! Requests of a sequence model differ per send only in `sequence_id`, `sequence_start` and
//! `sequence_end`. A template is encoded once with fixed-width placeholders for the three;
//! the engine copies its bytes into the send buffer and `patch` overwrites the placeholders.
//! Nothing changes length, so Content-Length, Inference-Header-Content-Length, the gRPC
//! length prefix and the protobuf lengths stay valid, and nothing allocates.
//!
//! - HTTP: `"parameters":{"sequence_id":<id, left-aligned in 20 bytes, space padded>,
//!   "sequence_start":true |false,"sequence_end":true |false,...}` (spaces are JSON whitespace).
//! - gRPC: three `parameters` map entries appended at the end of the `ModelInferRequest`
//!   (protobuf accepts fields in any order, and a later map key wins): `int64_param` as a
//!   10-byte varint (redundant continuation bytes are valid protobuf), `bool_param` as one
//!   byte. With gzip/deflate the bulk of the message is compressed once and the entries ride
//!   in a final stored (uncompressed) deflate block; `patch` then updates the stream's
//!   checksum from a saved state over those few bytes only.

use std::ops::Range;

use flate2::{Compress, FlushCompress};

use super::{triton_grpc, triton_http};
use crate::config::{Compression, ParamValue, TensorFormat};
use crate::error::{Error, Result};
use crate::protocol::grpc::message::{write_message_prefix, MESSAGE_PREFIX_LEN};
use crate::tensor::InputTensor;

/// What one request of a sequence carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqFields {
    /// `sequence_id` parameter.
    pub id: u64,
    /// `sequence_start`: first request of the sequence.
    pub start: bool,
    /// `sequence_end`: last request of the sequence.
    pub end: bool,
    /// Input-data stream of the sequence (0 without JSON data).
    pub stream: usize,
    /// Step of that stream to send.
    pub step: usize,
}

/// Request parameter names of the sequence fields.
pub const SEQUENCE_ID: &str = "sequence_id";
pub const SEQUENCE_START: &str = "sequence_start";
pub const SEQUENCE_END: &str = "sequence_end";

/// Decimal digits of `u64::MAX`: the width of the HTTP id field (bytes).
const HTTP_ID_WIDTH: usize = 20;
/// An int64 written as a varint of maximal length (bytes).
const VARINT_WIDTH: usize = 10;

/// How the fields are spelled in the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// JSON text: padded decimal id, `true ` / `false`.
    Json,
    /// Protobuf: 10-byte varint id, bools as 0 / 1.
    Protobuf,
}

/// The checksum a compressed template must refresh after a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checksum {
    None,
    /// gzip's CRC-32 (little-endian trailer); `state` is the running CRC register after the
    /// uncompressed bytes that precede the patched tail.
    Crc32 {
        state: u32,
    },
    /// zlib's Adler-32 (big-endian trailer); `a`, `b` after the bytes preceding the tail.
    Adler32 {
        a: u32,
        b: u32,
    },
}

/// A pre-encoded infer request with room for the sequence fields.
#[derive(Debug, Clone)]
pub struct SeqTemplate {
    /// The request as sent (HTTP request, or length-prefixed gRPC message) with placeholder
    /// fields; copy it, then `patch` the copy.
    pub bytes: Vec<u8>,
    id_at: usize,
    start_at: usize,
    end_at: usize,
    spelling: Spelling,
    /// Uncompressed bytes stored verbatim after the compressed prefix (the three map
    /// entries); the checksum trailer follows at `tail.end`. Empty when not compressed.
    tail: Range<usize>,
    checksum: Checksum,
}

impl SeqTemplate {
    /// Writes `f`'s id and flags into `out`, a copy of `self.bytes` (other fields of `f` are
    /// the engine's). Panics if `out` is shorter than the template (a caller bug).
    pub fn patch(&self, out: &mut [u8], f: &SeqFields) {
        match self.spelling {
            Spelling::Json => {
                write_padded_decimal(&mut out[self.id_at..self.id_at + HTTP_ID_WIDTH], f.id);
                out[self.start_at..self.start_at + 5].copy_from_slice(json_bool(f.start));
                out[self.end_at..self.end_at + 5].copy_from_slice(json_bool(f.end));
            }
            Spelling::Protobuf => {
                write_varint10(&mut out[self.id_at..self.id_at + VARINT_WIDTH], f.id);
                out[self.start_at] = u8::from(f.start);
                out[self.end_at] = u8::from(f.end);
            }
        }
        let at = self.tail.end;
        match self.checksum {
            Checksum::None => {}
            Checksum::Crc32 { state } => {
                let crc = !crc32_update(state, &out[self.tail.clone()]);
                out[at..at + 4].copy_from_slice(&crc.to_le_bytes());
            }
            Checksum::Adler32 { a, b } => {
                let sum = adler32_update(a, b, &out[self.tail.clone()]);
                out[at..at + 4].copy_from_slice(&sum.to_be_bytes());
            }
        }
    }
}

/// JSON members of the placeholders, with the id's field 20 bytes wide.
fn http_placeholder() -> String {
    format!(
        "\"{SEQUENCE_ID}\":{:<HTTP_ID_WIDTH$},\"{SEQUENCE_START}\":false,\"{SEQUENCE_END}\":false",
        0
    )
}

/// `triton_http::encode_infer_request` with the sequence fields first in `parameters`.
pub fn http_template(
    host: &str,
    path: &str,
    inputs: &[InputTensor],
    outputs: &[String],
    input_format: TensorFormat,
    output_format: TensorFormat,
    extra_headers: &[(String, String)],
) -> Result<SeqTemplate> {
    let members = http_placeholder();
    let json =
        triton_http::infer_request_json(inputs, outputs, input_format, output_format, &members)?;
    let bytes =
        triton_http::assemble_infer_request(host, path, json, inputs, input_format, extra_headers)?;
    // Header values cannot hold CR LF, so the first blank line ends the head; the JSON
    // opens with `{"parameters":{` followed by the placeholders.
    let body_at = find(&bytes, b"\r\n\r\n").map(|i| i + 4);
    let opening = "{\"parameters\":{";
    let members_at = body_at.map(|b| b + opening.len());
    let found = members_at.filter(|&m| {
        bytes.get(m - opening.len()..m + members.len())
            == Some(format!("{opening}{members}").as_bytes())
    });
    let Some(members_at) = found else {
        return Err(Error::generic(
            "HTTP sequence request: placeholders not where expected",
        ));
    };
    let id_at = members_at + SEQUENCE_ID.len() + 3;
    let start_at = id_at + HTTP_ID_WIDTH + SEQUENCE_START.len() + 4;
    let end_at = start_at + 5 + SEQUENCE_END.len() + 4;
    Ok(SeqTemplate {
        bytes,
        id_at,
        start_at,
        end_at,
        spelling: Spelling::Json,
        tail: 0..0,
        checksum: Checksum::None,
    })
}

/// `triton_grpc::encode_infer_request` with the sequence fields as `parameters` entries.
/// `--request-parameter` values named like a sequence field are dropped (the sequence fields win).
pub fn grpc_template(
    model: &str,
    version: &str,
    inputs: &[InputTensor],
    outputs: &[String],
    params: &[(String, ParamValue)],
    compression: Compression,
) -> Result<SeqTemplate> {
    let kept: Vec<(String, ParamValue)> = params
        .iter()
        .filter(|(name, _)| ![SEQUENCE_ID, SEQUENCE_START, SEQUENCE_END].contains(&name.as_str()))
        .cloned()
        .collect();
    let framed = triton_grpc::encode_infer_request(
        model,
        version,
        inputs,
        outputs,
        &kept,
        Compression::None,
    )?;
    let message = framed
        .get(MESSAGE_PREFIX_LEN..)
        .ok_or_else(|| Error::generic("gRPC sequence request: no message"))?;
    let (entries, offsets) = sequence_entries();
    match compression {
        Compression::None => plain_grpc(message, &entries, offsets),
        c => compressed_grpc(c, message, &entries, offsets),
    }
}

/// Offsets of the id and the two flags inside the entries.
type EntryOffsets = (usize, usize, usize);

/// The three `parameters` map entries (field 4) with placeholder values.
fn sequence_entries() -> (Vec<u8>, EntryOffsets) {
    let mut out = Vec::with_capacity(80);
    // InferParameter { int64_param (2) = 10-byte varint }.
    let id_value = [&[0x10][..], &[0x80; VARINT_WIDTH - 1], &[0]].concat();
    let id_at = push_map_entry(&mut out, SEQUENCE_ID, &id_value) + 1;
    // InferParameter { bool_param (1) = false }.
    let start_at = push_map_entry(&mut out, SEQUENCE_START, &[0x08, 0]) + 1;
    let end_at = push_map_entry(&mut out, SEQUENCE_END, &[0x08, 0]) + 1;
    (out, (id_at, start_at, end_at))
}

/// Appends `parameters[key] = value` (value: encoded `InferParameter`); returns the offset
/// of the value in `out`. Every length here is under 128, so each fits one varint byte.
fn push_map_entry(out: &mut Vec<u8>, key: &str, value: &[u8]) -> usize {
    let entry_len = 2 + key.len() + 2 + value.len();
    out.extend_from_slice(&[0x22, entry_len as u8, 0x0a, key.len() as u8]);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&[0x12, value.len() as u8]);
    let value_at = out.len();
    out.extend_from_slice(value);
    value_at
}

fn plain_grpc(message: &[u8], entries: &[u8], offsets: EntryOffsets) -> Result<SeqTemplate> {
    let mut bytes = Vec::with_capacity(MESSAGE_PREFIX_LEN + message.len() + entries.len());
    write_message_prefix(&mut bytes, message.len() + entries.len(), false)?;
    bytes.extend_from_slice(message);
    let base = bytes.len();
    bytes.extend_from_slice(entries);
    Ok(SeqTemplate {
        bytes,
        id_at: base + offsets.0,
        start_at: base + offsets.1,
        end_at: base + offsets.2,
        spelling: Spelling::Protobuf,
        tail: 0..0,
        checksum: Checksum::None,
    })
}

/// gzip (RFC 1952) or zlib (RFC 1950, gRPC's "deflate") around: `message` deflated and
/// sync-flushed to a byte boundary, then `entries` as the final stored block.
fn compressed_grpc(
    c: Compression,
    message: &[u8],
    entries: &[u8],
    offsets: EntryOffsets,
) -> Result<SeqTemplate> {
    /// Header with no name, no mtime, OS "unknown".
    const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    /// Deflate, 32 KiB window, default level; (0x78 × 256 + 0x9c) is a multiple of 31.
    const ZLIB_HEADER: [u8; 2] = [0x78, 0x9c];
    let deflated = deflate_sync(message)?;
    let mut stream = Vec::with_capacity(deflated.len() + entries.len() + 32);
    stream.extend_from_slice(if c == Compression::Gzip {
        &GZIP_HEADER
    } else {
        &ZLIB_HEADER
    });
    stream.extend_from_slice(&deflated);
    // Stored block header: BFINAL=1, BTYPE=00, padding to the byte, LEN, NLEN (LE).
    let len = entries.len() as u16;
    stream.push(0x01);
    stream.extend_from_slice(&len.to_le_bytes());
    stream.extend_from_slice(&(!len).to_le_bytes());
    let tail_at = MESSAGE_PREFIX_LEN + stream.len();
    stream.extend_from_slice(entries);
    let checksum = match c {
        Compression::Gzip => Checksum::Crc32 {
            state: crc32_update(!0, message),
        },
        _ => {
            let (a, b) = adler32_state(message);
            Checksum::Adler32 { a, b }
        }
    };
    stream.extend_from_slice(&[0; 4]); // checksum, written by `patch`
    if c == Compression::Gzip {
        let size = (message.len() + entries.len()) as u32; // ISIZE is mod 2^32
        stream.extend_from_slice(&size.to_le_bytes());
    }
    let mut bytes = Vec::with_capacity(MESSAGE_PREFIX_LEN + stream.len());
    write_message_prefix(&mut bytes, stream.len(), true)?;
    bytes.extend_from_slice(&stream);
    let mut template = SeqTemplate {
        bytes: Vec::new(),
        id_at: tail_at + offsets.0,
        start_at: tail_at + offsets.1,
        end_at: tail_at + offsets.2,
        spelling: Spelling::Protobuf,
        tail: tail_at..tail_at + entries.len(),
        checksum,
    };
    // Fill in the checksum of the placeholder values so the template itself is valid.
    template.patch(&mut bytes, &placeholder_fields());
    template.bytes = bytes;
    Ok(template)
}

/// The values the placeholders hold (id 0, both flags false).
fn placeholder_fields() -> SeqFields {
    SeqFields {
        id: 0,
        start: false,
        end: false,
        stream: 0,
        step: 0,
    }
}

/// Raw deflate of `data`, ending in a sync flush (non-final blocks, byte aligned) so that
/// more blocks can follow.
fn deflate_sync(data: &[u8]) -> Result<Vec<u8>> {
    let mut deflater = Compress::new(flate2::Compression::default(), false);
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity());
        }
        let consumed = deflater.total_in() as usize;
        deflater
            .compress_vec(&data[consumed..], &mut out, FlushCompress::Sync)
            .map_err(|e| Error::generic(format!("compressing a gRPC message: {e}")))?;
        // The flush is complete once all input is in and the output was not filled up.
        if deflater.total_in() as usize == data.len() && out.len() < out.capacity() {
            return Ok(out);
        }
    }
}

fn json_bool(v: bool) -> &'static [u8; 5] {
    if v {
        b"true "
    } else {
        b"false"
    }
}

/// `v` in decimal, left-aligned, the rest of `field` spaces.
fn write_padded_decimal(field: &mut [u8], mut v: u64) {
    let mut digits = [0u8; HTTP_ID_WIDTH];
    let mut n = 0;
    loop {
        digits[HTTP_ID_WIDTH - 1 - n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    field.fill(b' ');
    field[..n].copy_from_slice(&digits[HTTP_ID_WIDTH - n..]);
}

/// `v` as a varint of exactly 10 bytes: nine with the continuation bit, then the top bit.
fn write_varint10(field: &mut [u8], v: u64) {
    for (i, byte) in field.iter_mut().enumerate().take(VARINT_WIDTH - 1) {
        *byte = ((v >> (7 * i)) & 0x7f) as u8 | 0x80;
    }
    field[VARINT_WIDTH - 1] = (v >> 63) as u8;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) lookup table.
const CRC_TABLE: [u32; 256] = crc_table();

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// Runs the CRC register over `data` (start from `!0`; the CRC is the final register's
/// complement).
fn crc32_update(state: u32, data: &[u8]) -> u32 {
    data.iter().fold(state, |c, &b| {
        CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

const ADLER_MOD: u32 = 65_521;

/// Adler-32 sums `(a, b)` after `data`.
fn adler32_state(data: &[u8]) -> (u32, u32) {
    /// Bytes that can be summed before `b` could overflow a u32 (zlib's NMAX).
    const CHUNK: usize = 5552;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(CHUNK) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= ADLER_MOD;
        b %= ADLER_MOD;
    }
    (a, b)
}

/// Adler-32 of the bytes summed into `(a, b)` followed by `tail` (a few bytes).
fn adler32_update(mut a: u32, mut b: u32, tail: &[u8]) -> u32 {
    for &byte in tail {
        a = (a + u32::from(byte)) % ADLER_MOD;
        b = (b + a) % ADLER_MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
#[path = "seq_patch_tests.rs"]
mod tests;
