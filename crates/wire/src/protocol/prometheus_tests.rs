use super::*;

fn one(text: &str) -> Sample {
    let exposition = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(exposition.samples.len(), 1, "{text:?}");
    exposition.samples.into_iter().next().unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// (line, name, labels, value, timestamp)
type SampleCase<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], f64, Option<i64>);

#[test]
fn sample_syntax_table() {
    let cases: &[SampleCase] = &[
        ("up 1", "up", &[], 1.0, None),
        ("a:b_c9 2.5", "a:b_c9", &[], 2.5, None),
        ("_x -3", "_x", &[], -3.0, None),
        ("m 1e3", "m", &[], 1000.0, None),
        ("m 2.5E-2", "m", &[], 0.025, None),
        ("m +7", "m", &[], 7.0, None),
        ("m .5", "m", &[], 0.5, None),
        ("m +Inf", "m", &[], f64::INFINITY, None),
        ("m -Inf", "m", &[], f64::NEG_INFINITY, None),
        ("m inf", "m", &[], f64::INFINITY, None),
        ("m 1 1712345678901", "m", &[], 1.0, Some(1712345678901)),
        ("m 1 -5", "m", &[], 1.0, Some(-5)),
        ("  m \t 4  ", "m", &[], 4.0, None),
        ("m{} 1", "m", &[], 1.0, None),
        ("m {a=\"b\"} 1", "m", &[("a", "b")], 1.0, None),
        ("m{a=\"b\"}1", "m", &[("a", "b")], 1.0, None),
        (
            "nv_gpu_utilization{gpu_uuid=\"GPU-1\"} 0.5",
            "nv_gpu_utilization",
            &[("gpu_uuid", "GPU-1")],
            0.5,
            None,
        ),
        (
            "m{z=\"1\",gpu_uuid=\"G\",a=\"2\"} 3",
            "m",
            &[("z", "1"), ("gpu_uuid", "G"), ("a", "2")],
            3.0,
            None,
        ),
        ("m{a=\"b\",} 1", "m", &[("a", "b")], 1.0, None),
        (
            "m{ a = \"b\" , c=\"d\" } 1",
            "m",
            &[("a", "b"), ("c", "d")],
            1.0,
            None,
        ),
        (
            r#"m{path="C:\\dir",q="say \"hi\"",nl="a\nb"} 1"#,
            "m",
            &[("path", "C:\\dir"), ("q", "say \"hi\""), ("nl", "a\nb")],
            1.0,
            None,
        ),
        ("m{a=\"}{,= \"} 1", "m", &[("a", "}{,= ")], 1.0, None),
        ("m{a=\"\"} 1", "m", &[("a", "")], 1.0, None),
        ("m{a=\"ünï\"} 1", "m", &[("a", "ünï")], 1.0, None),
    ];
    for (line, name, want_labels, value, ts) in cases {
        let s = one(line);
        assert_eq!(s.name, *name, "{line:?}");
        assert_eq!(s.labels, labels(want_labels), "{line:?}");
        assert_eq!(s.value, *value, "{line:?}");
        assert_eq!(s.timestamp_ms, *ts, "{line:?}");
    }
}

#[test]
fn nan_value() {
    assert!(one("m NaN").value.is_nan());
    assert!(one("m{a=\"b\"} nan 12").value.is_nan());
}

#[test]
fn label_lookup() {
    let s = one("m{gpu_uuid=\"GPU-a\",model=\"x\"} 1");
    assert_eq!(s.label("gpu_uuid"), Some("GPU-a"));
    assert_eq!(s.label("model"), Some("x"));
    assert_eq!(s.label("missing"), None);
}

#[test]
fn comments_blank_lines_and_crlf() {
    let body = "# HELP nv_gpu_power_usage GPU power usage in watts\r\n\
                # TYPE nv_gpu_power_usage gauge\r\n\
                \r\n\
                #just a comment\r\n\
                # another one with TYPE inside\r\n\
                nv_gpu_power_usage{gpu_uuid=\"GPU-0\"} 250.5\r\n\
                \t \r\n\
                # HELP esc Line one\\nline two \\\\ and \\x kept\n\
                # TYPE esc counter\n\
                esc 3";
    let e = parse(body.as_bytes()).unwrap();
    assert_eq!(e.samples.len(), 2);
    assert_eq!(e.samples[0].value, 250.5);
    assert_eq!(e.samples[1].name, "esc");
    assert_eq!(
        e.help,
        vec![
            (
                "nv_gpu_power_usage".to_string(),
                "GPU power usage in watts".to_string()
            ),
            (
                "esc".to_string(),
                "Line one\nline two \\ and \\x kept".to_string()
            ),
        ]
    );
    assert_eq!(
        e.types,
        vec![
            ("nv_gpu_power_usage".to_string(), MetricType::Gauge),
            ("esc".to_string(), MetricType::Counter),
        ]
    );
}

