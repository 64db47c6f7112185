use super::*;
use crate::measure::llm::record::RequestError;
use crate::measure::FailKind;

fn req(latency_ms: u64, images: u32, audio_us: u64) -> LlmRequest {
    LlmRequest {
        start_ns: 1_000_000_000,
        end_ns: 1_000_000_000 + latency_ms * 1_000_000,
        isl: 10,
        osl: 1,
        images,
        audio_us,
        ..LlmRequest::default()
    }
}

#[test]
fn image_and_audio_values_follow_aiperfs_formulas() {
    // 2 images in 500 ms: 4 images/s, 250 ms per image; 5 s of audio in 500 ms: RTFx 10.
    let [n, tput, lat, dur, rtfx] = request_media(&req(500, 2, 5_000_000));
    assert_eq!(n, Some(2.0));
    assert_eq!(tput, Some(4.0));
    assert_eq!(lat, Some(250e6));
    assert_eq!(dur, Some(5.0));
    assert_eq!(rtfx, Some(10.0));
    assert_eq!(request_media(&req(500, 0, 0)), [None; 5]);
}

#[test]
fn only_successful_requests_with_media_count() {
    let mut failed = req(100, 3, 1_000_000);
    failed.error = Some(RequestError::new(FailKind::Reset, "reset"));
    let reqs = [req(500, 2, 0), req(250, 1, 0), req(100, 0, 0), failed];
    let m = compute(&reqs);
    let n = m.num_images.unwrap();
    assert_eq!((n.count, n.avg, n.min, n.max), (2, 1.5, 1.0, 2.0));
    let t = m.image_throughput.unwrap();
    assert_eq!((t.min, t.max), (4.0, 4.0));
    let l = m.image_latency.unwrap();
    assert_eq!((l.min, l.max), (250e6, 250e6));
    assert!(m.audio_duration.is_none() && m.rtfx.is_none());
}
