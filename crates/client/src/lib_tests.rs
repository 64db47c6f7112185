//! The layer order of the crate doc holds: no module imports a top-level module of a layer
//! above its own, apart from the exceptions listed here (which must still exist, so the list
//! only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Imports that go up the layer order today: (file under `src/`, top-level module it uses).
const KNOWN_UPWARD: &[(&str, &str)] = &[
    // `profile` flags share perf_analyzer's number bounds and metrics-URL rule.
    ("llm/cli/checks.rs", "cli"),
    ("llm/load_args.rs", "cli"),
    ("llm/sweep_args.rs", "cli"),
    ("llm/telemetry/mod.rs", "cli"),
    // The C API stub's answers are checked with the Triton HTTP parsers.
    ("protocol/capi/stub_tests.rs", "service"),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layers of the "Layers, top to bottom" paragraph of lib.rs's `//!` doc: segments
/// separated by `;`, each naming its modules in backticks. Index 0 is the top.
fn layers(lib: &str) -> Vec<Vec<String>> {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let start = doc
        .find("Layers, top to bottom")
        .expect("lib.rs doc names its layers");
    let para = &doc[start..];
    let para = &para[..para.find('.').expect("the layer paragraph ends with '.'")];
    para.split(';')
        .map(|seg| {
            seg.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|names| !names.is_empty())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level modules a line names as `crate::NAME` or inside `crate::{A, B::..}`; comment
/// lines name none.
fn crate_paths(line: &str, out: &mut BTreeSet<String>) {
    let code = line.trim_start();
    if code.starts_with("//") {
        return;
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` or `inferperf_crate::`, not this crate's root.
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            for part in group.split(',') {
                if depth == 0 {
                    let name = ident(part.trim());
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
                depth += part.matches('{').count() as i32 - part.matches('}').count() as i32;
                if depth < 0 {
                    break;
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
}

#[test]
fn layer_doc_names_every_top_level_module_once() {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    let named: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<&String> = named.iter().copied().collect();
    assert_eq!(
        named.len(),
        unique.len(),
        "a module in two layers: {layers:?}"
    );
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let named: BTreeSet<String> = unique.into_iter().cloned().collect();
    assert_eq!(
        declared, named,
        "lib.rs's modules and its layer list differ"
    );
}

#[test]
fn no_import_goes_up_the_layer_order() {
    let src = src_dir();
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let rank: BTreeMap<String, usize> = layers(&lib)
        .into_iter()
        .enumerate()
        .flat_map(|(i, names)| names.into_iter().map(move |n| (n, i)))
        .collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = BTreeSet::new();
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let first = rel.split('/').next().unwrap().trim_end_matches(".rs");
        let top = first.trim_end_matches("_tests").to_string();
        let Some(&own) = rank.get(&top) else {
            continue; // lib.rs and its tests
        };
        let mut used = BTreeSet::new();
        for line in fs::read_to_string(file).unwrap().lines() {
            crate_paths(line, &mut used);
        }
        for target in used {
            if rank.get(&target).is_some_and(|&r| r < own) {
                upward.insert((rel.clone(), target));
            }
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let new: Vec<_> = upward.difference(&known).collect();
    assert!(
        new.is_empty(),
        "imports up the layer order of lib.rs (move the item down, or the import): {new:?}"
    );
    let gone: Vec<_> = known.difference(&upward).collect();
    assert!(gone.is_empty(), "fixed: drop from KNOWN_UPWARD: {gone:?}");
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
    let want: BTreeSet<String> = ["engine", "config", "clock", "measure", "error"]
        .map(String::from)
        .into();
    assert_eq!(seen, want);
}

#[test]
fn layers_parse_the_lib_doc_in_order() {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert_eq!(layers[0], ["cli"]);
    assert_eq!(layers[1], ["run", "llm", "mpi"]);
    assert!(layers.last().unwrap().contains(&"error".to_string()));
}
