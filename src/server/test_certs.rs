//! Test PKI (tests only; copy freely into other tests): a CA, a server certificate for
//! `localhost` and `127.0.0.1` signed by it, a client CA with a client certificate, and an
//! unrelated CA, generated with `rcgen` and written as PEM files into a private temp dir that
//! is removed on drop. `client_config` builds a rustls client trusting one of the CAs.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::tls::TlsFiles;

/// Which CA a test client trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The CA that signed the server certificate.
    ServerCa,
    /// A CA that signed nothing the server presents.
    OtherCa,
}

pub struct TestPki {
    pub dir: PathBuf,
    server_ca_pem: String,
    other_ca_pem: String,
    /// Client certificate and key (PEM), signed by the client CA.
    client_cert_pem: String,
    client_key_pem: String,
}

/// A CA: its certificate PEM and an issuer able to sign leaves.
fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, format!("inferperf test {name}"));
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

/// A leaf for `names` signed by `issuer`: (certificate PEM, key PEM).
fn new_leaf(names: &[&str], issuer: &Issuer<'_, KeyPair>) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let params = CertificateParams::new(names).expect("leaf params");
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem())
}

impl TestPki {
    /// Generates everything into `$TMPDIR/inferperf-pki-<tag>-<pid>`.
    pub fn new(tag: &str) -> TestPki {
        let dir = std::env::temp_dir().join(format!("inferperf-pki-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (server_ca_pem, server_ca) = new_ca("server CA");
        let (client_ca_pem, client_ca) = new_ca("client CA");
        let (other_ca_pem, other_ca) = new_ca("other CA");
        let (server_cert, server_key) = new_leaf(&["localhost", "127.0.0.1"], &server_ca);
        let (client_cert_pem, client_key_pem) = new_leaf(&["client"], &client_ca);
        let (_, other_key) = new_leaf(&["localhost"], &other_ca);
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect(name);
        write("server.pem", &server_cert);
        write("server.key", &server_key);
        write("client-ca.pem", &client_ca_pem);
        write("other.key", &other_key);
        TestPki {
            dir,
            server_ca_pem,
            other_ca_pem,
            client_cert_pem,
            client_key_pem,
        }
    }

    /// The server's files; `client_ca` = Some(()) requires client certificates.
    pub fn server_files(&self, client_ca: Option<()>) -> TlsFiles {
        TlsFiles {
            cert_chain: self.dir.join("server.pem"),
            key: self.dir.join("server.key"),
            client_ca: client_ca.map(|_| self.dir.join("client-ca.pem")),
        }
    }

    /// A private key that does not belong to the server certificate.
    pub fn other_key(&self) -> PathBuf {
        self.dir.join("other.key")
    }

    /// A client trusting `trust`, offering `alpn`, presenting the client certificate if asked.
    pub fn client_config(&self, trust: Trust, alpn: &[u8], with_cert: bool) -> Arc<ClientConfig> {
        let ca_pem = match trust {
            Trust::ServerCa => &self.server_ca_pem,
            Trust::OtherCa => &self.other_ca_pem,
        };
        let mut roots = RootCertStore::empty();
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM");
        roots.add(ca).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let mut config = if with_cert {
            let cert = CertificateDer::from_pem_slice(self.client_cert_pem.as_bytes()).unwrap();
            let key = PrivateKeyDer::from_pem_slice(self.client_key_pem.as_bytes()).unwrap();
            builder
                .with_client_auth_cert(vec![cert], key)
                .expect("client cert")
        } else {
            builder.with_no_client_auth()
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        Arc::new(config)
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
