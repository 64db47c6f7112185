//! The layer order of the crate doc holds (see `layers`), and the checker reads what it
//! should: grouped and plain paths, layer lists, declarations and circles. Test files sit
//! beside the modules that declare them in every crate of the workspace.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use crate::layers::{
    check, check_test_files, crate_paths, declared_modules, file_depth, file_paths, layers,
    root_paths, scan, test_file_findings,
};

fn src_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_import_goes_up_the_layer_order() {
    check(src_dir(), &[], &[]);
}

#[test]
fn layers_parse_the_lib_doc_in_order() {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert_eq!(layers[0], ["tfserving"]);
    assert_eq!(layers[1], ["protocol"]);
    assert_eq!(layers.last().unwrap(), &["text"]);
}

#[test]
fn crate_paths_reads_plain_grouped_and_skips_comments() {
    let mut seen = BTreeSet::new();
    crate_paths("use crate::engine::share::X;", &mut seen);
    crate_paths(
        "    let n = crate::config::Y + crate::clock::now();",
        &mut seen,
    );
    crate_paths("use crate::{measure::{A, B}, error::Result};", &mut seen);
    crate_paths("/// see [`crate::report`]", &mut seen);
    crate_paths("$crate::cli::x!()", &mut seen);
    crate_paths("use inferperf_crate::tensor;", &mut seen);
    let want: BTreeSet<String> = ["engine", "config", "clock", "measure", "error"]
        .map(String::from)
        .into();
    assert_eq!(seen, want);
}

#[test]
fn super_paths_count_when_they_climb_to_the_root() {
    let mut seen = BTreeSet::new();
    root_paths("use super::conn::X;", 1, &mut seen);
    root_paths("use super::super::{state::S, self};", 2, &mut seen);
    root_paths("use super::sibling::Y;", 2, &mut seen);
    root_paths("use super::super::super::deep;", 2, &mut seen);
    root_paths("pub(super) fn f() { a::super::b(); }", 1, &mut seen);
    let want: BTreeSet<String> = ["conn", "state"].map(String::from).into();
    assert_eq!(seen, want);
    assert_eq!(file_depth("conn.rs"), 1);
    assert_eq!(file_depth("grpc/mod.rs"), 1);
    assert_eq!(file_depth("grpc/wire.rs"), 2);
    assert_eq!(file_depth("cli_tests.rs"), 2);
    assert_eq!(file_depth("protocol/grpc/blocking_tests.rs"), 4);
    let text = "use super::a::X;\n#[cfg(test)]\nmod tests {\n    use super::super::b::Y;\n    \
                use super::c;\n}\nuse super::d;\n";
    let want: BTreeSet<String> = ["a", "b", "d"].map(String::from).into();
    assert_eq!(file_paths("m.rs", text), want);
}

#[test]
fn declared_modules_skip_test_modules_and_read_wire_re_exports() {
    let lib = "pub mod a;\nmod b;\n#[cfg(feature = \"llm\")]\npub mod c;\n#[cfg(test)]\n\
               #[path = \"lib_tests.rs\"]\nmod tests;\n#[cfg(test)]\nmod test_client;\n\
               pub use inferperf_wire::{clock, error};\npub use inferperf_wire::text;\n\
               pub use cli::serve_main;\n";
    let want: BTreeSet<String> = ["a", "b", "c", "clock", "error", "text"]
        .map(String::from)
        .into();
    assert_eq!(declared_modules(lib), want);
}

