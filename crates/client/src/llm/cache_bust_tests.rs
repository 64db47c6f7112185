use super::*;

fn chat(system: Option<&str>, user: Value) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": user}));
    json!({"model": "m", "messages": messages})
}

fn cfg(args: &[&str]) -> Result<ProfileConfig> {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
    v.extend(args.iter().map(Into::into));
    super::super::cli::parse(v).map(|c| c.expect("a run, not help"))
}

#[test]
fn the_rid_marker_is_the_sha256_of_the_key_pass_and_trace() {
    // hashlib.sha256(b"7:0:rate:3:3:5").hexdigest()[:12]
    let m = rid_marker("7:0:rate", 3, 5, Target::FirstTurnPrefix);
    assert_eq!(m, "[rid:855dba6b8fce]\n\n");
    let m = rid_marker("7:0:rate", 3, 5, Target::SystemSuffix);
    assert_eq!(m, "\n\n[rid:855dba6b8fce]");
    assert_ne!(
        rid_marker("7:0:rate", 4, 5, Target::FirstTurnPrefix),
        rid_marker("7:0:rate", 3, 5, Target::FirstTurnPrefix)
    );
}

#[test]
fn warmup_isolation_marks_warmup_sessions_only() {
    let t = Target::WarmupIsolationFirstTurn;
    assert_eq!(
        marker_for(t, "k", 0, 0, true).as_deref(),
        Some(WARMUP_MARKER)
    );
    assert_eq!(marker_for(t, "k", 0, 0, false), None);
    assert_eq!(marker_for(Target::None, "k", 0, 0, true), None);
    assert!(marker_for(Target::SystemPrefix, "k", 0, 0, false).is_some());
}

#[test]
fn system_targets_mark_the_system_message_or_else_the_first_user_message() {
    let mut b = chat(Some("sys"), json!("hello"));
    assert!(mark(&mut b, "[X]\n\n", Target::SystemPrefix));
    assert_eq!(b["messages"][0]["content"], "[X]\n\nsys");
    assert_eq!(b["messages"][1]["content"], "hello");
    let mut b = chat(Some("sys"), json!("hello"));
    assert!(mark(&mut b, "\n\n[X]", Target::SystemSuffix));
    assert_eq!(b["messages"][0]["content"], "sys\n\n[X]");
    let mut b = chat(None, json!("hello"));
    assert!(mark(&mut b, "[X]\n\n", Target::SystemPrefix));
    assert_eq!(b["messages"][0]["content"], "[X]\n\nhello");
}

#[test]
fn first_turn_targets_mark_the_first_user_message() {
    let mut b = chat(Some("sys"), json!("hello"));
    assert!(mark(&mut b, "[X]\n\n", Target::FirstTurnPrefix));
    assert_eq!(b["messages"][0]["content"], "sys");
    assert_eq!(b["messages"][1]["content"], "[X]\n\nhello");
    let mut b = chat(Some("sys"), json!("hello"));
    assert!(mark(&mut b, "\n\n[X]", Target::FirstTurnSuffix));
    assert_eq!(b["messages"][1]["content"], "hello\n\n[X]");
}

#[test]
fn parts_get_the_marker_in_a_text_part() {
    let parts = json!([
        {"type": "text", "text": "hello"},
        {"type": "image_url", "image_url": {"url": "data:"}}
    ]);
    let mut b = chat(None, parts.clone());
    assert!(mark(&mut b, "[X]\n\n", Target::FirstTurnPrefix));
    assert_eq!(b["messages"][0]["content"][0]["text"], "[X]\n\nhello");
    let mut b = chat(None, parts);
    assert!(mark(&mut b, "\n\n[X]", Target::FirstTurnSuffix));
    assert_eq!(b["messages"][0]["content"][0]["text"], "hello\n\n[X]");
    let mut b = chat(
        None,
        json!([{"type": "image_url", "image_url": {"url": "data:"}}]),
    );
    assert!(mark(&mut b, "[X]\n\n", Target::FirstTurnPrefix));
    assert_eq!(
        b["messages"][0]["content"][0],
        json!({"type": "text", "text": "[X]"})
    );
    let mut none = json!({"prompt": "p"});
    assert!(!mark(&mut none, "[X]", Target::FirstTurnPrefix));
}

#[test]
fn the_flag_needs_chat_and_a_system_message_for_warmup_isolation_system() {
    let e = cfg(&[
        "--endpoint-type",
        "completions",
        "--cache-bust",
        "first_turn_prefix",
    ])
    .unwrap_err();
    assert!(
        e.to_string().contains("--cache-bust first_turn_prefix"),
        "{e}"
    );
    assert_eq!(e.exit_code(), 99);
    let e = cfg(&[
        "--endpoint-type",
        "chat",
        "--cache-bust",
        "warmup_isolation_system",
    ])
    .unwrap_err();
    assert!(e.to_string().contains("needs a system message"), "{e}");
    cfg(&[
        "--endpoint-type",
        "chat",
        "--cache-bust",
        "warmup_isolation_system",
        "--system-prompt",
        "be brief",
    ])
    .unwrap();
    let e = cfg(&["--endpoint-type", "chat", "--cache-bust", "everywhere"]).unwrap_err();
    assert!(e.to_string().contains("--cache-bust"), "{e}");
}

#[test]
fn entries_repeat_up_to_the_request_count() {
    let c = cfg(&[
        "--endpoint-type",
        "chat",
        "--cache-bust",
        "first_turn_prefix",
        "--request-count",
        "7",
    ])
    .unwrap();
    let entry = |t: &str| Entry {
        text: t.into(),
        isl: 1,
        osl: None,
        payload: None,
    };
    let mut entries = vec![entry("a"), entry("b"), entry("c")];
    expand(&c, &mut entries);
    let texts: Vec<&str> = entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["a", "b", "c", "a", "b", "c", "a"]);
    let off = cfg(&["--endpoint-type", "chat", "--request-count", "7"]).unwrap();
    let mut entries = vec![entry("a")];
    expand(&off, &mut entries);
    assert_eq!(entries.len(), 1);
}
