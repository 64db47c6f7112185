//! Synthetic images and audio (`--image-*`, `--audio-*`): AIPerf's vision and audio
//! tutorial command lines run as [`crate::profile_quickstart`] runs the quick starts (the
//! document's arguments, `inferperf` as the program, the in-process reference server's
//! address), and the server's record of what each chat request carried: how many images
//! and clips, their formats, pixel sizes, sample rates, depths and lengths.
//!
//! Sources: the AIPerf 0.13 docs/tutorials vision.md ("Profile with Synthetic Images") and
//! audio.md ("Profile with Synthetic Audio").

use crate::profile_quickstart::{bodies, start_llm, Run};

use inferperf::inputs::tokenizer::hub::stand_in::StandIn;
use inferperf::server::{Media, Wav};

/// The content part types of each body the server received.
fn part_types(server: &inferperf::server::ServerHandle) -> Vec<Vec<String>> {
    bodies(server)
        .iter()
        .map(|b| {
            b["messages"][0]["content"]
                .as_array()
                .expect("content parts")
                .iter()
                .map(|p| p["type"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

/// AIPerf docs/tutorials/vision.md, "Profile with Synthetic Images": 20 requests, 4 at a
/// time, each with a 100-token prompt and one 512x512 PNG.
#[test]
fn aiperf_vision_synthetic_images() {
    let server = start_llm("Qwen/Qwen2-VL-2B-Instruct");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("media-aiperf-vision", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen2-VL-2B-Instruct",
        "--endpoint-type", "chat",
        "--image-width-mean", "512",
        "--image-height-mean", "512",
        "--synthetic-input-tokens-mean", "100",
        "--streaming",
        "--url", "localhost:8000",
        "--request-count", "20",
        "--concurrency", "4",
    ])
    .ok();
    let name = "Qwen_Qwen2-VL-2B-Instruct-openai-chat-concurrency4";
    assert_eq!(run.aiperf_files(name), 20);
    let media = server.llm_media();
    assert_eq!(media.len(), 20, "every request carried media");
    let mut sizes = Vec::new();
    for m in &media {
        let [Media::Image {
            format,
            bytes,
            width,
            height,
        }] = m[..]
        else {
            panic!("one image per request: {m:?}");
        };
        assert_eq!((format, width, height), ("png", 512, 512));
        sizes.push(bytes);
    }
    sizes.sort_unstable();
    sizes.dedup();
    assert!(sizes.len() > 1, "each prompt has its own image: {sizes:?}");
    assert!(part_types(&server)
        .iter()
        .all(|t| t == &["text", "image_url"]));
    let stdout = String::from_utf8_lossy(&run.out.stdout);
    assert!(stdout.contains("Synthetic media: 100 images"), "{stdout}");
}

/// AIPerf docs/tutorials/audio.md, "Profile with Synthetic Audio": 20 requests, 4 at a
/// time, each with one 5 s mono 16 kHz 16-bit WAV clip after the default 550-token prompt.
#[test]
fn aiperf_audio_synthetic_wav() {
    let server = start_llm("Qwen/Qwen2-Audio-7B-Instruct");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("media-aiperf-audio", &server, &hub, &[
        "profile",
        "--model", "Qwen/Qwen2-Audio-7B-Instruct",
        "--endpoint-type", "chat",
        "--audio-length-mean", "5.0",
        "--audio-format", "wav",
        "--audio-sample-rates", "16",
        "--streaming",
        "--url", "localhost:8000",
        "--request-count", "20",
        "--concurrency", "4",
    ])
    .ok();
    let name = "Qwen_Qwen2-Audio-7B-Instruct-openai-chat-concurrency4";
    assert_eq!(run.aiperf_files(name), 20);
    let media = server.llm_media();
    assert_eq!(media.len(), 20);
    let clip = Media::Audio {
        format: "wav",
        bytes: 44 + 80_000 * 2,
        wav: Some(Wav {
            sample_rate: 16_000,
            channels: 1,
            bits: 16,
            frames: 80_000,
        }),
    };
    for m in &media {
        assert_eq!(m, std::slice::from_ref(&clip));
    }
    assert!(part_types(&server)
        .iter()
        .all(|t| t == &["text", "input_audio"]));
}

/// Batches of both, random image formats, several depths and stereo: each request carries
/// its prompt's 2 images then 2 clips, prompts reused round robin with the same media, and
/// the same seed draws the same media again.
#[test]
fn batches_formats_and_seeded_reuse() {
    let run_once = |tag: &str| {
        let server = start_llm("vlm");
        let hub = StandIn::start();
        #[rustfmt::skip]
        Run::new(tag, &server, &hub, &[
            "profile", "-m", "vlm", "--url", "localhost:8000",
            "--image-width-mean", "40", "--image-width-stddev", "10",
            "--image-height-mean", "20",
            "--image-format", "random", "--batch-size-image", "2",
            "--audio-length-mean", "0.1", "--audio-length-stddev", "0.02",
            "--audio-depths", "8", "24", "--audio-sample-rates", "8,22.05",
            "--audio-num-channels", "2", "--audio-batch-size", "2",
            "--num-dataset-entries", "4", "--request-count", "12",
            "--random-seed", "7",
        ])
        .ok();
        server.llm_media()
    };
    let media = run_once("media-batches-1");
    assert_eq!(media.len(), 12);
    let mut formats = std::collections::BTreeSet::new();
    for (i, m) in media.iter().enumerate() {
        assert_eq!(m.len(), 4, "{m:?}");
        for img in &m[..2] {
            let Media::Image { format, height, .. } = img else {
                panic!("{img:?}")
            };
            formats.insert(*format);
            assert_eq!(*height, 20);
        }
        for clip in &m[2..] {
            let Media::Audio {
                format: "wav",
                wav: Some(w),
                ..
            } = clip
            else {
                panic!("{clip:?}")
            };
            assert_eq!(w.channels, 2);
            assert!([8, 24].contains(&w.bits), "{w:?}");
            assert!([8000, 22050].contains(&w.sample_rate), "{w:?}");
            let seconds = w.frames as f64 / f64::from(w.sample_rate);
            assert!((0.01..0.2).contains(&seconds), "{seconds}");
        }
        assert_eq!(m, &media[i % 4], "request {i} reuses prompt {}", i % 4);
    }
    assert_eq!(formats.into_iter().collect::<Vec<_>>(), ["jpeg", "png"]);
    assert_eq!(run_once("media-batches-2"), media, "seeded");
}

/// MP3 needs an encoder there is not: refused before any request, one line, exit 99.
#[test]
fn mp3_is_refused_naming_the_flag() {
    let server = start_llm("m");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("media-mp3", &server, &hub, &[
        "profile", "-m", "m", "--url", "localhost:8000",
        "--audio-length-mean", "1", "--audio-format", "mp3",
    ]);
    let stderr = String::from_utf8_lossy(&run.out.stderr);
    assert_eq!(run.out.status.code(), Some(99), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--audio-format mp3"), "{stderr}");
    assert!(bodies(&server).is_empty());
}

/// The records of `profile_export.jsonl` in `dir`.
fn records(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// AIPerf's image and audio metrics: per request in `profile_export.jsonl` (num_images as
/// many as the server decoded, image_throughput = images / latency, image_latency = latency /
/// images, audio_duration the WAV's own length, rtfx = audio seconds / latency seconds), and
/// their statistics in `profile_export_aiperf.json`.
#[test]
fn image_and_audio_metrics_match_what_the_server_decoded() {
    let server = start_llm("vlm");
    let hub = StandIn::start();
    #[rustfmt::skip]
    let run = Run::new("media-metrics", &server, &hub, &[
        "profile", "-m", "vlm", "--url", "localhost:8000",
        "--image-width-mean", "32", "--image-height-mean", "16", "--batch-size-image", "3",
        "--audio-length-mean", "0.5", "--audio-sample-rates", "16",
        "--streaming", "--request-count", "6", "--concurrency", "2",
    ])
    .ok();
    let name = "vlm-openai-chat-concurrency2";
    assert_eq!(run.aiperf_files(name), 6);
    let media = server.llm_media();
    assert_eq!(media.len(), 6);
    let seconds: Vec<f64> = media
        .iter()
        .map(|m| {
            assert_eq!(
                m.iter()
                    .filter(|x| matches!(x, Media::Image { .. }))
                    .count(),
                3
            );
            m.iter()
                .filter_map(|x| match x {
                    Media::Audio { wav: Some(w), .. } => {
                        Some(w.frames as f64 / f64::from(w.sample_rate))
                    }
                    _ => None,
                })
                .sum()
        })
        .collect();
    let dir = run.profile_dir(name);
    let recs = records(&dir);
    assert_eq!(recs.len(), 6);
    for r in &recs {
        let m = &r["metrics"];
        let v = |k: &str| m[k]["value"].as_f64().unwrap_or_else(|| panic!("{k}: {m}"));
        let latency_ms = v("request_latency");
        assert_eq!(v("num_images"), 3.0);
        assert_eq!(m["num_images"]["unit"], "images");
        assert!(
            close(v("image_throughput"), 3.0 / (latency_ms / 1000.0)),
            "{m}"
        );
        assert_eq!(m["image_throughput"]["unit"], "images/sec");
        assert!(close(v("image_latency"), latency_ms / 3.0), "{m}");
        assert_eq!(m["image_latency"]["unit"], "ms/image");
        let audio = v("audio_duration");
        assert!(
            seconds.iter().any(|s| close(*s, audio)),
            "{audio} in {seconds:?}"
        );
        assert_eq!(m["audio_duration"]["unit"], "sec");
        assert!(close(v("rtfx"), audio / (latency_ms / 1000.0)), "{m}");
        assert_eq!(m["rtfx"]["unit"], "ratio");
    }
    let text = std::fs::read_to_string(dir.join("profile_export_aiperf.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = &summary["num_images"];
    assert_eq!(
        (n["avg"].as_f64(), n["min"].as_f64(), n["max"].as_f64()),
        (Some(3.0), Some(3.0), Some(3.0))
    );
    let mean = |k: &str| {
        recs.iter()
            .map(|r| r["metrics"][k]["value"].as_f64().unwrap())
            .sum::<f64>()
            / recs.len() as f64
    };
    for (k, unit) in [
        ("image_throughput", "images/sec"),
        ("image_latency", "ms/image"),
        ("audio_duration", "sec"),
        ("rtfx", "ratio"),
    ] {
        assert_eq!(summary[k]["unit"], unit, "{k}");
        let avg = summary[k]["avg"].as_f64().unwrap();
        assert!(close(avg, mean(k)), "{k}: {avg} vs {}", mean(k));
    }
    let console = std::fs::read_to_string(dir.join("profile_export_console.txt")).unwrap();
    for row in [
        "Image Throughput",
        "Image Latency",
        "Inverse Real-Time Factor (RTFx)",
    ] {
        assert!(console.contains(row), "{row}: {console}");
    }
    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf.csv")).unwrap();
    assert!(csv.contains("Image Throughput"), "{csv}");
}
