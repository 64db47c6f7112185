//! The `dynamic_grpc` service kind: any gRPC method, no .proto. Each input step's
//! `message_generator` shell command runs once at startup; its stdout holds pre-serialised
//! request messages, each framed as a 4-byte length in host byte order followed by that many
//! bytes. One request sends all of a step's messages on a new call to `/<--grpc-method>`,
//! closes the request side, and completes when the server ends the call (status checked).

use std::process::{Command, Stdio};

use crate::config::Compression;
use crate::error::{Error, Result};
use crate::protocol::grpc::compress::compress;
use crate::protocol::grpc::message::write_message;

/// The pseudo-input holding the shell command that prints a step's messages.
pub const MESSAGE_GENERATOR: &str = "message_generator";

/// Checks `--grpc-method pkg.Service/Method` and returns the call path `/pkg.Service/Method`.
pub fn method_path(method: &str) -> Result<String> {
    let m = method.trim().trim_start_matches('/');
    let valid = m.split_once('/').is_some_and(|(service, name)| {
        !service.is_empty() && !name.is_empty() && !name.contains('/') && !m.contains(' ')
    });
    if !valid {
        return Err(Error::usage(format!(
            "Failed to parse --grpc-method. Expected a fully qualified method \
             'package.Service/Method' (got '{method}')."
        )));
    }
    Ok(format!("/{m}"))
}

/// Runs `command` with `sh -c` and returns its stdout. A failed start or a non-zero exit is
/// an error naming the command (and its stderr).
pub fn run_generator(command: &str) -> Result<Vec<u8>> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            Error::usage(format!(
                "{MESSAGE_GENERATOR} '{command}': cannot run it: {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::usage(format!(
            "{MESSAGE_GENERATOR} '{command}' failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out.stdout)
}

/// Splits a generator's stdout into messages: `u32` length (host order) then the bytes,
/// repeated; a trailing short frame ends the list (as perf_analyzer stops at a short read).
pub fn split_messages(mut stdout: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while stdout.len() >= 4 {
        let len = u32::from_ne_bytes([stdout[0], stdout[1], stdout[2], stdout[3]]) as usize;
        let rest = &stdout[4..];
        if rest.len() < len {
            break;
        }
        out.push(&rest[..len]);
        stdout = &rest[len..];
    }
    out
}

/// The request body of one step: every message gRPC length-prefixed (compressed when
/// `compression` says so), back to back.
pub fn encode_messages(messages: &[&[u8]], compression: Compression) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(messages.iter().map(|m| m.len() + 5).sum());
    for msg in messages {
        let res = match compression {
            Compression::None => write_message(&mut out, msg, false),
            c => write_message(&mut out, &compress(c, msg)?, true),
        };
        res.map_err(|e| Error::usage(format!("{MESSAGE_GENERATOR} message: {e}")))?;
    }
    Ok(out)
}

/// The export's `request_inputs` object: `{"message_generator":"<command>"}`.
pub fn request_inputs_json(command: &str) -> String {
    let text = serde_json::Value::String(command.to_string());
    format!("{{\"{MESSAGE_GENERATOR}\":{text}}}")
}

/// The export's `response_outputs` object: the size of the last response message,
/// `{"response_bytes":N}` (the messages are opaque without their .proto).
pub fn response_outputs_json(body: &[u8]) -> String {
    format!("{{\"response_bytes\":{}}}", body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(msgs: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            out.extend_from_slice(&(m.len() as u32).to_ne_bytes());
            out.extend_from_slice(m);
        }
        out
    }

    #[test]
    fn method_paths() {
        let rows = [
            ("pkg.Svc/Method", Some("/pkg.Svc/Method")),
            ("/a.b.C/D", Some("/a.b.C/D")),
            ("Svc/M", Some("/Svc/M")),
            ("pkg.Svc", None),
            ("pkg.Svc/", None),
            ("/M", None),
            ("a/b/c", None),
            ("", None),
        ];
        for (raw, want) in rows {
            let got = method_path(raw).ok();
            assert_eq!(got.as_deref(), want, "{raw}");
        }
        let err = method_path("x").unwrap_err();
        assert!(err.to_string().contains("--grpc-method"));
    }

    #[test]
    fn messages_split_on_their_length_prefix() {
        let bytes = framed(&[b"ab", b"", b"cde"]);
        assert_eq!(split_messages(&bytes), vec![&b"ab"[..], b"", b"cde"]);
        let mut short = framed(&[b"ab"]);
        short.extend_from_slice(&9u32.to_ne_bytes());
        short.extend_from_slice(b"xy");
        assert_eq!(split_messages(&short), vec![&b"ab"[..]]);
        assert!(split_messages(b"\x01\x00").is_empty());
    }

    #[test]
    fn body_is_grpc_framed_messages() {
        let body = encode_messages(&[b"ab", b"c"], Compression::None).unwrap();
        assert_eq!(body, b"\x00\x00\x00\x00\x02ab\x00\x00\x00\x00\x01c");
        let gz = encode_messages(&[b"hello"], Compression::Gzip).unwrap();
        assert_eq!(gz[0], 1, "compressed flag");
    }

    #[test]
    fn generator_output_and_failures() {
        let out = run_generator("printf 'hi'").unwrap();
        assert_eq!(out, b"hi");
        let err = run_generator("echo oops >&2; exit 3").unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
        assert!(err.to_string().contains(MESSAGE_GENERATOR), "{err}");
    }
}
