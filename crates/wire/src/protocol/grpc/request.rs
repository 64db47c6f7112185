//! The HPACK block of a gRPC call's HEADERS frame. A method is either a full call path
//! (`/<package>.<service>/<method>`) or the name of a method of the KServe v2 inference
//! service whose messages are `pb::inference`.

use super::hpack::Encoder;

/// Path prefix of the KServe v2 inference service's methods (Triton's gRPC API).
pub const SERVICE_PATH: &str = "/inference.GRPCInferenceService/";

/// The HPACK block of a request's HEADERS frame, encoded once: pseudo-headers, the gRPC
/// content type, `te: trailers`, and `-H` headers as metadata (names lower-cased).
pub fn request_headers(authority: &str, method: &str, metadata: &[(String, String)]) -> Vec<u8> {
    call_headers(authority, method, metadata, false, None)
}

/// `request_headers` for a load call: `:scheme https` over TLS, and `grpc-encoding` when
/// request messages are compressed.
pub fn call_headers(
    authority: &str,
    method: &str,
    metadata: &[(String, String)],
    tls: bool,
    encoding: Option<&str>,
) -> Vec<u8> {
    let enc = Encoder::new();
    let mut block = Vec::new();
    // A method starting with '/' is a full call path (any gRPC service); otherwise it names
    // a method of the inference service.
    let path = if method.starts_with('/') {
        method.to_string()
    } else {
        format!("{SERVICE_PATH}{method}")
    };
    let scheme = if tls { "https" } else { "http" };
    let mut fields = vec![
        (":method", "POST"),
        (":scheme", scheme),
        (":path", path.as_str()),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    if let Some(encoding) = encoding {
        fields.push(("grpc-encoding", encoding));
    }
    for (name, value) in fields {
        enc.encode_literal_without_indexing(&mut block, name.as_bytes(), value.as_bytes());
    }
    for (name, value) in metadata {
        enc.encode_literal_without_indexing(
            &mut block,
            name.to_ascii_lowercase().as_bytes(),
            value.as_bytes(),
        );
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grpc::hpack::Decoder;

    #[test]
    fn call_headers_name_scheme_and_encoding() {
        let block = call_headers("h:1", "ModelStreamInfer", &[], true, Some("gzip"));
        let mut got = Vec::new();
        Decoder::new()
            .decode(&block, |n, v| {
                got.push((n.to_vec(), v.to_vec()));
            })
            .unwrap();
        let has = |n: &[u8], v: &[u8]| got.iter().any(|(a, b)| a == n && b == v);
        assert!(has(b":scheme", b"https"));
        assert!(has(
            b":path",
            b"/inference.GRPCInferenceService/ModelStreamInfer"
        ));
        assert!(has(b"grpc-encoding", b"gzip"));
        let plain = call_headers("h:1", "ModelInfer", &[], false, None);
        let mut names = Vec::new();
        Decoder::new()
            .decode(&plain, |n, _| names.push(n.to_vec()))
            .unwrap();
        assert!(!names.iter().any(|n| n == b"grpc-encoding"));
    }

    #[test]
    fn request_headers_decode_to_grpc_headers_and_metadata() {
        let block = request_headers(
            "127.0.0.1:8001",
            "ModelInfer",
            &[("X-Token".into(), "abc".into())],
        );
        let mut got = Vec::new();
        Decoder::new()
            .decode(&block, |n, v| {
                got.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        let want = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/inference.GRPCInferenceService/ModelInfer"),
            (":authority", "127.0.0.1:8001"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("x-token", "abc"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
