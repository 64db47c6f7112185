//! Test fixtures: certificates made with rcgen (written to a temp dir) and a tiny blocking
//! TLS HTTP/1.1 server (std threads, rustls `ServerConnection`) that answers every request
//! with a fixed KServe-like JSON body, keeps connections alive and stops by itself.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};

/// The body every request gets.
pub const BODY: &str = r#"{"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1],"data":[7]}]}"#;

/// A server never lives longer than this, whatever the test does.
const SERVER_LIFETIME: Duration = Duration::from_secs(30);
/// A connection idle this long is closed by the server.
const IDLE: Duration = Duration::from_secs(5);

/// A leaf certificate and its key, as DER (for the server) and as files (for the client).
pub struct Leaf {
    pub cert: CertificateDer<'static>,
    pub key: Vec<u8>,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
    pub cert_der: PathBuf,
    pub key_der: PathBuf,
}

/// A CA, a server cert for 127.0.0.1 and localhost, a server cert for another name, a
/// client cert, and an unrelated CA; all files under `dir`.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: CertificateDer<'static>,
    pub ca_pem: PathBuf,
    pub other_ca_pem: PathBuf,
    pub server: Leaf,
    pub server_other_name: Leaf,
    pub client: Leaf,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn leaf(
    dir: &std::path::Path,
    name: &str,
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> Leaf {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).unwrap();
    Leaf {
        cert: cert.der().clone(),
        key: key.serialize_der(),
        cert_pem: write(dir, &format!("{name}.crt.pem"), cert.pem().as_bytes()),
        key_pem: write(
            dir,
            &format!("{name}.key.pem"),
            key.serialize_pem().as_bytes(),
        ),
        cert_der: write(dir, &format!("{name}.crt.der"), cert.der()),
        key_der: write(dir, &format!("{name}.key.der"), &key.serialize_der()),
    }
}

impl Pki {
    /// Fresh certificates in a fresh temp dir named after `tag`.
    pub fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("inferperf-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let params = ca_params("inferperf test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let ca_pem = write(&dir, "ca.pem", ca.pem().as_bytes());
        let other_key = KeyPair::generate().unwrap();
        let other = ca_params("someone else's CA")
            .self_signed(&other_key)
            .unwrap();
        let other_ca_pem = write(&dir, "other-ca.pem", other.pem().as_bytes());
        let issuer = Issuer::new(params, ca_key);
        let server_usage = ExtendedKeyUsagePurpose::ServerAuth;
        let server = leaf(
            &dir,
            "server",
            &["127.0.0.1", "localhost"],
            server_usage.clone(),
            &issuer,
        );
        let server_other_name = leaf(
            &dir,
            "elsewhere",
            &["elsewhere.example"],
            server_usage,
            &issuer,
        );
        let client = leaf(
            &dir,
            "client",
            &["client.example"],
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        );
        Pki {
            dir,
            ca: ca.der().clone(),
            ca_pem,
            other_ca_pem,
            server,
            server_other_name,
            client,
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running test server; stops when dropped (or after [`SERVER_LIFETIME`]).
pub struct TlsServer {
    pub addr: SocketAddr,
    /// Requests answered so far, over all connections.
    pub answered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl TlsServer {
    /// Serves with `leaf`'s certificate; `client_ca`: require a client cert issued by it.
    pub fn start(leaf: &Leaf, client_ca: Option<&CertificateDer<'static>>) -> TlsServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                roots.add(ca.clone()).unwrap();
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key.clone()));
        let config = Arc::new(
            builder
                .with_single_cert(vec![leaf.cert.clone()], key)
                .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let (stop2, answered2) = (stop.clone(), answered.clone());
        let accept = thread::spawn(move || accept_loop(listener, config, &stop2, &answered2));
        TlsServer {
            addr,
            answered,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(j) = self.accept.take() {
            let _ = j.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    stop: &AtomicBool,
    answered: &Arc<AtomicUsize>,
) {
    let until = Instant::now() + SERVER_LIFETIME;
    while !stop.load(Ordering::SeqCst) && Instant::now() < until {
        match listener.accept() {
            Ok((socket, _)) => {
                let session = ServerConnection::new(config.clone()).unwrap();
                let answered = answered.clone();
                thread::spawn(move || serve_connection(socket, session, &answered));
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Answers requests until EOF, an error, or [`IDLE`] without a request.
fn serve_connection(socket: TcpStream, session: ServerConnection, answered: &AtomicUsize) {
    let _ = socket.set_nonblocking(false);
    let _ = socket.set_read_timeout(Some(IDLE));
    let _ = socket.set_nodelay(true);
    let mut tls = StreamOwned::new(session, socket);
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        while let Some(len) = request_length(&pending) {
            pending.drain(..len);
            // Counted before the reply leaves, so a client that has its reply sees the count.
            answered.fetch_add(1, Ordering::SeqCst);
            if tls.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Length of the complete request (head + Content-Length body) at the start of `buf`.
fn request_length(buf: &[u8]) -> Option<usize> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let body = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buf.len() >= head_end + body).then_some(head_end + body)
}
