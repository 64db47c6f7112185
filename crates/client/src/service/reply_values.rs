//! The values of a KServe v2 JSON output's `data`, read in place against its datatype: an
//! integer type takes integers within its range, a float type numbers whose magnitude the
//! type holds (a JSON number past it would read as infinity), BOOL takes `true`/`false`,
//! BYTES strings. A reply whose value cannot be the datatype's is invalid, naming the output,
//! the element and the value.

use super::reply_check::{shown, Bad};
use super::reply_json::{as_i64, as_u64, Json};

/// Past this magnitude a number rounds to infinity in FP16 (65504 is its largest finite
/// value; halfway to the next power of two rounds up).
const FP16_OVERFLOW: f64 = 65520.0;
/// The same for BF16: (2 - 2^-8) * 2^127.
const BF16_OVERFLOW: f64 = 3.396_177_530_480_259_4e38;

/// What one element of a datatype may be.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer in `min..=max` (`max` as u64, so UINT64 fits).
    Int {
        min: i64,
        max: u64,
    },
    /// A number below `overflow` in magnitude (`None`: finite as an f64, FP32: finite as an
    /// f32).
    Float(FloatRange),
    Bool,
    Bytes,
    /// Not a datatype: counted, not checked (the size check names the datatype).
    Unknown,
}

#[derive(Clone, Copy)]
enum FloatRange {
    Fp64,
    Fp32,
    Below(f64),
}

fn kind_of(datatype: &[u8]) -> Kind {
    let int = |min: i64, max: u64| Kind::Int { min, max };
    match datatype {
        b"BOOL" => Kind::Bool,
        b"BYTES" => Kind::Bytes,
        b"INT8" => int(i8::MIN.into(), i8::MAX as u64),
        b"INT16" => int(i16::MIN.into(), i16::MAX as u64),
        b"INT32" => int(i32::MIN.into(), i32::MAX as u64),
        b"INT64" => int(i64::MIN, i64::MAX as u64),
        b"UINT8" => int(0, u8::MAX.into()),
        b"UINT16" => int(0, u16::MAX.into()),
        b"UINT32" => int(0, u32::MAX.into()),
        b"UINT64" => int(0, u64::MAX),
        b"FP16" => Kind::Float(FloatRange::Below(FP16_OVERFLOW)),
        b"BF16" => Kind::Float(FloatRange::Below(BF16_OVERFLOW)),
        b"FP32" => Kind::Float(FloatRange::Fp32),
        b"FP64" => Kind::Float(FloatRange::Fp64),
        _ => Kind::Unknown,
    }
}

/// The output being read, for messages.
struct Output<'a> {
    name: &'a str,
    datatype: &'a [u8],
    kind: Kind,
}

/// The elements of `data` (a value already syntax-checked: a scalar or nested arrays), each
/// checked against `datatype`; `name` is the output's.
pub(crate) fn data_elements(data: &[u8], datatype: &[u8], name: &str) -> Result<u64, Bad> {
    let out = Output {
        name,
        datatype,
        kind: kind_of(datatype),
    };
    let mut j = Json::new(data);
    let mut n = 0u64;
    elements(&mut j, &out, &mut n)?;
    Ok(n)
}

fn elements(j: &mut Json<'_>, out: &Output<'_>, n: &mut u64) -> Result<(), Bad> {
    if j.peek() == Some(b'[') {
        return j.array(|j, _| elements(j, out, n));
    }
    element(j, out, *n)?;
    *n += 1;
    Ok(())
}

/// One element, number `index` in the flattened data.
fn element(j: &mut Json<'_>, out: &Output<'_>, index: u64) -> Result<(), Bad> {
    let start = j.pos;
    let first = j.peek();
    let fits = match (out.kind, first) {
        (Kind::Unknown, _) => {
            j.value()?;
            true
        }
        (Kind::Bool, Some(b't' | b'f')) => j.value().is_ok(),
        (Kind::Bytes, Some(b'"')) => j.string().is_ok(),
        (Kind::Int { min, max }, Some(b'-' | b'0'..=b'9')) => int_fits(j.number()?, min, max),
        (Kind::Float(range), Some(b'-' | b'0'..=b'9')) => float_fits(j.number()?, range),
        _ => {
            j.value()?;
            false
        }
    };
    if fits {
        return Ok(());
    }
    let raw = String::from_utf8_lossy(j.slice(start));
    let datatype = String::from_utf8_lossy(out.datatype);
    Err(Bad::invalid(format!(
        "output {} has {} as element {index} of its {datatype} data, which {datatype} cannot hold",
        shown(out.name),
        shown(raw.trim())
    )))
}

