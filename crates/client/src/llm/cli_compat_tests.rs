use super::super::cli::{parse, EndpointType, ProfileConfig};
use super::*;

fn cfg(args: &[&str]) -> Result<ProfileConfig> {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into()];
    v.extend(args.iter().map(Into::into));
    match parse(v)? {
        Ok(c) => Ok(c),
        Err(text) => Err(Error::generic(text)),
    }
}

fn usage_error(args: &[&str]) -> String {
    let e = cfg(args).unwrap_err();
    assert_eq!(e.exit_code(), 99, "{args:?}: {}", e.msg);
    e.msg
}

#[test]
fn genai_perf_spellings_are_accepted_with_their_meaning() {
    let c = cfg(&[
        "-m",
        "m",
        "--endpoint-type",
        "embeddings",
        "-b",
        "4",
        "-p",
        "2000",
        "-v",
        "--num-warmup-requests",
        "3",
        "-g",
        "request_latency:300",
        "--model-selection-strategy",
        "round_robin",
    ])
    .unwrap();
    assert_eq!(c.batch_size, 4);
    assert_eq!(
        c.args.benchmark_duration,
        Some(6.0),
        "-p is three intervals"
    );
    assert!(c.args.compat.verbose);
    assert_eq!(c.args.warmup_request_count, 3);
    assert_eq!(c.args.goodput, ["request_latency:300"]);
    let c = cfg(&[
        "-m",
        "m",
        "--batch-size",
        "2",
        "--endpoint-type",
        "rankings",
    ])
    .unwrap();
    assert_eq!(c.batch_size, 2);
    let c = cfg(&["-m", "t", "--endpoint-type", "kserve", "--backend", "vllm"]).unwrap();
    assert_eq!(c.backend, Backend::Vllm);
    let c = cfg(&["-m", "t", "--endpoint-type", "kserve"]).unwrap();
    assert_eq!(c.backend, Backend::Tensorrtllm);
    let text = settings_text(&c);
    assert!(text.contains("backend tensorrtllm"), "{text}");
}

#[test]
fn aiperf_spellings_are_accepted_with_their_meaning() {
    let c = cfg(&[
        "--model-names",
        "m",
        "--api-key",
        "sk-123",
        "--num-requests",
        "7",
        "--conversation-num",
        "9",
        "--isl",
        "32",
        "--isl-stddev",
        "2",
        "--osl",
        "16",
        "--osl-stddev",
        "1",
        "--ui-type",
        "none",
        "--custom-endpoint",
        "/x/y",
        "--request-timeout-seconds",
        "2.5",
        "--workers-max",
        "2",
    ])
    .unwrap();
    assert_eq!(c.models, ["m"]);
    assert_eq!(
        c.headers,
        [("Authorization".into(), "Bearer sk-123".into())]
    );
    assert_eq!(c.args.request_count, Some(7));
    assert_eq!(c.args.num_prompts, 9);
    assert_eq!(
        (
            c.args.synthetic_input_tokens_mean,
            c.args.synthetic_input_tokens_stddev
        ),
        (32, 2.0)
    );
    assert_eq!(
        (c.args.output_tokens_mean, c.args.output_tokens_stddev),
        (Some(16), 1.0)
    );
    assert!(c.args.quiet, "--ui-type none is --quiet");
    assert_eq!(c.endpoint, "x/y");
    assert_eq!(c.request_timeout, std::time::Duration::from_millis(2500));
    assert_eq!(c.args.max_workers, Some(2));
    let text = settings_text(&c);
    assert!(
        text.contains("Authorization") && !text.contains("sk-123"),
        "{text}"
    );
}

#[test]
fn prefill_concurrency_is_accepted_where_aiperf_accepts_it() {
    let cap = |args: &[&str]| {
        let mut all = vec!["-m", "m", "--streaming"];
        all.extend_from_slice(args);
        cfg(&all).unwrap().load.prefill_concurrency
    };
    assert_eq!(cap(&[]), None);
    assert_eq!(cap(&["--prefill-concurrency", "2"]), Some(2));
    // Every point of a sweep may hold it.
    let sweep = ["--concurrency", "2,8", "--prefill-concurrency", "2"];
    assert_eq!(cap(&sweep), Some(2));
    // An open loop caps requests in flight only with --max-inflight.
    let rate = ["--request-rate", "5", "--prefill-concurrency", "64"];
    assert_eq!(cap(&rate), Some(64));
    let within = [
        "--request-rate",
        "5",
        "--max-inflight",
        "4",
        "--prefill-concurrency",
        "4",
    ];
    assert_eq!(cap(&within), Some(4));
    let generate = ["--endpoint-type", "generate", "--prefill-concurrency", "1"];
    assert_eq!(cap(&generate), Some(1));
    let msg = usage_error(&["-m", "m", "--streaming", "--prefill-concurrency", "x"]);
    assert!(
        msg.contains("--prefill-concurrency must be a whole number"),
        "{msg}"
    );
}

