//! Transport flags: `-i`, `-u`, `-H`, the gRPC options and the `--ssl-*` TLS settings.

use std::path::{Path, PathBuf};

use super::args::RunArgs;
use super::net::{parse_header, parse_url};
use crate::config::{CertFormat, Compression, Config, ParamValue, Protocol, TlsConfig};
use crate::error::{Error, Result};

/// The longest `--ready-timeout` (one day): beyond it the deadline is not a wait but a typo.
const MAX_READY_TIMEOUT_S: u64 = 86_400;

/// The longest `--request-timeout` or `--request-idle-timeout` (one day, in ms).
const MAX_REQUEST_TIMEOUT_MS: u64 = 86_400_000;
/// The largest `--max-response-bytes` (16 GiB): a body is held in memory whole.
const MAX_RESPONSE_BYTES: u64 = 16 << 30;

/// perf_analyzer's default server addresses per protocol.
const DEFAULT_HTTP_URL: &str = "localhost:8000";
const DEFAULT_GRPC_URL: &str = "localhost:8001";

/// `--request-timeout MS` or `--request-idle-timeout MS` (`flag`), from 1 ms to a day.
fn request_timeout(flag: &str, raw: &Option<String>) -> Result<Option<std::time::Duration>> {
    let Some(raw) = raw.as_deref() else {
        return Ok(None);
    };
    let ms = super::number::parse_in_range(flag, raw, 1, MAX_REQUEST_TIMEOUT_MS)?;
    Ok(Some(std::time::Duration::from_millis(ms)))
}

pub fn apply_transport(args: &RunArgs, config: &mut Config) -> Result<()> {
    if let Some(protocol) = args.protocol.as_deref() {
        config.protocol = match protocol.to_ascii_lowercase().as_str() {
            "http" => Protocol::Http,
            "grpc" => Protocol::Grpc,
            _ => {
                return Err(Error::usage(format!(
                    "Failed to parse -i (protocol). The value should be either HTTP or gRPC \
                     (got '{protocol}')."
                )))
            }
        };
    }
    let grpc = config.protocol == Protocol::Grpc;
    let mut https = false;
    config.url = match args.url.as_deref() {
        Some(url) => {
            let parsed = parse_url(url)?;
            if parsed.https && grpc {
                return Err(Error::usage(format!(
                    "Failed to parse -u. https:// is for -i http; gRPC over TLS takes host:port \
                     and --ssl-grpc-use-ssl (got '{}').",
                    crate::text::redact_url(url)
                )));
            }
            https = parsed.https;
            parsed.authority
        }
        None if grpc => DEFAULT_GRPC_URL.into(),
        None => DEFAULT_HTTP_URL.into(),
    };
    config.headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<_>>()?;
    if let Some(raw) = args.ready_timeout.as_deref() {
        config.ready_timeout_s =
            super::number::parse_in_range("--ready-timeout", raw, 0, MAX_READY_TIMEOUT_S)?;
    }
    config.request_timeout = request_timeout("--request-timeout", &args.request_timeout)?;
    config.request_idle_timeout =
        request_timeout("--request-idle-timeout", &args.request_idle_timeout)?;
    if let Some(raw) = args.max_response_bytes.as_deref() {
        let flag = "--max-response-bytes";
        let n = super::number::parse_in_range(flag, raw, 1, MAX_RESPONSE_BYTES)?;
        // At most 16 GiB: fits usize on the 64-bit targets inferperf builds for.
        config.max_response_bytes = usize::try_from(n).unwrap_or(usize::MAX);
    }
    apply_grpc_options(args, config)?;
    config.trace_settings = trace_settings(args)?;
    if let Some(spec) = &args.bls_composing_models {
        // Checked now so that a bad list is a usage error before any connection.
        crate::measure::server_stats::bls_composing_models(spec)?;
        config.bls_composing_models = Some(spec.clone());
    }
    config.tls = if grpc {
        grpc_tls(args)?
    } else {
        https_tls(args, https)?
    };
    Ok(())
}

/// `--streaming`, `--grpc-compression-algorithm`, `--request-parameter`: gRPC only.
fn apply_grpc_options(args: &RunArgs, config: &mut Config) -> Result<()> {
    let grpc = config.protocol == Protocol::Grpc;
    let only_grpc = |flag: &str| {
        Error::usage(format!(
            "{flag} is only supported with the gRPC protocol (-i grpc)."
        ))
    };
    if args.streaming {
        if !grpc && config.service_kind != crate::config::ServiceKind::TritonCApi {
            return Err(only_grpc("--streaming"));
        }
        if args.sync {
            return Err(Error::usage(
                "--streaming implies --async; it cannot be used with --sync.",
            ));
        }
        config.streaming = true;
        config.async_mode = true;
    }
    if let Some(raw) = args.grpc_compression_algorithm.as_deref() {
        if !grpc {
            return Err(only_grpc("--grpc-compression-algorithm"));
        }
        config.compression = match raw.to_ascii_lowercase().as_str() {
            "none" => Compression::None,
            "gzip" => Compression::Gzip,
            "deflate" => Compression::Deflate,
            _ => {
                return Err(Error::usage(format!(
                    "Failed to parse --grpc-compression-algorithm. The value should be none, \
                     gzip or deflate (got '{raw}')."
                )))
            }
        };
    }
    if !args.request_parameter.is_empty() && !grpc {
        return Err(only_grpc("--request-parameter"));
    }
    config.request_parameters = args
        .request_parameter
        .iter()
        .map(|raw| parse_request_parameter(raw))
        .collect::<Result<_>>()?;
    Ok(())
}