/// An integer (no fraction or exponent) within `min..=max`.
fn int_fits(raw: &[u8], min: i64, max: u64) -> bool {
    match raw.strip_prefix(b"-") {
        Some(_) => as_i64(raw).is_some_and(|v| v >= min),
        None => as_u64(raw).is_some_and(|v| v <= max),
    }
}

/// A number the float type holds as a finite value.
fn float_fits(raw: &[u8], range: FloatRange) -> bool {
    // The raw text is an RFC 8259 number, which Rust's float grammar accepts; a number too
    // large for f64 parses as infinity.
    let Some(v) = std::str::from_utf8(raw)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
    else {
        return false;
    };
    match range {
        FloatRange::Fp64 => v.is_finite(),
        FloatRange::Fp32 => (v as f32).is_finite(),
        FloatRange::Below(overflow) => v.abs() < overflow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::fail::FailKind;

    fn count(data: &str, datatype: &str) -> Result<u64, String> {
        data_elements(data.as_bytes(), datatype.as_bytes(), "OUT").map_err(|b| {
            assert_eq!(b.kind, FailKind::Invalid);
            b.msg
        })
    }

    #[test]
    fn values_within_their_datatype_pass() {
        let cases = [
            ("[1,-2,[3,4]]", "INT8", 4),
            ("[-128,127]", "INT8", 2),
            ("[0,255]", "UINT8", 2),
            ("[-2147483648,2147483647]", "INT32", 2),
            ("[4294967295]", "UINT32", 1),
            ("[-9223372036854775808,9223372036854775807]", "INT64", 2),
            ("[18446744073709551615,0]", "UINT64", 2),
            ("[1.5,-2e3,0,3.4028234e38]", "FP32", 4),
            ("[1e308,-1.7976931348623157e308]", "FP64", 2),
            ("[65504,-65519.9]", "FP16", 2),
            ("[3.38e38]", "BF16", 1),
            ("[true,false]", "BOOL", 2),
            (r#"["a","\u00e9",""]"#, "BYTES", 3),
            ("7", "INT32", 1),
            ("[]", "INT32", 0),
            (r#"["x",1,null]"#, "INT33", 3),
        ];
        for (data, datatype, n) in cases {
            assert_eq!(count(data, datatype), Ok(n), "{datatype} {data}");
        }
    }

    #[test]
    fn values_outside_their_datatype_are_invalid() {
        let huge = format!("1{}", "0".repeat(4999));
        let cases = [
            ("[2147483648]", "INT32", "2147483648", 0),
            ("[0,-2147483649]", "INT32", "-2147483649", 1),
            (huge.as_str(), "INT32", &huge[..64], 0),
            ("[1.5]", "INT32", "1.5", 0),
            ("[1e3]", "INT64", "1e3", 0),
            ("[-1]", "UINT64", "-1", 0),
            ("[256]", "UINT8", "256", 0),
            (
                "[18446744073709551616]",
                "UINT64",
                "18446744073709551616",
                0,
            ),
            ("[3.5e38]", "FP32", "3.5e38", 0),
            (huge.as_str(), "FP32", &huge[..64], 0),
            (huge.as_str(), "FP64", &huge[..64], 0),
            ("[1,65520]", "FP16", "65520", 1),
            ("[3.4e38]", "BF16", "3.4e38", 0),
            ("[1]", "BOOL", "1", 0),
            ("[\"true\"]", "BOOL", "\"true\"", 0),
            ("[5]", "BYTES", "5", 0),
            ("[null]", "FP32", "null", 0),
            ("[[1],[\"2\"]]", "INT32", "\"2\"", 1),
        ];
        for (data, datatype, shown_value, index) in cases {
            let msg = count(data, datatype).expect_err(data);
            let want = format!("output OUT has {shown_value}");
            assert!(msg.starts_with(&want), "{datatype} {data}: {msg}");
            let want = format!("as element {index} of its {datatype} data");
            assert!(msg.contains(&want), "{msg}");
        }
        // A value longer than the quote limit is cut.
        let msg = count(&huge, "INT32").unwrap_err();
        assert!(msg.len() < 200, "{msg}");
        assert!(
            msg.contains("...") && msg.ends_with("which INT32 cannot hold"),
            "{msg}"
        );
    }
}