/// A throwaway crate source tree under the system temp dir.
fn tree(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("inferperf-layers-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    dir
}

const LIB: &str = "//! Layers, top to bottom: `top`; `mid`, `side`; `low`.\n\
                   pub mod top;\npub mod mid;\npub mod side;\npub mod low;\n";

#[test]
fn scan_finds_upward_imports_and_circles_in_one_layer() {
    let dir = tree(
        "bad",
        &[
            ("lib.rs", LIB),
            ("top.rs", "use crate::mid::X;\n"),
            ("mid.rs", "use crate::side::Y;\nuse crate::low::Z;\n"),
            ("side/mod.rs", "mod inner;\n"),
            ("side/inner.rs", "use crate::mid::X;\n"),
            ("low/inner.rs", "use super::super::top;\nuse super::Z;\n"),
            (
                "low.rs",
                "// crate::top in a comment\nfn f() { crate::top::g() }\n",
            ),
            ("low_tests.rs", "use crate::mid;\n"),
        ],
    );
    let found = scan(&dir);
    let upward: Vec<(&str, &str)> = found
        .upward
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        upward,
        [
            ("low.rs", "top"),
            ("low/inner.rs", "top"),
            ("low_tests.rs", "mid")
        ]
    );
    assert_eq!(
        found.circles.into_iter().collect::<Vec<_>>(),
        ["mid <-> side"]
    );
    let known = [
        ("low.rs", "top"),
        ("low/inner.rs", "top"),
        ("low_tests.rs", "mid"),
    ];
    let err = std::panic::catch_unwind(|| check(&dir, &known[..2], &["mid <-> side"]));
    assert!(err.is_err(), "an unlisted upward import fails the check");
    let err = std::panic::catch_unwind(|| check(&dir, &known, &[]));
    assert!(err.is_err(), "an unlisted circle fails the check");
    check(&dir, &known, &["mid <-> side"]);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn scan_of_a_clean_tree_finds_nothing_and_stale_exceptions_fail() {
    let dir = tree(
        "good",
        &[
            ("lib.rs", LIB),
            ("top.rs", "use crate::{mid::X, low::{A, B}};\n"),
            ("mid.rs", "use crate::side::Y;\n"),
            ("side.rs", "use crate::low::Z;\n"),
            ("low.rs", "pub fn g() {}\n"),
        ],
    );
    let found = scan(&dir);
    assert!(
        found.upward.is_empty() && found.circles.is_empty(),
        "{found:?}"
    );
    check(&dir, &[], &[]);
    let stale = std::panic::catch_unwind(|| check(&dir, &[("low.rs", "top")], &[]));
    assert!(stale.is_err(), "an exception that no longer occurs fails");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn files_named_x_topic_tests_belong_to_module_x() {
    let dir = tree(
        "owner",
        &[
            ("lib.rs", LIB),
            ("top.rs", ""),
            ("mid.rs", ""),
            ("side.rs", ""),
            ("low.rs", ""),
            ("low_extra_tests.rs", "use crate::mid::X;\n"),
            ("mid_extra_tests.rs", "use crate::low::X;\n"),
            ("lib_tests.rs", "use crate::top::X;\n"),
        ],
    );
    let found = scan(&dir);
    let upward: Vec<(&str, &str)> = found
        .upward
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(upward, [("low_extra_tests.rs", "mid")]);
    let _ = fs::remove_dir_all(&dir);
}

/// `(path, text)` pairs as [`test_file_findings`] takes them.
fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

#[test]
fn test_files_beside_their_declaring_module_pass() {
    let good = files(&[
        (
            "lib.rs",
            "mod a;\nmod b;\n#[cfg(test)]\n#[path = \"lib_tests.rs\"]\nmod tests;\n",
        ),
        (
            "lib_tests.rs",
            "#[path = \"lib_more_tests.rs\"]\nmod more;\n",
        ),
        ("lib_more_tests.rs", "use super::*;\n"),
        (
            "a.rs",
            "#[cfg(test)]\n#[allow(dead_code)]\n#[path = \"a_tests.rs\"]\nmod tests;\n\
             #[cfg(test)]\n#[path = \"a_wire_tests.rs\"]\npub(crate) mod wire_tests;\n",
        ),
        ("a_tests.rs", ""),
        ("a_wire_tests.rs", ""),
        ("b/mod.rs", "mod c;\n#[cfg(test)]\nmod b_tests;\n"),
        ("b/b_tests.rs", "// #[path = \"x.rs\"] in a comment\n"),
        (
            "b/c.rs",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ]);
    assert_eq!(test_file_findings(&good), Vec::<String>::new());
}

#[test]
fn misplaced_misnamed_and_undeclared_test_files_are_named() {
    let bad = files(&[
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod tests_x;\n"),
        ("tests.rs", ""),
        ("tests_x.rs", ""),
        ("a.rs", "mod inner;\n#[cfg(test)]\nmod inner_tests;\n"),
        ("a/inner.rs", "#[path = \"../elsewhere.rs\"]\nmod other;\n"),
        ("a/inner_tests.rs", ""),
        ("b/mod.rs", "#[path = \"b_tests.rs\"]\nmod tests;\n#[cfg(test)]\n#[path = \"helper.rs\"]\nmod helper;\n"),
        ("b/b_tests.rs", ""),
        ("b/lost_tests.rs", ""),
    ]);
    let found = test_file_findings(&bad);
    let has = |needle: &str| found.iter().any(|f| f.contains(needle));
    assert!(has("tests.rs: name test files"), "{found:?}");
    assert!(has("tests_x.rs: name test files"), "{found:?}");
    assert!(
        has("a.rs:3: `mod inner_tests;` puts the test file in `a/`"),
        "{found:?}"
    );
    assert!(
        has("a/inner_tests.rs: no file of its folder declares it"),
        "{found:?}"
    );
    assert!(
        has("a/inner.rs:1: #[path] only on a #[cfg(test)] module declaration"),
        "{found:?}"
    );
    assert!(
        has("a/inner.rs:1: #[path] names `../elsewhere.rs`"),
        "{found:?}"
    );
    assert!(
        has("b/mod.rs:1: #[path] only on a #[cfg(test)]"),
        "{found:?}"
    );
    assert!(has("b/mod.rs:4: #[path] names `helper.rs`"), "{found:?}");
    assert!(
        has("b/lost_tests.rs: no file of its folder declares it"),
        "{found:?}"
    );
    assert!(!has("b/b_tests.rs"), "{found:?}");
    assert_eq!(found.len(), 9, "{found:?}");
}

#[test]
fn test_files_sit_beside_their_modules_in_every_crate() {
    let mut srcs = vec![src_dir().to_path_buf()];
    let root = src_dir().join("../../..");
    if root.join("Cargo.toml").is_file() && root.join("crates/wire").is_dir() {
        let root = root.canonicalize().unwrap();
        srcs = vec![root.join("src")];
        let mut crates: Vec<_> = fs::read_dir(root.join("crates"))
            .unwrap()
            .flatten()
            .map(|e| e.path().join("src"))
            .filter(|p| p.is_dir())
            .collect();
        crates.sort();
        srcs.extend(crates);
        assert!(
            srcs.len() >= 4,
            "the root package and three crates: {srcs:?}"
        );
    }
    check_test_files(&srcs);
}
