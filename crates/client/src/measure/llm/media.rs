//! AIPerf's image and audio metrics of chat requests that carried media, over the successful
//! requests that carried any: `num_images` (images per request), `image_throughput` (images
//! / request latency, images/s), `image_latency` (request latency / images, ms per image),
//! `audio_duration` (seconds of input audio per request) and `rtfx` (audio seconds / request
//! latency seconds: how many times faster than real time). A request without images (without
//! audio) gives no image (audio) value, as AIPerf raises `NoMetricValue` for it.

use super::record::LlmRequest;
use super::request::request_metrics;
use super::stats::{StatAcc, Stats};

/// The media metrics of a run; each `None` when no successful request carried that medium.
/// Latencies in ns, throughputs per second, audio in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MediaMetrics {
    pub num_images: Option<Stats>,
    pub image_throughput: Option<Stats>,
    /// ns per image.
    pub image_latency: Option<Stats>,
    pub audio_duration: Option<Stats>,
    pub rtfx: Option<Stats>,
}

/// The per-request values of `r` (a successful request): (num_images, image_throughput,
/// image_latency ns, audio_duration s, rtfx), each `None` where it does not apply.
pub fn request_media(r: &LlmRequest) -> [Option<f64>; 5] {
    let Some(m) = request_metrics(r) else {
        return [None; 5];
    };
    let latency_s = m.e2e_ns as f64 / 1e9;
    let images = (r.images > 0).then_some(f64::from(r.images));
    let audio = (r.audio_us > 0).then_some(r.audio_us as f64 / 1e6);
    [
        images,
        images.filter(|_| latency_s > 0.0).map(|n| n / latency_s),
        images.map(|n| m.e2e_ns as f64 / n),
        audio,
        audio.filter(|_| latency_s > 0.0).map(|a| a / latency_s),
    ]
}

/// The media metrics of `reqs`.
pub fn compute(reqs: &[LlmRequest]) -> MediaMetrics {
    let mut acc: [StatAcc; 5] = std::array::from_fn(|_| StatAcc::new());
    for r in reqs {
        for (a, v) in acc.iter_mut().zip(request_media(r)) {
            if let Some(v) = v {
                a.record(v);
            }
        }
    }
    let [num_images, image_throughput, image_latency, audio_duration, rtfx] =
        acc.map(|a| a.stats());
    MediaMetrics {
        num_images,
        image_throughput,
        image_latency,
        audio_duration,
        rtfx,
    }
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