#[test]
fn version_prints_and_exits() {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "--version".into()];
    let text = parse(std::mem::take(&mut v)).unwrap().unwrap_err();
    assert_eq!(text, format!("inferperf {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn refused_flags_name_the_flag_and_why() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["-m", "m", "--input-dataset", "openorca"],
            &["--input-dataset", "--input-file", "download"],
        ),
        (
            &["-m", "m", "--public-dataset=sharegpt"],
            &["--public-dataset", "--input-file"],
        ),
        (
            &["-m", "m", "--image-width-mean", "10"],
            &["--image-width-mean", "--image-height-mean"],
        ),
        (
            &["-m", "m", "--video-width", "10"],
            &["--video-width", "video"],
        ),
        (
            &["-m", "m", "--mlflow-experiment", "x"],
            &["--mlflow-experiment"],
        ),
        (
            &["-m", "m", "-s", "10"],
            &["--stability-percentage", "stable"],
        ),
        (&["-m", "m", "--ui-type", "dashboard"], &["dashboard"]),
        (&["-m", "m", "--backend", "vllm"], &["--backend", "kserve"]),
        (
            &["-m", "m", "-b", "2"],
            &["--batch-size-text", "embeddings"],
        ),
        (
            &["-m", "m", "--endpoint-type", "embeddings", "-b", "0"],
            &["--batch-size-text"],
        ),
        (
            &["-m", "m", "-p", "100", "--request-count", "5"],
            &["--measurement-interval", "--request-count"],
        ),
        (&["-m", "m", "-p", "0"], &["--measurement-interval"]),
        (
            &["-m", "m", "--api-key", "k", "-H", "authorization: Bearer x"],
            &["--api-key", "not both"],
        ),
        (&["-m", "m", "--api-key", " "], &["--api-key"]),
        (&["-m", "m", "--backend", "onnx"], &["--backend"]),
        (
            &["-m", "m", "--input-file", "payload:/no/trace.jsonl"],
            &["--input-file payload:/no/trace.jsonl", "no such file"],
        ),
        (&["-m", "m", "--input-file", "payload:"], &["names no file"]),
        (
            &["-m", "m", "--input-file", "synthetic:queries,"],
            &["--input-file synthetic:queries,", "separated by commas"],
        ),
        (&["-m", "m", "--no-such-flag"], &["--no-such-flag"]),
        (
            &["-m", "m", "--extra-inputs", "{\"temperature\":"],
            &["--extra-inputs", "JSON object"],
        ),
        (
            &["-m", "m", "--extra-inputs", "{\"\":1}"],
            &["--extra-inputs", "empty name"],
        ),
        (
            &["-m", "m", "--ssl-https-verify-peer", "0"],
            &["--ssl-https", "https://"],
        ),
        (&["-m", "m", "-u", "ftp://h:1"], &["--url"]),
        (
            &["-m", "m", "--prefill-concurrency-ramp-duration", "30"],
            &["--prefill-concurrency-ramp-duration", "not ramped"],
        ),
        (
            &["-m", "m", "--warmup-prefill-concurrency=2"],
            &["--warmup-prefill-concurrency ", "warm-up"],
        ),
    ];
    for (args, needles) in cases {
        let msg = usage_error(args);
        for needle in *needles {
            assert!(msg.contains(needle), "{args:?}: {needle}: {msg}");
        }
    }
}

#[test]
fn https_urls_build_a_tls_client_and_bad_files_name_the_flag() {
    let pki = crate::transport::test_pki::Pki::new("profile-https");
    let ca = pki.ca_pem.display().to_string();
    let c = cfg(&[
        "-m",
        "m",
        "-u",
        "https://127.0.0.1:8443/v1",
        "--ssl-https-ca-certificates-file",
        &ca,
    ])
    .unwrap();
    assert!(c.tls.is_some());
    assert_eq!(c.address, "127.0.0.1:8443");
    let c = cfg(&[
        "-m",
        "m",
        "-u",
        "https://localhost",
        "--ssl-https-verify-peer",
        "0",
    ])
    .unwrap();
    assert_eq!(c.address, "localhost:443");
    let c = cfg(&["-m", "m", "-u", "http://localhost"]).unwrap();
    assert!(c.tls.is_none());
    assert_eq!(c.endpoint_type, EndpointType::named("chat").unwrap());
    let garbage = pki.dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let g = garbage.display().to_string();
    let msg = usage_error(&[
        "-m",
        "m",
        "-u",
        "https://127.0.0.1:1",
        "--ssl-https-ca-certificates-file",
        &g,
    ]);
    assert!(
        msg.contains("--ssl-https-ca-certificates-file") && msg.contains(&g),
        "{msg}"
    );
    let missing = pki.dir.join("missing.pem").display().to_string();
    let msg = usage_error(&[
        "-m",
        "m",
        "-u",
        "https://h:1",
        "--ssl-https-ca-certificates-file",
        &missing,
    ]);
    assert!(
        msg.contains("--ssl-https-ca-certificates-file") && msg.contains(&missing),
        "{msg}"
    );
    let msg = usage_error(&[
        "-m",
        "m",
        "-u",
        "https://h:1",
        "--ssl-https-verify-host",
        "3",
    ]);
    assert!(msg.contains("--ssl-https-verify-host"), "{msg}");
    let cert = pki.client.cert_pem.display().to_string();
    let msg = usage_error(&[
        "-m",
        "m",
        "-u",
        "https://h:1",
        "--ssl-https-client-certificate-file",
        &cert,
    ]);
    assert!(msg.contains("--ssl-https-private-key-file"), "{msg}");
}

