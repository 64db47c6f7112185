use super::*;
use crate::llm::cli::parse;

fn cfg(args: &[&str]) -> ProfileConfig {
    let mut v: Vec<std::ffi::OsString> = vec!["profile".into(), "-m".into(), "m".into()];
    v.extend(args.iter().map(Into::into));
    parse(v).unwrap().unwrap()
}

fn tok() -> Tokenizer {
    Tokenizer::load("cl100k_base").unwrap()
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("inferperf-dataset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn no_synthetic(_: &ProfileConfig, _: &Tokenizer) -> Result<Vec<Entry>> {
    Ok(vec![Entry {
        text: "synthetic".into(),
        isl: 1,
        osl: None,
        payload: None,
    }])
}

fn prepared(args: &[&str]) -> Result<(Vec<Entry>, ProfileConfig)> {
    prepare(&cfg(args), &tok(), no_synthetic)
}

#[test]
fn sampling_orders() {
    assert_eq!(order(None, 3, 7, 1), None);
    assert_eq!(order(Some(Sampling::RoundRobin), 3, 7, 1), None);
    let random = order(Some(Sampling::Random), 4, 400, 9).unwrap();
    assert_eq!(random.len(), 400);
    assert_eq!(
        Some(random.clone()),
        order(Some(Sampling::Random), 4, 400, 9),
        "seeded"
    );
    assert_ne!(
        Some(random.clone()),
        order(Some(Sampling::Random), 4, 400, 10)
    );
    for k in 0..4 {
        let c = random.iter().filter(|&&i| i == k).count();
        assert!((60..140).contains(&c), "{k}: {c}");
    }
    let shuffled = order(Some(Sampling::Shuffle), 5, 12, 3).unwrap();
    assert_eq!(shuffled.len(), 15, "whole passes");
    for pass in shuffled.chunks(5) {
        let mut p = pass.to_vec();
        p.sort_unstable();
        assert_eq!(p, vec![0, 1, 2, 3, 4], "each pass is a permutation");
    }
    assert_ne!(shuffled[..5], shuffled[5..10], "reshuffled after a pass");
}

#[test]
fn sampling_spellings_parse() {
    for (name, want) in [
        ("round_robin", Sampling::RoundRobin),
        ("round-robin", Sampling::RoundRobin),
        ("sequential", Sampling::Sequential),
        ("random", Sampling::Random),
        ("shuffle", Sampling::Shuffle),
    ] {
        let c = cfg(&["--dataset-sampling-strategy", name]);
        assert_eq!(c.args.dataset.dataset_sampling_strategy, Some(want));
    }
}

#[test]
fn single_turn_file_with_sampling_and_osl() {
    let path = write(
        "single.jsonl",
        "{\"text\": \"one two\", \"output_length\": 3}\n{\"text\": \"three\"}\n",
    );
    let p = path.to_str().unwrap();
    let (e, _) = prepared(&["--input-file", p, "--custom-dataset-type", "single_turn"]).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(
        (e[0].text.as_str(), e[0].isl, e[0].osl),
        ("one two", 2, Some(3))
    );
    assert_eq!(e[1].osl, None);
    let args = [
        "--input-file",
        p,
        "--custom-dataset-type",
        "single_turn",
        "--output-tokens-mean",
        "7",
        "--dataset-sampling-strategy",
        "random",
        "--request-count",
        "30",
    ];
    let (e, _) = prepared(&args).unwrap();
    assert_eq!(e.len(), 30, "one entry per request");
    assert!(e.iter().any(|x| x.text == "three") && e.iter().any(|x| x.text == "one two"));
    assert!(e
        .iter()
        .all(|x| x.osl == Some(if x.text == "three" { 7 } else { 3 })));
}

#[test]
fn sharegpt_reference_reply_is_the_osl_unless_asked_otherwise() {
    let path = write(
        "share.json",
        r#"[{"conversations": [{"from": "human", "value": "Why is the sky blue?"},
            {"from": "gpt", "value": "Because of Rayleigh scattering of light."}]}]"#,
    );
    let p = path.to_str().unwrap();
    let (e, _) = prepared(&["--dataset-name", "sharegpt", "--dataset-path", p]).unwrap();
    let reply = tok().count("Because of Rayleigh scattering of light.") as u64;
    assert_eq!((e[0].isl, e[0].osl), (6, Some(reply)));
    let (e, _) = prepared(&[
        "--input-file",
        p,
        "--custom-dataset-type",
        "sharegpt",
        "--osl",
        "9",
    ])
    .unwrap();
    assert_eq!(e[0].osl, Some(9));
}

