//! A PNG writer for 8-bit RGB images: the signature, an `IHDR`, one zlib-compressed `IDAT`
//! of scanlines under the Sub filter (each byte less the same channel of the pixel to its
//! left) and an `IEND`, each chunk with its CRC-32.

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::Compression;

/// The eight bytes every PNG file starts with.
pub const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// The PNG file of a `width` x `height` image whose pixels are `rgb` (3 bytes each, rows
/// top to bottom). `rgb` must hold exactly `width * height * 3` bytes.
pub fn encode_rgb(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let row = width as usize * 3;
    assert_eq!(rgb.len(), row * height as usize, "pixel buffer size");
    let mut out = Vec::with_capacity(rgb.len() / 2 + 64);
    out.extend_from_slice(&SIGNATURE);
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    // Bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    let mut z = ZlibEncoder::new(Vec::with_capacity(rgb.len() / 2), Compression::fast());
    let mut filtered = Vec::with_capacity(row + 1);
    for line in rgb.chunks_exact(row.max(1)).take(height as usize) {
        // Filter type 1 (Sub) before each scanline. Writes to a Vec cannot fail.
        filtered.clear();
        filtered.push(1);
        filtered.extend_from_slice(line);
        for i in (3..line.len()).rev() {
            filtered[1 + i] = line[i].wrapping_sub(line[i - 3]);
        }
        let _ = z.write_all(&filtered);
    }
    let data = z.finish().unwrap_or_default();
    chunk(&mut out, b"IDAT", &data);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Appends one chunk: length, type, data, CRC-32 of type and data.
fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

#[cfg(test)]
#[path = "png_tests.rs"]
mod tests;
