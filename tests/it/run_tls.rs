//! End-to-end TLS: the library runs HTTPS and gRPC over TLS against the reference server with
//! a certificate generated here, and fails clearly on the wrong CA or a plain-text server.

use crate::common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::pki::Pki;
use common::*;
use inferperf::config::{CertFormat, Config, Protocol, TlsConfig};
use inferperf::server::TlsFiles;

fn tls_settings(ca: &std::path::Path, prefix: &'static str) -> TlsConfig {
    TlsConfig {
        ca_file: Some(ca.to_path_buf()),
        client_cert: None,
        client_key: None,
        verify_peer: true,
        verify_host: true,
        flag_prefix: prefix,
    }
}

fn tls_server(pki: &Pki) -> inferperf::server::ServerHandle {
    let files = TlsFiles {
        cert_chain: pki.server_cert.clone(),
        key: pki.server_key.clone(),
        client_ca: None,
    };
    start_grpc_server_with(Vec::new(), Some(files))
}

fn run_err(cfg: &Config) -> inferperf::error::Error {
    let mut out = Vec::new();
    let stop = Arc::new(AtomicBool::new(false));
    match inferperf::run::run(cfg, &mut out, stop) {
        Err(e) => e,
        Ok(res) => res.error.expect("the run fails"),
    }
}

#[test]
fn https_run_matches_the_server() {
    let pki = Pki::new("https");
    let server = tls_server(&pki);
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.tls = Some(tls_settings(&pki.ca, "--ssl-https"));
    cfg.request_count = 200;
    let (res, text) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 200);
    assert_eq!(model_counters(&server, "simple").infer_requests, 200);
    assert!(text.contains("Avg HTTP time"), "{text}");
}

#[test]
fn grpc_over_tls_matches_the_server() {
    let pki = Pki::new("grpcs");
    let server = tls_server(&pki);
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.tls = Some(tls_settings(&pki.ca, "--ssl-grpc"));
    cfg.request_count = 200;
    cfg.async_mode = true;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(res.points[0].client.request_count, 200);
    assert_eq!(model_counters(&server, "simple").infer_requests, 200);
}

#[test]
fn wrong_ca_fails_the_handshake_on_both_protocols() {
    let pki = Pki::new("wrong-ca");
    let server = tls_server(&pki);
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.ready_timeout_s = 0;
    cfg.tls = Some(tls_settings(&pki.other_ca, "--ssl-https"));
    let err = run_err(&cfg);
    assert!(err.msg.contains("UnknownIssuer"), "{}", err.msg);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.tls = Some(tls_settings(&pki.other_ca, "--ssl-grpc"));
    let err = run_err(&cfg);
    assert!(err.msg.contains("UnknownIssuer"), "{}", err.msg);
    assert_eq!(model_counters(&server, "simple").infer_requests, 0);
}

#[test]
fn tls_to_a_plain_text_server_says_so() {
    let pki = Pki::new("plain");
    let server = start_server();
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.ready_timeout_s = 0;
    cfg.tls = Some(tls_settings(&pki.ca, "--ssl-https"));
    let err = run_err(&cfg);
    assert!(err.msg.contains("plain-text"), "{}", err.msg);
}

#[test]
fn der_client_files_are_read_and_checked() {
    // A missing client key names its flag and file before any connection is made.
    let pki = Pki::new("der");
    let server = tls_server(&pki);
    let mut cfg = quick_config(&server, "simple", 40);
    let mut tls = tls_settings(&pki.ca, "--ssl-https");
    tls.client_cert = Some((pki.dir.join("none.der"), CertFormat::Der));
    tls.client_key = Some((pki.server_key.clone(), CertFormat::Pem));
    cfg.tls = Some(tls);
    let err = run_err(&cfg);
    assert!(err.msg.contains("--ssl-https"), "{}", err.msg);
    assert!(err.msg.contains("none.der"), "{}", err.msg);
}

/// A self-signed certificate with `CA:TRUE` (what `openssl req -x509` makes by default),
/// served by the reference server and given to the client as its own CA: trusted on both
/// protocols, as curl trusts it.
#[test]
fn a_self_signed_ca_certificate_is_its_own_ca() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = temp_dir("tls-own-ca");
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let mut params = CertificateParams::new(names).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    let (cert_pem, key_pem) = (dir.join("own.pem"), dir.join("own.key"));
    std::fs::write(&cert_pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    let files = TlsFiles {
        cert_chain: cert_pem.clone(),
        key: key_pem,
        client_ca: None,
    };
    let server = start_grpc_server_with(Vec::new(), Some(files));
    let mut cfg = quick_config(&server, "simple", 40);
    cfg.tls = Some(tls_settings(&cert_pem, "--ssl-https"));
    cfg.request_count = 50;
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    cfg.protocol = Protocol::Grpc;
    cfg.url = server.grpc_addr.unwrap().to_string();
    cfg.tls = Some(tls_settings(&cert_pem, "--ssl-grpc"));
    let (res, _) = run(&cfg);
    assert!(res.error.is_none(), "{:?}", res.error);
    assert_eq!(model_counters(&server, "simple").infer_requests, 100);
}
