//! KServe v2 tensor datatypes and shapes.

use crate::error::{Error, Result};

/// The datatypes of the KServe v2 protocol (and Triton's `TYPE_*` config names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    F32,
    F64,
    Bf16,
    Bytes,
}

const ALL: [(DataType, &str, usize); 14] = [
    (DataType::Bool, "BOOL", 1),
    (DataType::U8, "UINT8", 1),
    (DataType::U16, "UINT16", 2),
    (DataType::U32, "UINT32", 4),
    (DataType::U64, "UINT64", 8),
    (DataType::I8, "INT8", 1),
    (DataType::I16, "INT16", 2),
    (DataType::I32, "INT32", 4),
    (DataType::I64, "INT64", 8),
    (DataType::F16, "FP16", 2),
    (DataType::F32, "FP32", 4),
    (DataType::F64, "FP64", 8),
    (DataType::Bf16, "BF16", 2),
    (DataType::Bytes, "BYTES", 0),
];

impl DataType {
    /// Parses a v2 protocol name (`FP32`) or a model-config name (`TYPE_FP32`, `TYPE_STRING`).
    pub fn parse(name: &str) -> Result<DataType> {
        let n = name.strip_prefix("TYPE_").unwrap_or(name);
        let n = if n == "STRING" { "BYTES" } else { n };
        ALL.iter()
            .find(|(_, s, _)| *s == n)
            .map(|(d, _, _)| *d)
            .ok_or_else(|| Error::generic(format!("unknown tensor datatype '{name}'")))
    }

    /// The v2 protocol name, e.g. `FP32`.
    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|(d, _, _)| *d == self)
            .map(|(_, s, _)| *s)
            .unwrap_or("BYTES")
    }

    /// Bytes per element; 0 for BYTES, whose elements are variable length.
    pub fn size(self) -> usize {
        ALL.iter()
            .find(|(d, _, _)| *d == self)
            .map(|(_, _, z)| *z)
            .unwrap_or(0)
    }
}

/// One input tensor of a request, with its data already laid out as the wire wants it.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    pub name: String,
    pub datatype: DataType,
    /// Full shape sent to the server, including the batch dimension when the model batches.
    pub shape: Vec<i64>,
    /// Raw little-endian row-major bytes; BYTES elements are length-prefixed (4-byte LE).
    pub data: Vec<u8>,
}

/// Number of elements of a fully defined shape (an empty shape is a scalar: 1 element);
/// `None` for a negative (undefined) dim or a count that does not fit a `usize`. Shapes come
/// from servers and files: a wrapped product would make a wrong request out of garbage.
pub fn element_count(shape: &[i64]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d).ok()?;
        acc.checked_mul(d)
    })
}

/// Bytes of a fixed-size tensor of `shape`: elements times the element size (0 for BYTES,
/// whose size depends on its elements); `None` as for [`element_count`] or on overflow.
pub fn byte_size(datatype: DataType, shape: &[i64]) -> Option<usize> {
    element_count(shape)?.checked_mul(datatype.size())
}

/// Frames BYTES elements the way Triton does: a 4-byte little-endian length, then the bytes.
pub fn push_bytes_element(out: &mut Vec<u8>, elem: &[u8]) {
    out.extend_from_slice(&(elem.len() as u32).to_le_bytes());
    out.extend_from_slice(elem);
}

/// Splits a BYTES tensor buffer into its elements; `None` if the framing is broken.
pub fn split_bytes_elements(mut buf: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        if buf.len() < 4 {
            return None;
        }
        let n = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let rest = &buf[4..];
        if rest.len() < n {
            return None;
        }
        out.push(&rest[..n]);
        buf = &rest[n..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_spellings() {
        assert_eq!(DataType::parse("FP32").unwrap(), DataType::F32);
        assert_eq!(DataType::parse("TYPE_INT32").unwrap(), DataType::I32);
        assert_eq!(DataType::parse("TYPE_STRING").unwrap(), DataType::Bytes);
        assert!(DataType::parse("FP8").is_err());
        assert_eq!(DataType::Bf16.name(), "BF16");
        assert_eq!(DataType::I64.size(), 8);
    }

    #[test]
    fn counts_and_sizes_never_wrap() {
        assert_eq!(element_count(&[2, 3]), Some(6));
        assert_eq!(element_count(&[]), Some(1));
        assert_eq!(element_count(&[0, 7]), Some(0));
        assert_eq!(element_count(&[-1, 3]), None);
        assert_eq!(element_count(&[-2]), None);
        // 2^96 wraps to 0 in a plain product.
        let big = 1i64 << 32;
        assert_eq!(element_count(&[big, big, big]), None);
        assert_eq!(element_count(&[big, big]), None);
        assert_eq!(element_count(&[65536, 65536]), Some(1 << 32));
        assert_eq!(byte_size(DataType::F32, &[65536, 65536]), Some(1 << 34));
        assert_eq!(byte_size(DataType::F64, &[1 << 31, 1 << 30]), None);
        assert_eq!(byte_size(DataType::Bytes, &[4]), Some(0));
        assert_eq!(byte_size(DataType::I32, &[-1]), None);
    }

    #[test]
    fn bytes_framing_round_trips() {
        let mut b = Vec::new();
        push_bytes_element(&mut b, b"ab");
        push_bytes_element(&mut b, b"");
        assert_eq!(b, [2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0]);
        assert_eq!(
            split_bytes_elements(&b).unwrap(),
            vec![&b"ab"[..], &b""[..]]
        );
        assert!(split_bytes_elements(&b[..3]).is_none());
        assert!(split_bytes_elements(&[5, 0, 0, 0, 1]).is_none());
    }
}
