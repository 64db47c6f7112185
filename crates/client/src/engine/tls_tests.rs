//! TLS end to end over 127.0.0.1: the blocking client, the load engine, and the handshake
//! failures a user meets (unknown CA, wrong name, plain-text server, missing client cert).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Engine, EngineSpec};
use crate::clock::Clock;
use crate::measure::WindowRecords;
use crate::protocol::http1::blocking::BlockingClient;
use crate::transport::test_pki::{Pki, TlsServer, BODY};
use crate::transport::{connect_blocking, PemOrDer, TlsClient, TlsOptions, NOT_TLS};

const TIMEOUT: Duration = Duration::from_secs(5);

fn options(ca: &std::path::Path) -> TlsOptions {
    TlsOptions {
        ca_file: Some(ca.to_path_buf()),
        ..TlsOptions::new("--ssl-https", &[b"http/1.1"])
    }
}

fn client(opts: &TlsOptions, host: &str) -> TlsClient {
    TlsClient::new(opts, host).unwrap()
}

/// The error of a blocking TLS connect to `addr`.
fn connect_error(addr: std::net::SocketAddr, tls: &TlsClient) -> String {
    match connect_blocking(&addr.to_string(), TIMEOUT, "server", Some(tls)) {
        Ok(_) => panic!("the TLS connect to {addr} should fail"),
        Err(e) => e.msg,
    }
}

fn infer_request(body_len: usize) -> Vec<u8> {
    let mut req = format!(
        "POST /v2/models/simple/infer HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
    )
    .into_bytes();
    req.resize(req.len() + body_len, b'7');
    req
}

