use super::*;

fn err(format: Format, text: &str) -> (usize, String) {
    parse(format, text).unwrap_err()
}

#[test]
fn single_turn_fields() {
    let text = concat!(
        "{\"text\": \"hello\", \"output_length\": 5, \"timestamp\": 1000}\n",
        "\n",
        "{\"texts\": [\"a\", \"b\"], \"delay\": 2.5, \"session_id\": \"s\"}\n",
        "{\"texts\": [{\"name\": \"q\", \"contents\": [\"x\", \"y\"]}], \"role\": \"user\"}\n",
    );
    let r = parse(Format::SingleTurn, text).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].prompt, Prompt::Text("hello".into()));
    assert_eq!(
        (r[0].osl, r[0].timestamp_ms, r[0].line),
        (Some(5), Some(1000.0), 1)
    );
    assert_eq!(r[1].prompt, Prompt::Text("a b".into()));
    assert_eq!(
        (r[1].delay_ms, r[1].session.as_deref(), r[1].line),
        (Some(2.5), Some("s"), 3)
    );
    assert_eq!(r[2].prompt, Prompt::Text("x y".into()));
}

#[test]
fn errors_name_the_line_and_the_field() {
    let cases: &[(Format, &str, usize, &str)] = &[
        (
            Format::SingleTurn,
            "{\"text\": \"a\"}\n{oops\n",
            2,
            "not JSON",
        ),
        (Format::SingleTurn, "[1]\n", 1, "JSON object"),
        (Format::SingleTurn, "{\"txt\": \"a\"}\n", 1, "field 'txt'"),
        (
            Format::SingleTurn,
            "{\"text\": \"a\", \"image\": \"x.png\"}\n",
            1,
            "field 'image'",
        ),
        (
            Format::SingleTurn,
            "{\"role\": \"user\"}\n",
            1,
            "'text' or 'texts'",
        ),
        (
            Format::SingleTurn,
            "{\"text\": \"a\", \"texts\": [\"b\"]}\n",
            1,
            "'text' and 'texts'",
        ),
        (
            Format::SingleTurn,
            "{\"text\": \"a\", \"output_length\": 0}\n",
            1,
            "field 'output_length'",
        ),
        (
            Format::SingleTurn,
            "{\"text\": \"a\", \"timestamp\": -1}\n",
            1,
            "field 'timestamp'",
        ),
        (
            Format::SingleTurn,
            "{\"text\": \"a\", \"timestamp\": 1, \"delay\": 2}\n",
            1,
            "'timestamp' and 'delay'",
        ),
        (
            Format::SingleTurn,
            "{\"texts\": [3]}\n",
            1,
            "field 'texts[0]'",
        ),
        (Format::SingleTurn, "\n\n", 0, "no entries"),
        (
            Format::MultiTurn,
            "{\"session_id\": \"s\"}\n",
            1,
            "field 'turns'",
        ),
        (Format::MultiTurn, "{\"turns\": []}\n", 1, "at least one"),
        (
            Format::MultiTurn,
            "{\"turns\": [{\"text\": \"a\"}, {\"text\": 3}]}\n",
            1,
            "turns[1]: field 'text'",
        ),
        (
            Format::RandomPool,
            "{\"text\": \"a\", \"timestamp\": 1}\n",
            1,
            "field 'timestamp'",
        ),
        (
            Format::MooncakeTrace,
            "{\"timestamp\": 1}\n",
            1,
            "exactly one",
        ),
        (
            Format::MooncakeTrace,
            "{\"input_length\": 3, \"text_input\": \"a\"}\n",
            1,
            "exactly one",
        ),
        (
            Format::MooncakeTrace,
            "{\"input_length\": 3, \"hash_ids\": [1, -2]}\n",
            1,
            "field 'hash_ids'",
        ),
        (
            Format::MooncakeTrace,
            "{\"input_length\": 0}\n",
            1,
            "field 'input_length'",
        ),
        (
            Format::MooncakeTrace,
            "{\"text_input\": \"a\", \"hash_ids\": [1]}\n",
            1,
            "'hash_ids' needs",
        ),
        (
            Format::MooncakeTrace,
            "{\"payload\": [1]}\n",
            1,
            "field 'payload'",
        ),
        (
            Format::MooncakeTrace,
            "{\"input_length\": 9, \"session_id\": []}\n",
            1,
            "field 'session_id'",
        ),
    ];
    for &(format, text, line, needle) in cases {
        let (l, msg) = err(format, text);
        assert_eq!(l, line, "{text}: {msg}");
        assert!(msg.contains(needle), "{text}: {msg}");
    }
}

