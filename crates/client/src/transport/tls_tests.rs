use super::*;
use crate::transport::test_pki::Pki;
use std::path::{Path, PathBuf};

fn https(pki: &Pki) -> TlsOptions {
    TlsOptions {
        ca_file: Some(pki.ca_pem.clone()),
        ..TlsOptions::new("--ssl-https", &[b"http/1.1"])
    }
}

fn error_of(opts: &TlsOptions) -> String {
    match TlsClient::new(opts, "127.0.0.1") {
        Ok(_) => panic!("expected an error for {opts:?}"),
        Err(e) => e.msg,
    }
}

#[test]
fn builds_for_names_and_addresses() {
    let pki = Pki::new("build");
    let opts = https(&pki);
    for host in [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "::1",
        "inference.example.com",
    ] {
        let client = TlsClient::new(&opts, host).unwrap();
        assert_eq!(client.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
    let err = TlsClient::new(&opts, "not a host").unwrap_err();
    assert!(err.msg.contains("'not a host'"), "{}", err.msg);
}

#[test]
fn client_identity_in_pem_and_der() {
    let pki = Pki::new("identity");
    let pem = TlsOptions {
        client_cert: Some((pki.client.cert_pem.clone(), PemOrDer::Pem)),
        client_key: Some((pki.client.key_pem.clone(), PemOrDer::Pem)),
        ..https(&pki)
    };
    TlsClient::new(&pem, "127.0.0.1").unwrap();
    let der = TlsOptions {
        client_cert: Some((pki.client.cert_der.clone(), PemOrDer::Der)),
        client_key: Some((pki.client.key_der.clone(), PemOrDer::Der)),
        ..https(&pki)
    };
    assert!(TlsClient::new(&der, "127.0.0.1")
        .unwrap()
        .config
        .client_auth_cert_resolver
        .has_certs());
}

/// `base` changed by `edit`.
fn with(base: &TlsOptions, edit: impl FnOnce(&mut TlsOptions)) -> TlsOptions {
    let mut opts = base.clone();
    edit(&mut opts);
    opts
}

const NO_FILE: &str = "cannot read: No such file or directory";

/// A PKI and three bad files beside it: one missing, one PEM without a certificate, one
/// that is not DER.
struct BadFiles {
    pki: Pki,
    missing: PathBuf,
    empty: PathBuf,
    garbage: PathBuf,
}

impl BadFiles {
    fn new(name: &str) -> BadFiles {
        let pki = Pki::new(name);
        let missing = pki.dir.join("missing.pem");
        let empty = pki.dir.join("empty.pem");
        std::fs::write(&empty, "# nothing here\n").unwrap();
        let garbage = pki.dir.join("garbage.der");
        std::fs::write(&garbage, b"\x01\x02\x03 not der").unwrap();
        BadFiles {
            pki,
            missing,
            empty,
            garbage,
        }
    }
}

fn file(path: &Path, kind: PemOrDer) -> Option<(PathBuf, PemOrDer)> {
    Some((path.to_path_buf(), kind))
}

/// Checks each `(options, want)`: building a client fails with a message starting `want`.
fn check_errors(cases: Vec<(TlsOptions, String)>) {
    for (opts, want) in cases {
        let got = error_of(&opts);
        assert!(got.starts_with(&want), "got:  {got}\nwant: {want}");
    }
}

#[test]
fn ca_file_errors_name_the_flag_and_the_file() {
    let bad = BadFiles::new("errors-ca");
    let (m, e) = (bad.missing.display(), bad.empty.display());
    let base = https(&bad.pki);
    let grpc = with(&base, |o| o.flag_prefix = "--ssl-grpc");
    check_errors(vec![
        (
            with(&base, |o| o.ca_file = Some(bad.missing.clone())),
            format!("--ssl-https-ca-certificates-file {m}: {NO_FILE}"),
        ),
        (
            with(&base, |o| o.ca_file = Some(bad.empty.clone())),
            format!("--ssl-https-ca-certificates-file {e}: no certificate found"),
        ),
        (
            with(&grpc, |o| o.ca_file = Some(bad.empty.clone())),
            format!("--ssl-grpc-root-certifications-file {e}: no certificate found"),
        ),
    ]);
}

#[test]
fn client_identity_errors_name_the_flag_and_the_file() {
    let bad = BadFiles::new("errors-identity");
    let (missing, empty, garbage) = (&bad.missing, &bad.empty, &bad.garbage);
    let (m, e, g) = (missing.display(), empty.display(), garbage.display());
    let (client, server) = (&bad.pki.client, &bad.pki.server);
    let base = https(&bad.pki);
    let pem_pair = with(&base, |o| {
        o.client_cert = file(&client.cert_pem, PemOrDer::Pem);
        o.client_key = file(&client.key_pem, PemOrDer::Pem);
    });
    let der_pair = with(&base, |o| {
        o.client_cert = file(&client.cert_der, PemOrDer::Der);
        o.client_key = file(&client.key_der, PemOrDer::Der);
    });
    check_errors(vec![
        (
            with(&pem_pair, |o| {
                o.flag_prefix = "--ssl-grpc";
                o.client_key = file(missing, PemOrDer::Pem);
            }),
            format!("--ssl-grpc-private-key-file {m}: {NO_FILE}"),
        ),
        (
            with(&pem_pair, |o| {
                o.flag_prefix = "--ssl-grpc";
                o.client_cert = file(empty, PemOrDer::Pem);
            }),
            format!("--ssl-grpc-certificate-chain-file {e}: no certificate found"),
        ),
        (
            with(&pem_pair, |o| {
                o.client_key = file(&client.cert_pem, PemOrDer::Pem)
            }),
            format!(
                "--ssl-https-private-key-file {}: no private key found",
                client.cert_pem.display()
            ),
        ),
        (
            with(&der_pair, |o| o.client_key = file(garbage, PemOrDer::Der)),
            format!("--ssl-https-private-key-file {g}: bad DER: "),
        ),
        (
            with(&der_pair, |o| o.client_cert = file(garbage, PemOrDer::Der)),
            format!("--ssl-https-client-certificate-file {g}: not a usable certificate: "),
        ),
        (
            with(&pem_pair, |o| {
                o.client_key = file(&server.key_pem, PemOrDer::Pem)
            }),
            format!(
                "--ssl-https-client-certificate-file {}: does not match the key in {}",
                client.cert_pem.display(),
                server.key_pem.display()
            ),
        ),
        (
            with(&pem_pair, |o| o.client_key = None),
            "--ssl-https-client-certificate-file and --ssl-https-private-key-file must be \
             given together"
                .to_string(),
        ),
    ]);
}

#[test]
fn a_ca_file_is_checked_even_without_peer_verification() {
    let pki = Pki::new("noverify-ca");
    let opts = TlsOptions {
        ca_file: Some(pki.dir.join("typo.pem")),
        verify_peer: false,
        ..https(&pki)
    };
    assert!(error_of(&opts).contains("typo.pem: cannot read"));
    let opts = TlsOptions {
        ca_file: None,
        verify_peer: false,
        ..https(&pki)
    };
    TlsClient::new(&opts, "127.0.0.1").unwrap();
}

#[test]
fn system_bundle_errors_say_how_to_give_a_ca() {
    let pki = Pki::new("bundle");
    let missing = pki.dir.join("no-bundle.crt");
    let err = bundle_roots(&missing, "SSL_CERT_FILE", "--ssl-https").unwrap_err();
    assert_eq!(
        err.msg,
        format!(
            "SSL_CERT_FILE {}: cannot read: No such file or directory; give the CA with \
             --ssl-https-ca-certificates-file",
            missing.display()
        )
    );
    let empty = pki.dir.join("empty.crt");
    std::fs::write(&empty, "").unwrap();
    let err = bundle_roots(&empty, "the system CA bundle", "--ssl-grpc").unwrap_err();
    assert!(
        err.msg.ends_with(
            "no certificate found; give the CA with --ssl-grpc-root-certifications-file"
        ),
        "{}",
        err.msg
    );
    assert_eq!(
        bundle_roots(&pki.ca_pem, "x", "--ssl-https").unwrap().len(),
        1
    );
}

#[test]
fn hosts_of_addresses() {
    let cases = [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("localhost:443", "localhost"),
        ("[::1]:8001", "[::1]"),
        ("example.com", "example.com"),
        ("::1", "::1"),
    ];
    for (address, host) in cases {
        assert_eq!(host_of(address), host, "{address}");
    }
}

#[test]
fn flag_names_per_protocol() {
    let cases = [
        (
            "--ssl-grpc",
            FileFlag::Ca,
            "--ssl-grpc-root-certifications-file",
        ),
        (
            "--ssl-grpc",
            FileFlag::Cert,
            "--ssl-grpc-certificate-chain-file",
        ),
        ("--ssl-grpc", FileFlag::Key, "--ssl-grpc-private-key-file"),
        (
            "--ssl-https",
            FileFlag::Ca,
            "--ssl-https-ca-certificates-file",
        ),
        (
            "--ssl-https",
            FileFlag::Cert,
            "--ssl-https-client-certificate-file",
        ),
        ("--ssl-https", FileFlag::Key, "--ssl-https-private-key-file"),
    ];
    for (prefix, which, want) in cases {
        assert_eq!(flag_name(prefix, which), want);
    }
}

#[test]
fn options_from_the_run_config() {
    use crate::config::{CertFormat, TlsConfig};
    let cfg = TlsConfig {
        ca_file: Some("ca.pem".into()),
        client_cert: Some(("c.der".into(), CertFormat::Der)),
        client_key: Some(("k.pem".into(), CertFormat::Pem)),
        verify_peer: true,
        verify_host: false,
        flag_prefix: "--ssl-grpc",
    };
    let opts = TlsOptions::from_config(&cfg, &[b"h2"]);
    assert_eq!(opts.ca_file, Some(PathBuf::from("ca.pem")));
    assert_eq!(opts.client_cert, Some(("c.der".into(), PemOrDer::Der)));
    assert_eq!(opts.client_key, Some(("k.pem".into(), PemOrDer::Pem)));
    assert!(opts.verify_peer && !opts.verify_host);
    assert_eq!(opts.alpn, vec![b"h2".to_vec()]);
    assert_eq!(opts.flag_prefix, "--ssl-grpc");
}

/// A self-signed certificate for 127.0.0.1 and localhost; `ca`: with `CA:TRUE` (as
/// `openssl req -x509` makes one); `expired`: valid only in 2001. Written to `dir` as PEM.
fn self_signed(
    dir: &Path,
    name: &str,
    ca: bool,
    expired: bool,
) -> (CertificateDer<'static>, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let mut params = CertificateParams::new(sans).unwrap();
    if ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    if expired {
        params.not_before = rcgen::date_time_ymd(2001, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 12, 31);
    }
    let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, cert.pem()).unwrap();
    (cert.der().clone(), path)
}

/// What the verifier built for `opts` says of `cert` presented by `host`.
fn verdict(
    opts: &TlsOptions,
    cert: &CertificateDer<'_>,
    host: &str,
) -> std::result::Result<(), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = server_verifier(opts, &provider).unwrap();
    let name = ServerName::try_from(host.to_string()).unwrap();
    verifier
        .verify_server_cert(cert, &[], &name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

#[test]
fn a_self_signed_ca_certificate_given_as_its_own_ca_is_trusted() {
    let pki = Pki::new("own-ca");
    let (cert, pem) = self_signed(&pki.dir, "own", true, false);
    let own = TlsOptions {
        ca_file: Some(pem.clone()),
        ..TlsOptions::new("--ssl-https", &[b"http/1.1"])
    };
    assert_eq!(verdict(&own, &cert, "127.0.0.1"), Ok(()));
    assert_eq!(verdict(&own, &cert, "localhost"), Ok(()));
    // The name still counts, unless host verification is off.
    let wrong = verdict(&own, &cert, "elsewhere.example").unwrap_err();
    assert!(wrong.contains("NotValidForName"), "{wrong}");
    let no_host = with(&own, |o| o.verify_host = false);
    assert_eq!(verdict(&no_host, &cert, "elsewhere.example"), Ok(()));
    // In a file with other certificates too.
    let bundle = pki.dir.join("bundle.pem");
    let mut text = std::fs::read_to_string(&pki.ca_pem).unwrap();
    text.push_str(&std::fs::read_to_string(&pem).unwrap());
    std::fs::write(&bundle, text).unwrap();
    let in_bundle = with(&own, |o| o.ca_file = Some(bundle.clone()));
    assert_eq!(verdict(&in_bundle, &cert, "127.0.0.1"), Ok(()));
    // A self-signed certificate without CA:TRUE was trusted already; it still is.
    let (plain, plain_pem) = self_signed(&pki.dir, "plain", false, false);
    let plain_opts = with(&own, |o| o.ca_file = Some(plain_pem.clone()));
    assert_eq!(verdict(&plain_opts, &plain, "127.0.0.1"), Ok(()));
}

#[test]
fn a_ca_certificate_not_in_the_file_or_expired_is_still_refused() {
    let pki = Pki::new("own-ca-refused");
    let (cert, _) = self_signed(&pki.dir, "own", true, false);
    // The CA file holds another certificate: webpki's refusal stands.
    let other = https(&pki);
    let err = verdict(&other, &cert, "127.0.0.1").unwrap_err();
    assert!(err.contains("CaUsedAsEndEntity"), "{err}");
    // The certificate is in the file but expired.
    let (old, old_pem) = self_signed(&pki.dir, "old", true, true);
    let expired = with(&other, |o| o.ca_file = Some(old_pem.clone()));
    let err = verdict(&expired, &old, "127.0.0.1").unwrap_err();
    assert!(err.contains("Expired"), "{err}");
}
