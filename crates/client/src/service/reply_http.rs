//! The KServe v2 HTTP infer reply, checked in place: a JSON object (the whole body, or the
//! first `Inference-Header-Content-Length` bytes) with `outputs`, each output's shape
//! against its data (JSON values against the datatype too), and the binary tail against the
//! declared `binary_data_size`s.

use std::borrow::Cow;

use super::reply_check::{product, shown, Bad, Expect, Seen, SizeCheck};
use super::reply_json::{as_i64, as_u64, decoded, str_eq, Json};
use super::reply_values::data_elements;
use crate::measure::fail::FailKind;

/// Checks one infer reply body against `exp`.
pub fn check_kserve_http(exp: &Expect, body: &[u8], header_len: Option<usize>) -> Result<(), Bad> {
    let (header, tail) = match header_len {
        Some(n) if n > body.len() => {
            return Err(Bad::new(
                FailKind::Length,
                format!(
                    "Inference-Header-Content-Length {n} exceeds the reply body's {} bytes",
                    body.len()
                ),
            ))
        }
        Some(n) => (&body[..n], Some(&body[n..])),
        None => (body, None),
    };
    let mut j = Json::new(header);
    if j.peek() != Some(b'{') {
        return Err(j.err("expected a JSON object"));
    }
    let mut reply = Reply {
        exp,
        tail,
        binary_total: 0,
        seen: Seen::default(),
    };
    j.object(|j, key| reply.member(j, key))?;
    let binary = match tail {
        Some(tail) => {
            j.end()?;
            tail
        }
        // Without the header length, binary data follows the JSON value directly.
        None => &header[j.pos..],
    };
    if u64::try_from(binary.len()).ok() != Some(reply.binary_total) {
        if tail.is_none() && reply.binary_total == 0 {
            return j.end();
        }
        return Err(Bad::new(
            FailKind::Length,
            format!(
                "the outputs declare {} bytes of binary data but {} bytes follow the JSON header",
                reply.binary_total,
                binary.len()
            ),
        ));
    }
    match reply.seen.missing(exp) {
        Some(name) => Err(Bad::invalid(format!("reply has no output {}", shown(name)))),
        None => Ok(()),
    }
}

/// The state of one reply's check.
struct Reply<'e, 'b> {
    exp: &'e Expect,
    /// The binary data after the JSON header, when its length is known up front.
    tail: Option<&'b [u8]>,
    /// Sum of the outputs' `binary_data_size` so far.
    binary_total: u64,
    seen: Seen,
}

/// One output object's fields, raw.
#[derive(Default)]
struct Output<'b> {
    name: Option<&'b [u8]>,
    datatype: Option<&'b [u8]>,
    shape: Option<&'b [u8]>,
    /// `data`, raw (its values are checked once the datatype is known).
    data: Option<&'b [u8]>,
    binary_size: Option<u64>,
}

