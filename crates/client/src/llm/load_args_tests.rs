use super::*;

fn args(pairs: &[(&str, &str)]) -> LoadArgs {
    let mut a = LoadArgs::default();
    for (k, v) in pairs {
        let v = Some(v.to_string());
        match *k {
            "pattern" => a.arrival_pattern = v,
            "smooth" => a.arrival_smoothness = v,
            "grace" => a.benchmark_grace_period = v,
            "threshold" => a.failed_request_threshold = v,
            _ => unreachable!(),
        }
    }
    a
}

#[test]
fn arrival_pattern_smoothness_and_distribution_resolve_as_aiperf_does() {
    let p = |pairs: &[(&str, &str)], d| plan(&args(pairs), d).map(|p| p.arrival);
    assert_eq!(p(&[], None).unwrap(), Arrival::Constant);
    assert_eq!(p(&[], Some(Given::Poisson)).unwrap(), Arrival::Poisson);
    assert_eq!(
        p(&[("pattern", "poisson")], None).unwrap(),
        Arrival::Poisson
    );
    assert_eq!(
        p(&[("pattern", "GAMMA")], None).unwrap(),
        Arrival::Gamma(1.0)
    );
    assert_eq!(p(&[("smooth", "4")], None).unwrap(), Arrival::Gamma(4.0));
    let both = [("pattern", "gamma"), ("smooth", "0.5")];
    assert_eq!(p(&both, None).unwrap(), Arrival::Gamma(0.5));
    assert_eq!(
        p(&[("pattern", "poisson")], Some(Given::Poisson)).unwrap(),
        Arrival::Poisson
    );
    for (pairs, d, needle) in [
        (
            vec![("pattern", "burst")],
            None,
            "--arrival-pattern must be",
        ),
        (
            vec![("pattern", "poisson")],
            Some(Given::Constant),
            "disagree",
        ),
        (
            vec![("pattern", "constant"), ("smooth", "2")],
            None,
            "applies to",
        ),
        (vec![("smooth", "0")], None, "--arrival-smoothness must be"),
        (
            vec![("smooth", "nan")],
            None,
            "--arrival-smoothness must be",
        ),
        (
            vec![("grace", "-1")],
            None,
            "--benchmark-grace-period must be",
        ),
        (
            vec![("grace", "soon")],
            None,
            "--benchmark-grace-period must be",
        ),
        (
            vec![("threshold", "1.5")],
            None,
            "--failed-request-threshold must be",
        ),
        (
            vec![("threshold", "x")],
            None,
            "--failed-request-threshold must be",
        ),
    ] {
        let err = plan(&args(&pairs), d).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Usage);
        assert_eq!(err.exit_code(), 99);
        assert!(err.msg.contains(needle), "{pairs:?}: {}", err.msg);
        assert!(!err.msg.contains('\n'));
    }
}

#[test]
fn grace_and_threshold_are_read() {
    let d = plan(&LoadArgs::default(), None).unwrap();
    assert_eq!(d, LoadPlan::default());
    assert_eq!(d.grace, Some(Duration::from_secs(30)));
    let p = plan(&args(&[("grace", "2.5"), ("threshold", "0.25")]), None).unwrap();
    assert_eq!(p.grace, Some(Duration::from_millis(2500)));
    assert_eq!(p.failed_request_threshold, Some(0.25));
    assert_eq!(plan(&args(&[("grace", "inf")]), None).unwrap().grace, None);
    assert_eq!(
        plan(&args(&[("grace", "0")]), None).unwrap().grace,
        Some(Duration::ZERO)
    );
    let json = config_json(&plan(&args(&[("smooth", "2"), ("grace", "inf")]), None).unwrap());
    assert_eq!(json["arrival_pattern"], "gamma");
    assert_eq!(json["arrival_smoothness"], 2.0);
    assert_eq!(json["benchmark_grace_period"], "inf");
    assert!(json["failed_request_threshold"].is_null());
}
