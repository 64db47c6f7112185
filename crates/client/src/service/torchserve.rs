//! The `torchserve` service kind: each input step names a file (the
//! `TORCHSERVE_INPUT` pseudo-input); its contents are uploaded as the `data` part of a
//! `multipart/form-data` POST to `/predictions/<model>[/<version>]`. The whole request is
//! encoded once per step, so the hot path only copies bytes.

use std::path::Path;

use crate::error::{Error, Result};
use crate::protocol::http1::write_request;

/// The pseudo-input holding the path of the file to upload.
pub const TORCHSERVE_INPUT: &str = "TORCHSERVE_INPUT";
/// The name of the form part that carries the file (TorchServe reads `data` or `body`).
pub const PART_NAME: &str = "data";
/// Multipart boundary. It only has to be absent from the uploaded file; a file that contains
/// it is refused by [`multipart_body`] rather than sent broken.
const BOUNDARY: &str = "------------------------inferperf7d3c9a51e2b84f06";

/// `/predictions/<model>` or `/predictions/<model>/<version>`.
pub fn predictions_path(model: &str, version: &str) -> String {
    if version.is_empty() {
        format!("/predictions/{model}")
    } else {
        format!("/predictions/{model}/{version}")
    }
}

/// The `multipart/form-data` body with one part, `data`, holding `file` (named `file_name`).
pub fn multipart_body(file_name: &str, file: &[u8]) -> Result<Vec<u8>> {
    let delimiter = format!("--{BOUNDARY}");
    if file
        .windows(delimiter.len())
        .any(|w| w == delimiter.as_bytes())
    {
        return Err(Error::usage(format!(
            "{TORCHSERVE_INPUT} file '{file_name}' contains the multipart boundary inferperf uses"
        )));
    }
    // The file name goes into a quoted header parameter: quotes and line breaks would end it.
    let safe_name: String = file_name
        .chars()
        .map(|c| {
            if matches!(c, '"' | '\r' | '\n') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut body = Vec::with_capacity(file.len() + 256);
    body.extend_from_slice(delimiter.as_bytes());
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(
        format!(
            "Content-Disposition: form-data; name=\"{PART_NAME}\"; filename=\"{safe_name}\"\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(b"Content-Type: application/octet-stream\r\n\r\n");
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n{delimiter}--\r\n").as_bytes());
    Ok(body)
}

/// The complete bytes of one request uploading the file at `path`: `POST` with `Host`, the
/// multipart `Content-Type` (the user's `-H` headers follow), `Content-Length` and the body.
pub fn encode_request(
    host: &str,
    model: &str,
    version: &str,
    headers: &[(String, String)],
    path: &Path,
) -> Result<Vec<u8>> {
    let file = std::fs::read(path).map_err(|e| {
        Error::usage(format!(
            "{TORCHSERVE_INPUT}: cannot read file '{}': {e}",
            path.display()
        ))
    })?;
    let file_name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let body = multipart_body(&file_name, &file)?;
    let mut fields = Vec::with_capacity(headers.len() + 1);
    fields.push((
        "Content-Type".to_string(),
        format!("multipart/form-data; boundary={BOUNDARY}"),
    ));
    fields.extend(headers.iter().cloned());
    let mut out = Vec::with_capacity(body.len() + 256);
    write_request(
        &mut out,
        "POST",
        host,
        &predictions_path(model, version),
        &fields,
        &body,
    );
    Ok(out)
}

/// The export's `request_inputs` object: `{"TORCHSERVE_INPUT":"<path>"}`.
pub fn request_inputs_json(path: &Path) -> String {
    let text = serde_json::Value::String(path.display().to_string());
    format!("{{\"{TORCHSERVE_INPUT}\":{text}}}")
}

/// The export's `response_outputs` object: the answer's body as text, `{"response":".."}`.
pub fn response_outputs_json(body: &[u8]) -> String {
    let text = serde_json::Value::String(String::from_utf8_lossy(body).into_owned());
    format!("{{\"response\":{text}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_and_without_version() {
        let rows = [
            ("resnet", "", "/predictions/resnet"),
            ("resnet", "2", "/predictions/resnet/2"),
        ];
        for (model, version, want) in rows {
            assert_eq!(predictions_path(model, version), want);
        }
    }

    #[test]
    fn body_has_one_data_part_with_the_file() {
        let body = multipart_body("cat.jpg", b"\x00\x01img").unwrap();
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(&format!("--{BOUNDARY}\r\n")), "{text}");
        assert!(text.contains("name=\"data\"; filename=\"cat.jpg\"\r\n"));
        assert!(body
            .windows(9)
            .any(|w| w == b"\r\n\r\n\x00\x01img".as_slice()));
        assert!(text.ends_with(&format!("\r\n--{BOUNDARY}--\r\n")), "{text}");
    }

    #[test]
    fn a_file_holding_the_boundary_is_refused_and_names_are_sanitised() {
        let file = format!("x--{BOUNDARY}y");
        let err = multipart_body("f", file.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(TORCHSERVE_INPUT), "{err}");
        let body = multipart_body("a\"b\r\n", b"").unwrap();
        assert!(String::from_utf8_lossy(&body).contains("filename=\"a_b__\""));
    }

    #[test]
    fn request_has_head_and_body_length() {
        let dir = std::env::temp_dir().join(format!("inferperf-ts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("in.bin");
        std::fs::write(&file, b"12345").unwrap();
        let headers = [("X-Key".to_string(), "v".to_string())];
        let req = encode_request("h:8080", "m", "3", &headers, &file).unwrap();
        let text = String::from_utf8_lossy(&req);
        assert!(
            text.starts_with("POST /predictions/m/3 HTTP/1.1\r\n"),
            "{text}"
        );
        assert!(text.contains("multipart/form-data; boundary="), "{text}");
        assert!(text.contains("X-Key: v\r\n"), "{text}");
        let missing = encode_request("h", "m", "", &[], &dir.join("nope")).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