/// `name:value:type` with type bool|int|string; the value may itself contain colons.
pub fn parse_request_parameter(raw: &str) -> Result<(String, ParamValue)> {
    let bad = |why: &str| {
        Error::usage(format!(
            "Failed to parse --request-parameter. {why} (got '{raw}')."
        ))
    };
    let (rest, kind) = raw
        .rsplit_once(':')
        .ok_or_else(|| bad("Expected name:value:type"))?;
    let (name, value) = rest
        .split_once(':')
        .ok_or_else(|| bad("Expected name:value:type"))?;
    if name.is_empty() {
        return Err(bad("The parameter name is empty"));
    }
    let value = match kind.to_ascii_lowercase().as_str() {
        // perf_analyzer: true iff the value is "true".
        "bool" => ParamValue::Bool(value == "true"),
        "int" => ParamValue::Int(
            value
                .trim()
                .parse()
                .map_err(|_| bad("An int parameter needs a 64-bit integer value"))?,
        ),
        "string" => ParamValue::Str(value.to_string()),
        _ => return Err(bad("The type should be bool, int or string")),
    };
    Ok((name.to_string(), value))
}

/// The trace flags as Triton's setting keys, only those given.
fn trace_settings(args: &RunArgs) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(raw) = args.trace_level.as_deref() {
        let level = raw.to_ascii_uppercase();
        if !["OFF", "TIMESTAMPS", "TENSORS"].contains(&level.as_str()) {
            return Err(Error::usage(format!(
                "Failed to parse --trace-level. The value should be OFF, TIMESTAMPS or TENSORS \
                 (got '{raw}')."
            )));
        }
        out.push(("trace_level".to_string(), level));
    }
    let numbers = [
        ("--trace-rate", "trace_rate", &args.trace_rate, 0),
        ("--trace-count", "trace_count", &args.trace_count, -1),
        ("--log-frequency", "log_frequency", &args.log_frequency, 0),
    ];
    for (flag, key, raw, min) in numbers {
        if let Some(raw) = raw.as_deref() {
            let v: i64 = super::number::parse_at_least(flag, raw, min)?;
            out.push((key.to_string(), v.to_string()));
        }
    }
    Ok(out)
}

/// An existing file named by `flag`.
fn existing_file(flag: &str, raw: &Option<String>) -> Result<Option<PathBuf>> {
    let Some(path) = raw.as_deref() else {
        return Ok(None);
    };
    if path.is_empty() || !Path::new(path).is_file() {
        return Err(Error::usage(format!(
            "Failed to parse {flag}. The file '{path}' does not exist."
        )));
    }
    Ok(Some(PathBuf::from(path)))
}

fn grpc_tls(args: &RunArgs) -> Result<Option<TlsConfig>> {
    let https_flags = [
        &args.ssl_https_verify_peer,
        &args.ssl_https_verify_host,
        &args.ssl_https_ca_certificates_file,
        &args.ssl_https_client_certificate_file,
        &args.ssl_https_client_certificate_type,
        &args.ssl_https_private_key_file,
        &args.ssl_https_private_key_type,
    ];
    if https_flags.iter().any(|f| f.is_some()) {
        return Err(Error::usage(
            "The --ssl-https-* options are for -i http; use the --ssl-grpc-* options with gRPC.",
        ));
    }
    let ca_file = existing_file(
        "--ssl-grpc-root-certifications-file",
        &args.ssl_grpc_root_certifications_file,
    )?;
    let key = existing_file(
        "--ssl-grpc-private-key-file",
        &args.ssl_grpc_private_key_file,
    )?;
    let chain = existing_file(
        "--ssl-grpc-certificate-chain-file",
        &args.ssl_grpc_certificate_chain_file,
    )?;
    let any_file = ca_file.is_some() || key.is_some() || chain.is_some();
    if !args.ssl_grpc_use_ssl {
        if any_file {
            return Err(Error::usage(
                "The --ssl-grpc-* certificate options need --ssl-grpc-use-ssl.",
            ));
        }
        return Ok(None);
    }
    if key.is_some() != chain.is_some() {
        return Err(Error::usage(
            "--ssl-grpc-private-key-file and --ssl-grpc-certificate-chain-file go together.",
        ));
    }
    Ok(Some(TlsConfig {
        ca_file,
        client_cert: chain.map(|p| (p, CertFormat::Pem)),
        client_key: key.map(|p| (p, CertFormat::Pem)),
        verify_peer: true,
        verify_host: true,
        flag_prefix: "--ssl-grpc",
    }))
}

