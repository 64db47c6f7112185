//! gRPC over inferperf's own HTTP/2 client: the frame codec, HPACK, message framing with
//! gzip/deflate, the sans-IO `Session` the engine drives over mio, the prost messages and a
//! blocking unary client on the same `Session` for setup calls.

pub mod blocking;
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
