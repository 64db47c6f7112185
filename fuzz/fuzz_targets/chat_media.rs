//! Bytes as a chat content part (or a list of parts), a data URL, and a PNG, JPEG, WAV or
//! MP3 file, as the reference server reads the images and audio of chat requests: media or
//! an error, never a panic. The seed corpus is also run by `tests/it/fuzz_corpus.rs` on
//! stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    inferperf_server::fuzz_media(data);
});
