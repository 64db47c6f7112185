use super::*;

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("inferperf-rate-series-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn both_documented_forms_are_read_and_bad_files_are_named() {
    let list = write(
        "list.json",
        r#"[{"time_s": 0, "qps": 2}, {"time_s": 10, "qps": 4}]"#,
    );
    assert_eq!(read(&list).unwrap(), vec![(0.0, 2.0), (10.0, 4.0)]);
    let obj = write(
        "obj.json",
        r#"{"points": [{"time_s": 1, "qps": 1.5}, {"time_s": 2, "qps": 3}]}"#,
    );
    assert_eq!(read(&obj).unwrap(), vec![(1.0, 1.5), (2.0, 3.0)]);
    for (name, text, needle) in [
        ("one.json", r#"[{"time_s": 0, "qps": 2}]"#, "needs from 2"),
        (
            "order.json",
            r#"[{"time_s": 5, "qps": 2}, {"time_s": 5, "qps": 3}]"#,
            "increase strictly",
        ),
        (
            "zero.json",
            r#"[{"time_s": 0, "qps": 0}, {"time_s": 5, "qps": 3}]"#,
            "point 0",
        ),
        (
            "extra.json",
            r#"[{"time_s": 0, "qps": 1, "x": 1}, {"time_s": 5, "qps": 3}]"#,
            "point 0",
        ),
        (
            "keys.json",
            r#"{"points": [], "more": 1}"#,
            "must be a list",
        ),
        ("text.json", "nope", "not JSON"),
    ] {
        let err = read(&write(name, text)).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Usage, "{name}");
        assert!(
            err.msg.contains("--request-rate-series") && err.msg.contains(name),
            "{}",
            err.msg
        );
        assert!(err.msg.contains(needle), "{name}: {}", err.msg);
        assert!(!err.msg.contains('\n'));
    }
    let missing = read(Path::new("/nonexistent/series.json")).unwrap_err();
    assert!(missing.msg.contains("series.json"));
}

#[test]
fn the_rate_follows_the_line_and_the_sends_its_integral() {
    let points = [(0.0, 10.0), (10.0, 30.0)];
    assert_eq!(rate_at(&points, -1.0), 10.0);
    assert_eq!(rate_at(&points, 5.0), 20.0);
    assert_eq!(rate_at(&points, 99.0), 30.0);
    // Integral over 10 s: 10*10 + 20*10/2 = 200 sends, then 30/s.
    let t = offsets(&points, None, Some(10.0));
    assert_eq!(t.len(), 200);
    assert!(t.windows(2).all(|w| w[0] < w[1]));
    // The first 5 s hold 10*5 + 2*25/2 = 75 sends.
    assert_eq!(t.iter().filter(|&&x| x <= 5_000_000_000).count(), 75);
    // After the last point: 30/s.
    let t = offsets(&points, None, Some(12.0));
    assert_eq!(t.len(), 260);
    let t = offsets(&points, Some(7), None);
    assert_eq!(t.len(), 7);
    // 10 t + t^2 = 1 (rate 10 + 2 t per s): t = (sqrt(104) - 10) / 2.
    let want = (104f64.sqrt() - 10.0) / 2.0 * 1e9;
    assert!((t[0] as f64 - want).abs() < 2.0, "{}", t[0]);
    // A series that starts later holds its first rate until then.
    let t = offsets(&[(2.0, 5.0), (4.0, 5.0)], Some(20), None);
    assert_eq!(t.len(), 20);
    assert!((t[19] as f64 / 1e9 - 4.0).abs() < 1e-6, "{}", t[19]);
}