/// Runs `total` requests of `body_len` bytes at `concurrency` through the engine; returns the
/// records' ok flags or the first worker error.
fn run_engine(
    addr: std::net::SocketAddr,
    tls: TlsClient,
    concurrency: u64,
    total: u64,
    body_len: usize,
) -> std::result::Result<Vec<bool>, String> {
    let spec = EngineSpec {
        addr,
        requests: Arc::new(vec![infer_request(body_len)]),
        keep_bodies: true,
        keep_going: false,
        http_trace: false,
        rx_stamps: true,
        tx_stamps: Some(Default::default()),
        packet_stamps: None,
        fresh_connections: false,
        pin: false,
        max_workers: 2,
        clock: Clock::new(),
        tls: Some(tls),
        wire: crate::engine::wire::Wire::Http1,
        sequences: None,
        slots: None,
        read_batch: None,
        request_limits: Default::default(),
        reply_check: Default::default(),
        max_response_bytes: crate::protocol::http1::DEFAULT_MAX_RESPONSE_BYTES,
        cancel: None,
        prefill: None,
    };
    let mut engine = Engine::start(&spec, concurrency, Some(total)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !engine.all_finished() && Instant::now() < deadline {
        if let Some((_, msg)) = engine.first_error() {
            return Err(msg);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut window = WindowRecords::default();
    engine.collect(u64::MAX, &mut window).unwrap();
    if let Some((_, msg)) = engine.first_error() {
        return Err(msg);
    }
    let body = String::from_utf8_lossy(&window.bodies).to_string();
    assert_eq!(body, BODY.repeat(window.records.len()));
    Ok(window.records.iter().map(|r| r.ok).collect())
}

#[test]
fn blocking_client_gets_over_tls() {
    let pki = Pki::new("blocking-get");
    let server = TlsServer::start(&pki.server, None);
    let opts = options(&pki.ca_pem);
    for host in ["127.0.0.1", "localhost"] {
        let tls = client(&opts, host);
        let url = format!("https://{host}:{}/", server.addr.port());
        let mut http = BlockingClient::connect_tls(&url, TIMEOUT, Some(&tls)).unwrap();
        for _ in 0..2 {
            assert_eq!(http.get("/v2").unwrap(), (200, BODY.as_bytes().to_vec()));
        }
    }
    assert_eq!(server.answered.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[test]
fn engine_completes_requests_over_tls() {
    let pki = Pki::new("engine");
    let server = TlsServer::start(&pki.server, None);
    let tls = client(&options(&pki.ca_pem), "127.0.0.1");
    let oks = run_engine(server.addr, tls.clone(), 2, 40, 64).unwrap();
    assert_eq!(oks, vec![true; 40]);
    // Requests far larger than the socket and rustls buffers go out in pieces.
    let oks = run_engine(server.addr, tls, 1, 3, 16 << 20).unwrap();
    assert_eq!(oks, vec![true; 3]);
}

#[test]
fn unknown_ca_is_a_handshake_error() {
    let pki = Pki::new("unknown-ca");
    let server = TlsServer::start(&pki.server, None);
    let tls = client(&options(&pki.other_ca_pem), "127.0.0.1");
    let want = "TLS handshake failed: invalid peer certificate: UnknownIssuer";
    assert_eq!(
        connect_error(server.addr, &tls),
        format!("cannot connect to server at {}: {want}", server.addr)
    );
    // The engine opens every connection before the first request, and says how many did.
    assert_eq!(
        run_engine(server.addr, tls, 2, 4, 8).unwrap_err(),
        format!(
            "cannot connect to {} (0 of 2 connections open): {want}",
            server.addr
        )
    );
}

/// A plain HTTP/1.1 server on 127.0.0.1 that answers every connection with `400 Bad Request`
/// and closes it; it stops accepting after `connections` connections.
fn plain_http_server(connections: usize) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for socket in listener.incoming().take(connections) {
            let Ok(mut socket) = socket else { return };
            let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
            let mut hello = [0u8; 512];
            let _ = socket.read(&mut hello);
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    addr
}

#[test]
fn plain_text_server_is_named() {
    let plain = plain_http_server(8);
    let pki = Pki::new("plain");
    let tls = client(&options(&pki.ca_pem), "127.0.0.1");
    let got = connect_error(plain, &tls);
    assert!(got.ends_with("(is it a plain-text server?)"), "{got}");
    let got = run_engine(plain, tls, 1, 2, 8).unwrap_err();
    assert!(got.ends_with("(is it a plain-text server?)"), "{got}");
}

#[test]
fn not_tls_bytes_get_the_plain_text_message() {
    // A server that answers in plain HTTP, whatever it was sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut socket, _) = listener.accept().unwrap();
        let mut hello = [0u8; 64];
        let _ = socket.read(&mut hello);
        let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        std::thread::sleep(Duration::from_millis(200));
    });
    let pki = Pki::new("not-tls");
    let tls = client(&options(&pki.ca_pem), "127.0.0.1");
    let got = connect_error(addr, &tls);
    assert_eq!(
        got,
        format!("cannot connect to server at {addr}: {NOT_TLS}")
    );
    answer.join().unwrap();
}

#[test]
fn verify_peer_off_accepts_an_unknown_ca() {
    let pki = Pki::new("verify-peer");
    let server = TlsServer::start(&pki.server, None);
    let opts = TlsOptions {
        verify_peer: false,
        ..options(&pki.other_ca_pem)
    };
    let tls = client(&opts, "127.0.0.1");
    connect_blocking(&server.addr.to_string(), TIMEOUT, "server", Some(&tls)).unwrap();
    assert_eq!(
        run_engine(server.addr, tls, 2, 6, 8).unwrap(),
        vec![true; 6]
    );
}

#[test]
fn verify_host_off_forgives_only_the_name() {
    let pki = Pki::new("verify-host");
    let server = TlsServer::start(&pki.server_other_name, None);
    let strict = client(&options(&pki.ca_pem), "127.0.0.1");
    let got = connect_error(server.addr, &strict);
    assert!(
        got.ends_with(
            "TLS handshake failed: invalid peer certificate: certificate not valid for name \
             \"127.0.0.1\"; certificate is only valid for DnsName(\"elsewhere.example\")"
        ),
        "{got}"
    );
    let lax = TlsOptions {
        verify_host: false,
        ..options(&pki.ca_pem)
    };
    let tls = client(&lax, "127.0.0.1");
    connect_blocking(&server.addr.to_string(), TIMEOUT, "server", Some(&tls)).unwrap();
    // The chain is still checked.
    let lax_other_ca = TlsOptions {
        verify_host: false,
        ..options(&pki.other_ca_pem)
    };
    let got = connect_error(server.addr, &client(&lax_other_ca, "127.0.0.1"));
    assert!(got.ends_with("UnknownIssuer"), "{got}");
}

#[test]
fn client_certificate_required_and_given() {
    let pki = Pki::new("client-cert");
    let server = TlsServer::start(&pki.server, Some(&pki.ca));
    let with_cert = TlsOptions {
        client_cert: Some((pki.client.cert_pem.clone(), PemOrDer::Pem)),
        client_key: Some((pki.client.key_pem.clone(), PemOrDer::Pem)),
        ..options(&pki.ca_pem)
    };
    let tls = client(&with_cert, "127.0.0.1");
    let url = format!("127.0.0.1:{}", server.addr.port());
    let mut http = BlockingClient::connect_tls(&url, TIMEOUT, Some(&tls)).unwrap();
    assert_eq!(http.get("/v2").unwrap().0, 200);
    assert_eq!(
        run_engine(server.addr, tls, 2, 6, 8).unwrap(),
        vec![true; 6]
    );
    // Without one, TLS 1.3 finishes the client's side of the handshake first; the server's
    // refusal arrives with the first read.
    let without = client(&options(&pki.ca_pem), "127.0.0.1");
    let refused = BlockingClient::connect_tls(&url, TIMEOUT, Some(&without))
        .and_then(|mut c| c.get("/v2"))
        .unwrap_err();
    assert!(
        refused
            .msg
            .ends_with("TLS error: received fatal alert: CertificateRequired"),
        "{}",
        refused.msg
    );
}

#[test]
fn alpn_is_offered_and_reported() {
    let pki = Pki::new("alpn");
    let server = TlsServer::start(&pki.server, None);
    let tls = client(&options(&pki.ca_pem), "127.0.0.1");
    let stream = connect_blocking(&server.addr.to_string(), TIMEOUT, "server", Some(&tls)).unwrap();
    assert!(stream.is_tls());
    // The test server configures no ALPN, so none is chosen.
    assert_eq!(stream.alpn_protocol(), None);
    let plain = connect_blocking(&server.addr.to_string(), TIMEOUT, "server", None).unwrap();
    assert!(!plain.is_tls());
}