/// No two flags share a name, alias or short letter (clap checks this only in debug builds,
/// and the tests run optimised), and no refusal shadows a flag the parser knows.
#[test]
fn flag_names_are_unique_and_refusals_only_cover_unknown_flags() {
    use clap::CommandFactory;
    let cmd = super::super::cli::ProfileArgs::command();
    let mut longs = std::collections::HashMap::new();
    let mut shorts = std::collections::HashMap::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().to_string();
        for name in arg.get_long_and_visible_aliases().unwrap_or_default() {
            if let Some(other) = longs.insert(format!("--{name}"), id.clone()) {
                panic!("--{name} is both {other} and {id}");
            }
        }
        for alias in arg.get_all_aliases().unwrap_or_default() {
            longs.entry(format!("--{alias}")).or_insert(id.clone());
        }
        for short in arg.get_short_and_visible_aliases().unwrap_or_default() {
            if let Some(other) = shorts.insert(short, id.clone()) {
                panic!("-{short} is both {other} and {id}");
            }
        }
    }
    for flag in longs.keys() {
        assert!(refusal(flag).is_none(), "{flag} is a flag and refused");
    }
    assert!(refusal("--input-dataset=x").is_some());
}

#[test]
fn urls_to_addresses() {
    let cases = [
        ("https://h", ("h:443", true)),
        ("https://h:8443/v1/x", ("h:8443", true)),
        ("http://h", ("h:80", false)),
        ("h:9", ("h:9", false)),
        ("https://[::1]", ("[::1]:443", true)),
        ("http://[::1]:81", ("[::1]:81", false)),
    ];
    for (url, (address, https)) in cases {
        let got = server_address(Some(url), EndpointType::named("chat").unwrap()).unwrap();
        assert_eq!(got, (address.to_string(), https), "{url}");
    }
    assert_eq!(
        server_address(None, EndpointType::named("kserve").unwrap()).unwrap(),
        ("localhost:8001".into(), false)
    );
    for url in [
        "http://u:s3cret@h:80",
        "grpc://u:s3cret@h",
        "u:s3cret@h:1/v1",
    ] {
        let e = server_address(Some(url), EndpointType::named("chat").unwrap()).unwrap_err();
        assert!(e.msg.contains("u:<redacted>@h"), "{url}: {e}");
        assert!(!e.msg.contains("s3cret"), "{url}: {e}");
    }
}

/// AIPerf's tokenizer flags are accepted, and with no --tokenizer a Hub-shaped model name is
/// the tokenizer (AIPerf's default) while a plain served name keeps o200k_base.
#[test]
fn tokenizer_flags_and_default() {
    let c = cfg(&["-m", "Qwen/Qwen3-0.6B"]).unwrap();
    assert_eq!(c.args.tokenizer.as_deref(), Some("Qwen/Qwen3-0.6B"));
    assert_eq!(c.args.tokenizer_revision, "main");
    let c = cfg(&["-m", "gpt-4o", "m2"]).unwrap();
    assert_eq!(c.args.tokenizer.as_deref(), Some("o200k_base"));
    let c = cfg(&[
        "-m",
        "org/model",
        "--tokenizer",
        "cl100k_base",
        "--tokenizer-revision",
        "v1.0",
        "--tokenizer-trust-remote-code",
    ])
    .unwrap();
    assert_eq!(c.args.tokenizer.as_deref(), Some("cl100k_base"));
    assert_eq!(c.args.tokenizer_revision, "v1.0");
    assert!(c.args.tokenizer_trust_remote_code);
    assert!(settings_text(&c).contains("tokenizer cl100k_base (revision v1.0)"));
}
