//! The TLS steps shared by the non-blocking and the blocking streams: push queued records,
//! drive the handshake, fold new records in, and turn rustls errors into clear `io::Error`s.

use std::io::{self, Read, Write};

use rustls::{ClientConnection, InvalidMessage};

/// The text for a server that answered the ClientHello with something that is not TLS.
pub const NOT_TLS: &str =
    "TLS handshake failed: the server did not answer with TLS (is it a plain-text server?)";

/// A rustls error as an `io::Error` (kind InvalidData) with a message a user can act on.
pub fn tls_error(e: &rustls::Error, during_handshake: bool) -> io::Error {
    let text = match e {
        // A plain-text HTTP or HTTP/2 reply starts with bytes that are no TLS record type.
        rustls::Error::InvalidMessage(
            InvalidMessage::InvalidContentType | InvalidMessage::UnknownProtocolVersion,
        ) if during_handshake => NOT_TLS.to_string(),
        _ if during_handshake => format!("TLS handshake failed: {e}"),
        _ => format!("TLS error: {e}"),
    };
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// EOF before the handshake finished. `answered`: the server sent some TLS bytes first.
pub fn closed_during_handshake(answered: bool) -> io::Error {
    let text = if answered {
        "TLS handshake failed: the server closed the connection"
    } else {
        "TLS handshake failed: the server closed the connection without answering with TLS \
         (is it a plain-text server?)"
    };
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Writes queued TLS bytes until none remain (Ok(true)) or the socket is full (Ok(false)).
pub fn push<S: Write>(session: &mut ClientConnection, socket: &mut S) -> io::Result<bool> {
    while session.wants_write() {
        match session.write_tls(socket) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "connection closed while sending",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Decrypts the records read so far. On error, a last alert goes out (best effort) so the
/// server logs why the client hung up.
pub fn process<S: Write>(session: &mut ClientConnection, socket: &mut S) -> io::Result<()> {
    let during_handshake = session.is_handshaking();
    match session.process_new_packets() {
        Ok(_) => Ok(()),
        Err(e) => {
            let _ = session.write_tls(socket);
            Err(tls_error(&e, during_handshake))
        }
    }
}

/// Advances the handshake as far as the socket allows. Ok(true): done (the last flight may
/// still be queued, see `wants_write`); Ok(false): the socket would block. `answered` is set
/// once the server has sent any byte.
pub fn drive_handshake<S: Read + Write>(
    session: &mut ClientConnection,
    socket: &mut S,
    answered: &mut bool,
) -> io::Result<bool> {
    loop {
        push(session, socket)?;
        if !session.is_handshaking() {
            return Ok(true);
        }
        match session.read_tls(socket) {
            Ok(0) => return Err(closed_during_handshake(*answered)),
            Ok(_) => {
                *answered = true;
                process(session, socket)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
