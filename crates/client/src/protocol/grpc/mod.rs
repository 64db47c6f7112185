//! Groundwork for gRPC over a hand-rolled HTTP/2 client (issue 3): the codecs, tested and
//! fuzzed on their own. The session that drives them over mio comes next.

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
mod hpack_diff_tests;
#[cfg(test)]
mod hpack_tests;
