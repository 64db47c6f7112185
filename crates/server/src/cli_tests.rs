//! Unit tests of `inferperf serve`'s flags.

use super::*;
use crate::delay::Delay;

fn args(line: &str) -> Vec<OsString> {
    line.split_whitespace().map(OsString::from).collect()
}

#[test]
fn parses_flags() {
    let Parsed::Run(cfg, duration) = parse(args(
        "inferperf serve --port 0 --threads 2 --pin 0,1 --delay simple=2ms --duration 0.5",
    ))
    .unwrap() else {
        panic!("expected a run")
    };
    assert_eq!(cfg.addr.to_string(), "127.0.0.1:0");
    assert_eq!((cfg.threads, cfg.pin_cores.clone()), (2, vec![0, 1]));
    assert_eq!(
        cfg.delays,
        vec![("simple".to_string(), Delay::Fixed(Duration::from_millis(2)))]
    );
    assert_eq!(duration, Some(Duration::from_millis(500)));
    let Parsed::Run(cfg, duration) = parse(args("serve")).unwrap() else {
        panic!()
    };
    let default_grpc = SocketAddr::from(([127, 0, 0, 1], 8001));
    assert_eq!(
        (*cfg, duration),
        (
            ServeConfig {
                grpc_addr: Some(default_grpc),
                ..ServeConfig::default()
            },
            None
        )
    );
    let Parsed::Run(cfg, _) = parse(args("--port 9")).unwrap() else {
        panic!()
    };
    assert_eq!(cfg.addr.port(), 9);
}

#[test]
fn grpc_and_tls_flags() {
    let run = |line: &str| match parse(args(line)).unwrap() {
        Parsed::Run(cfg, duration) => (cfg, duration),
        _ => panic!("{line}"),
    };
    let (cfg, duration) = run("inferperf serve --grpc-port 0 --duration 0.5");
    assert_eq!(cfg.grpc_addr, Some(SocketAddr::from(([127, 0, 0, 1], 0))));
    assert_eq!(duration, Some(Duration::from_millis(500)));
    let (cfg, _) = run("serve --host 0.0.0.0 --grpc-port 9001");
    assert_eq!(cfg.grpc_addr.unwrap().to_string(), "0.0.0.0:9001");
    assert_eq!(run("serve --port 0").0.grpc_addr.unwrap().port(), 0);
    assert_eq!(
        run("serve --port 0 --grpc-port 7")
            .0
            .grpc_addr
            .unwrap()
            .port(),
        7
    );
    assert_eq!(run("serve --port 9000").0.grpc_addr.unwrap().port(), 8001);
    assert_eq!(run("serve --no-grpc").0.grpc_addr, None);
    let (cfg, _) = run("serve --tls-cert c.pem --tls-key k.pem --tls-client-ca ca.pem");
    assert_eq!(
        cfg.tls,
        Some(TlsFiles {
            cert_chain: "c.pem".into(),
            key: "k.pem".into(),
            client_ca: Some("ca.pem".into()),
        })
    );
    for (line, want) in [
        ("serve --tls-cert c.pem", "--tls-cert needs --tls-key"),
        ("serve --tls-key k.pem", "--tls-key needs --tls-cert"),
        ("serve --tls-client-ca a.pem", "--tls-client-ca needs"),
        ("serve --grpc-port 70000", "--grpc-port"),
    ] {
        let err = parse(args(line)).unwrap_err();
        assert!(err.msg.contains(want), "{line}: {}", err.msg);
    }
}

