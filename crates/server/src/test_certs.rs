//! Test PKI for the server's TLS tests: the crate's shared test certificates
//! (`transport::test_pki`) seen as the server's files, plus rustls clients trusting one CA or
//! another. Client certificates are signed by the same CA as the server's, which is also the
//! client CA the server checks against.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::tls::TlsFiles;
use inferperf_client::transport::test_pki::Pki;

/// Which CA a test client trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The CA that signed the server certificate.
    ServerCa,
    /// A CA that signed nothing the server presents.
    OtherCa,
}

pub struct TestPki {
    pki: Pki,
}

impl TestPki {
    /// Generates everything into a fresh temp dir named after `tag`.
    pub fn new(tag: &str) -> TestPki {
        TestPki {
            pki: Pki::new(&format!("srv-{tag}")),
        }
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &std::path::Path {
        &self.pki.dir
    }

    /// The server's files; `client_ca` = Some(()) requires client certificates.
    pub fn server_files(&self, client_ca: Option<()>) -> TlsFiles {
        TlsFiles {
            cert_chain: self.pki.server.cert_pem.clone(),
            key: self.pki.server.key_pem.clone(),
            client_ca: client_ca.map(|_| self.pki.ca_pem.clone()),
        }
    }

    /// A private key that does not belong to the server certificate.
    pub fn other_key(&self) -> PathBuf {
        self.pki.server_other_name.key_pem.clone()
    }

    /// A client trusting `trust`, offering `alpn`, presenting the client certificate if asked.
    pub fn client_config(&self, trust: Trust, alpn: &[u8], with_cert: bool) -> Arc<ClientConfig> {
        let ca_file = match trust {
            Trust::ServerCa => &self.pki.ca_pem,
            Trust::OtherCa => &self.pki.other_ca_pem,
        };
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(ca_file).expect("CA PEM"))
            .expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let mut config = if with_cert {
            let client = &self.pki.client;
            let key = PrivateKeyDer::from_pem_file(&client.key_pem).expect("client key");
            builder
                .with_client_auth_cert(vec![client.cert.clone()], key)
                .expect("client cert")
        } else {
            builder.with_no_client_auth()
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        Arc::new(config)
    }
}
