use super::*;

fn cfg(args: &[&str]) -> Result<ProfileConfig> {
    let mut v: Vec<OsString> = vec!["profile".into()];
    v.extend(args.iter().map(OsString::from));
    match parse(v)? {
        Ok(c) => Ok(c),
        Err(text) => Err(Error::generic(text)),
    }
}

#[test]
fn defaults_and_lists() {
    let c = cfg(&["-m", "llm", "--concurrency", "1,4,8"]).unwrap();
    assert_eq!(c.endpoint, "v1/chat/completions");
    assert_eq!(c.address, "localhost:8000");
    assert_eq!(
        c.points,
        vec![
            LoadPoint::Concurrency(1),
            LoadPoint::Concurrency(4),
            LoadPoint::Concurrency(8)
        ]
    );
    let c = cfg(&[
        "-m",
        "a",
        "b",
        "--request-rate",
        "2.5",
        "-u",
        "http://h:9/x",
    ])
    .unwrap();
    assert_eq!(c.models, vec!["a", "b"]);
    assert_eq!(c.points, vec![LoadPoint::RequestRate(2.5)]);
    assert_eq!(c.address, "h:9");
    assert_eq!(c.points[0].label(), "request_rate2.5");
    let c = cfg(&["-m", "t", "--service-kind", "triton"]).unwrap();
    assert_eq!(c.endpoint_type, EndpointType::named("kserve").unwrap());
    assert_eq!(c.address, "localhost:8001");
}

#[test]
fn extra_inputs_and_headers_parse() {
    let c = cfg(&[
        "-m",
        "x",
        "--extra-inputs",
        "ignore_eos:true",
        "--extra-inputs",
        "temperature:0.5",
        "--extra-inputs",
        "stop:end",
        "-H",
        "Authorization: Bearer k",
    ])
    .unwrap();
    assert_eq!(c.extra[0], ("ignore_eos".into(), serde_json::json!(true)));
    assert_eq!(c.extra[1], ("temperature".into(), serde_json::json!(0.5)));
    assert_eq!(c.extra[2], ("stop".into(), serde_json::json!("end")));
    assert_eq!(c.headers[0], ("Authorization".into(), "Bearer k".into()));
    let c = cfg(&[
        "-m",
        "x",
        "--extra-inputs",
        r#"{"temperature":0.7,"top_p":0.9,"stop":["a"]}"#,
        "--extra-inputs",
        "url:http://h:1/x",
    ])
    .unwrap();
    let extra: std::collections::HashMap<_, _> = c.extra.iter().cloned().collect();
    assert_eq!(extra.len(), 4);
    assert_eq!(extra["temperature"], serde_json::json!(0.7));
    assert_eq!(extra["top_p"], serde_json::json!(0.9));
    assert_eq!(extra["stop"], serde_json::json!(["a"]));
    assert_eq!(extra["url"], serde_json::json!("http://h:1/x"));
}

#[test]
fn bad_flags_are_usage_errors_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--concurrency", "1"], "--model"),
        (&["-m", "x", "--concurrency", "0"], "--concurrency"),
        (
            &["-m", "x", "--concurrency", "1,2", "--request-rate", "2"],
            "takes one value",
        ),
        (
            &[
                "-m",
                "x",
                "--concurrency",
                "1",
                "--request-rate",
                "2",
                "--max-inflight",
                "3",
            ],
            "not both",
        ),
        (&["-m", "x", "--request-rate=-1"], "--request-rate"),
        (&["-m", "x", "--extra-inputs", "novalue"], "--extra-inputs"),
        (&["-m", "x", "-H", "bad header"], "-H"),
        (
            &["-m", "x", "--service-kind", "tfserving"],
            "--service-kind",
        ),
        (
            &["-m", "x", "--output-tokens-mean-deterministic"],
            "--output-tokens-mean",
        ),
        (
            &[
                "-m",
                "x",
                "--endpoint-type",
                "embeddings",
                "--use-server-token-count",
            ],
            "--use-server-token-count",
        ),
        (&["-m", "x", "--goodput", "nonsense:1"], "nonsense"),
        (&["-m", "x", "-u", "https://"], "no host"),
        (&["-m", "x", "--no-such-flag"], "--no-such-flag"),
        (&["-m", "x", "--read-batch-us", "100001"], "--read-batch-us"),
        (&["-m", "x", "--read-batch-us", "lots"], "--read-batch-us"),
        (
            &["-m", "x", "--max-response-bytes", "0"],
            "--max-response-bytes",
        ),
        (
            &["-m", "x", "--max-response-bytes", "18446744073709551615"],
            "--max-response-bytes",
        ),
        (
            &["-m", "x", "--profile-export-file", "out/my.json"],
            "--profile-export-file",
        ),
        (
            &["-m", "x", "--profile-export-file", ""],
            "--profile-export-file",
        ),
    ];
    for (args, needle) in cases {
        let e = cfg(args).unwrap_err();
        assert_eq!(e.exit_code(), 99, "{args:?}");
        assert!(e.msg.contains(needle), "{args:?}: {}", e.msg);
    }
}

