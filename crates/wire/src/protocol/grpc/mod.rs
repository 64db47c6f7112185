//! gRPC over inferperf's own HTTP/2: the frame codec, HPACK, message framing with
//! gzip/deflate, the sans-IO client `Session` the client's engine drives over mio, and the
//! prost messages. The client's blocking unary client sits on the same `Session`.

pub mod compress;
pub mod frame;
pub mod hpack;
mod hpack_huffman;
pub mod message;
pub mod pb;
pub mod request;
pub mod session;

#[cfg(test)]
mod hpack_cache_tests;
#[cfg(test)]
mod hpack_diff_tests;
#[cfg(test)]
mod hpack_tests;
