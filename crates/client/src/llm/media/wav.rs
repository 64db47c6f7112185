//! A WAV writer: a RIFF/WAVE file with one `fmt ` chunk (integer PCM) and one `data`
//! chunk, samples interleaved by channel, little-endian.

/// Bit depths a sample may have.
pub const DEPTHS: [u16; 4] = [8, 16, 24, 32];

/// The WAV file of `samples` (interleaved, `channels` per frame, each in -1.0..=1.0) at
/// `sample_rate` Hz and `bits` per sample (one of [`DEPTHS`]): 8-bit samples are unsigned
/// with 128 as silence (as WAV defines them), wider ones signed.
pub fn encode(samples: &[f64], sample_rate: u32, channels: u16, bits: u16) -> Vec<u8> {
    assert!(DEPTHS.contains(&bits), "bit depth {bits}");
    let width = usize::from(bits / 8);
    let data_len = samples.len() * width;
    let mut out = Vec::with_capacity(44 + data_len);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((36 + data_len) as u32).to_le_bytes());
    out.extend_from_slice(b"WAVE");
    out.extend_from_slice(b"fmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&sample_rate.to_le_bytes());
    let block = u32::from(channels) * width as u32;
    out.extend_from_slice(&(sample_rate * block).to_le_bytes());
    out.extend_from_slice(&(block as u16).to_le_bytes());
    out.extend_from_slice(&bits.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    let max = ((1i64 << (bits - 1)) - 1) as f64;
    for &s in samples {
        let v = (s.clamp(-1.0, 1.0) * max) as i64;
        match bits {
            8 => out.push((v + 128) as u8),
            _ => out.extend_from_slice(&v.to_le_bytes()[..width]),
        }
    }
    out
}

#[cfg(test)]
#[path = "wav_tests.rs"]
mod tests;
