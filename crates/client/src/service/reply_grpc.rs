//! gRPC replies checked by walking the protobuf wire format in place: a KServe
//! `ModelInferResponse` (model name, outputs, shapes against `raw_output_contents`), a
//! `ModelStreamInferResponse` around one, or any message's well-formedness.
//!
//! Field numbers (grpc_service.proto): ModelInferResponse{model_name=1, model_version=2,
//! id=3, parameters=4, outputs=5, raw_output_contents=6}; InferOutputTensor{name=1,
//! datatype=2, shape=3 (packed int64), parameters=4, contents=5};
//! ModelStreamInferResponse{error_message=1, infer_response=2}.

use super::pb_wire::{Fields, Val, WireErr};
use super::reply_check::{product, shown, Bad, Expect, Seen, SizeCheck};
use crate::measure::fail::FailKind;

/// Walks every field of a message (wire format only); groups are skipped.
fn walk(buf: &[u8], base: usize) -> Result<(), WireErr> {
    let mut f = Fields::new(buf, base);
    while let Some((field, val, _)) = f.next()? {
        if let Val::Group = val {
            f.skip_group(field, 1)?;
        }
    }
    Ok(())
}

/// The message of a wire fault in a reply that should be `message`.
fn not_protobuf(message: &str, path: &str, e: &WireErr) -> Bad {
    Bad::new(
        FailKind::NotProtobuf,
        format!(
            "reply is not a {message} protobuf (field {path}{} {} at byte {})",
            e.field, e.what, e.at
        ),
    )
}

/// A well-formed protobuf message named `message` (wire format only).
pub fn check_protobuf(message: &str, msg: &[u8]) -> Result<(), Bad> {
    walk(msg, 0).map_err(|e| not_protobuf(message, "", &e))
}

/// A fault in a field whose wire type or content is wrong for the schema.
fn wrong(field: u64, at: usize, what: &'static str) -> WireErr {
    WireErr { field, at, what }
}

/// A fault inside a nested message is reported against the top-level field holding it.
fn within(field: u64, e: WireErr) -> WireErr {
    WireErr { field, ..e }
}

/// A string field's bytes (wire type 2, UTF-8).
fn string(field: u64, val: Val<'_>, at: usize) -> Result<&str, WireErr> {
    let Val::Bytes(b) = val else {
        return Err(wrong(field, at, "has the wrong wire type for a string"));
    };
    std::str::from_utf8(b).map_err(|_| wrong(field, at, "is not UTF-8"))
}

/// One `ModelStreamInferResponse`: a non-empty `error_message` fails with its text
/// (`Status`); the `infer_response` is checked as a unary reply, except that a response
/// without outputs (a decoupled model's empty final response) needs none.
pub fn check_stream_response(exp: &Expect, msg: &[u8]) -> Result<(), Bad> {
    const NAME: &str = "ModelStreamInferResponse";
    let mut f = Fields::new(msg, 0);
    let mut inner = None;
    while let Some((field, val, at)) = f.next().map_err(|e| not_protobuf(NAME, "", &e))? {
        match (field, val) {
            (1, v) => {
                let text = string(field, v, at).map_err(|e| not_protobuf(NAME, "", &e))?;
                if !text.is_empty() {
                    return Err(Bad::new(FailKind::Status, text));
                }
            }
            (2, Val::Bytes(b)) => inner = Some((b, at)),
            (2, _) => {
                let e = wrong(2, at, "has the wrong wire type for a message");
                return Err(not_protobuf(NAME, "", &e));
            }
            (_, Val::Group) => f
                .skip_group(field, 1)
                .map_err(|e| not_protobuf(NAME, "", &e))?,
            _ => {}
        }
    }
    let (body, at) = inner.unwrap_or((&[], 0));
    infer_response(exp, body, at, true).map_err(|b| match b {
        Fault::Wire(e) => not_protobuf(NAME, "2.", &e),
        Fault::Bad(b) => b,
    })
}

/// One unary `ModelInferResponse`.
pub fn check_infer_response(exp: &Expect, msg: &[u8]) -> Result<(), Bad> {
    infer_response(exp, msg, 0, false).map_err(|b| match b {
        Fault::Wire(e) => not_protobuf("ModelInferResponse", "", &e),
        Fault::Bad(b) => b,
    })
}

/// A wire fault (worded by the caller, which knows the message) or a refused reply.
enum Fault {
    Wire(WireErr),
    Bad(Bad),
}

impl From<WireErr> for Fault {
    fn from(e: WireErr) -> Fault {
        Fault::Wire(e)
    }
}

impl From<Bad> for Fault {
    fn from(b: Bad) -> Fault {
        Fault::Bad(b)
    }
}

