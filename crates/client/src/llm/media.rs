//! Synthetic images and audio for chat requests (AIPerf's and GenAI-Perf's `--image-*` and
//! `--audio-*` flags): each synthetic prompt gets its own images and audio clips, drawn
//! before the run from `--random-seed`, and the chat body carries them as OpenAI content
//! parts after the prompt's text: `image_url` with a `data:image/<format>;base64,` URL and
//! `input_audio` with the base64 file and its format.
//!
//! Images are PNG ([`png`]) or JPEG (the `image` crate's encoder) of a seeded colour
//! gradient with noise, sized by the width and height draws. Audio is WAV ([`wav`]) of
//! Gaussian noise (standard deviation 0.3 of full scale, clipped), as AIPerf draws it; MP3
//! is refused (there is no encoder here).

pub mod png;
pub mod wav;

use crate::run::kinds::codec::Input;
use base64::Engine;
use clap::ValueEnum;
use serde_json::{json, Value};

use super::cli::{EndpointType, ProfileArgs};
use super::payload::splitmix;
use crate::error::{Error, Result};

/// The largest image width or height drawn, in pixels (a larger draw is cut to it).
pub const MAX_SIDE: u32 = 4096;
/// The longest audio clip drawn, in seconds (a longer draw is cut to it).
pub const MAX_AUDIO_SECONDS: f64 = 600.0;
/// The most images or audio clips one request may carry.
pub const MAX_BATCH: u64 = 64;
/// The highest sample rate accepted, in kHz.
pub const MAX_SAMPLE_RATE_KHZ: f64 = 384.0;
/// The shortest mean audio length, in seconds (AIPerf's).
pub const MIN_AUDIO_SECONDS: f64 = 0.01;

/// `--image-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ImageFormat {
    #[default]
    Png,
    Jpeg,
    /// PNG or JPEG, drawn for each image.
    Random,
}

/// `--audio-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum AudioFormat {
    #[default]
    Wav,
    /// Refused: there is no MP3 encoder.
    Mp3,
}

/// Image and audio flags of `profile` (AIPerf's names, GenAI-Perf's as aliases).
#[derive(clap::Args, Debug, Clone)]
pub struct MediaArgs {
    /// Synthetic images: mean width in pixels (images are sent when this and
    /// --image-height-mean are above 0; chat only).
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_width_mean: f64,
    /// Synthetic images: standard deviation of the width.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_width_stddev: f64,
    /// Synthetic images: mean height in pixels.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_height_mean: f64,
    /// Synthetic images: standard deviation of the height.
    #[arg(long, default_value_t = 0.0, value_name = "PX")]
    pub image_height_stddev: f64,
    /// Synthetic images: png, jpeg, or random (either, drawn per image).
    #[arg(long, value_enum, default_value = "png")]
    pub image_format: ImageFormat,
    /// Images per request.
    #[arg(
        long,
        visible_alias = "batch-size-image",
        default_value_t = 1,
        value_name = "N"
    )]
    pub image_batch_size: u64,
    /// Synthetic audio: mean clip length in seconds (clips are sent when above 0; chat
    /// only).
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    pub audio_length_mean: f64,
    /// Synthetic audio: standard deviation of the clip length in seconds.
    #[arg(long, default_value_t = 0.0, value_name = "S")]
    pub audio_length_stddev: f64,
    /// Synthetic audio: wav (mp3 is refused: there is no MP3 encoder).
    #[arg(long, value_enum, default_value = "wav")]
    pub audio_format: AudioFormat,
    /// Synthetic audio: bit depths drawn from per clip (8, 16, 24, 32) [default: 16].
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "BITS")]
    pub audio_depths: Vec<u16>,
    /// Synthetic audio: sample rates in kHz drawn from per clip [default: 16].
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "KHZ")]
    pub audio_sample_rates: Vec<f64>,
    /// Synthetic audio: 1 (mono) or 2 (stereo).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub audio_num_channels: u16,
    /// Audio clips per request.
    #[arg(
        long,
        visible_alias = "batch-size-audio",
        default_value_t = 1,
        value_name = "N"
    )]
    pub audio_batch_size: u64,
}

impl Default for MediaArgs {
    /// The flags' defaults: no images, no audio.
    fn default() -> Self {
        MediaArgs {
            image_width_mean: 0.0,
            image_width_stddev: 0.0,
            image_height_mean: 0.0,
            image_height_stddev: 0.0,
            image_format: ImageFormat::Png,
            image_batch_size: 1,
            audio_length_mean: 0.0,
            audio_length_stddev: 0.0,
            audio_format: AudioFormat::Wav,
            audio_depths: Vec::new(),
            audio_sample_rates: Vec::new(),
            audio_num_channels: 1,
            audio_batch_size: 1,
        }
    }
}