#[test]
fn random_pool_directory_draws_from_every_file() {
    let dir = std::env::temp_dir().join(format!("inferperf-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.jsonl"),
        "{\"text\": \"Q1\"}\n{\"text\": \"Q2\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.jsonl"),
        "{\"texts\": [{\"name\": \"p\", \"contents\": [\"P1\"]}]}\n",
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    let args = [
        "--input-file",
        d,
        "--custom-dataset-type",
        "random_pool",
        "--num-prompts",
        "20",
    ];
    let (e, _) = prepared(&args).unwrap();
    assert_eq!(e.len(), 20);
    assert!(
        e.iter().all(|x| x.text == "Q1 P1" || x.text == "Q2 P1"),
        "{:?}",
        e[0].text
    );
    assert!(e.iter().any(|x| x.text == "Q1 P1") && e.iter().any(|x| x.text == "Q2 P1"));
    std::fs::write(dir.join("c.jsonl"), "{\"text\": 5}\n").unwrap();
    let err = prepared(&args).unwrap_err();
    assert!(
        err.msg.contains("c.jsonl line 1: field 'text'"),
        "{}",
        err.msg
    );
    assert_eq!(err.exit_code(), 99);
}

#[test]
fn a_mooncake_trace_replays_its_timestamps() {
    let path = write(
        "trace.jsonl",
        concat!(
            "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]}\n",
            "{\"timestamp\": 500, \"input_length\": 520, \"hash_ids\": [1, 3]}\n",
            "{\"timestamp\": 3000, \"text_input\": \"late\"}\n",
        ),
    );
    let p = path.to_str().unwrap();
    let base = ["--input-file", p, "--custom-dataset-type", "mooncake_trace"];
    let (e, c) = prepared(&base).unwrap();
    assert_eq!(
        e.iter().map(|x| x.isl).collect::<Vec<_>>(),
        vec![520, 600, 1]
    );
    assert_eq!(e[1].osl, Some(2));
    let head = |x: &Entry| x.text[..200].to_string();
    assert_eq!(head(&e[0]), head(&e[1]), "hash id 1 leads both prompts");
    let plan = c.args.dataset.plan.clone().unwrap();
    assert_eq!(
        plan.fixed_ns,
        Some(vec![600_000_000, 1_100_000_000, 3_100_000_000])
    );
    assert_eq!(c.args.request_count, Some(3));
    assert!(matches!(
        c.args
            .dataset
            .engine_load(LoadPoint::Concurrency(1), None, None),
        Some(Load::Paced {
            schedule: Schedule::Fixed(_),
            ..
        })
    ));
    let mut more = base.to_vec();
    more.extend([
        "--fixed-schedule-auto-offset",
        "--fixed-schedule-speedup",
        "2",
        "--fixed-schedule-end-offset",
        "1000",
    ]);
    let (e, c) = prepared(&more).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(
        c.args.dataset.plan.unwrap().fixed_ns,
        Some(vec![100_000_000, 350_000_000])
    );
    // Closed loop over the same trace: no schedule.
    let mut closed = base.to_vec();
    closed.extend(["--concurrency", "2"]);
    let (e, c) = prepared(&closed).unwrap();
    assert_eq!(e.len(), 3, "file order; the engine wraps around it");
    assert!(
        c.args.dataset.plan.is_none()
            && c.args
                .dataset
                .engine_load(LoadPoint::Concurrency(1), None, None)
                .is_none()
    );
}