#[test]
fn multi_turn_conversations() {
    let text = concat!(
        "{\"session_id\": \"c1\", \"turns\": [{\"text\": \"hi\"}, {\"text\": \"more\", \"delay\": 50}]}\n",
        "{\"turns\": [{\"text\": \"solo\"}]}\n",
    );
    let r = parse(Format::MultiTurn, text).unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].session.as_deref(), Some("c1"));
    assert_eq!(
        (r[1].session.as_deref(), r[1].delay_ms),
        (Some("c1"), Some(50.0))
    );
    assert_eq!(r[2].session.as_deref(), Some("line 2"));
}

#[test]
fn mooncake_entries() {
    let text = concat!(
        "{\"timestamp\": 0, \"input_length\": 700, \"output_length\": 4, \"hash_ids\": [1, 2]}\n",
        "{\"timestamp\": 20.5, \"text_input\": \"hello\", \"session_id\": 7}\n",
        "{\"payload\": {\"model\": \"m\", \"prompt\": \"p\"}}\n",
    );
    let r = parse(Format::MooncakeTrace, text).unwrap();
    assert_eq!(
        r[0].prompt,
        Prompt::Synthetic {
            input_length: 700,
            hash_ids: vec![1, 2]
        }
    );
    assert_eq!((r[0].osl, r[0].timestamp_ms), (Some(4), Some(0.0)));
    assert_eq!(r[1].prompt, Prompt::Text("hello".into()));
    assert_eq!(
        (r[1].timestamp_ms, r[1].session.as_deref()),
        (Some(20.5), Some("7"))
    );
    assert!(matches!(&r[2].prompt, Prompt::Payload(p) if p["prompt"] == "p"));
}

#[test]
fn sharegpt_first_human_turn_and_its_reply() {
    let text = r#"[
        {"id": "a", "conversations": [
            {"from": "system", "value": "be nice"},
            {"from": "human", "value": "Why?"},
            {"from": "gpt", "value": "Because it is so."},
            {"from": "human", "value": "later"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "no reply"}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}
    ]"#;
    let r = parse(Format::ShareGpt, text).unwrap();
    assert_eq!(r.len(), 2, "the conversation without a reply is skipped");
    assert_eq!(r[0].prompt, Prompt::Text("Why?".into()));
    assert_eq!(r[0].reference.as_deref(), Some("Because it is so."));
    assert_eq!(
        (r[1].prompt.clone(), r[1].line),
        (Prompt::Text("Q".into()), 2)
    );
    let cases: &[(&str, usize, &str)] = &[
        ("[\n{\"conversations\": [}\n]", 2, "not JSON"),
        ("{\"conversations\": []}", 0, "JSON list"),
        ("[{\"id\": 1}]", 0, "entry 0: needs field 'conversations'"),
        (
            "[{\"conversations\": 3}]",
            0,
            "field 'conversations' must be a list",
        ),
        (
            "[{\"conversations\": [{\"from\": \"human\"}]}]",
            0,
            "conversations[0]",
        ),
        (
            "[{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}]",
            0,
            "no conversation",
        ),
    ];
    for &(text, line, needle) in cases {
        let (l, msg) = err(Format::ShareGpt, text);
        assert_eq!(l, line, "{text}: {msg}");
        assert!(msg.contains(needle), "{text}: {msg}");
    }
}

