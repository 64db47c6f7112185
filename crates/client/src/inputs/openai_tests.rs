use super::*;

fn plain() -> PayloadOptions {
    PayloadOptions::default()
}

fn payloads(text: &str, opts: PayloadOptions) -> Result<Vec<PayloadEntry>> {
    parse_payloads(text.as_bytes(), "in.json", opts)
}

#[test]
fn payloads_keep_file_key_order_compactly() {
    let text = r#"{ "data": [
        {"payload": [ { "model": "m", "messages": [ {"role": "user", "content": "a  b \"q\" {x}"} ],
                        "stream": true } ]},
        {"payload": {"z": 1, "a": [1, 2.5e3, null, false]}, "model": "ignored"}
    ] }"#;
    let got = payloads(text, plain()).unwrap();
    let bodies: Vec<String> = got
        .iter()
        .map(|e| String::from_utf8(e.payload.clone()).unwrap())
        .collect();
    assert_eq!(
        bodies,
        [
            r#"{"model":"m","messages":[{"role":"user","content":"a  b \"q\" {x}"}],"stream":true}"#,
            r#"{"z":1,"a":[1,2.5e3,null,false]}"#,
        ]
    );
    assert!(got
        .iter()
        .all(|e| e.timestamp_ms.is_none() && e.session_id.is_none()));
}

#[test]
fn escaped_key_falls_back_to_the_parsed_value() {
    // "\u0070ayload" is "payload": the text scan does not see it, serde_json does.
    let text = r#"{"data":[{"\u0070ayload":[{"b":1,"a":2}]}]}"#;
    let got = payloads(text, plain()).unwrap();
    assert_eq!(got[0].payload, br#"{"a":2,"b":1}"#);
}

#[test]
fn mode_pseudo_inputs() {
    let fixed = PayloadOptions {
        fixed_schedule: true,
        sessions: false,
    };
    let got = payloads(
        r#"{"data":[{"payload":[{}],"timestamp":[5]},{"payload":[{}],"timestamp":7}]}"#,
        fixed,
    )
    .unwrap();
    assert_eq!(
        got.iter().map(|e| e.timestamp_ms).collect::<Vec<_>>(),
        [Some(5), Some(7)]
    );
    let sessions = PayloadOptions {
        fixed_schedule: false,
        sessions: true,
    };
    let got = payloads(
        r#"{"data":[{"payload":[{}],"session_id":["s1"],"delay":[250]},
                    {"payload":[{}],"session_id":"s1"}]}"#,
        sessions,
    )
    .unwrap();
    assert_eq!(got[0].session_id.as_deref(), Some("s1"));
    assert_eq!((got[0].delay_ms, got[1].delay_ms), (Some(250), None));
}

#[test]
fn errors_name_the_file_the_step_and_the_problem() {
    let cases: &[(&str, PayloadOptions, &str)] = &[
        ("{", plain(), "failed to parse"),
        ("[]", plain(), "top level must be an object"),
        (r#"{"x":1}"#, plain(), "doesn't contain data field"),
        (r#"{"data":{}}"#, plain(), "must be an array"),
        (r#"{"data":[]}"#, plain(), "is empty"),
        (r#"{"data":[[{"payload":[{}]}]]}"#, plain(), "not streams"),
        (
            r#"{"data":[{"payload":[{}]}],"validation_data":[{}]}"#,
            plain(),
            "validation_data",
        ),
        (r#"{"data":[5]}"#, plain(), "step id: 0"),
        (
            r#"{"data":[{"payload":[{}]},{"prompt":"x","payload":[{}]}]}"#,
            plain(),
            "'prompt' is not found in the model configuration (Location stream id: 0, step id: 1)",
        ),
        (
            r#"{"data":[{"model":"m"}]}"#,
            plain(),
            "missing tensor payload",
        ),
        (
            r#"{"data":[{"payload":[{},{}]}]}"#,
            plain(),
            "exactly one JSON object",
        ),
        (
            r#"{"data":[{"payload":"text"}]}"#,
            plain(),
            "exactly one JSON object",
        ),
        (
            r#"{"data":[{"payload":[{}]}]}"#,
            PayloadOptions {
                fixed_schedule: true,
                sessions: false,
            },
            "missing tensor timestamp",
        ),
        (
            r#"{"data":[{"payload":[{}],"timestamp":[-1]}]}"#,
            PayloadOptions {
                fixed_schedule: true,
                sessions: false,
            },
            "tensor timestamp must hold one non-negative integer",
        ),
        (
            r#"{"data":[{"payload":[{}],"session_id":[true]}]}"#,
            PayloadOptions {
                fixed_schedule: false,
                sessions: true,
            },
            "tensor session_id must hold one string",
        ),
        (
            r#"{"data":[{"payload":[{}],"session_id":"a"}]}"#,
            plain(),
            "'session_id' is not found",
        ),
    ];
    for &(text, opts, want) in cases {
        let err = payloads(text, opts).expect_err(text);
        assert!(err.msg.starts_with("--input-data in.json: "), "{}", err.msg);
        assert!(err.msg.contains(want), "{text}: {}", err.msg);
    }
}

#[test]
fn files_add_up_and_missing_files_are_named() {
    let dir = std::env::temp_dir().join(format!("inferperf-openai-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    std::fs::write(&a, r#"{"data":[{"payload":[{"n":1}]}]}"#).unwrap();
    std::fs::write(
        &b,
        r#"{"data":[{"payload":[{"n":2}]},{"payload":[{"n":3}]}]}"#,
    )
    .unwrap();
    let got = load_payloads(&[a, b], plain()).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2].payload, br#"{"n":3}"#);
    let missing = dir.join("none.json");
    let err = load_payloads(std::slice::from_ref(&missing), plain()).unwrap_err();
    assert!(
        err.msg.contains(&missing.display().to_string()),
        "{}",
        err.msg
    );
    let err = load_payloads(std::slice::from_ref(&dir), plain()).unwrap_err();
    assert!(err.msg.contains("not a directory"), "{}", err.msg);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compact_and_span_scanner_survive_odd_text() {
    assert_eq!(
        compact(b" { \"a b\" : [ 1 , \"\\\" x\" ] } "),
        b"{\"a b\":[1,\"\\\" x\"]}"
    );
    for text in [
        &b""[..],
        b"{",
        b"{\"data\":[{\"payload\":[",
        b"{\"data\":[{\"payload\":\"\\",
        b"}}]]",
        b"{\"data\":[{\"payload\":[{]}]}",
        b"[{\"data\"",
    ] {
        fuzz_payloads(text);
    }
}
