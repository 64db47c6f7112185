//! Client TLS configuration: trust roots, client certificate, peer/host verification and
//! ALPN, turned once per run into a shared `rustls::ClientConfig` (ring provider).
//!
//! Every error names the command-line flag and the file it came from, so a user can fix the
//! right argument without reading a TLS stack trace.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{SignatureScheme, ALL_VERSIONS};

use super::tcp::os_message;
use crate::error::{Error, Result};

/// The system CA bundle used when no CA file is given and `SSL_CERT_FILE` is not set.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Encoding of a client certificate or key file (`--ssl-https-*-type PEM|DER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemOrDer {
    Pem,
    Der,
}

/// What the user asked for on the command line, for one protocol (gRPC or HTTPS).
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// Trusted roots; `None`: the system bundle (`SSL_CERT_FILE`, else [`SYSTEM_CA_BUNDLE`]).
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<(PathBuf, PemOrDer)>,
    pub client_key: Option<(PathBuf, PemOrDer)>,
    /// false: accept any certificate (curl `VERIFYPEER=0`).
    pub verify_peer: bool,
    /// false: the chain is checked, the name is not (curl `VERIFYHOST=0`).
    pub verify_host: bool,
    /// ALPN protocols offered, most preferred first (`b"h2"`, `b"http/1.1"`).
    pub alpn: Vec<Vec<u8>>,
    /// `"--ssl-grpc"` or `"--ssl-https"`: picks the flag names used in messages.
    pub flag_prefix: &'static str,
}

impl TlsOptions {
    /// The run's `--ssl-*` settings, offering `alpn` (`b"h2"` for gRPC, `b"http/1.1"`).
    pub fn from_config(cfg: &crate::config::TlsConfig, alpn: &[&[u8]]) -> TlsOptions {
        let format = |f: crate::config::CertFormat| match f {
            crate::config::CertFormat::Pem => PemOrDer::Pem,
            crate::config::CertFormat::Der => PemOrDer::Der,
        };
        TlsOptions {
            ca_file: cfg.ca_file.clone(),
            client_cert: cfg.client_cert.clone().map(|(p, f)| (p, format(f))),
            client_key: cfg.client_key.clone().map(|(p, f)| (p, format(f))),
            verify_peer: cfg.verify_peer,
            verify_host: cfg.verify_host,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            flag_prefix: cfg.flag_prefix,
        }
    }

    /// Verify everything against the system roots, no client certificate.
    pub fn new(flag_prefix: &'static str, alpn: &[&[u8]]) -> TlsOptions {
        TlsOptions {
            ca_file: None,
            client_cert: None,
            client_key: None,
            verify_peer: true,
            verify_host: true,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            flag_prefix,
        }
    }
}

/// What a connection needs: the shared rustls config and the name to verify.
#[derive(Clone)]
pub struct TlsClient {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: ServerName<'static>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .field("alpn", &self.config.alpn_protocols)
            .finish()
    }
}

impl TlsClient {
    /// Builds the client config. `host`: the server's host name or IP address (brackets
    /// around an IPv6 address are allowed), checked against the certificate.
    pub fn new(opts: &TlsOptions, host: &str) -> Result<TlsClient> {
        let server_name = server_name(host)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(ALL_VERSIONS)
            .map_err(|e| Error::generic(format!("TLS setup failed: {e}")))?;
        let verifier = server_verifier(opts, &provider)?;
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match client_identity(opts, &provider)? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| Error::generic(format!("TLS client certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = opts.alpn.clone();
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
        })
    }

    /// The name the server certificate is checked against.
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.server_name
    }

    /// A fresh client session for one connection.
    pub(crate) fn session(&self) -> std::io::Result<rustls::ClientConnection> {
        rustls::ClientConnection::new(self.config.clone(), self.server_name.clone())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}

/// The host part of `host:port` or `[v6]:port` (brackets kept; [`TlsClient::new`] drops them).
pub fn host_of(address: &str) -> &str {
    if address.starts_with('[') {
        return match address.find(']') {
            Some(end) => &address[..=end],
            None => address,
        };
    }
    match address.rfind(':') {
        Some(colon) if address[..colon].contains(':') => address, // bare IPv6, no port
        Some(colon) => &address[..colon],
        None => address,
    }
}