impl<'b> Reply<'_, 'b> {
    fn member(&mut self, j: &mut Json<'b>, key: &'b [u8]) -> Result<(), Bad> {
        match key {
            b"model_name" => {
                let name = string_field(j, "model_name")?;
                if !str_eq(name, &self.exp.model) {
                    return Err(Bad::invalid(format!(
                        "reply names model \"{}\", expected \"{}\"",
                        shown(&decoded(name)),
                        shown(&self.exp.model)
                    )));
                }
                Ok(())
            }
            b"outputs" => {
                if j.peek() != Some(b'[') {
                    return Err(field_type(j.pos, "outputs", "array"));
                }
                j.array(|j, i| self.output(j, i))
            }
            _ => j.value(),
        }
    }

    fn output(&mut self, j: &mut Json<'b>, index: usize) -> Result<(), Bad> {
        if j.peek() != Some(b'{') {
            // Bad JSON is reported as such; a well-formed non-object is not an output.
            j.value()?;
            return Err(Bad::invalid(format!(
                "reply's outputs[{index}] is not an object"
            )));
        }
        let mut out = Output::default();
        j.object(|j, key| {
            let at = j.pos;
            match key {
                b"name" => out.name = Some(string_field(j, "name")?),
                b"datatype" => out.datatype = Some(string_field(j, "datatype")?),
                b"shape" => {
                    let start = j.pos;
                    j.array(|j, _| j.number().map(|_| ()))
                        .map_err(|_| field_type(at, "shape", "array of integers"))?;
                    out.shape = Some(j.slice(start));
                }
                b"data" => {
                    let start = j.pos;
                    j.value()?;
                    out.data = Some(j.slice(start));
                }
                b"parameters" if j.peek() == Some(b'{') => j.object(|j, key| {
                    if key != b"binary_data_size" {
                        return j.value();
                    }
                    let at = j.pos;
                    let n = j.number().ok().and_then(as_u64);
                    out.binary_size = Some(n.ok_or_else(|| {
                        field_type(at, "binary_data_size", "non-negative integer")
                    })?);
                    Ok(())
                })?,
                _ => j.value()?,
            }
            Ok(())
        })?;
        self.check_output(index, &out)
    }

    fn check_output(&mut self, index: usize, out: &Output<'b>) -> Result<(), Bad> {
        let missing =
            |field: &str| Bad::invalid(format!("reply's outputs[{index}] has no \"{field}\""));
        let raw_name = out.name.ok_or_else(|| missing("name"))?;
        let datatype = out.datatype.ok_or_else(|| missing("datatype"))?;
        let shape = out.shape.ok_or_else(|| missing("shape"))?;
        self.seen.mark(self.exp, |o| str_eq(raw_name, o));
        // A name without escapes is used in place (the common case: no allocation).
        let name: Cow<'_, str> = match std::str::from_utf8(raw_name) {
            Ok(plain) if !raw_name.contains(&b'\\') => Cow::Borrowed(plain),
            _ => Cow::Owned(decoded(raw_name)),
        };
        let dims = || shape_dims(shape);
        let elements = product(dims().map(|d| d.unwrap_or(-1))).map_err(|()| {
            Bad::invalid(format!(
                "output {} has shape {} with a negative or non-integer dimension",
                shown(&name),
                shape_text(shape)
            ))
        })?;
        let text = || shape_text(shape);
        let check = SizeCheck {
            name: &name,
            datatype,
            shape: &text,
            elements,
        };
        match (out.binary_size, out.data) {
            (Some(size), _) => {
                let off = self.binary_total;
                self.binary_total = off.checked_add(size).ok_or_else(|| {
                    Bad::new(FailKind::Length, "binary_data_size total overflows")
                })?;
                let data = self.tail.and_then(|t| {
                    let start = usize::try_from(off).ok()?;
                    t.get(start..start.checked_add(usize::try_from(size).ok()?)?)
                });
                check.binary(size, data)
            }
            (None, Some(data)) => check.json(data_elements(data, datatype, &name)?),
            (None, None) if self.exp.shm_outputs => Ok(()),
            (None, None) => Err(Bad::invalid(format!(
                "output {} has no data (neither \"data\" nor \"parameters.binary_data_size\")",
                shown(&name)
            ))),
        }
    }
}

/// A member that must be a string, raw.
fn string_field<'b>(j: &mut Json<'b>, field: &str) -> Result<&'b [u8], Bad> {
    if j.peek() != Some(b'"') {
        return Err(field_type(j.pos, field, "string"));
    }
    j.string()
}

/// A JSON shape array's dims (`None` for a dim that is not an integer).
fn shape_dims(raw: &[u8]) -> impl Iterator<Item = Option<i64>> + '_ {
    raw.split(|&b| matches!(b, b'[' | b']' | b','))
        .map(<[u8]>::trim_ascii)
        .filter(|d| !d.is_empty())
        .map(as_i64)
}

/// A JSON shape array as `[2,16]` (failure path only).
fn shape_text(raw: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(raw)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    shown(&text)
}

/// A field of the wrong JSON type.
fn field_type(at: usize, field: &str, want: &str) -> Bad {
    Bad::new(
        FailKind::Invalid,
        format!("reply's \"{field}\" is not a {want} (at byte {at})"),
    )
}