#[test]
fn files_are_read_with_bounds_and_quoted_short() {
    let dir = std::env::temp_dir().join(format!("inferperf-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jsonl = dir.join("long.jsonl");
    let mut text = b"{\"text\": \"a\"}\n".to_vec();
    text.extend(vec![0u8; MAX_JSONL_LINE + 1]);
    std::fs::write(&jsonl, &text).unwrap();
    let (line, msg) = read(Format::SingleTurn, &jsonl).unwrap_err();
    assert_eq!(line, 2);
    assert_eq!(
        msg,
        "the line is longer than 16 MiB (the bound on one line)"
    );
    let share = dir.join("broken.json");
    let mut text = b"[".to_vec();
    text.extend(b"{\"conversations\": []},".repeat(1000));
    text.push(b'}');
    std::fs::write(&share, &text).unwrap();
    let (line, msg) = read(Format::ShareGpt, &share).unwrap_err();
    assert_eq!(line, 0);
    assert!(
        msg.starts_with("not JSON: expected value at line 1 column 22002, near '...")
            && msg.ends_with("{\"conversations\": []},}'")
            && msg.len() < 200,
        "{msg}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn payload_lines_as_genai_perf_reads_them() {
    let text = concat!(
        "{\"timestamp\": 500, \"input_length\": 700, \"output_length\": 4, \"hash_ids\": [1, 2]}\n",
        "{\"timestamp\": 0, \"text\": \"  hello  \", \"priority\": 3, \"temperature\": 0.5}\n",
        "{\"text_input\": \"hi\", \"text\": \"\"}\n",
        "{\"output_length\": 9}\n",
        "{\"hash_ids\": [5]}\n",
    );
    let r = parse(Format::Payload, text).unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[0].prompt,
        Prompt::Synthetic {
            input_length: 700,
            hash_ids: vec![1, 2]
        }
    );
    assert_eq!((r[0].osl, r[0].timestamp_ms), (Some(4), Some(500.0)));
    assert!(r[0].extra.is_empty());
    assert_eq!(r[1].prompt, Prompt::Text("hello".into()), "trimmed");
    let extra: Vec<(&str, &Value)> = r[1].extra.iter().map(|(k, v)| (k.as_str(), v)).collect();
    assert_eq!(
        extra,
        [
            ("priority", &Value::from(3)),
            ("temperature", &Value::from(0.5))
        ],
        "fields GenAI-Perf does not read go into the body"
    );
    assert_eq!(
        r[2].prompt,
        Prompt::Text("hi".into()),
        "an empty text is absent"
    );
    assert_eq!(r[3].prompt, Prompt::Sampled { hash_ids: vec![] });
    assert_eq!(r[3].osl, Some(9));
    assert_eq!(r[4].prompt, Prompt::Sampled { hash_ids: vec![5] });
}

#[test]
fn payload_delays_move_onto_the_sessions_next_turn() {
    let text = concat!(
        "{\"session_id\": \"a\", \"delay\": 1000, \"input_length\": 50, \"output_length\": 10}\n",
        "{\"session_id\": 7, \"delay\": 300, \"input_length\": 25}\n",
        "{\"session_id\": \"a\", \"delay\": 2000, \"input_length\": 50}\n",
        "{\"session_id\": \"a\", \"input_length\": 100}\n",
        "{\"session_id\": 7, \"input_length\": 20}\n",
        "{\"text\": \"alone\"}\n",
    );
    let r = parse(Format::Payload, text).unwrap();
    let delays: Vec<Option<f64>> = r.iter().map(|r| r.delay_ms).collect();
    assert_eq!(
        delays,
        [None, None, Some(1000.0), Some(2000.0), Some(300.0), None],
        "a turn waits the delay written on the session's turn before it"
    );
    assert_eq!(r[4].session.as_deref(), Some("7"));
    assert_eq!(r[5].session, None);
}

#[test]
fn payload_errors_name_the_line_and_the_field() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "{\"text\": \"a\", \"text_input\": \"b\"}\n",
            1,
            "'text' and 'text_input'",
        ),
        (
            "{\"text\": \"a\"}\n{\"input_length\": -3}\n",
            2,
            "field 'input_length'",
        ),
        ("{\"output_length\": \"ten\"}\n", 1, "field 'output_length'"),
        ("{\"timestamp\": \"soon\"}\n", 1, "field 'timestamp'"),
        ("{\"hash_ids\": [1, \"x\"]}\n", 1, "field 'hash_ids'"),
        (
            "{\"text\": \"a\", \"delay\": 5}\n",
            1,
            "field 'delay' needs 'session_id'",
        ),
        (
            "{\"text\": \"a\", \"session_id\": \"s\", \"timestamp\": 5}\n",
            1,
            "'timestamp' and 'session_id'",
        ),
        (
            "{\"text\": \"a\", \"session_id\": \"s\"}\n{\"text\": \"b\", \"session_id\": \"s\"}\n",
            1,
            "field 'delay' is needed on every turn of session 's'",
        ),
        ("{\"session_id\": [1]}\n", 1, "field 'session_id'"),
        ("[]\n", 1, "JSON object"),
        ("\n", 0, "no entries"),
    ];
    for (text, line, needle) in cases {
        let (l, msg) = err(Format::Payload, text);
        assert_eq!(l, *line, "{text}: {msg}");
        assert!(msg.contains(needle), "{text}: {msg}");
    }
}
