//! Images and audio in chat content parts: `image_url` parts with a `data:` URL and
//! `input_audio` parts with base64 `data` and a `format`. The bytes are decoded and their
//! header checked (PNG signature and `IHDR` with its CRC, JPEG start-of-image and frame
//! header, WAV `RIFF`/`WAVE` with `fmt ` and `data` chunks, MP3 frame sync or ID3 tag), so
//! a malformed part is answered with a 400 naming what is wrong. What was received is kept
//! per request for tests ([`MediaLog`]).

use std::sync::Mutex;

use base64::Engine;
use serde_json::Value;

/// Requests whose media the log keeps (the oldest are dropped beyond it).
pub const MEDIA_LOG_REQUESTS: usize = 100_000;

/// One image or audio clip of a chat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Media {
    /// A decoded image: its format (`png` or `jpeg`), file size and pixel size.
    Image {
        format: &'static str,
        bytes: usize,
        width: u32,
        height: u32,
    },
    /// An `image_url` that is a link (http or https), not fetched.
    ImageLink,
    /// A decoded audio clip: its format (`wav` or `mp3`) and file size; a WAV clip's
    /// layout too.
    Audio {
        format: &'static str,
        bytes: usize,
        wav: Option<Wav>,
    },
}

/// The layout of a WAV clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wav {
    pub sample_rate: u32,
    pub channels: u16,
    pub bits: u16,
    /// Sample frames in the `data` chunk.
    pub frames: u64,
}

/// The media of one content part: `None` for a part that carries none (text, or a type
/// not read here); an error message for a malformed one.
pub fn part(part: &Value) -> Result<Option<Media>, String> {
    match part.get("type").and_then(Value::as_str) {
        Some("image_url") => image_part(part).map(Some),
        Some("input_audio") => audio_part(part).map(Some),
        _ => Ok(None),
    }
}

fn image_part(part: &Value) -> Result<Media, String> {
    // `image_url` is an object with `url`; a plain string is accepted too.
    let url = match part.get("image_url") {
        Some(Value::String(u)) => u.as_str(),
        Some(obj) => obj
            .get("url")
            .and_then(Value::as_str)
            .ok_or("an image_url part needs 'image_url.url' (a string)")?,
        None => return Err("an image_url part needs 'image_url'".into()),
    };
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(Media::ImageLink);
    }
    let (mime, bytes) = data_url(url)?;
    let (format, (width, height)) = match mime {
        "image/png" => ("png", png_size(&bytes)?),
        "image/jpeg" | "image/jpg" => ("jpeg", jpeg_size(&bytes)?),
        other => {
            return Err(format!(
                "image data URL type '{other}' is not image/png or image/jpeg"
            ))
        }
    };
    Ok(Media::Image {
        format,
        bytes: bytes.len(),
        width,
        height,
    })
}

fn audio_part(part: &Value) -> Result<Media, String> {
    let audio = part
        .get("input_audio")
        .ok_or("an input_audio part needs 'input_audio'")?;
    let data = audio
        .get("data")
        .and_then(Value::as_str)
        .ok_or("an input_audio part needs 'input_audio.data' (base64)")?;
    let format = audio
        .get("format")
        .and_then(Value::as_str)
        .ok_or("an input_audio part needs 'input_audio.format' (wav or mp3)")?;
    let bytes = base64(data).map_err(|e| format!("input_audio data is not base64: {e}"))?;
    match format {
        "wav" => Ok(Media::Audio {
            format: "wav",
            bytes: bytes.len(),
            wav: Some(wav_info(&bytes)?),
        }),
        "mp3" => {
            mp3_check(&bytes)?;
            Ok(Media::Audio {
                format: "mp3",
                bytes: bytes.len(),
                wav: None,
            })
        }
        other => Err(format!("input_audio format '{other}' is not wav or mp3")),
    }
}

fn base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text)
}

/// A `data:<type>;base64,<data>` URL: its media type and decoded bytes.
pub fn data_url(url: &str) -> Result<(&str, Vec<u8>), String> {
    let rest = url
        .strip_prefix("data:")
        .ok_or("image URL is neither a data: URL nor an http(s) link")?;
    let (head, data) = rest
        .split_once(',')
        .ok_or("data URL has no ',' before its data")?;
    let mime = head
        .strip_suffix(";base64")
        .ok_or("data URL is not base64 (';base64' before the ',')")?;
    let bytes = base64(data).map_err(|e| format!("data URL data is not base64: {e}"))?;
    Ok((mime, bytes))
}

/// A PNG file's width and height, from its signature and `IHDR` chunk (CRC checked).
pub fn png_size(b: &[u8]) -> Result<(u32, u32), String> {
    const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    if b.len() < 33 || b[..8] != SIGNATURE {
        return Err("image is not a PNG file (no PNG signature and IHDR)".into());
    }
    if be32(&b[8..12]) != 13 || &b[12..16] != b"IHDR" {
        return Err("PNG file does not start with a 13-byte IHDR chunk".into());
    }
    if crc32fast::hash(&b[12..29]) != be32(&b[29..33]) {
        return Err("PNG IHDR chunk has a wrong CRC".into());
    }
    let (width, height) = (be32(&b[16..20]), be32(&b[20..24]));
    if width == 0 || height == 0 {
        return Err(format!("PNG image is {width}x{height}"));
    }
    Ok((width, height))
}

