//! Blocking TCP connections for setup calls (the load path uses mio instead).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, Result};

/// Connects to `address` (`host:port`, every resolved address tried in turn) with `timeout`
/// on the connect and on every read and write, Nagle off. Errors read
/// "cannot connect to {what} at {address}: {reason}".
pub fn connect_blocking(address: &str, timeout: Duration, what: &str) -> Result<TcpStream> {
    let cannot =
        |why: String| Error::generic(format!("cannot connect to {what} at {address}: {why}"));
    let candidates = address
        .to_socket_addrs()
        .map_err(|e| cannot(os_message(&e)))?;
    let mut last_error = String::from("address resolved to nothing");
    for candidate in candidates {
        match TcpStream::connect_timeout(&candidate, timeout) {
            Ok(stream) => {
                let setup = stream
                    .set_read_timeout(Some(timeout))
                    .and_then(|()| stream.set_write_timeout(Some(timeout)))
                    .and_then(|()| stream.set_nodelay(true));
                setup.map_err(|e| cannot(os_message(&e)))?;
                return Ok(stream);
            }
            Err(e) => last_error = os_message(&e),
        }
    }
    Err(cannot(last_error))
}

/// An I/O error's text without the " (os error N)" suffix.
pub fn os_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