/// Checks a `ModelInferResponse` at offset `base` of the reply. `outputs_optional`: a
/// response without any output passes (stream responses).
fn infer_response(
    exp: &Expect,
    msg: &[u8],
    base: usize,
    outputs_optional: bool,
) -> Result<(), Fault> {
    let mut f = Fields::new(msg, base);
    let (mut outputs, mut raws) = (0usize, 0usize);
    while let Some((field, val, at)) = f.next()? {
        match (field, val) {
            (1, v) => {
                let name = string(field, v, at)?;
                if !name.is_empty() && name != exp.model {
                    return Err(Bad::invalid(format!(
                        "reply names model \"{}\", expected \"{}\"",
                        shown(name),
                        shown(&exp.model)
                    ))
                    .into());
                }
            }
            (2 | 3, v) => drop(string(field, v, at)?),
            (4, Val::Bytes(b)) => walk(b, at).map_err(|e| within(4, e))?,
            (5, Val::Bytes(b)) => {
                output_tensor(b, at).map_err(|e| within(5, e))?;
                outputs += 1;
            }
            (4 | 5, _) => {
                return Err(wrong(field, at, "has the wrong wire type for a message").into())
            }
            (6, Val::Bytes(_)) => raws += 1,
            (6, _) => return Err(wrong(field, at, "has the wrong wire type for bytes").into()),
            (_, Val::Group) => f.skip_group(field, 1)?,
            _ => {}
        }
    }
    if outputs == 0 && outputs_optional {
        return Ok(());
    }
    if raws != 0 && raws != outputs {
        return Err(Bad::new(
            FailKind::Length,
            format!("reply has {outputs} outputs but {raws} raw_output_contents"),
        )
        .into());
    }
    check_outputs(exp, msg, base, raws != 0)
}

/// Second pass: each output against its `raw_output_contents` entry (the i-th output's data
/// is the i-th entry), and every expected output present.
fn check_outputs(exp: &Expect, msg: &[u8], base: usize, raw: bool) -> Result<(), Fault> {
    let mut outs = Fields::new(msg, base);
    let mut raws = Fields::new(msg, base);
    let mut seen = Seen::default();
    while let Some((field, val, at)) = outs.next()? {
        let (5, Val::Bytes(tensor)) = (field, val) else {
            continue;
        };
        let t = output_tensor(tensor, at).map_err(|e| within(5, e))?;
        seen.mark(exp, |o| o == t.name);
        let data = if raw { next_raw(&mut raws)? } else { None };
        let dims = || t.dims();
        let shape = || shape_text(dims());
        let elements = product(dims()).map_err(|()| {
            Bad::invalid(format!(
                "output {} has shape {} with a negative dimension",
                shown(t.name),
                shape()
            ))
        })?;
        let check = SizeCheck {
            name: t.name,
            datatype: t.datatype.as_bytes(),
            shape: &shape,
            elements,
        };
        match data {
            // An output written to a shared memory region leaves its entry empty.
            Some([]) if exp.shm_outputs => {}
            Some(d) => check.binary(d.len() as u64, Some(d))?,
            None if t.contents || exp.shm_outputs => {}
            None => {
                return Err(Bad::invalid(format!(
                    "output {} has no data (no raw_output_contents, no contents)",
                    shown(t.name)
                ))
                .into())
            }
        }
    }
    match seen.missing(exp) {
        Some(name) => Err(Bad::invalid(format!("reply has no output {}", shown(name))).into()),
        None => Ok(()),
    }
}

/// The next `raw_output_contents` entry.
fn next_raw<'a>(raws: &mut Fields<'a>) -> Result<Option<&'a [u8]>, WireErr> {
    while let Some((field, val, _)) = raws.next()? {
        if let (6, Val::Bytes(b)) = (field, val) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// One `InferOutputTensor`, read in place.
struct Tensor<'a> {
    name: &'a str,
    datatype: &'a str,
    /// The tensor's bytes (the dims are read from its shape fields when needed).
    bytes: &'a [u8],
    contents: bool,
}

impl<'a> Tensor<'a> {
    /// The dims, from every shape field in order: packed (wire type 2) or one varint each.
    fn dims(&self) -> impl Iterator<Item = i64> + 'a {
        let mut f = Fields::new(self.bytes, 0);
        let mut packed = Fields::new(&[], 0);
        std::iter::from_fn(move || loop {
            if !packed.at_end() {
                return packed.varint(3).ok().map(|v| v as i64);
            }
            match f.next().ok()?? {
                (3, Val::Varint(v), _) => return Some(v as i64),
                (3, Val::Bytes(b), _) => packed = Fields::new(b, 0),
                _ => {}
            }
        })
    }
}

/// Reads an `InferOutputTensor` at `at`, checking its fields' wire types and the packed
/// shape's varints.
fn output_tensor(b: &[u8], at: usize) -> Result<Tensor<'_>, WireErr> {
    let mut f = Fields::new(b, at);
    let (mut name, mut datatype, mut contents) = ("", "", false);
    while let Some((field, val, vat)) = f.next()? {
        match (field, val) {
            (1, v) => name = string(1, v, vat)?,
            (2, v) => datatype = string(2, v, vat)?,
            (3, Val::Varint(_)) => {}
            (3, Val::Bytes(p)) => {
                let mut dims = Fields::new(p, vat);
                while !dims.at_end() {
                    dims.varint(3)?;
                }
            }
            (3, _) => return Err(wrong(3, vat, "has a shape of the wrong wire type")),
            (4 | 5, Val::Bytes(m)) => {
                walk(m, vat)?;
                contents |= field == 5;
            }
            (4 | 5, _) => return Err(wrong(field, vat, "has the wrong wire type for a message")),
            (_, Val::Group) => f.skip_group(field, 1)?,
            _ => {}
        }
    }
    Ok(Tensor {
        name,
        datatype,
        bytes: b,
        contents,
    })
}

/// Dims as `[2,16]` (failure path only).
fn shape_text(dims: impl Iterator<Item = i64>) -> String {
    let mut s = String::from("[");
    for (i, d) in dims.enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&d.to_string());
    }
    s.push(']');
    s
}