fn server_name(host: &str) -> Result<ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| {
        Error::usage(format!(
            "server host '{host}' is neither a valid DNS name nor an IP address, so it cannot \
             be checked against a TLS certificate"
        ))
    })
}

/// Which file a message is about; maps to the flag name of each protocol.
#[derive(Clone, Copy)]
enum FileFlag {
    Ca,
    Cert,
    Key,
}

fn flag_name(prefix: &str, which: FileFlag) -> String {
    let suffix = match (prefix, which) {
        ("--ssl-grpc", FileFlag::Ca) => "-root-certifications-file",
        ("--ssl-grpc", FileFlag::Cert) => "-certificate-chain-file",
        (_, FileFlag::Ca) => "-ca-certificates-file",
        (_, FileFlag::Cert) => "-client-certificate-file",
        (_, FileFlag::Key) => "-private-key-file",
    };
    format!("{prefix}{suffix}")
}

/// "{flag} {file}: {why}", a usage error (bad input file, exit 99).
fn file_error(prefix: &str, which: FileFlag, path: &Path, why: impl fmt::Display) -> Error {
    Error::usage(format!(
        "{} {}: {why}",
        flag_name(prefix, which),
        path.display()
    ))
}

fn read_file(prefix: &str, which: FileFlag, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        file_error(
            prefix,
            which,
            path,
            format!("cannot read: {}", os_message(&e)),
        )
    })
}

/// Every certificate in a PEM file; an empty list is an error.
fn pem_certificates(
    prefix: &str,
    which: FileFlag,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = read_file(prefix, which, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, pem::Error>>()
        .map_err(|e| file_error(prefix, which, path, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(prefix, which, path, "no certificate found"));
    }
    Ok(certs)
}

/// The trusted roots: the CA file if given, else the system bundle.
fn root_store(opts: &TlsOptions) -> Result<RootCertStore> {
    if let Some(path) = &opts.ca_file {
        let mut roots = RootCertStore::empty();
        let prefix = opts.flag_prefix;
        for (i, cert) in pem_certificates(prefix, FileFlag::Ca, path)?
            .into_iter()
            .enumerate()
        {
            roots.add(cert).map_err(|e| {
                file_error(
                    prefix,
                    FileFlag::Ca,
                    path,
                    format!("certificate {}: {e}", i + 1),
                )
            })?;
        }
        return Ok(roots);
    }
    let (bundle, origin) = match std::env::var_os("SSL_CERT_FILE") {
        Some(file) if !file.is_empty() => (PathBuf::from(file), "SSL_CERT_FILE"),
        _ => (PathBuf::from(SYSTEM_CA_BUNDLE), "the system CA bundle"),
    };
    bundle_roots(&bundle, origin, opts.flag_prefix)
}

/// The usable certificates of a CA bundle; none is an error that says how to give a CA.
fn bundle_roots(bundle: &Path, origin: &str, prefix: &str) -> Result<RootCertStore> {
    let missing = |why: String| {
        Error::usage(format!(
            "{origin} {}: {why}; give the CA with {}",
            bundle.display(),
            flag_name(prefix, FileFlag::Ca)
        ))
    };
    let bytes =
        std::fs::read(bundle).map_err(|e| missing(format!("cannot read: {}", os_message(&e))))?;
    // A system bundle may hold a few certificates webpki cannot use; skip those.
    let parsed = CertificateDer::pem_slice_iter(&bytes).filter_map(|c| c.ok());
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(parsed);
    if added == 0 {
        return Err(missing("no certificate found".into()));
    }
    Ok(roots)
}

fn server_verifier(
    opts: &TlsOptions,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>> {
    let algorithms = provider.signature_verification_algorithms;
    if !opts.verify_peer {
        // A CA file given anyway must still be readable, as a typo deserves an error.
        if opts.ca_file.is_some() {
            root_store(opts)?;
        }
        return Ok(Arc::new(AcceptAnyCertificate { algorithms }));
    }
    let roots = Arc::new(root_store(opts)?);
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| Error::generic(format!("TLS verifier setup failed: {e}")))?;
    let given = match &opts.ca_file {
        Some(path) => pem_certificates(opts.flag_prefix, FileFlag::Ca, path)?,
        None => Vec::new(),
    };
    if opts.verify_host && given.is_empty() {
        return Ok(webpki);
    }
    Ok(Arc::new(WebPkiForgiving {
        inner: webpki,
        given,
        verify_host: opts.verify_host,
    }))
}

/// The client certificate chain and key, checked to belong together.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_identity(opts: &TlsOptions, provider: &CryptoProvider) -> Result<Option<Identity>> {
    let prefix = opts.flag_prefix;
    let ((cert_path, cert_kind), (key_path, key_kind)) = match (&opts.client_cert, &opts.client_key)
    {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) | (None, Some(_)) => {
            return Err(Error::usage(format!(
                "{} and {} must be given together",
                flag_name(prefix, FileFlag::Cert),
                flag_name(prefix, FileFlag::Key)
            )))
        }
    };
    let chain = match cert_kind {
        PemOrDer::Pem => pem_certificates(prefix, FileFlag::Cert, cert_path)?,
        PemOrDer::Der => vec![CertificateDer::from(read_file(
            prefix,
            FileFlag::Cert,
            cert_path,
        )?)],
    };
    let key = private_key(prefix, key_path, *key_kind)?;
    let signing_key = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| {
            file_error(
                prefix,
                FileFlag::Key,
                key_path,
                format!("unusable key: {e}"),
            )
        })?;
    // Parses the end-entity certificate and compares its public key with the private key's.
    CertifiedKey::new(chain.clone(), signing_key)
        .keys_match()
        .map_err(|e| {
            let why = match e {
                rustls::Error::InconsistentKeys(_) => {
                    format!("does not match the key in {}", key_path.display())
                }
                other => format!("not a usable certificate: {other}"),
            };
            file_error(prefix, FileFlag::Cert, cert_path, why)
        })?;
    Ok(Some((chain, key)))
}