#[test]
fn limit_flags() {
    let line = "serve --max-request-bytes 1024 --max-connections 10 --read-timeout 0.5 \
                --idle-timeout 2 --request-read-timeout 7.5 --max-concurrent-streams 8";
    let Parsed::Run(cfg, _) = parse(args(line)).unwrap() else {
        panic!()
    };
    let want = Limits {
        max_request_bytes: 1024,
        max_connections: 10,
        read_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(2),
        request_read_timeout: Duration::from_millis(7500),
        max_streams: 8,
    };
    assert_eq!(cfg.limits, want);
    for (line, want) in [
        (
            "serve --read-timeout 0",
            "--read-timeout 0.0: expected a positive",
        ),
        ("serve --read-timeout 1e300", "--read-timeout 1e300"),
        ("serve --read-timeout nan", "--read-timeout NaN"),
        (
            "serve --idle-timeout 0",
            "--idle-timeout 0.0: expected a positive",
        ),
        (
            "serve --request-read-timeout 100000",
            "--request-read-timeout 100000.0: expected a positive number of seconds, at most 86400",
        ),
        ("serve --max-request-bytes 1.5", "--max-request-bytes"),
        ("serve --max-connections 1e3", "--max-connections"),
    ] {
        let err = parse(args(line)).unwrap_err();
        assert!(err.msg.contains(want), "{line}: {}", err.msg);
        assert_eq!(err.exit_code(), 99, "{line}");
    }
    let Parsed::Info(help) = parse(args("serve --help")).unwrap() else {
        panic!()
    };
    for flag in [
        "--max-request-bytes <BYTES>",
        "[default: 67108864]",
        "--max-connections <N>",
        "--read-timeout <SECONDS>",
        "--idle-timeout <SECONDS>",
        "[default: 60]",
        "--request-read-timeout <SECONDS>",
        "--max-concurrent-streams <N>",
        "RESOURCE_EXHAUSTED",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn metrics_style_flag() {
    use crate::metrics::MetricsStyle;
    for (line, want) in [
        ("serve", MetricsStyle::Triton),
        ("serve --metrics-style vllm", MetricsStyle::Vllm),
        ("serve --metrics-style dcgm", MetricsStyle::Dcgm),
    ] {
        let Parsed::Run(cfg, _) = parse(args(line)).unwrap() else {
            panic!()
        };
        assert_eq!(cfg.metrics_style, want, "{line}");
    }
    let e = parse(args("serve --metrics-style prom")).unwrap_err();
    assert_eq!(e.exit_code(), 99);
    assert!(e.to_string().contains("--metrics-style"), "{e}");
}

#[test]
fn openai_flags() {
    let line = "serve --openai-model llm --openai-ttft 50ms --openai-itl 2ms..8ms \
                --openai-tokens-per-chunk 3 --openai-usage-on-last --openai-adapter a1 \
                --openai-adapter a2";
    let Parsed::Run(cfg, _) = parse(args(line)).unwrap() else {
        panic!()
    };
    let ms = Duration::from_millis;
    let want = OpenAiConfig {
        model: "llm".into(),
        ttft: Delay::Fixed(ms(50)),
        itl: Delay::Uniform(ms(2), ms(8)),
        tokens_per_chunk: 3,
        usage_on_last: true,
        adapters: vec!["a1".into(), "a2".into()],
        ..OpenAiConfig::default()
    };
    assert_eq!(cfg.openai, want);
    let busy = "serve --openai-busy-streams 3 --openai-busy-ttft 400ms";
    let Parsed::Run(cfg, _) = parse(args(busy)).unwrap() else {
        panic!()
    };
    let want = crate::llm::state::Busy {
        streams: 3,
        extra_ttft: ms(400),
    };
    assert_eq!(cfg.openai.busy, Some(want));
    for bad in [
        "serve --openai-busy-streams 3",
        "serve --openai-busy-ttft 4ms",
        "serve --openai-busy-streams 3 --openai-busy-ttft 1ms..2ms",
    ] {
        assert_eq!(parse(args(bad)).err().unwrap().exit_code(), 99, "{bad}");
    }
    let Parsed::Run(cfg, _) = parse(args("serve")).unwrap() else {
        panic!()
    };
    assert_eq!(cfg.openai, OpenAiConfig::default());
    for (line, want) in [
        ("serve --openai-ttft 5", "--openai-ttft '5'"),
        ("serve --openai-itl 3ms..1ms", "--openai-itl '3ms..1ms'"),
        (
            "serve --openai-tokens-per-chunk x",
            "--openai-tokens-per-chunk",
        ),
    ] {
        let err = parse(args(line)).unwrap_err();
        assert!(err.msg.contains(want), "{line}: {}", err.msg);
    }
    let zero = "inferperf serve --port 0 --no-grpc --openai-tokens-per-chunk 0";
    assert_eq!(serve_main(args(zero)), 99);
}

#[test]
fn startup_line_names_both_ports() {
    let http = SocketAddr::from(([127, 0, 0, 1], 8000));
    let grpc = Some(SocketAddr::from(([127, 0, 0, 1], 8001)));
    let line = startup_line(&http, grpc, false);
    assert!(
        line.starts_with("inferperf serve: listening on http://127.0.0.1:8000 and gRPC 127.0.0.1:8001 (models: simple"),
        "{line}"
    );
    assert!(startup_line(&http, grpc, true).contains("https://127.0.0.1:8000 and gRPC over TLS"));
    assert!(!startup_line(&http, None, false).contains("gRPC"));
}

#[test]
fn errors_are_one_line_usage() {
    for line in [
        "inferperf serve --bogus",
        "inferperf serve --port x",
        "inferperf serve --delay simple",
        "inferperf serve --duration -1",
        "inferperf serve --host no.such.host.invalid",
    ] {
        let err = parse(args(line)).unwrap_err();
        assert_eq!(err.exit_code(), 99, "{line}");
        assert!(
            !err.msg.contains('\n') && !err.msg.is_empty(),
            "{line}: {:?}",
            err.msg
        );
    }
    assert_eq!(serve_main(args("inferperf serve --threads 0 --port 0")), 99);
    let missing = "inferperf serve --port 0 --grpc-port 0 --tls-cert /nonexistent/c.pem \
                   --tls-key /nonexistent/k.pem --duration 0.1";
    assert_eq!(serve_main(args(missing)), 99);
}

#[test]
fn help_is_real() {
    let Parsed::Info(text) = parse(args("inferperf serve --help")).unwrap() else {
        panic!()
    };
    for flag in [
        "--host",
        "--port",
        "--threads",
        "--pin",
        "--delay",
        "--duration",
        "--grpc-port",
        "--no-grpc",
        "--tls-cert",
        "--tls-key",
        "--tls-client-ca",
        "--openai-model",
        "--openai-ttft",
        "--openai-itl",
        "--openai-tokens-per-chunk",
        "--openai-usage-on-last",
    ] {
        assert!(text.contains(flag), "{flag} missing from help");
    }
}

#[test]
fn runs_for_duration() {
    let started = Instant::now();
    assert_eq!(
        serve_main(args(
            "inferperf serve --port 0 --grpc-port 0 --duration 0.2"
        )),
        0
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(3),
        "{took:?}"
    );
}
