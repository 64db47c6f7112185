use super::stand_in::{StandIn, COMMIT, ETAG, TOKENIZER_JSON};
use super::*;
use crate::error::ErrorKind;
use crate::inputs::tokenizer::Tokenizer;

/// A fresh, empty cache folder, unique per test and process.
fn temp_cache(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("inferperf-hub-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn env_for(cache: &Path, endpoint: &str) -> HubEnv {
    HubEnv {
        cache: cache.to_path_buf(),
        endpoint: endpoint.to_string(),
        token: None,
        offline: None,
    }
}

/// Nothing listens there: port 9 (discard) on loopback is closed in the test environment;
/// a test using it also asserts the message is the offline one, not a connection error.
const NOWHERE: &str = "http://127.0.0.1:9";

#[test]
fn env_precedence_matches_huggingface_hub() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        HubEnv::from_vars(move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    };
    let e = vars(&[("HOME", "/nonexistent-home")]);
    assert_eq!(
        e.cache,
        Path::new("/nonexistent-home/.cache/huggingface/hub")
    );
    assert_eq!(e.endpoint, DEFAULT_ENDPOINT);
    assert_eq!((e.token, e.offline), (None, None));
    let e = vars(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]);
    assert_eq!(e.cache, Path::new("/x/huggingface/hub"));
    let e = vars(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x"), ("HF_HOME", "/hf")]);
    assert_eq!(e.cache, Path::new("/hf/hub"));
    let e = vars(&[
        ("HF_HOME", "/hf"),
        ("HF_HUB_CACHE", "/c"),
        ("HF_ENDPOINT", "http://e:1/"),
    ]);
    assert_eq!(e.cache, Path::new("/c"));
    assert_eq!(e.endpoint, "http://e:1");
    let e = vars(&[("HF_TOKEN", "hf_x"), ("TRANSFORMERS_OFFLINE", "1")]);
    assert_eq!(e.token, Some(Token::from_var("HF_TOKEN", "hf_x")));
    assert_eq!(e.offline, Some("TRANSFORMERS_OFFLINE"));
    assert_eq!(
        vars(&[("HF_HUB_OFFLINE", "true")]).offline,
        Some("HF_HUB_OFFLINE")
    );
    assert_eq!(vars(&[("HF_HUB_OFFLINE", "0")]).offline, None);
    assert_eq!(
        vars(&[("HF_HUB_CACHE", "")]).cache,
        Path::new("./.cache/huggingface/hub")
    );
}