impl MediaArgs {
    /// Requests carry images (both mean sides above 0, as AIPerf decides).
    pub fn images(&self) -> bool {
        self.image_width_mean > 0.0 && self.image_height_mean > 0.0
    }

    /// Requests carry audio clips.
    pub fn audio(&self) -> bool {
        self.audio_length_mean > 0.0
    }

    fn depths(&self) -> Vec<u16> {
        if self.audio_depths.is_empty() {
            vec![16]
        } else {
            self.audio_depths.clone()
        }
    }

    fn sample_rates(&self) -> Vec<f64> {
        if self.audio_sample_rates.is_empty() {
            vec![16.0]
        } else {
            self.audio_sample_rates.clone()
        }
    }
}

/// Checks the media flags against the rest of the run (usage errors naming the flag).
pub fn check(args: &ProfileArgs, endpoint_type: EndpointType) -> Result<()> {
    let m = &args.media;
    let usage = |text: String| Err(Error::usage(format!("profile: {text}")));
    for (flag, v) in [
        ("--image-width-mean", m.image_width_mean),
        ("--image-width-stddev", m.image_width_stddev),
        ("--image-height-mean", m.image_height_mean),
        ("--image-height-stddev", m.image_height_stddev),
        ("--audio-length-mean", m.audio_length_mean),
        ("--audio-length-stddev", m.audio_length_stddev),
    ] {
        if !v.is_finite() || v < 0.0 {
            return usage(format!("{flag} must be a number of at least 0 (got {v})"));
        }
    }
    for (flag, v) in [
        ("--image-width-mean", m.image_width_mean),
        ("--image-height-mean", m.image_height_mean),
    ] {
        if v > f64::from(MAX_SIDE) {
            return usage(format!("{flag} must be at most {MAX_SIDE} (got {v})"));
        }
    }
    if (m.image_width_mean > 0.0) != (m.image_height_mean > 0.0) {
        return usage(
            "--image-width-mean and --image-height-mean must both be above 0 to send images".into(),
        );
    }
    for (flag, v) in [
        ("--image-batch-size", m.image_batch_size),
        ("--audio-batch-size", m.audio_batch_size),
    ] {
        if !(1..=MAX_BATCH).contains(&v) {
            return usage(format!("{flag} must be from 1 to {MAX_BATCH} (got {v})"));
        }
    }
    if !(1..=2).contains(&m.audio_num_channels) {
        return usage(format!(
            "--audio-num-channels must be 1 (mono) or 2 (stereo) (got {})",
            m.audio_num_channels
        ));
    }
    if m.audio() {
        if m.audio_format == AudioFormat::Mp3 {
            return usage(
                "--audio-format mp3 is not supported: there is no MP3 encoder; use \
                 --audio-format wav"
                    .into(),
            );
        }
        if m.audio_length_mean < MIN_AUDIO_SECONDS || m.audio_length_mean > MAX_AUDIO_SECONDS {
            return usage(format!(
                "--audio-length-mean must be from {MIN_AUDIO_SECONDS} to {MAX_AUDIO_SECONDS} \
                 seconds (got {})",
                m.audio_length_mean
            ));
        }
        if let Some(d) = m.depths().iter().find(|d| !wav::DEPTHS.contains(d)) {
            return usage(format!(
                "--audio-depths {d} is not supported: the bit depths are 8, 16, 24 and 32"
            ));
        }
        if let Some(r) = m
            .sample_rates()
            .iter()
            .find(|r| !(r.is_finite() && **r * 1000.0 >= 1.0 && **r <= MAX_SAMPLE_RATE_KHZ))
        {
            return usage(format!(
                "--audio-sample-rates {r} must be above 0 and at most {MAX_SAMPLE_RATE_KHZ} \
                 (kHz)"
            ));
        }
    }
    let Some(flag) = given_flag(m) else {
        return Ok(());
    };
    if endpoint_type.input() != Input::Messages {
        return usage(format!(
            "{flag} applies to --endpoint-type chat (images and audio go in chat content \
             parts), not {}",
            endpoint_type.name()
        ));
    }
    if args.input_file.is_some() || args.dataset.dataset_path.is_some() {
        return usage(format!(
            "{flag} adds synthetic media to synthetic prompts; with an input file the \
             requests come from the file"
        ));
    }
    let turns = &args.dataset.turns;
    if turns.conversation_turn_mean.is_some_and(|t| t != 1.0)
        || turns.conversation_turn_stddev != 0.0
    {
        return usage(format!(
            "{flag} is not supported with multi-turn conversations (--conversation-turn-mean \
             above 1); media go with single-turn requests"
        ));
    }
    Ok(())
}