fn private_key(prefix: &str, path: &Path, kind: PemOrDer) -> Result<PrivateKeyDer<'static>> {
    let bytes = read_file(prefix, FileFlag::Key, path)?;
    match kind {
        PemOrDer::Pem => PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
            let why = match e {
                pem::Error::NoItemsFound => "no private key found".to_string(),
                other => format!("bad PEM: {other}"),
            };
            file_error(prefix, FileFlag::Key, path, why)
        }),
        PemOrDer::Der => PrivateKeyDer::try_from(bytes)
            .map_err(|e| file_error(prefix, FileFlag::Key, path, format!("bad DER: {e}"))),
    }
}

/// `verify_peer = false`: any certificate is accepted, but the handshake signatures are
/// still checked (so the server proves it holds the key of the certificate it sent).
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A server certificate that is itself in the CA file is trusted as it is, as curl (OpenSSL)
/// trusts it, also when it is a CA certificate: a self-signed certificate made with
/// `CA:TRUE` and given as its own CA, which webpki refuses as an end entity
/// (`CaUsedAsEndEntity`). webpki checks a certificate's validity period before its basic
/// constraints, so that error means the certificate is current; the name is checked here
/// (unless `verify_host` is off), and the handshake signatures by `inner` as always.
///
/// With `verify_host` off, a name mismatch is forgiven too: webpki checks the chain before
/// the name, so a name error means the chain was good.
#[derive(Debug)]
struct WebPkiForgiving {
    inner: Arc<WebPkiServerVerifier>,
    /// The certificates of the CA file (none without one).
    given: Vec<CertificateDer<'static>>,
    verify_host: bool,
}

impl WebPkiForgiving {
    /// `end_entity`, refused by webpki only for being a CA certificate, is one of the CA
    /// file's own certificates and names the server.
    fn accepts(
        &self,
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
    ) -> std::result::Result<bool, rustls::Error> {
        if !self.given.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            return Ok(false);
        }
        if self.verify_host {
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
        }
        Ok(true)
    }
}

/// webpki's `CaUsedAsEndEntity`, which rustls passes on as an opaque "other" error.
fn is_ca_used_as_end_entity(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => {
            format!("{other:?}").contains("CaUsedAsEndEntity")
        }
        _ => false,
    }
}

impl ServerCertVerifier for WebPkiForgiving {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let verdict = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verdict {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.verify_host => Ok(ServerCertVerified::assertion()),
            Err(e) if is_ca_used_as_end_entity(&e) => {
                if self.accepts(end_entity, server_name)? {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
