use std::io::Read;

use super::*;

/// The chunks of a PNG file, each CRC checked: (type, data).
fn chunks(file: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
    assert_eq!(file[..8], SIGNATURE);
    let mut at = 8;
    let mut out = Vec::new();
    while at < file.len() {
        let len = u32::from_be_bytes(file[at..at + 4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = file[at + 4..at + 8].try_into().unwrap();
        let data = file[at + 8..at + 8 + len].to_vec();
        let crc = u32::from_be_bytes(file[at + 8 + len..at + 12 + len].try_into().unwrap());
        let mut h = crc32fast::Hasher::new();
        h.update(&kind);
        h.update(&data);
        assert_eq!(
            h.finalize(),
            crc,
            "CRC of {}",
            String::from_utf8_lossy(&kind)
        );
        out.push((kind, data));
        at += 12 + len;
    }
    assert_eq!(at, file.len(), "nothing after the last chunk");
    out
}

#[test]
fn decodes_back_to_the_same_pixels() {
    let (w, h) = (7u32, 5u32);
    let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
    let file = encode_rgb(w, h, &rgb);
    let c = chunks(&file);
    let kinds: Vec<&[u8; 4]> = c.iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, [b"IHDR", b"IDAT", b"IEND"]);
    let ihdr = &c[0].1;
    assert_eq!(ihdr.len(), 13);
    assert_eq!(u32::from_be_bytes(ihdr[0..4].try_into().unwrap()), w);
    assert_eq!(u32::from_be_bytes(ihdr[4..8].try_into().unwrap()), h);
    assert_eq!(ihdr[8..], [8, 2, 0, 0, 0]);
    assert!(c[2].1.is_empty());
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&c[1].1[..])
        .read_to_end(&mut raw)
        .unwrap();
    let row = w as usize * 3;
    assert_eq!(raw.len(), h as usize * (row + 1));
    for (y, line) in raw.chunks(row + 1).enumerate() {
        assert_eq!(line[0], 1, "filter type (Sub) of row {y}");
        assert_eq!(
            unfilter_sub(&line[1..]),
            &rgb[y * row..(y + 1) * row],
            "row {y}"
        );
    }
}

#[test]
fn one_pixel_image() {
    let file = encode_rgb(1, 1, &[1, 2, 3]);
    let c = chunks(&file);
    assert_eq!(c.len(), 3);
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&c[1].1[..])
        .read_to_end(&mut raw)
        .unwrap();
    assert_eq!(raw, [1, 1, 2, 3]);
}

/// A scanline under the Sub filter back to its bytes: each adds the reconstructed byte
/// three to its left (one RGB pixel).
fn unfilter_sub(line: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(line.len());
    for (i, &b) in line.iter().enumerate() {
        let left = if i < 3 { 0 } else { out[i - 3] };
        out.push(b.wrapping_add(left));
    }
    out
}

#[test]
fn a_png_decoder_reads_the_same_pixels() {
    let (w, h) = (33u32, 17u32);
    let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 253) as u8).collect();
    let file = encode_rgb(w, h, &rgb);
    let mut reader = ::png::Decoder::new(&file[..]).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w, h));
    assert_eq!(info.color_type, ::png::ColorType::Rgb);
    assert_eq!(&buf[..info.buffer_size()], &rgb[..]);
}