/// The flag that turns media on (images first), if any.
fn given_flag(m: &MediaArgs) -> Option<&'static str> {
    if m.images() {
        Some("--image-width-mean")
    } else if m.audio() {
        Some("--audio-length-mean")
    } else {
        None
    }
}

/// What one generated item is, for the settings line and tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Drawn {
    Image {
        format: &'static str,
        width: u32,
        height: u32,
        bytes: usize,
    },
    Audio {
        sample_rate: u32,
        bits: u16,
        channels: u16,
        frames: usize,
        bytes: usize,
    },
}

/// The media of each of `count` prompts: the chat content parts to add after the text
/// (images, then audio), and what each part holds. Empty when no media flag is set.
pub fn generate(m: &MediaArgs, seed: u64, count: usize) -> Result<Vec<(Vec<Value>, Vec<Drawn>)>> {
    if !m.images() && !m.audio() {
        return Ok(Vec::new());
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut images = Rng(seed ^ 0x0069_6d61_6765_7300);
    let mut audio = Rng(seed ^ 0x0061_7564_696f_0000);
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let mut parts = Vec::new();
        let mut drawn = Vec::new();
        for _ in 0..m.image_batch_size * u64::from(m.images()) {
            let (format, width, height, file) = image(m, &mut images)?;
            let url = format!("data:image/{format};base64,{}", b64.encode(&file));
            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
            drawn.push(Drawn::Image {
                format,
                width,
                height,
                bytes: file.len(),
            });
        }
        for _ in 0..m.audio_batch_size * u64::from(m.audio()) {
            let (clip, d) = clip(m, &mut audio);
            parts.push(json!({"type": "input_audio",
                "input_audio": {"data": b64.encode(&clip), "format": "wav"}}));
            drawn.push(d);
        }
        out.push((parts, drawn));
    }
    Ok(out)
}

/// One image: (format name, width, height, file).
fn image(m: &MediaArgs, rng: &mut Rng) -> Result<(&'static str, u32, u32, Vec<u8>)> {
    let jpeg = match m.image_format {
        ImageFormat::Png => false,
        ImageFormat::Jpeg => true,
        ImageFormat::Random => rng.next() & 1 == 1,
    };
    let side = |rng: &mut Rng, mean: f64, sd: f64| {
        (rng.normal_at_least(mean, sd, 0.0).ceil() as u32).clamp(1, MAX_SIDE)
    };
    let width = side(rng, m.image_width_mean, m.image_width_stddev);
    let height = side(rng, m.image_height_mean, m.image_height_stddev);
    let rgb = pixels(width, height, rng);
    if !jpeg {
        return Ok(("png", width, height, png::encode_rgb(width, height, &rgb)));
    }
    let mut file = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut file, 85)
        .encode(&rgb, width, height, image::ColorType::Rgb8)
        .map_err(|e| Error::generic(format!("profile: encoding a synthetic JPEG image: {e}")))?;
    Ok(("jpeg", width, height, file))
}

/// A seeded colour gradient with per-pixel noise of up to 7 levels, which PNG compresses to
/// about half the raw size, near what photographs of that size take (RGB, rows top to bottom).
fn pixels(width: u32, height: u32, rng: &mut Rng) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let base = rng.next().to_le_bytes();
    let mut out = vec![0u8; w * h * 3];
    if out.is_empty() {
        return out;
    }
    // The ramp of channel c is (x * base[3 + c] / w + y * base[6 - c] / h) / 2: the column
    // term is computed once per column, the row term once per row.
    let across: Vec<[usize; 3]> = (0..w)
        .map(|x| std::array::from_fn(|c| x * usize::from(base[3 + c]) / w))
        .collect();
    let mut noise = 0u64;
    for (y, row) in out.chunks_exact_mut(w * 3).enumerate() {
        let down: [usize; 3] = std::array::from_fn(|c| y * usize::from(base[6 - c]) / h);
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            // One draw gives the noise of two pixels (the low 3 bits of 6 of its bytes).
            if x % 2 == 0 {
                noise = rng.next();
            }
            for c in 0..3 {
                let n = (noise & 0x07) as usize;
                noise >>= 8;
                px[c] = (usize::from(base[c]) + (across[x][c] + down[c]) / 2 + n) as u8;
            }
        }
    }
    out
}