#[test]
fn export_file_must_be_a_plain_name() {
    assert!(check_export_file_name("my.json").is_ok());
    for bad in ["", "out/my.json", "./my.json", "/tmp/x.json", "..", "dir/"] {
        let e = check_export_file_name(bad).unwrap_err();
        assert!(e.contains("--profile-export-file"), "{bad}: {e}");
    }
}

#[test]
fn max_response_bytes_defaults_to_64_mib_and_can_be_raised() {
    assert_eq!(cfg(&["-m", "x"]).unwrap().args.max_response_bytes, 64 << 20);
    let raised = cfg(&["-m", "x", "--max-response-bytes", "1073741824"]).unwrap();
    assert_eq!(raised.args.max_response_bytes, 1 << 30);
}

#[test]
fn time_limits_name_the_flag_that_set_them() {
    let c = cfg(&["-m", "m"]).unwrap();
    assert_eq!(c.request_timeout, Duration::from_secs(600));
    assert_eq!(c.request_timeout_flag, "--request-timeout-seconds");
    assert_eq!(c.request_idle_timeout, None);
    let c = cfg(&["-m", "m", "--request-timeout", "2500"]).unwrap();
    assert_eq!(c.request_timeout, Duration::from_millis(2500));
    assert_eq!(c.request_timeout_flag, "--request-timeout");
    let c = cfg(&["-m", "m", "--request-idle-timeout", "300"]).unwrap();
    assert_eq!(c.request_idle_timeout, Some(Duration::from_millis(300)));
    for bad in ["0", "1.5", "86400001", "x"] {
        let err = cfg(&["-m", "m", "--request-idle-timeout", bad]).unwrap_err();
        assert!(err.msg.contains("--request-idle-timeout"), "{}", err.msg);
        assert_eq!(err.exit_code(), 99);
    }
}

#[test]
fn user_centric_rate_flags() {
    let c = cfg(&[
        "-m",
        "m",
        "--user-centric-rate",
        "2",
        "--num-users",
        "4",
        "--concurrency",
        "6",
    ])
    .unwrap();
    assert_eq!(c.points, vec![LoadPoint::RequestRate(2.0)]);
    assert_eq!(c.args.max_inflight, Some(6), "--concurrency caps the users");
    for (args, words) in [
        (&["--user-centric-rate", "2"][..], "needs --num-users"),
        (
            &["--num-users", "3"][..],
            "--num-users applies to --user-centric-rate",
        ),
        (
            &["--user-centric-rate", "0", "--num-users", "3"][..],
            "must be positive",
        ),
        (
            &["--user-centric-rate", "1", "--num-users", "0"][..],
            "--num-users must be",
        ),
        (
            &[
                "--user-centric-rate",
                "1",
                "--num-users",
                "2",
                "--request-rate",
                "3",
            ][..],
            "not both",
        ),
    ] {
        let e = cfg(&[&["-m", "m"][..], args].concat())
            .unwrap_err()
            .to_string();
        assert!(e.contains(words), "{args:?}: {e}");
    }
}

/// Each `profile` kind is what `--endpoint-type` selects, and its capabilities are what
/// `profile` reads.
#[test]
fn each_endpoint_kind_is_reached_through_the_registry() {
    for name in crate::run::kinds::registry::endpoint_names() {
        let kind = crate::run::kinds::registry::for_endpoint(name).unwrap();
        let argv = ["profile", "-m", "m", "--endpoint-type", name];
        let cfg = parse(argv.iter().map(Into::into).collect())
            .unwrap()
            .unwrap();
        assert!(std::ptr::eq(cfg.endpoint_type.kind(), kind), "{name}");
        assert_eq!(cfg.endpoint_type.name(), name);
        assert_eq!(cfg.endpoint_type.grpc(), kind.caps.grpc);
        let endpoint = kind.endpoint.unwrap();
        assert_eq!(cfg.endpoint, endpoint.default_path("m", false));
        let port = endpoint.default_url.rsplit(':').next().unwrap();
        assert!(cfg.address.ends_with(port), "{name}: {}", cfg.address);
    }
    let argv = ["profile", "-m", "m", "--endpoint-type", "nope"];
    let err = parse(argv.iter().map(Into::into).collect()).unwrap_err();
    assert!(err.msg.contains("nope"), "{}", err.msg);
}
