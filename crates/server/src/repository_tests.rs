use super::*;

fn none() -> LoadParams {
    LoadParams::default()
}

fn names(entries: &[IndexEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.name).collect()
}

#[test]
fn none_mode_loads_everything_and_refuses_changes() {
    let repo = Repository::default();
    assert!((0..MODELS.len()).all(|i| repo.is_ready(i)));
    let index = repo.index(false);
    assert_eq!(index.len(), MODELS.len());
    let mut sorted = names(&index);
    sorted.sort();
    assert_eq!(names(&index), sorted);
    assert!(index.iter().all(|e| e.state == Some("READY")));
    for result in [repo.load("simple", &none()), repo.unload("simple", false)] {
        assert_eq!(result, Err(RepoError::Unavailable(NOT_EXPLICIT.into())));
    }
    assert_eq!(RepoError::Unavailable(String::new()).http_status(), 503);
}

#[test]
fn explicit_mode_loads_and_unloads() {
    let repo = Repository::new(ControlMode::Explicit, &["identity_fp32".into()]).unwrap();
    let simple = find_model("simple").unwrap();
    let ensemble = find_model("ensemble_simple").unwrap();
    let inner = find_model("identity_int32").unwrap();
    assert!(repo.is_ready(find_model("identity_fp32").unwrap()));
    assert!(!repo.is_ready(simple));
    assert_eq!(names(&repo.index(true)), ["identity_fp32"]);
    let json = repo.index_json(false);
    assert_eq!(json[0], json!({"name": "accumulate_int32"}));
    // An ensemble brings its composing models.
    repo.load("ensemble_simple", &none()).unwrap();
    assert!(repo.is_ready(ensemble) && repo.is_ready(simple) && repo.is_ready(inner));
    repo.unload("ensemble_simple", false).unwrap();
    assert!(!repo.is_ready(ensemble) && repo.is_ready(simple));
    let entry = repo
        .index(false)
        .into_iter()
        .find(|e| e.name == "ensemble_simple");
    assert_eq!(
        entry.map(|e| (e.version, e.state, e.reason)),
        Some((Some("1"), Some("UNAVAILABLE"), Some("unloaded".into())))
    );
    repo.load("ensemble_simple", &none()).unwrap();
    repo.unload("ensemble_simple", true).unwrap();
    assert!(!repo.is_ready(simple) && !repo.is_ready(inner));
    let err = repo.load("nosuch", &none()).unwrap_err();
    assert_eq!(err.http_status(), 500);
    assert_eq!(
        err.message(),
        "failed to load 'nosuch', failed to poll from model repository"
    );
    assert_eq!(repo.unload("nosuch", false), Ok(()));
    assert!(Repository::new(ControlMode::Explicit, &["nope".into()]).is_err());
    let all = Repository::new(ControlMode::Explicit, &["*".into()]).unwrap();
    assert!((0..MODELS.len()).all(|i| all.is_ready(i)));
}

#[test]
fn request_bodies() {
    assert_eq!(index_request(b""), Ok(false));
    assert_eq!(index_request(br#"{"ready":true}"#), Ok(true));
    assert!(index_request(b"xx")
        .unwrap_err()
        .starts_with("failed to parse the request JSON buffer"));
    assert_eq!(unload_request(b" "), Ok(false));
    let body = br#"{"parameters":{"unload_dependents":true}}"#;
    assert_eq!(unload_request(body), Ok(true));
}

fn with_config(config: &str) -> LoadParams {
    LoadParams {
        config: Some(config.into()),
        files: Vec::new(),
    }
}

#[test]
fn an_override_stays_until_an_unload() {
    let repo = Repository::new(ControlMode::Explicit, &["simple".into()]).unwrap();
    let simple = find_model("simple").unwrap();
    repo.load("simple", &with_config(r#"{"max_batch_size": 2}"#))
        .unwrap();
    assert_eq!(repo.model(simple).max_batch_size, 2);
    repo.load("simple", &none()).unwrap();
    assert_eq!(repo.settings(simple).max_batch_size, 2, "kept");
    repo.unload("simple", false).unwrap();
    repo.load("simple", &none()).unwrap();
    assert_eq!(*repo.settings(simple), MODELS[simple].settings());
    assert_eq!(repo.model(simple).max_batch_size, 8);
}

#[test]
fn refused_overrides_leave_the_model_as_it_was() {
    let repo = Repository::new(ControlMode::Explicit, &["simple".into()]).unwrap();
    let simple = find_model("simple").unwrap();
    let unreadable = repo.load("simple", &with_config("{")).unwrap_err();
    assert_eq!(unreadable.http_status(), 500);
    let refused = repo
        .load("simple", &with_config(r#"{"backend": "python"}"#))
        .unwrap_err();
    assert_eq!(refused.http_status(), 400);
    assert!(refused.message().ends_with(";\n"), "{refused:?}");
    assert!(repo.is_ready(simple));
    assert_eq!(*repo.settings(simple), MODELS[simple].settings());
    // Model files cannot be loaded; without a config the poll fails.
    let files = LoadParams {
        config: None,
        files: vec!["file:1/model.onnx".into()],
    };
    assert_eq!(repo.load("simple", &files).unwrap_err().http_status(), 500);
    let files = LoadParams {
        config: Some("{}".into()),
        ..files
    };
    let err = repo.load("simple", &files).unwrap_err();
    assert!(err.message().contains("models are built in"), "{err:?}");
    // A model that was not loaded shows why it failed.
    let repeat = repo.load("repeat_int32", &with_config(r#"{"max_batch_size": 1}"#));
    assert_eq!(repeat.unwrap_err().http_status(), 400);
    let entry = repo
        .index(false)
        .into_iter()
        .find(|e| e.name == "repeat_int32");
    let reason = entry.and_then(|e| e.reason).unwrap_or_default();
    assert!(reason.starts_with("Invalid argument: "), "{reason}");
}

#[test]
fn an_ensemble_batches_no_more_than_its_composing_models() {
    let repo = Repository::new(ControlMode::Explicit, &[]).unwrap();
    repo.load("simple", &with_config(r#"{"max_batch_size": 4}"#))
        .unwrap();
    let err = repo
        .load("ensemble_simple", &with_config(r#"{"max_batch_size": 8}"#))
        .unwrap_err();
    assert_eq!(
        err.message(),
        "load failed for model 'ensemble_simple': ensemble ensemble_simple allows maximum \
         batch size 8, but it contains model simple which only allows maximum batch size to \
         be 4\n"
    );
    repo.load("ensemble_simple", &with_config(r#"{"max_batch_size": 4}"#))
        .unwrap();
    let ensemble = find_model("ensemble_simple").unwrap();
    assert_eq!(repo.model(ensemble).max_batch_size, 4);
}