/// One WAV clip of Gaussian noise and what it holds.
fn clip(m: &MediaArgs, rng: &mut Rng) -> (Vec<u8>, Drawn) {
    let seconds = rng
        .normal_at_least(
            m.audio_length_mean,
            m.audio_length_stddev,
            MIN_AUDIO_SECONDS,
        )
        .min(MAX_AUDIO_SECONDS);
    let rates = m.sample_rates();
    let depths = m.depths();
    let khz = rates[(rng.next() % rates.len() as u64) as usize];
    let bits = depths[(rng.next() % depths.len() as u64) as usize];
    let sample_rate = (khz * 1000.0).round() as u32;
    let frames = (seconds * f64::from(sample_rate)) as usize;
    let channels = m.audio_num_channels;
    let samples: Vec<f64> = (0..frames * usize::from(channels))
        .map(|_| rng.normal(0.0, 0.3))
        .collect();
    let file = wav::encode(&samples, sample_rate, channels, bits);
    let drawn = Drawn::Audio {
        sample_rate,
        bits,
        channels,
        frames,
        bytes: file.len(),
    };
    (file, drawn)
}

/// Adds each prompt's media parts to its chat body: the last message's `content` becomes
/// a list of parts, its text first (left out when empty), then the media. Body `i` gets
/// the media of prompt `i` modulo the number of prompts.
pub fn attach(bodies: &mut [Value], media: &[(Vec<Value>, Vec<Drawn>)]) {
    if media.is_empty() {
        return;
    }
    for (i, body) in bodies.iter_mut().enumerate() {
        let Some(message) = body
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .and_then(|m| m.last_mut())
        else {
            continue;
        };
        let mut content = Vec::new();
        match message.get("content") {
            Some(Value::String(t)) if !t.is_empty() => {
                content.push(json!({"type": "text", "text": t}));
            }
            Some(Value::Array(parts)) => content.extend(parts.iter().cloned()),
            _ => {}
        }
        content.extend(media[i % media.len()].0.iter().cloned());
        message["content"] = Value::Array(content);
    }
}

/// The images and the audio length (µs) body `i` of `n` carries (as [`attach`] gives them).
pub fn counts(media: &[(Vec<Value>, Vec<Drawn>)], n: usize) -> Vec<(u32, u64)> {
    if media.is_empty() {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let mut images = 0;
            let mut audio_us = 0u64;
            for d in &media[i % media.len()].1 {
                match d {
                    Drawn::Image { .. } => images += 1,
                    Drawn::Audio {
                        sample_rate,
                        frames,
                        ..
                    } => {
                        audio_us += (*frames as u64).saturating_mul(1_000_000)
                            / u64::from((*sample_rate).max(1));
                    }
                }
            }
            (images, audio_us)
        })
        .collect()
}

/// Puts on each request the media its body carried (`counts` by step).
pub fn count_requests(
    requests: &mut [crate::measure::llm::LlmRequest],
    records: &[crate::measure::RequestRecord],
    counts: &[(u32, u64)],
) {
    if counts.is_empty() || records.len() != requests.len() {
        return;
    }
    for (r, rec) in requests.iter_mut().zip(records) {
        if let Some(&(images, audio_us)) = counts.get(rec.step as usize) {
            r.images = images;
            r.audio_us = audio_us;
        }
    }
}

/// The run's media in one line (for the console), or empty without media.
pub fn summary_line(media: &[(Vec<Value>, Vec<Drawn>)]) -> String {
    let (mut images, mut clips, mut image_bytes, mut audio_bytes) = (0, 0, 0, 0);
    for d in media.iter().flat_map(|(_, d)| d) {
        match d {
            Drawn::Image { bytes, .. } => {
                images += 1;
                image_bytes += bytes;
            }
            Drawn::Audio { bytes, .. } => {
                clips += 1;
                audio_bytes += bytes;
            }
        }
    }
    if images + clips == 0 {
        return String::new();
    }
    format!(
        "Synthetic media: {images} images ({image_bytes} bytes), {clips} audio clips \
         ({audio_bytes} bytes) over {} prompts\n",
        media.len()
    )
}

/// splitmix64 draws: uniform and Gaussian.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        splitmix(&mut self.0)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A normal draw (Box-Muller).
    fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        if sd == 0.0 {
            return mean;
        }
        let (u, v) = (self.unit(), self.unit());
        mean + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// A normal draw of at least `low`, drawn again below it (AIPerf's rejection
    /// sampling); the mean itself after many misses.
    fn normal_at_least(&mut self, mean: f64, sd: f64, low: f64) -> f64 {
        for _ in 0..1000 {
            let x = self.normal(mean, sd);
            if x >= low {
                return x;
            }
        }
        mean.max(low)
    }
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