#[test]
fn usage_errors_name_the_flag_file_and_line() {
    let path = write(
        "st.jsonl",
        "{\"text\": \"a\"}\n{\"text\": \"b\", \"timestamp\": 5}\n",
    );
    let p = path.to_str().unwrap();
    let st = ["--input-file", p, "--custom-dataset-type", "single_turn"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&st[..], &["--fixed-schedule"]].concat(),
            "line 1: --fixed-schedule needs field 'timestamp'",
        ),
        (
            [&st[..], &["--fixed-schedule-speedup", "2"]].concat(),
            "--fixed-schedule-speedup applies",
        ),
        (vec!["--fixed-schedule"], "--fixed-schedule needs a trace"),
        (
            vec!["--custom-dataset-type", "single_turn"],
            "needs --input-file",
        ),
        (vec!["--dataset-name", "sharegpt"], "needs --dataset-path"),
        (vec!["--dataset-path", p], "needs --dataset-name"),
        (
            vec![
                "--input-file",
                "/nonexistent/x.jsonl",
                "--custom-dataset-type",
                "mooncake_trace",
            ],
            "--input-file /nonexistent/x.jsonl",
        ),
        (
            [&st[..], &["--fixed-schedule", "--concurrency", "2"]].concat(),
            "drop --concurrency",
        ),
    ];
    let share = write("s.json", "[]");
    let share_args = [
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        share.to_str().unwrap(),
        "--fixed-schedule",
    ];
    let cases = [
        cases,
        vec![(share_args.to_vec(), "sharegpt datasets do not have")],
    ]
    .concat();
    for (args, needle) in cases {
        let err = prepared(&args).unwrap_err();
        assert!(err.msg.contains(needle), "{args:?}: {}", err.msg);
        assert_eq!(err.exit_code(), 99, "{args:?}");
    }
}

#[test]
fn fuzz_entry_survives_odd_input() {
    for data in [
        &b""[..],
        b"[",
        b"{\"timestamp\": 1e308, \"input_length\": 1}",
        b"\xff\n{}",
        b"[{\"conversations\": [[]]}]",
    ] {
        fuzz_datasets(data);
    }
}

#[test]
fn multi_turn_conversations_become_a_session_plan() {
    let multi = write(
        "mt.jsonl",
        concat!(
            "{\"session_id\": \"s\", \"turns\": [{\"text\": \"a\"}, {\"text\": \"b c\", \"delay\": 30}]}\n",
            "{\"turns\": [{\"text\": \"solo\"}]}\n",
        ),
    );
    let p = multi.to_str().unwrap();
    let base = ["--input-file", p, "--custom-dataset-type", "multi_turn"];
    let (e, c) = prepared(&[&base[..], &["--concurrency", "2"]].concat()).unwrap();
    let texts: Vec<&str> = e.iter().map(|x| x.text.as_str()).collect();
    assert_eq!(texts, ["a", "b c", "solo"]);
    let plan = c.args.dataset.plan.clone().unwrap();
    let conv = plan.conversations.clone().unwrap();
    assert_eq!(conv.conversations.len(), 2);
    assert_eq!(conv.conversations[0].steps, vec![0, 1]);
    assert_eq!(conv.conversations[0].delays_ms, vec![0, 30]);
    assert_eq!((conv.turns, c.args.request_count), (3, Some(3)));
    assert!(String::from_utf8_lossy(&conv.bodies[1]).contains("\"content\":\"b c\""));
    assert!(matches!(
        c.args
            .dataset
            .engine_load(LoadPoint::Concurrency(2), None, None),
        Some(Load::Sessions { slots: 2, .. })
    ));
    // At a rate: one slot per conversation (or the cap), all on one worker.
    let rate = Schedule::Constant { rate: 2.0 };
    let (_, c) = prepared(&[&base[..], &["--request-rate", "2"]].concat()).unwrap();
    let at_rate = c
        .args
        .dataset
        .engine_load(LoadPoint::RequestRate(2.0), None, Some(&rate));
    assert!(matches!(&at_rate, Some(Load::Sessions { slots: 2, turns }) if turns.0.one_worker()));
    let capped = c
        .args
        .dataset
        .engine_load(LoadPoint::RequestRate(2.0), Some(1), Some(&rate));
    assert!(matches!(capped, Some(Load::Sessions { slots: 1, .. })));
    for (extra, needle) in [
        (&["--fixed-schedule"][..], "not --fixed-schedule"),
        (
            &["--endpoint-type", "completions"][..],
            "--endpoint-type chat",
        ),
        (
            &["--warmup-request-count", "1"][..],
            "--warmup-request-count",
        ),
    ] {
        let err = prepared(&[&base[..], extra].concat()).unwrap_err();
        assert!(err.msg.contains(needle), "{extra:?}: {}", err.msg);
        assert_eq!(err.exit_code(), 99);
    }
}

/// One synthetic prompt per `--num-prompts`, numbered, so the steps can be traced.
fn numbered(cfg: &ProfileConfig, _: &Tokenizer) -> Result<Vec<Entry>> {
    Ok((0..cfg.args.num_prompts)
        .map(|i| Entry {
            text: format!("p{i}"),
            isl: 1,
            osl: Some(4),
            payload: None,
        })
        .collect())
}

