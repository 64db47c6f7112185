//! TLS end to end: HTTPS through the front and gRPC over TLS, with certificates from
//! `test_certs`; wrong CAs and missing client certificates are refused.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::grpc::test_client::{block_on, connect_tls};
use crate::test_certs::{TestPki, Trust};
use crate::tls::{ALPN_H2, ALPN_HTTP1};
use crate::{start, ServeConfig, ServerHandle};
use inferperf_wire::protocol::grpc::pb::inference as pb;

fn tls_server(pki: &TestPki, client_ca: Option<()>) -> ServerHandle {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    start(ServeConfig {
        addr: local,
        grpc_addr: Some(local),
        tls: Some(pki.server_files(client_ca)),
        ..ServeConfig::default()
    })
    .expect("TLS server starts")
}

/// `GET path` over HTTPS; the status code, or Err if TLS fails.
async fn https_get(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> std::io::Result<u16> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("IP name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    // With a client-certificate failure TLS 1.3 reports the alert on the first read.
    tls.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    Ok(status)
}

async fn grpc_live(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> std::io::Result<bool> {
    let mut c = connect_tls(addr, config).await?;
    let r: pb::ServerLiveResponse = c
        .unary("ServerLive", &pb::ServerLiveRequest {})
        .await
        .map_err(|(code, msg)| std::io::Error::other(format!("{code}: {msg}")))?;
    Ok(r.live)
}

#[test]
fn https_and_grpc_over_tls() {
    let pki = TestPki::new("both");
    let server = tls_server(&pki, None);
    let (http, grpc) = (server.addr, server.grpc_addr.unwrap());
    block_on(async {
        let http_client = pki.client_config(Trust::ServerCa, ALPN_HTTP1, false);
        assert_eq!(
            https_get(http, http_client.clone(), "/v2/health/ready")
                .await
                .unwrap(),
            200
        );
        assert_eq!(
            https_get(http, http_client, "/v2/models/nope")
                .await
                .unwrap(),
            404
        );
        let grpc_client = pki.client_config(Trust::ServerCa, ALPN_H2, false);
        assert!(grpc_live(grpc, grpc_client).await.unwrap());
        // A client trusting another CA fails the handshake on both ports.
        let stranger = pki.client_config(Trust::OtherCa, ALPN_HTTP1, false);
        assert!(https_get(http, stranger, "/v2/health/ready").await.is_err());
        let stranger = pki.client_config(Trust::OtherCa, ALPN_H2, false);
        assert!(grpc_live(grpc, stranger).await.is_err());
        // Cleartext on a TLS port gets no HTTP answer.
        let mut plain = TcpStream::connect(http).await.unwrap();
        plain
            .write_all(b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = plain.read_to_end(&mut buf).await;
        assert!(
            !buf.starts_with(b"HTTP/1.1"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
    });
    // Only the successful HTTPS requests reached the HTTP server.
    assert_eq!(server.counters().http_requests, 2);
}

#[test]
fn client_certificates_when_required() {
    let pki = TestPki::new("mtls");
    let server = tls_server(&pki, Some(()));
    let (http, grpc) = (server.addr, server.grpc_addr.unwrap());
    block_on(async {
        let anonymous = pki.client_config(Trust::ServerCa, ALPN_HTTP1, false);
        assert!(https_get(http, anonymous, "/v2/health/ready")
            .await
            .is_err());
        let anonymous = pki.client_config(Trust::ServerCa, ALPN_H2, false);
        assert!(grpc_live(grpc, anonymous).await.is_err());
        let with_cert = pki.client_config(Trust::ServerCa, ALPN_HTTP1, true);
        assert_eq!(
            https_get(http, with_cert, "/v2/health/ready")
                .await
                .unwrap(),
            200
        );
        let with_cert = pki.client_config(Trust::ServerCa, ALPN_H2, true);
        assert!(grpc_live(grpc, with_cert).await.unwrap());
    });
}
