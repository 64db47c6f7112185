//! Certificates for the TLS integration tests: a CA, a server certificate for `127.0.0.1`
//! and `localhost` signed by it, and an unrelated CA, written as PEM files.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

pub struct Pki {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

impl Pki {
    pub fn new(tag: &str) -> Pki {
        let dir = super::temp_dir(&format!("pki-{tag}"));
        let (ca_pem, issuer) = ca("inferperf integration CA");
        let (other_pem, _) = ca("inferperf unrelated CA");
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let params = CertificateParams::new(names).expect("server params");
        let key = KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write PEM");
            path
        };
        Pki {
            ca: write("ca.pem", &ca_pem),
            other_ca: write("other-ca.pem", &other_pem),
            server_cert: write("server.pem", &cert.pem()),
            server_key: write("server.key", &key.serialize_pem()),
            dir,
        }
    }
}