#[test]
fn synthetic_conversations_take_their_turns_and_pauses_from_the_flags() {
    let run = |args: &[&str]| prepare(&cfg(args), &tok(), numbered);
    let fixed = [
        "--conversation-num",
        "4",
        "--conversation-turn-mean",
        "3",
        "--conversation-turn-delay-mean",
        "250",
    ];
    let (e, c) = run(&fixed).unwrap();
    assert_eq!(e.len(), 12, "one prompt per turn");
    let conv = c
        .args
        .dataset
        .plan
        .clone()
        .unwrap()
        .conversations
        .clone()
        .unwrap();
    let steps: Vec<Vec<u32>> = conv.conversations.iter().map(|c| c.steps.clone()).collect();
    assert_eq!(
        steps,
        [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9, 10, 11]]
    );
    assert!(conv
        .conversations
        .iter()
        .all(|c| c.delays_ms == [0, 250, 250]));
    assert_eq!((conv.turns, c.args.request_count), (12, Some(12)));
    // Drawn turn counts and pauses: seeded, at least one turn, pauses at least 0.
    let drawn = [
        "--conversation-num",
        "50",
        "--conversation-turn-mean",
        "4",
        "--conversation-turn-stddev",
        "2",
        "--conversation-turn-delay-mean",
        "10",
        "--conversation-turn-delay-stddev",
        "20",
    ];
    let (e, c) = run(&drawn).unwrap();
    let conv = c
        .args
        .dataset
        .plan
        .clone()
        .unwrap()
        .conversations
        .clone()
        .unwrap();
    let lens: Vec<usize> = conv.conversations.iter().map(|c| c.steps.len()).collect();
    assert_eq!(lens.iter().sum::<usize>(), e.len());
    assert!(lens.iter().all(|&n| n >= 1) && lens.iter().min() < lens.iter().max());
    let pauses: Vec<u64> = conv
        .conversations
        .iter()
        .flat_map(|c| c.delays_ms[1..].to_vec())
        .collect();
    assert!(
        pauses.contains(&0) && pauses.iter().any(|&p| p > 10),
        "{pauses:?}"
    );
    let (_, again) = run(&drawn).unwrap();
    assert_eq!(again.args.dataset.plan, c.args.dataset.plan, "seeded");
    // One turn is a single-turn run; a pause without turns, or turns with a file, is refused.
    let (e, c) = run(&["--conversation-turn-mean", "1", "--num-prompts", "3"]).unwrap();
    assert_eq!((e.len(), c.args.dataset.plan.is_none()), (3, true));
    let file = write("turns-with-file.jsonl", "{\"text\": \"a\"}\n");
    for (args, needle) in [
        (
            vec!["--conversation-turn-delay-mean", "5"],
            "--conversation-turn-delay-mean",
        ),
        (
            vec!["--conversation-turn-mean", "0.5"],
            "--conversation-turn-mean must be",
        ),
        (
            vec![
                "--conversation-turn-mean",
                "2",
                "--conversation-turn-delay-stddev",
                "-1",
            ],
            "--conversation-turn-delay-stddev must be",
        ),
        (
            vec![
                "--conversation-turn-mean",
                "3",
                "--input-file",
                file.to_str().unwrap(),
                "--custom-dataset-type",
                "single_turn",
            ],
            "come from the file",
        ),
        (
            vec![
                "--conversation-num",
                "600000",
                "--conversation-turn-mean",
                "4",
            ],
            "at most",
        ),
    ] {
        let err = run(&args).unwrap_err();
        assert!(err.msg.contains(needle), "{args:?}: {}", err.msg);
        assert_eq!(err.exit_code(), 99);
    }
}

/// clap's own consistency checks (unique names, valid conflicts) hold for the flags with
/// the dataset ones flattened in.
#[test]
fn the_flag_set_is_consistent() {
    use clap::CommandFactory;
    crate::llm::cli::ProfileArgs::command().debug_assert();
    let help = crate::llm::cli::ProfileArgs::command()
        .render_long_help()
        .to_string();
    for flag in [
        "--custom-dataset-type",
        "--fixed-schedule-speedup",
        "--replay-speedup",
        "mooncake_trace",
    ] {
        assert!(help.contains(flag), "{flag}");
    }
}
