//! A small blocking HTTP/1.1 client for the setup calls the coordinator makes (server and
//! model metadata, config, statistics, readiness), over plain TCP or TLS. Not for the
//! measured load: it allocates freely and waits on the socket.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use super::{check_header, write_request, ParseError, Progress, ResponseReader};
use crate::error::{Error, Result};
use crate::transport::tcp::os_message;
use crate::transport::{connect_blocking, BlockingStream, TlsClient};

/// Bytes read from the socket per `read` call.
const READ_CHUNK: usize = 16 * 1024;

/// One keep-alive connection to `host:port`, reopened when the server closes it.
#[derive(Debug)]
pub struct BlockingClient {
    /// `host:port` as given (after stripping `http://` and any path): used in messages and
    /// as the `Host` header.
    address: String,
    /// Connect, read and write timeout.
    timeout: Duration,
    /// TLS session settings; `None`: plain TCP.
    tls: Option<TlsClient>,
    stream: Option<BlockingStream>,
    reader: ResponseReader,
    response: Vec<u8>,
    request: Vec<u8>,
}

/// Why one request/response exchange failed.
enum Failure {
    /// A reused connection turned out closed before any response byte: worth one retry.
    Stale(String),
    Fatal(String),
}

impl BlockingClient {
    /// Plain TCP. `url`: `host:port`, optionally with `http://` in front and a `/` after.
    /// Opens the connection now so an unreachable server is reported at once.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self> {
        Self::connect_tls(url, timeout, None)
    }

    /// With `tls`, HTTPS: `url` is `host:port` with `https://` or no scheme in front (port
    /// 443 when missing), and the TLS handshake completes here so a certificate problem is
    /// reported at once. Without, the same as [`BlockingClient::connect`].
    pub fn connect_tls(url: &str, timeout: Duration, tls: Option<&TlsClient>) -> Result<Self> {
        let address = server_address_for(url, tls.is_some())?;
        let mut client = BlockingClient {
            address,
            timeout: timeout.max(Duration::from_millis(1)),
            tls: tls.cloned(),
            stream: None,
            reader: ResponseReader::new(),
            response: Vec::new(),
            request: Vec::new(),
        };
        client.stream = Some(client.open()?);
        Ok(client)
    }

    /// The `host:port` this client talks to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// `GET path` → (status, body).
    pub fn get(&mut self, path: &str) -> Result<(u16, Vec<u8>)> {
        self.request("GET", path, &[], b"")
    }

    /// `POST path` with extra headers and a body → (status, body).
    pub fn post(
        &mut self,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<(u16, Vec<u8>)> {
        self.request("POST", path, headers, body)
    }

    fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<(u16, Vec<u8>)> {
        for (name, value) in headers {
            check_header(name, value)?;
        }
        self.request.clear();
        write_request(
            &mut self.request,
            method,
            &self.address,
            path,
            headers,
            body,
        );
        let mut retried = false;
        loop {
            let reused = self.stream.is_some();
            let stream = match self.stream.take() {
                Some(s) => s,
                None => self.open()?,
            };
            match self.exchange(stream) {
                Ok(answer) => return Ok(answer),
                Err(Failure::Stale(_)) if reused && !retried => retried = true,
                Err(Failure::Stale(why) | Failure::Fatal(why)) => {
                    return Err(Error::generic(format!(
                        "{method} {path} to server at {}: {why}",
                        self.address
                    )));
                }
            }
        }
    }

    /// Sends the prepared request and reads one response; keeps the stream if it may be reused.
    fn exchange(
        &mut self,
        mut stream: BlockingStream,
    ) -> std::result::Result<(u16, Vec<u8>), Failure> {
        if let Err(e) = stream.write_all(&self.request) {
            return Err(Failure::Stale(os_message(&e)));
        }
        self.response.clear();
        self.reader.reset();
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            let progress = match stream.read(&mut chunk) {
                Ok(0) => self.reader.on_eof(&self.response),
                Ok(n) => {
                    self.response.extend_from_slice(&chunk[..n]);
                    self.reader.advance(&self.response)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Failure::Fatal(format!(
                        "no response within {:.1} s",
                        self.timeout.as_secs_f64()
                    )));
                }
                Err(e) if self.response.is_empty() => return Err(Failure::Stale(os_message(&e))),
                Err(e) => return Err(Failure::Fatal(os_message(&e))),
            };
            match progress {
                Ok(Progress::NeedMore) => {}
                Ok(Progress::Done(head)) => {
                    let body = self.reader.body(&self.response).to_vec();
                    if head.keep_alive {
                        self.stream = Some(stream);
                    }
                    return Ok((head.status, body));
                }
                Err(e @ ParseError::ClosedBeforeResponse) => {
                    return Err(Failure::Stale(e.to_string()))
                }
                Err(e) => return Err(Failure::Fatal(e.to_string())),
            }
        }
    }

    fn open(&self) -> Result<BlockingStream> {
        connect_blocking(&self.address, self.timeout, "server", self.tls.as_ref())
    }
}

/// `http://host:port/` → `host:port`; a missing port means 80 (as curl does).
pub fn server_address(url: &str) -> Result<String> {
    server_address_for(url, false)
}

/// `host:port` of `url` for a plain (`tls` false: `http://` or no scheme, port 80 by
/// default) or a TLS connection (`https://` or no scheme, port 443 by default).
pub fn server_address_for(url: &str, tls: bool) -> Result<String> {
    let trimmed = url.trim();
    let has_scheme = |scheme: &str| {
        trimmed
            .get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    };
    let (wrong, right, default_port) = if tls {
        ("http://", "https://", 443)
    } else {
        ("https://", "http://", 80)
    };
    if has_scheme(wrong) {
        let why = if tls {
            "http:// given for a TLS connection (use https://)"
        } else {
            "https:// needs the TLS settings, which this connection was not given"
        };
        return Err(Error::usage(format!("server URL '{url}': {why}")));
    }
    let rest = if has_scheme(right) {
        &trimmed[right.len()..]
    } else {
        trimmed
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() || authority.contains(char::is_whitespace) {
        return Err(Error::usage(format!(
            "server URL '{url}': expected host:port"
        )));
    }
    let has_port = match authority.rfind(']') {
        Some(bracket) => authority[bracket..].contains(':'),
        None => authority.contains(':'),
    };
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{default_port}")
    })
}

#[cfg(test)]
#[path = "blocking_tests.rs"]
mod tests;
