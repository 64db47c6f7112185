use base64::Engine;

use super::*;
use crate::llm::cli::parse;

fn args(line: &[&str]) -> ProfileArgs {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
    v.extend(line.iter().map(Into::into));
    parse(v).unwrap().unwrap().args
}

fn refusal(line: &[&str]) -> String {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
    v.extend(line.iter().map(Into::into));
    let e = parse(v).unwrap_err();
    assert_eq!(e.exit_code(), 99, "{e}");
    e.to_string()
}

fn b64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[test]
fn images_are_png_data_urls_of_the_drawn_size() {
    let a = args(&[
        "--image-width-mean",
        "40",
        "--image-height-mean",
        "30",
        "--image-batch-size",
        "2",
    ]);
    let media = generate(&a.media, 1, 3).unwrap();
    assert_eq!(media.len(), 3);
    for (parts, drawn) in &media {
        assert_eq!(parts.len(), 2);
        for (p, d) in parts.iter().zip(drawn) {
            assert_eq!(p["type"], "image_url");
            let url = p["image_url"]["url"].as_str().unwrap();
            let data = url.strip_prefix("data:image/png;base64,").unwrap();
            let file = b64(data);
            assert_eq!(file[..8], png::SIGNATURE);
            assert_eq!(&file[12..16], b"IHDR");
            assert_eq!(u32::from_be_bytes(file[16..20].try_into().unwrap()), 40);
            assert_eq!(u32::from_be_bytes(file[20..24].try_into().unwrap()), 30);
            let want = Drawn::Image {
                format: "png",
                width: 40,
                height: 30,
                bytes: file.len(),
            };
            assert_eq!(*d, want);
        }
    }
    assert_ne!(media[0].0, media[1].0, "each prompt has its own images");
    assert_eq!(generate(&a.media, 1, 3).unwrap(), media, "seeded");
    assert_ne!(generate(&a.media, 2, 3).unwrap(), media);
}

#[test]
fn jpeg_and_random_formats() {
    let a = args(&[
        "--image-width-mean",
        "17",
        "--image-height-mean",
        "9",
        "--image-format",
        "jpeg",
    ]);
    let (parts, _) = &generate(&a.media, 0, 1).unwrap()[0];
    let url = parts[0]["image_url"]["url"].as_str().unwrap();
    let file = b64(url.strip_prefix("data:image/jpeg;base64,").unwrap());
    assert_eq!(file[..2], [0xff, 0xd8], "JPEG start of image");
    assert_eq!(file[file.len() - 2..], [0xff, 0xd9], "JPEG end of image");

    let a = args(&[
        "--image-width-mean",
        "8",
        "--image-height-mean",
        "8",
        "--image-format",
        "random",
    ]);
    let formats: Vec<&str> = generate(&a.media, 0, 40)
        .unwrap()
        .iter()
        .map(|(_, d)| match d[0] {
            Drawn::Image { format, .. } => format,
            _ => panic!(),
        })
        .collect();
    assert!(formats.contains(&"png") && formats.contains(&"jpeg"));
}

#[test]
fn sizes_spread_with_a_stddev() {
    let a = args(&[
        "--image-width-mean",
        "64",
        "--image-width-stddev",
        "16",
        "--image-height-mean",
        "2",
        "--image-height-stddev",
        "4",
    ]);
    let sides: Vec<(u32, u32)> = generate(&a.media, 3, 200)
        .unwrap()
        .iter()
        .map(|(_, d)| match d[0] {
            Drawn::Image { width, height, .. } => (width, height),
            _ => panic!(),
        })
        .collect();
    let mean = sides.iter().map(|s| f64::from(s.0)).sum::<f64>() / 200.0;
    assert!((58.0..72.0).contains(&mean), "{mean}");
    assert!(sides.iter().any(|s| s.0 != sides[0].0));
    assert!(sides.iter().all(|s| s.1 >= 1));
}

