use super::*;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[test]
fn header_describes_the_samples() {
    let samples = [0.0, 1.0, -1.0, 0.5, -0.5, 2.0];
    for bits in DEPTHS {
        let file = encode(&samples, 16_000, 2, bits);
        let width = usize::from(bits / 8);
        assert_eq!(&file[0..4], b"RIFF");
        assert_eq!(u32_at(&file, 4) as usize, file.len() - 8);
        assert_eq!(&file[8..16], b"WAVEfmt ");
        assert_eq!(u32_at(&file, 16), 16);
        assert_eq!(u16_at(&file, 20), 1, "PCM");
        assert_eq!(u16_at(&file, 22), 2, "channels");
        assert_eq!(u32_at(&file, 24), 16_000);
        assert_eq!(u32_at(&file, 28), 16_000 * 2 * width as u32, "byte rate");
        assert_eq!(u16_at(&file, 32) as usize, 2 * width, "block align");
        assert_eq!(u16_at(&file, 34), bits);
        assert_eq!(&file[36..40], b"data");
        assert_eq!(u32_at(&file, 40) as usize, samples.len() * width);
        assert_eq!(file.len(), 44 + samples.len() * width);
    }
}

#[test]
fn samples_are_scaled_to_the_depth() {
    let samples = [0.0, 1.0, -1.0, 2.0];
    let f16 = encode(&samples, 8000, 1, 16);
    let s16: Vec<i16> = f16[44..]
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(s16, [0, 32767, -32767, 32767], "clipped to full scale");
    let f8 = encode(&samples, 8000, 1, 8);
    assert_eq!(&f8[44..], [128, 255, 1, 255], "unsigned, 128 is silence");
    let f24 = encode(&[-1.0], 8000, 1, 24);
    let v = i32::from_le_bytes([f24[44], f24[45], f24[46], 0]) << 8 >> 8;
    assert_eq!(v, -(1 << 23) + 1);
    let f32 = encode(&[1.0], 8000, 1, 32);
    assert_eq!(
        i32::from_le_bytes(f32[44..48].try_into().unwrap()),
        i32::MAX
    );
}