#[test]
fn every_type_keyword() {
    for (word, kind) in [
        ("counter", MetricType::Counter),
        ("gauge", MetricType::Gauge),
        ("histogram", MetricType::Histogram),
        ("summary", MetricType::Summary),
        ("untyped", MetricType::Untyped),
    ] {
        let e = parse(format!("# TYPE m {word}\n").as_bytes()).unwrap();
        assert_eq!(e.types, vec![("m".to_string(), kind)]);
    }
}

#[test]
fn empty_bodies() {
    for body in ["", "\n", "\r\n\r\n", "# only a comment"] {
        assert_eq!(
            parse(body.as_bytes()).unwrap(),
            Exposition::default(),
            "{body:?}"
        );
    }
}

#[test]
fn errors_name_the_line() {
    // (body, line, part of the message)
    let cases: &[(&str, usize, &str)] = &[
        ("1m 1", 1, "expected a metric name"),
        ("ok 1\nm", 2, "missing value for 'm'"),
        ("ok 1\n\nm{a=\"b\"}", 3, "missing value"),
        ("m abc", 1, "value 'abc' of 'm' is not a number"),
        ("m 1_000", 1, "not a number"),
        ("m 0x10", 1, "not a number"),
        ("m e5", 1, "not a number"),
        ("m 1 2.5", 1, "timestamp '2.5' of 'm' is not an integer"),
        ("m 1 2 3", 1, "unexpected text after the sample"),
        ("m-x 1", 1, "unexpected character after metric name 'm'"),
        ("m{a=\"b\" 1", 1, "expected ',' or '}' after label 'a'"),
        ("m{a=\"b} 1", 1, "unterminated value"),
        (
            "m{a=b} 1",
            1,
            "expected '\"' to open the value of label 'a'",
        ),
        ("m{a} 1", 1, "expected '=' after label 'a'"),
        ("m{1a=\"b\"} 1", 1, "expected a label name"),
        ("m{a:b=\"c\"} 1", 1, "expected '=' after label 'a'"),
        ("m{a=\"b\",a=\"c\"} 1", 1, "label 'a' given twice"),
        ("m{a=\"\\t\"} 1", 1, "invalid escape '\\t'"),
        ("m{a=\"x\\", 1, "unterminated value"),
        ("# TYPE m gauges", 1, "TYPE of 'm' is 'gauges'"),
        ("# TYPE m gauge extra", 1, "unexpected text after the TYPE"),
        ("# TYPE", 1, "missing metric name"),
        ("# HELP 9bad text", 1, "invalid metric name '9bad'"),
        (
            "# TYPE m gauge\n# TYPE m counter",
            2,
            "second TYPE line for 'm'",
        ),
    ];
    for (body, line, part) in cases {
        let e = parse(body.as_bytes()).expect_err(body);
        assert_eq!(e.line, *line, "{body:?}: {e}");
        assert!(e.message.contains(part), "{body:?}: {e}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
    }
}

#[test]
fn invalid_utf8_is_an_error_on_its_line() {
    let e = parse(b"a 1\nb{x=\"\xff\"} 2\n").unwrap_err();
    assert_eq!(
        e,
        ParseError {
            line: 2,
            message: "not valid UTF-8".into()
        }
    );
}

#[test]
fn lossy_parse_skips_bad_lines_and_keeps_the_first_error() {
    let body = b"good 1\nbad{ 2\nalso_good{g=\"x\"} 3\n??? 4\n";
    let (e, first) = parse_lossy(body);
    let names: Vec<&str> = e.samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good", "also_good"]);
    assert_eq!(first.map(|e| e.line), Some(2));
}

#[test]
fn fuzz_entry_accepts_odd_input() {
    for data in [
        &b""[..],
        b"\xff\xfe",
        b"m{a=\"\\",
        b"m NaN\nm NaN",
        b"# TYPE m gauge\n# TYPE m gauge",
        b"{}{}{} 1 2 3",
        b"m{a=\"b\"} +Inf -9223372036854775808",
    ] {
        fuzz_prometheus(data);
    }
}
