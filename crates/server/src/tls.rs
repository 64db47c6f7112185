//! Optional TLS for `inferperf serve`: PEM files into rustls server configs, and the HTTPS
//! front that terminates TLS and relays the bytes to the (cleartext, mio) HTTP listener.
//!
//! The HTTP server itself stays TLS-free: with TLS on it listens on an internal 127.0.0.1
//! ephemeral port, and this front (on the gRPC runtime) accepts on the public address, does
//! the handshake, then copies both ways. The extra hop costs a little latency on HTTPS only.
//! The HTTP loop's limits apply to the relayed connection; when it closes one, the front
//! closes the TLS connection too.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use inferperf_wire::error::{Error, Result};

/// A TLS handshake that has not finished after this long (or `--read-timeout`, if shorter) is
/// dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the HTTP loop has closed a relayed connection, what the client still sends is passed
/// on (and discarded there) for at most this long, so the answer is not reset away.
const RELAY_LINGER: Duration = Duration::from_secs(2);

/// PEM files for TLS on both ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server certificate chain, leaf first (`--tls-cert`).
    pub cert_chain: PathBuf,
    /// The server's private key, PKCS#8, PKCS#1 or SEC1 (`--tls-key`).
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by one of these CAs
    /// (`--tls-client-ca`).
    pub client_ca: Option<PathBuf>,
}

/// ALPN for the gRPC port.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN for the HTTP port.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

fn pem_error(flag: &str, path: &Path, what: impl std::fmt::Display) -> Error {
    Error::usage(format!("{flag} '{}': {what}", path.display()))
}

fn load_certs(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(flag, path, format!("cannot read: {e}")))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pem_error(flag, path, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_error(flag, path, "no CERTIFICATE found"));
    }
    Ok(certs)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server config from `files`, offering the `alpn` protocol. Errors name the flag and file.
pub fn server_config(files: &TlsFiles, alpn: &[u8]) -> Result<Arc<ServerConfig>> {
    let chain = load_certs("--tls-cert", &files.cert_chain)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        pem_error(
            "--tls-key",
            &files.key,
            format!("no usable private key: {e}"),
        )
    })?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::generic(format!("TLS setup: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in load_certs("--tls-client-ca", ca)? {
                roots
                    .add(cert)
                    .map_err(|e| pem_error("--tls-client-ca", ca, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| pem_error("--tls-client-ca", ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        pem_error(
            "--tls-key",
            &files.key,
            format!("does not match --tls-cert: {e}"),
        )
    })?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections on `listener` and relays each to the HTTP server at `backend`,
/// until the runtime stops. A connection must send its first byte and finish its handshake
/// within `first_byte` (`--read-timeout`) and [`HANDSHAKE_TIMEOUT`].
pub async fn front_http(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    backend: SocketAddr,
    first_byte: Duration,
) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let accepted = tokio::time::Instant::now();
            let due = accepted + first_byte.min(HANDSHAKE_TIMEOUT);
            // `readable` may return before a byte is there; a peek waits for one (or the end).
            if tokio::time::timeout_at(due, tcp.peek(&mut [0u8; 1]))
                .await
                .is_err()
            {
                return;
            }
            // Boxed: until the first byte the task holds only the socket, not the TLS state.
            Box::pin(handshake_and_relay(tcp, acceptor, backend, due)).await
        });
    }
}

/// The TLS handshake (by `due`), then the relay to the HTTP loop at `backend`.
async fn handshake_and_relay(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    backend: SocketAddr,
    due: tokio::time::Instant,
) {
    let handshake = tokio::time::timeout_at(due, acceptor.accept(tcp));
    let Ok(Ok(tls)) = handshake.await else {
        return;
    };
    let Ok(plain) = TcpStream::connect(backend).await else {
        return;
    };
    let _ = plain.set_nodelay(true);
    relay(tls, plain).await;
}

/// Copies both ways until both are done (half-closes are passed on), or, once the HTTP loop
/// has closed its side, for at most [`RELAY_LINGER`] more.
async fn relay(tls: tokio_rustls::server::TlsStream<TcpStream>, plain: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let (mut tls_in, mut tls_out) = tokio::io::split(tls);
    let (mut plain_in, mut plain_out) = plain.into_split();
    let upstream = async {
        let _ = tokio::io::copy(&mut tls_in, &mut plain_out).await;
        let _ = plain_out.shutdown().await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut plain_in, &mut tls_out).await;
        let _ = tls_out.shutdown().await;
    };
    tokio::pin!(upstream, downstream);
    tokio::select! {
        _ = &mut downstream => {
            let _ = tokio::time::timeout(RELAY_LINGER, upstream).await;
        }
        _ = &mut upstream => downstream.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certs::TestPki;

    #[test]
    fn config_errors_name_flag_and_file() {
        let pki = TestPki::new("cfgerr");
        let good = pki.server_files(None);
        assert!(server_config(&good, ALPN_H2).is_ok());
        let missing = pki.dir().join("missing.pem");
        let cases = [
            (
                TlsFiles {
                    cert_chain: missing.clone(),
                    ..good.clone()
                },
                "--tls-cert",
                "cannot read",
            ),
            (
                TlsFiles {
                    key: good.cert_chain.clone(),
                    ..good.clone()
                },
                "--tls-key",
                "no usable private key",
            ),
            (
                TlsFiles {
                    cert_chain: good.key.clone(),
                    ..good.clone()
                },
                "--tls-cert",
                "no CERTIFICATE",
            ),
            (
                TlsFiles {
                    key: pki.other_key(),
                    ..good.clone()
                },
                "--tls-key",
                "does not match",
            ),
            (
                TlsFiles {
                    client_ca: Some(missing),
                    ..good.clone()
                },
                "--tls-client-ca",
                "missing.pem",
            ),
        ];
        for (files, flag, want) in cases {
            let err = server_config(&files, ALPN_H2).unwrap_err();
            assert!(
                err.msg.starts_with(flag) && err.msg.contains(want),
                "{}",
                err.msg
            );
            assert_eq!(err.exit_code(), 99);
        }
    }
}