/// A JPEG file's width and height, from its start-of-image marker and frame header.
pub fn jpeg_size(b: &[u8]) -> Result<(u32, u32), String> {
    if b.len() < 4 || b[..2] != [0xff, 0xd8] {
        return Err("image is not a JPEG file (no start-of-image marker)".into());
    }
    let mut at = 2;
    while at + 4 <= b.len() {
        if b[at] != 0xff {
            return Err(format!("JPEG file has no marker at byte {at}"));
        }
        let marker = b[at + 1];
        if marker == 0xff {
            at += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        let frame = (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if frame {
            if len < 8 || at + 9 > b.len() {
                return Err("JPEG frame header is cut short".into());
            }
            let height = u32::from(u16::from_be_bytes([b[at + 5], b[at + 6]]));
            let width = u32::from(u16::from_be_bytes([b[at + 7], b[at + 8]]));
            if width == 0 || height == 0 {
                return Err(format!("JPEG image is {width}x{height}"));
            }
            return Ok((width, height));
        }
        if len < 2 {
            return Err(format!("JPEG segment at byte {at} has length {len}"));
        }
        at += 2 + len;
    }
    Err("JPEG file has no frame header".into())
}

/// A WAV file's layout: `RIFF`/`WAVE`, a PCM `fmt ` chunk and a `data` chunk that fits.
pub fn wav_info(b: &[u8]) -> Result<Wav, String> {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return Err("audio is not a WAV file (no RIFF/WAVE header)".into());
    }
    let mut at = 12;
    let mut fmt: Option<(u16, u32, u16)> = None;
    while at + 8 <= b.len() {
        let id = &b[at..at + 4];
        let len = le32(&b[at + 4..at + 8]) as usize;
        let body = &b[at + 8..];
        if id == b"fmt " {
            if len < 16 || body.len() < 16 {
                return Err("WAV fmt chunk is shorter than 16 bytes".into());
            }
            let tag = u16::from_le_bytes([body[0], body[1]]);
            if tag != 1 && tag != 3 && tag != 0xfffe {
                return Err(format!("WAV format tag {tag} is not PCM"));
            }
            let channels = u16::from_le_bytes([body[2], body[3]]);
            let rate = le32(&body[4..8]);
            let bits = u16::from_le_bytes([body[14], body[15]]);
            if channels == 0 || rate == 0 || bits == 0 || bits % 8 != 0 {
                return Err(format!(
                    "WAV fmt chunk has {channels} channels, {rate} Hz, {bits} bits"
                ));
            }
            fmt = Some((channels, rate, bits));
        } else if id == b"data" {
            let (channels, sample_rate, bits) =
                fmt.ok_or("WAV data chunk comes before its fmt chunk")?;
            if len > body.len() {
                return Err(format!(
                    "WAV data chunk says {len} bytes but {} follow",
                    body.len()
                ));
            }
            let block = u64::from(channels) * u64::from(bits / 8);
            return Ok(Wav {
                sample_rate,
                channels,
                bits,
                frames: len as u64 / block,
            });
        }
        at = at + 8 + len + (len & 1);
    }
    Err("WAV file has no data chunk".into())
}

/// An MP3 file starts with an ID3 tag or an MPEG audio frame sync.
fn mp3_check(b: &[u8]) -> Result<(), String> {
    let sync = b.len() >= 2 && b[0] == 0xff && b[1] & 0xe0 == 0xe0;
    if b.starts_with(b"ID3") || sync {
        Ok(())
    } else {
        Err("audio is not an MP3 file (no ID3 tag or frame sync)".into())
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The media of each chat request that carried any, oldest first.
#[derive(Debug, Default)]
pub struct MediaLog {
    requests: Mutex<std::collections::VecDeque<Vec<Media>>>,
}

impl MediaLog {
    /// Notes one request's media (nothing for a request without any).
    pub fn record(&self, media: &[Media]) {
        if media.is_empty() {
            return;
        }
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() == MEDIA_LOG_REQUESTS {
            r.pop_front();
        }
        r.push_back(media.to_vec());
    }

    /// Every kept request's media.
    pub fn requests(&self) -> Vec<Vec<Media>> {
        let r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        r.iter().cloned().collect()
    }
}

/// Bytes as a content part (JSON), a data URL, and a PNG, JPEG, WAV or MP3 file: media or
/// an error, never a panic.
pub fn fuzz_media(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        let _ = part(&v);
        if let Some(parts) = v.as_array() {
            for p in parts {
                let _ = part(p);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = data_url(text);
    }
    let _ = png_size(data);
    let _ = jpeg_size(data);
    let _ = wav_info(data);
    let _ = mp3_check(data);
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
