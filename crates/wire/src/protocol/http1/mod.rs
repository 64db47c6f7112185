//! Client side of HTTP/1.1: a request writer, an incremental allocation-free response parser
//! for the measured hot path (the client's blocking setup client is built on both).
//!
//! Hot-path use, per connection (the engine owns `buf`):
//!
//! ```
//! use inferperf_wire::protocol::http1::{Progress, ResponseReader};
//! let mut reader = ResponseReader::new();
//! let mut buf = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".to_vec();
//! if let Progress::Done(head) = reader.advance(&buf).unwrap() {
//!     assert_eq!((head.status, reader.body(&buf)), (200, &b"hi"[..]));
//!     reader.reset();
//!     buf.drain(..head.consumed);
//! }
//! ```

mod chunked;
mod error;
mod fuzz;
mod request;
mod response;

pub use error::ParseError;
pub use fuzz::fuzz_response;
pub use request::{check_header, write_request};
pub use response::{
    Framing, Limits, Progress, ResponseHead, ResponseReader, DEFAULT_MAX_INTERIM,
    DEFAULT_MAX_RESPONSE_BYTES, MAX_HEADERS,
};