/// The login file's place: `HF_TOKEN_PATH`, else under `HF_HOME`, `XDG_CACHE_HOME` or the
/// home folder, as `huggingface_hub` puts it.
#[test]
fn token_path_precedence_matches_huggingface_hub() {
    let path = |pairs: &[(&str, &str)]| {
        token_path(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    };
    assert_eq!(
        path(&[("HOME", "/h")]),
        Path::new("/h/.cache/huggingface/token")
    );
    let xdg = [("HOME", "/h"), ("XDG_CACHE_HOME", "/x")];
    assert_eq!(path(&xdg), Path::new("/x/huggingface/token"));
    let home = [
        ("XDG_CACHE_HOME", "/x"),
        ("HF_HOME", "/hf"),
        ("HF_HUB_CACHE", "/c"),
    ];
    assert_eq!(path(&home), Path::new("/hf/token"));
    let set = [("HF_HOME", "/hf"), ("HF_TOKEN_PATH", "/t/tok")];
    assert_eq!(path(&set), Path::new("/t/tok"));
    assert_eq!(
        path(&[("HF_TOKEN_PATH", " "), ("HF_HOME", "/hf")]),
        Path::new("/hf/token")
    );
}

/// A token saved by `hf auth login` (found through `HF_HOME`, or `HF_TOKEN_PATH`) opens a
/// gated repository, goes to the Hub's origin only, and gives way to `HF_TOKEN`; a blank
/// file is no token.
#[test]
fn the_login_token_file_is_read_and_hf_token_wins() {
    let hub = StandIn::start();
    let dir = temp_cache("login");
    let home = dir.join("hf-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("token"), "hf_good\n").unwrap();
    let endpoint = hub.endpoint();
    let from = |pairs: &[(&str, String)]| {
        let mut pairs = pairs.to_vec();
        pairs.push(("HF_ENDPOINT", endpoint.clone()));
        HubEnv::from_vars(move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
    };
    let hf_home = ("HF_HOME", home.display().to_string());
    let env = from(std::slice::from_ref(&hf_home));
    let file = home.join("token");
    assert_eq!(
        env.token,
        Some(Token {
            value: "hf_good".into(),
            source: format!("the token file {}", file.display()),
        })
    );
    assert_eq!(env.cache, home.join("hub"));
    resolve("gated/model", "main", &env).unwrap();
    let seen = hub.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer hf_good"));
    assert_eq!(seen[1].authorization, None, "no token to the CDN host");
    // HF_TOKEN wins over the file: a wrong one is denied, and the message names HF_TOKEN.
    let cache = ("HF_HUB_CACHE", dir.join("other").display().to_string());
    let bad = ("HF_TOKEN", "hf_bad".to_string());
    let env = from(&[hf_home.clone(), cache.clone(), bad]);
    let err = resolve("gated/model", "main", &env).unwrap_err();
    assert_eq!(err, Miss::Denied(401, true));
    let msg = miss_message("gated/model", "main", &env, &err);
    assert!(
        msg.contains("the token from HF_TOKEN has no access"),
        "{msg}"
    );
    // HF_TOKEN_PATH names another file: a wrong token there is denied and named.
    let other = dir.join("elsewhere");
    std::fs::write(&other, "  hf_bad  ").unwrap();
    let path = ("HF_TOKEN_PATH", other.display().to_string());
    let env = from(&[hf_home.clone(), cache.clone(), path]);
    let msg = miss_message(
        "gated/model",
        "main",
        &env,
        &resolve("gated/model", "main", &env).unwrap_err(),
    );
    let named = format!(
        "the token from the token file {} has no access",
        other.display()
    );
    assert!(msg.contains(&named), "{msg}");
    // A blank file is no token: the gated repository asks for one.
    std::fs::write(&other, "\n").unwrap();
    let path = ("HF_TOKEN_PATH", other.display().to_string());
    let env = from(&[hf_home, cache, path]);
    assert_eq!(env.token, None);
    assert_eq!(
        resolve("gated/model", "main", &env).unwrap_err(),
        Miss::Denied(401, false)
    );
    assert_eq!(hub.seen().len(), 5);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A token that cannot be one header value is refused before anything is sent.
#[test]
fn a_token_with_control_characters_is_refused() {
    let hub = StandIn::start();
    let cache = temp_cache("bad-token");
    let env = HubEnv {
        token: Some(Token::from_var("HF_TOKEN", "hf_a\r\nX-Evil: 1")),
        ..env_for(&cache, &hub.endpoint())
    };
    let err = resolve("org/model", "main", &env).unwrap_err();
    assert_eq!(err, Miss::BadToken);
    let msg = miss_message("org/model", "main", &env, &err);
    assert!(
        msg.contains("the token from HF_TOKEN is not one HTTP header value"),
        "{msg}"
    );
    assert!(hub.seen().is_empty());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn repo_id_shapes() {
    for ok in [
        "Qwen/Qwen3-0.6B",
        "hf-internal-testing/llama-tokenizer",
        "gpt2",
        "a_b/c.d",
    ] {
        assert!(is_repo_id(ok), "{ok}");
    }
    for bad in [
        "",
        "/abs/path",
        "./x",
        "a/b/c",
        "a//b",
        "a--b/c",
        "a/..b",
        "-a/b",
        "a/b.",
        "a b",
    ] {
        assert!(!is_repo_id(bad), "{bad}");
    }
}

#[test]
fn first_run_downloads_into_the_python_layout_second_run_asks_nothing() {
    let hub = StandIn::start();
    let cache = temp_cache("layout");
    let env = env_for(&cache, &hub.endpoint());
    let file = resolve("org/model", "main", &env).unwrap();
    let repo = cache.join("models--org--model");
    assert_eq!(
        file,
        repo.join("snapshots").join(COMMIT).join("tokenizer.json")
    );
    // The snapshot entry is a relative symlink to the blob named by X-Linked-Etag (not the
    // CDN's own ETag), and refs/main holds the commit with no newline.
    let link = std::fs::read_link(&file).unwrap();
    assert_eq!(link, Path::new("../../blobs").join(ETAG));
    assert_eq!(
        std::fs::read_to_string(repo.join("blobs").join(ETAG)).unwrap(),
        TOKENIZER_JSON
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    let leftovers: Vec<_> = std::fs::read_dir(repo.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from(ETAG)]);
    // The Hub answered 302 to the CDN origin, which gave the body.
    let paths: Vec<String> = hub.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        ["/org/model/resolve/main/tokenizer.json", "/cdn/blob"]
    );
    // Again: from the cache, no request.
    assert_eq!(resolve("org/model", "main", &env).unwrap(), file);
    assert_eq!(hub.seen().len(), 2);
    // The loaded tokenizer counts with the downloaded file.
    let tk = Tokenizer::load_from("org/model", "main", &env).unwrap();
    assert_eq!(tk.count("hello world and the sun"), 5);
    assert_eq!(tk.encode("hello world"), vec![14, 15]);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_revision_that_is_a_commit_writes_no_ref_and_a_direct_200_uses_etag() {
    let hub = StandIn::start();
    let cache = temp_cache("sha");
    let env = env_for(&cache, &hub.endpoint());
    let file = resolve("small/model", COMMIT, &env).unwrap();
    let repo = cache.join("models--small--model");
    assert!(!repo.join("refs").exists());
    assert_eq!(
        std::fs::read_link(&file).unwrap(),
        Path::new("../../blobs").join(ETAG)
    );
    assert_eq!(hub.seen().len(), 1);
    // Revision refs/pr/1 travels as one path segment.
    let miss = resolve("small/model", "refs/pr/1", &env).unwrap_err();
    assert_eq!(miss, Miss::NoRevision);
    assert_eq!(
        hub.seen()[1].path,
        "/small/model/resolve/refs%2Fpr%2F1/tokenizer.json"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_cache_written_by_python_is_used_with_no_server() {
    let cache = temp_cache("python");
    let repo = cache.join("models--hf-internal-testing--llama-tokenizer");
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots").join(COMMIT)).unwrap();
    std::fs::write(repo.join("blobs").join(ETAG), TOKENIZER_JSON).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    std::os::unix::fs::symlink(
        Path::new("../../blobs").join(ETAG),
        repo.join("snapshots").join(COMMIT).join("tokenizer.json"),
    )
    .unwrap();
    let env = env_for(&cache, NOWHERE);
    let tk = Tokenizer::load_from("hf-internal-testing/llama-tokenizer", "main", &env).unwrap();
    assert_eq!(tk.count("the love of thee"), 4);
    // By sha too, and offline.
    let offline = HubEnv {
        offline: Some("HF_HUB_OFFLINE"),
        ..env.clone()
    };
    assert!(resolve("hf-internal-testing/llama-tokenizer", COMMIT, &offline).is_ok());
    // Another revision is not cached, and offline says so without connecting.
    let err =
        Tokenizer::load_from("hf-internal-testing/llama-tokenizer", "v2", &offline).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Usage);
    assert!(err.msg.contains("HF_HUB_OFFLINE is set"), "{}", err.msg);
    assert!(err.msg.contains(&repo.display().to_string()), "{}", err.msg);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn offline_never_connects() {
    let hub = StandIn::start();
    let cache = temp_cache("offline");
    let env = HubEnv {
        offline: Some("TRANSFORMERS_OFFLINE"),
        ..env_for(&cache, &hub.endpoint())
    };
    assert_eq!(
        resolve("org/model", "main", &env).unwrap_err(),
        Miss::Offline("TRANSFORMERS_OFFLINE")
    );
    assert!(hub.seen().is_empty());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn each_failure_is_one_usage_line() {
    let hub = StandIn::start();
    let cache = temp_cache("failures");
    let env = env_for(&cache, &hub.endpoint());
    let cases: [(&str, &str, &str); 5] = [
        ("gated/model", "main", "set HF_TOKEN"),
        ("missing/model", "main", "RepositoryNotFound"),
        ("org/model", "nope", "RevisionNotFound"),
        ("org/no-tokenizer", "main", "EntryNotFound"),
        ("org/model", "..", "not a branch, tag or commit"),
    ];
    for (spec, rev, want) in cases {
        let err = Tokenizer::load_from(spec, rev, &env).unwrap_err();
        assert_eq!(
            (err.kind, err.exit_code()),
            (ErrorKind::Usage, 99),
            "{spec}"
        );
        assert!(err.msg.contains(want), "{spec}: {}", err.msg);
        assert!(
            err.msg.starts_with(&format!("--tokenizer {spec}: ")),
            "{}",
            err.msg
        );
        assert!(!err.msg.contains('\n'), "{}", err.msg);
        assert!(err.msg.contains("models--"), "{}", err.msg);
    }
    // Nothing was written for a failure.
    assert!(!cache.join("models--gated--model/snapshots").exists());
    // A name no other test loads: the process keeps every loaded tokenizer by name.
    let closed = env_for(&cache, NOWHERE);
    let err = Tokenizer::load_from("org/unreachable", "main", &closed).unwrap_err();
    assert!(
        err.msg.contains("cannot reach http://127.0.0.1:9"),
        "{}",
        err.msg
    );
    let _ = std::fs::remove_dir_all(&cache);
}

/// A file the Hub says is absent (404 `EntryNotFound` naming the commit) leaves the empty
/// marker `.no_exist/{commit}/tokenizer.json` and the ref, as `huggingface_hub` does; later
/// runs, by branch or by commit, online or offline, know it is absent without a request.
#[test]
fn an_absent_file_is_marked_and_not_asked_for_again() {
    let hub = StandIn::start();
    let cache = temp_cache("no-exist");
    let env = env_for(&cache, &hub.endpoint());
    let repo = "org/no-tokenizer";
    assert_eq!(
        resolve(repo, "main", &env).unwrap_err(),
        Miss::NoFile(Some(COMMIT.to_string()))
    );
    let dir = cache.join("models--org--no-tokenizer");
    let marker = dir.join(".no_exist").join(COMMIT).join("tokenizer.json");
    assert_eq!(std::fs::read(&marker).unwrap(), b"");
    assert_eq!(
        std::fs::read_to_string(dir.join("refs/main")).unwrap(),
        COMMIT
    );
    assert!(!dir.join("snapshots").exists());
    assert_eq!(hub.seen().len(), 1);
    let offline = HubEnv {
        offline: Some("HF_HUB_OFFLINE"),
        ..env.clone()
    };
    for (env, revision) in [(&env, "main"), (&env, COMMIT), (&offline, "main")] {
        let miss = resolve(repo, revision, env).unwrap_err();
        assert_eq!(miss, Miss::KnownAbsent(COMMIT.to_string()), "{revision}");
        let msg = miss_message(repo, revision, env, &miss);
        assert!(msg.contains("EntryNotFound"), "{msg}");
        let named = format!(".no_exist/{COMMIT}/tokenizer.json");
        assert!(msg.contains(&named), "{msg}");
        assert!(!msg.contains("HF_HUB_OFFLINE"), "{msg}");
    }
    assert_eq!(hub.seen().len(), 1, "no second request");
    // Without the marker the Hub is asked again.
    std::fs::remove_file(&marker).unwrap();
    assert!(matches!(
        resolve(repo, "main", &env),
        Err(Miss::NoFile(Some(_)))
    ));
    assert_eq!(hub.seen().len(), 2);
    // A marker for another commit says nothing about this one.
    let other = "fedcba9876543210fedcba9876543210fedcba98";
    std::fs::remove_file(&marker).unwrap();
    std::fs::create_dir_all(dir.join(".no_exist").join(other)).unwrap();
    std::fs::write(dir.join(".no_exist").join(other).join("tokenizer.json"), "").unwrap();
    assert!(known_absent(repo, "main", &env).is_none());
    // A file that exists is never marked.
    resolve("org/model", "main", &env).unwrap();
    assert!(!cache.join("models--org--model/.no_exist").exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn the_token_goes_to_the_hub_only() {
    let hub = StandIn::start();
    let cache = temp_cache("token");
    let env = HubEnv {
        token: Some(Token::from_var("HF_TOKEN", "hf_good")),
        ..env_for(&cache, &hub.endpoint())
    };
    resolve("gated/model", "main", &env).unwrap();
    let seen = hub.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer hf_good"));
    assert_eq!(seen[1].path, "/cdn/blob");
    assert_eq!(seen[1].authorization, None, "no token to the CDN host");
    // A wrong token: the message says the token has no access.
    let bad = HubEnv {
        token: Some(Token::from_var("HF_TOKEN", "hf_bad")),
        cache: cache.join("other"),
        ..env.clone()
    };
    let err = Tokenizer::load_from("gated/model", "main", &bad).unwrap_err();
    assert!(
        err.msg.contains("the token from HF_TOKEN has no access"),
        "{}",
        err.msg
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_renamed_repository_follows_the_relative_redirect() {
    let hub = StandIn::start();
    let cache = temp_cache("renamed");
    let env = env_for(&cache, &hub.endpoint());
    let file = resolve("old/model", "main", &env).unwrap();
    // Stored under the name asked for, as huggingface_hub does.
    assert!(file.starts_with(cache.join("models--old--model")));
    let paths: Vec<String> = hub.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        [
            "/old/model/resolve/main/tokenizer.json",
            "/new/model/resolve/main/tokenizer.json",
            "/cdn/blob"
        ]
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn urls_join_like_a_browser() {
    let u = Url::parse("https://huggingface.co/a/resolve/main/tokenizer.json").unwrap();
    assert_eq!(
        (u.tls, u.address.as_str(), u.host.as_str()),
        (true, "huggingface.co:443", "huggingface.co")
    );
    let cdn = u.join("https://cdn-lfs.hf.co/x?sig=1").unwrap();
    assert_eq!(
        (cdn.address.as_str(), cdn.path.as_str()),
        ("cdn-lfs.hf.co:443", "/x?sig=1")
    );
    assert_eq!(
        u.join("/b/resolve/main/t").unwrap().address,
        "huggingface.co:443"
    );
    assert_eq!(u.join("other").unwrap().path, "/a/resolve/main/other");
    assert!(Url::parse("ftp://x").is_none());
    assert_eq!(normalize_etag("W/\"abc\""), "abc");
    assert!(!etag_ok("../x"));
}
