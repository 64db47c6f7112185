//! gRPC message compression (`grpc-encoding: gzip | deflate`), used once per input step when
//! the request bytes are built, and to read a compressed response message.
//!
//! gRPC's "deflate" is the zlib format (RFC 1950), "gzip" is RFC 1952.

use std::io::{Read, Write};

use flate2::read::{GzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};

use crate::error::{Error, Result};

/// gRPC message compression (`--grpc-compression-algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Deflate,
}

/// The `grpc-encoding` header value; `None` for no compression.
pub fn encoding_name(c: Compression) -> Option<&'static str> {
    match c {
        Compression::None => None,
        Compression::Gzip => Some("gzip"),
        Compression::Deflate => Some("deflate"),
    }
}

/// Compresses one message payload (without the 5-byte prefix).
pub fn compress(c: Compression, payload: &[u8]) -> Result<Vec<u8>> {
    let level = flate2::Compression::default();
    let out = match c {
        Compression::None => return Ok(payload.to_vec()),
        Compression::Gzip => {
            let mut e = GzEncoder::new(Vec::new(), level);
            e.write_all(payload).and_then(|_| e.finish())
        }
        Compression::Deflate => {
            let mut e = ZlibEncoder::new(Vec::new(), level);
            e.write_all(payload).and_then(|_| e.finish())
        }
    };
    out.map_err(|e| Error::generic(format!("compressing a gRPC message: {e}")))
}

/// Decompresses a message flagged compressed with `encoding` (the response's
/// `grpc-encoding`), refusing output larger than `limit` bytes.
pub fn decompress(encoding: &str, data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let cap = limit as u64 + 1;
    let read = match encoding {
        "gzip" => GzDecoder::new(data).take(cap).read_to_end(&mut out),
        "deflate" => ZlibDecoder::new(data).take(cap).read_to_end(&mut out),
        other => {
            return Err(Error::generic(format!(
                "compressed gRPC message with unsupported grpc-encoding '{other}'"
            )))
        }
    };
    read.map_err(|e| Error::generic(format!("bad {encoding} gRPC message: {e}")))?;
    if out.len() > limit {
        return Err(Error::generic(format!(
            "{encoding} gRPC message inflates past {limit} bytes"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_limits() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        for (c, name) in [
            (Compression::Gzip, "gzip"),
            (Compression::Deflate, "deflate"),
        ] {
            let packed = compress(c, &payload).unwrap();
            assert!(packed.len() < payload.len() / 4, "{name}: {}", packed.len());
            assert_eq!(decompress(name, &packed, 10_000).unwrap(), payload);
            let err = decompress(name, &packed, 9_999).unwrap_err();
            assert!(err.msg.contains("inflates past"), "{}", err.msg);
            assert!(decompress(name, &packed[..packed.len() / 2], 10_000).is_err());
        }
        // The two formats are not interchangeable.
        let gz = compress(Compression::Gzip, b"abc").unwrap();
        assert!(decompress("deflate", &gz, 100).is_err());
        assert!(decompress("br", &gz, 100).unwrap_err().msg.contains("'br'"));
        assert_eq!(compress(Compression::None, b"abc").unwrap(), b"abc");
        assert_eq!(encoding_name(Compression::Deflate), Some("deflate"));
        assert_eq!(encoding_name(Compression::None), None);
    }
}
