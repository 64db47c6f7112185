use base64::Engine;
use serde_json::json;

use super::*;
use crate::llm::request::{parse_generation, Endpoint};
use inferperf_client::llm::media::{generate, png, wav, ImageFormat, MediaArgs};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn png_file(w: u32, h: u32) -> Vec<u8> {
    png::encode_rgb(w, h, &vec![7; (w * h * 3) as usize])
}

fn image(url: String) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

fn audio(data: String, format: &str) -> Value {
    json!({"type": "input_audio", "input_audio": {"data": data, "format": format}})
}

#[test]
fn png_jpeg_and_wav_parts_are_read() {
    let file = png_file(5, 3);
    let got = part(&image(format!("data:image/png;base64,{}", b64(&file)))).unwrap();
    let want = Media::Image {
        format: "png",
        bytes: file.len(),
        width: 5,
        height: 3,
    };
    assert_eq!(got, Some(want));

    let args = MediaArgs {
        image_width_mean: 11.0,
        image_height_mean: 4.0,
        image_format: ImageFormat::Jpeg,
        ..MediaArgs::default()
    };
    let (parts, drawn) = &generate(&args, 0, 1).unwrap()[0];
    let Some(Media::Image {
        format,
        bytes,
        width,
        height,
    }) = part(&parts[0]).unwrap()
    else {
        panic!("{:?}", part(&parts[0]));
    };
    assert_eq!((format, width, height), ("jpeg", 11, 4));
    assert!(
        matches!(drawn[0], inferperf_client::llm::media::Drawn::Image { bytes: b, .. } if b == bytes)
    );

    let clip = wav::encode(&[0.1; 300], 22_050, 2, 24);
    let got = part(&audio(b64(&clip), "wav")).unwrap();
    let want = Media::Audio {
        format: "wav",
        bytes: clip.len(),
        wav: Some(Wav {
            sample_rate: 22_050,
            channels: 2,
            bits: 24,
            frames: 150,
        }),
    };
    assert_eq!(got, Some(want));

    let mp3 = [0xff, 0xfb, 0x90, 0x00];
    assert!(matches!(
        part(&audio(b64(&mp3), "mp3")).unwrap(),
        Some(Media::Audio {
            format: "mp3",
            bytes: 4,
            wav: None
        })
    ));
    let link = image("https://example.com/a.png".into());
    assert_eq!(part(&link).unwrap(), Some(Media::ImageLink));
    assert_eq!(part(&json!({"type": "text", "text": "hi"})).unwrap(), None);
}

#[test]
fn malformed_parts_say_what_is_wrong() {
    let good = png_file(2, 2);
    let mut bad_crc = good.clone();
    bad_crc[17] ^= 1;
    let mut short_wav = wav::encode(&[0.0; 10], 8000, 1, 16);
    short_wav.truncate(50);
    let cases: Vec<(Value, &str)> = vec![
        (
            image(format!("data:image/png;base64,{}", b64(&bad_crc))),
            "CRC",
        ),
        (
            image(format!("data:image/png;base64,{}", b64(b"GIF89a....."))),
            "PNG",
        ),
        (image("data:image/png;base64,@@@".into()), "base64"),
        (
            image(format!("data:image/gif;base64,{}", b64(&good))),
            "image/gif",
        ),
        (image(format!("data:image/png,{}", b64(&good))), "base64"),
        (image("ftp://x".into()), "data: URL"),
        (
            image(format!("data:image/jpeg;base64,{}", b64(&good))),
            "JPEG",
        ),
        (json!({"type": "image_url"}), "image_url"),
        (audio(b64(&short_wav), "wav"), "data chunk"),
        (audio(b64(b"RIFF....AVI "), "wav"), "WAV"),
        (audio(b64(b"hello"), "mp3"), "MP3"),
        (audio(b64(&good), "flac"), "flac"),
        (
            json!({"type": "input_audio", "input_audio": {"format": "wav"}}),
            "data",
        ),
    ];
    for (p, word) in cases {
        let err = part(&p).unwrap_err();
        assert!(err.contains(word), "{word:?} not in {err:?}");
    }
}

#[test]
fn chat_requests_carry_their_media_or_get_a_400() {
    let file = png_file(4, 4);
    let clip = wav::encode(&[0.0; 16], 16_000, 1, 16);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "two words"},
        image(format!("data:image/png;base64,{}", b64(&file))),
        audio(b64(&clip), "wav"),
    ]}]});
    let req = parse_generation(Endpoint::Chat, body.to_string().as_bytes(), &["m"]).unwrap();
    assert_eq!(req.prompt_tokens, 2);
    assert_eq!(req.media.len(), 2);
    assert!(matches!(req.media[0], Media::Image { width: 4, .. }));
    assert!(matches!(
        req.media[1],
        Media::Audio {
            wav: Some(Wav { frames: 16, .. }),
            ..
        }
    ));

    let bad = json!({"model": "m", "messages": [{"role": "user", "content": [
        image("data:image/png;base64,AAAA".into()),
    ]}]});
    let err = parse_generation(Endpoint::Chat, bad.to_string().as_bytes(), &["m"]).unwrap_err();
    assert_eq!(err.status, 400);
    assert_eq!(err.param, Some("messages"));
    assert!(err.message.contains("PNG"), "{}", err.message);
}

#[test]
fn the_log_keeps_requests_with_media() {
    let log = MediaLog::default();
    log.record(&[]);
    log.record(&[Media::ImageLink]);
    assert_eq!(log.requests(), vec![vec![Media::ImageLink]]);
}

#[test]
fn fuzz_entry_takes_any_bytes() {
    for data in [
        &b""[..],
        b"\xff\xd8\xff\xc0\x00\x01",
        b"\xff\xd8\xff\xe0\xff\xff",
        b"RIFF\x00\x00\x00\x00WAVEfmt \xff\xff\xff\xff",
        b"RIFF\x00\x00\x00\x00WAVEdata\x10\x00\x00\x00",
        b"data:;base64,",
        br#"[{"type":"image_url","image_url":"data:image/png;base64,"}]"#,
    ] {
        fuzz_media(data);
    }
}

#[test]
fn over_http_media_are_logged_and_a_bad_part_is_a_400() {
    use crate::test_client::{post_json, Client};
    let server = crate::start(crate::ServeConfig {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ..crate::ServeConfig::default()
    })
    .expect("server starts");
    let file = png_file(3, 2);
    let model = crate::DEFAULT_OPENAI_MODEL;
    let good = json!({"model": model, "max_tokens": 2, "messages": [{"role": "user",
        "content": [image(format!("data:image/png;base64,{}", b64(&file)))]}]});
    let mut c = Client::connect(server.addr);
    let r = c.request(&post_json("/v1/chat/completions", &good.to_string()));
    assert_eq!(r.status, 200);
    let bad = json!({"model": model, "messages": [{"role": "user",
        "content": [audio(b64(b"RIFF"), "wav")]}]});
    let r = c.request(&post_json("/v1/chat/completions", &bad.to_string()));
    assert_eq!(r.status, 400);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("WAV"), "{message}");
    assert_eq!(v["error"]["param"], "messages");
    let want = Media::Image {
        format: "png",
        bytes: file.len(),
        width: 3,
        height: 2,
    };
    assert_eq!(server.llm_media(), vec![vec![want]]);
}