#[test]
fn audio_is_wav_of_the_drawn_length_rate_and_depth() {
    let a = args(&[
        "--audio-length-mean",
        "0.5",
        "--audio-sample-rates",
        "8,44.1",
        "--audio-depths",
        "16,24",
        "--audio-num-channels",
        "2",
        "--batch-size-audio",
        "3",
    ]);
    let media = generate(&a.media, 5, 20).unwrap();
    let mut rates = std::collections::BTreeSet::new();
    let mut depths = std::collections::BTreeSet::new();
    for (parts, drawn) in &media {
        assert_eq!(parts.len(), 3);
        for (p, d) in parts.iter().zip(drawn) {
            assert_eq!(p["type"], "input_audio");
            assert_eq!(p["input_audio"]["format"], "wav");
            let file = b64(p["input_audio"]["data"].as_str().unwrap());
            let Drawn::Audio {
                sample_rate,
                bits,
                channels,
                frames,
                bytes,
            } = *d
            else {
                panic!()
            };
            assert_eq!(&file[..4], b"RIFF");
            assert_eq!(u16::from_le_bytes([file[22], file[23]]), channels);
            assert_eq!(
                u32::from_le_bytes(file[24..28].try_into().unwrap()),
                sample_rate
            );
            assert_eq!(u16::from_le_bytes([file[34], file[35]]), bits);
            assert_eq!(channels, 2);
            assert_eq!(frames, sample_rate as usize / 2, "0.5 s");
            assert_eq!(bytes, file.len());
            assert_eq!(file.len(), 44 + frames * 2 * usize::from(bits / 8));
            rates.insert(sample_rate);
            depths.insert(bits);
        }
    }
    assert_eq!(rates.into_iter().collect::<Vec<_>>(), [8000, 44100]);
    assert_eq!(depths.into_iter().collect::<Vec<_>>(), [16, 24]);
}

#[test]
fn attach_puts_text_then_images_then_audio() {
    let a = args(&[
        "--image-width-mean",
        "4",
        "--image-height-mean",
        "4",
        "--audio-length-mean",
        "0.01",
    ]);
    let media = generate(&a.media, 0, 2).unwrap();
    let mut bodies = vec![
        json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": ""}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": "again"}]}),
    ];
    attach(&mut bodies, &media);
    let content = |i: usize| {
        bodies[i]["messages"][0]["content"]
            .as_array()
            .unwrap()
            .clone()
    };
    let types = |i: usize| -> Vec<String> {
        content(i)
            .iter()
            .map(|p| p["type"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(types(0), ["text", "image_url", "input_audio"]);
    assert_eq!(content(0)[0]["text"], "hello");
    assert_eq!(types(1), ["image_url", "input_audio"], "no empty text part");
    assert_eq!(
        content(2)[1],
        media[0].0[0],
        "body 2 reuses prompt 0's media"
    );
    assert_ne!(content(1)[0], media[0].0[0]);
    assert!(summary_line(&media).contains("2 images"));
    assert!(summary_line(&[]).is_empty());
}

#[test]
fn no_media_flags_no_media() {
    let a = args(&[]);
    assert!(generate(&a.media, 0, 5).unwrap().is_empty());
    let a = args(&["--image-format", "jpeg", "--audio-depths", "8"]);
    assert!(generate(&a.media, 0, 5).unwrap().is_empty());
}

#[test]
fn bad_media_flags_are_usage_errors_naming_the_flag() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--audio-length-mean", "1", "--audio-format", "mp3"],
            &["--audio-format mp3", "wav"],
        ),
        (
            &["--audio-length-mean", "1", "--audio-depths", "12"],
            &["--audio-depths 12", "8, 16, 24 and 32"],
        ),
        (
            &["--audio-length-mean", "1", "--audio-sample-rates", "0"],
            &["--audio-sample-rates"],
        ),
        (&["--audio-length-mean", "0.001"], &["--audio-length-mean"]),
        (&["--audio-num-channels", "3"], &["--audio-num-channels"]),
        (
            &["--image-height-mean", "5", "--image-width-mean", "-1"],
            &["--image-width-mean"],
        ),
        (
            &["--image-height-mean", "5000", "--image-width-mean", "5"],
            &["--image-height-mean", "4096"],
        ),
        (
            &[
                "--image-height-mean",
                "5",
                "--image-width-mean",
                "5",
                "--batch-size-image",
                "0",
            ],
            &["--image-batch-size"],
        ),
        (
            &[
                "--image-height-mean",
                "5",
                "--image-width-mean",
                "5",
                "--endpoint-type",
                "completions",
            ],
            &["--image-width-mean", "chat", "completions"],
        ),
        (
            &["--audio-length-mean", "1", "--input-file", "x.jsonl"],
            &["--audio-length-mean", "input file"],
        ),
        (
            &["--audio-length-mean", "1", "--conversation-turn-mean", "3"],
            &["--audio-length-mean", "multi-turn"],
        ),
    ];
    for (line, words) in cases {
        let text = refusal(line);
        assert_eq!(text.lines().count(), 1, "{text}");
        for w in *words {
            assert!(text.contains(w), "{w:?} not in {text:?} for {line:?}");
        }
    }
}