fn https_tls(args: &RunArgs, https: bool) -> Result<Option<TlsConfig>> {
    let grpc_flags = args.ssl_grpc_use_ssl
        || args.ssl_grpc_root_certifications_file.is_some()
        || args.ssl_grpc_private_key_file.is_some()
        || args.ssl_grpc_certificate_chain_file.is_some();
    if grpc_flags {
        return Err(Error::usage(
            "The --ssl-grpc-* options need -i grpc; for HTTPS use -u https://host:port and the \
             --ssl-https-* options.",
        ));
    }
    let verify_peer = match args.ssl_https_verify_peer.as_deref().map(str::trim) {
        None | Some("1") => true,
        Some("0") => false,
        Some(raw) => {
            return Err(Error::usage(format!(
                "Failed to parse --ssl-https-verify-peer. The value must be 0 or 1 (got '{raw}')."
            )))
        }
    };
    let verify_host = match args.ssl_https_verify_host.as_deref().map(str::trim) {
        None | Some("1") | Some("2") => true,
        Some("0") => false,
        Some(raw) => {
            return Err(Error::usage(format!(
                "Failed to parse --ssl-https-verify-host. The value must be 0, 1 or 2 (got \
                 '{raw}')."
            )))
        }
    };
    let ca_file = existing_file(
        "--ssl-https-ca-certificates-file",
        &args.ssl_https_ca_certificates_file,
    )?;
    let cert = existing_file(
        "--ssl-https-client-certificate-file",
        &args.ssl_https_client_certificate_file,
    )?;
    let key = existing_file(
        "--ssl-https-private-key-file",
        &args.ssl_https_private_key_file,
    )?;
    let cert_type = cert_format(
        "--ssl-https-client-certificate-type",
        &args.ssl_https_client_certificate_type,
    )?;
    let key_type = cert_format(
        "--ssl-https-private-key-type",
        &args.ssl_https_private_key_type,
    )?;
    if !https {
        let any = args.ssl_https_verify_peer.is_some()
            || args.ssl_https_verify_host.is_some()
            || ca_file.is_some()
            || cert.is_some()
            || key.is_some();
        if any {
            return Err(Error::usage(
                "The --ssl-https-* options need an https:// URL in -u.",
            ));
        }
        return Ok(None);
    }
    if key.is_some() != cert.is_some() {
        return Err(Error::usage(
            "--ssl-https-client-certificate-file and --ssl-https-private-key-file go together.",
        ));
    }
    Ok(Some(TlsConfig {
        ca_file,
        client_cert: cert.map(|p| (p, cert_type)),
        client_key: key.map(|p| (p, key_type)),
        verify_peer,
        verify_host,
        flag_prefix: "--ssl-https",
    }))
}

fn cert_format(flag: &str, raw: &Option<String>) -> Result<CertFormat> {
    match raw.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("PEM") => Ok(CertFormat::Pem),
        Some("DER") => Ok(CertFormat::Der),
        Some(_) => Err(Error::usage(format!(
            "Failed to parse {flag}. The value must be PEM or DER (got '{}').",
            raw.as_deref().unwrap_or_default()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_parameters() {
        let cases = [
            ("max_tokens:256:int", ("max_tokens", ParamValue::Int(256))),
            ("flag:true:bool", ("flag", ParamValue::Bool(true))),
            ("flag:yes:bool", ("flag", ParamValue::Bool(false))),
            ("s:a:b:string", ("s", ParamValue::Str("a:b".into()))),
            ("s::string", ("s", ParamValue::Str(String::new()))),
            ("n:-3:INT", ("n", ParamValue::Int(-3))),
        ];
        for (raw, (name, value)) in cases {
            assert_eq!(
                parse_request_parameter(raw).unwrap(),
                (name.to_string(), value),
                "{raw}"
            );
        }
        for (raw, needle) in [
            ("novalue", "name:value:type"),
            ("a:b", "name:value:type"),
            (":1:int", "name is empty"),
            ("n:x:int", "64-bit integer"),
            ("n:1:float", "bool, int or string"),
        ] {
            let err = parse_request_parameter(raw).unwrap_err();
            assert!(err.msg.contains(needle), "{raw}: {}", err.msg);
            assert!(err.msg.contains("--request-parameter"), "{raw}");
            assert_eq!(err.exit_code(), 99);
        }
    }
}
