//! The layer-order check the crates' tests run over their own sources (feature
//! `test-support`). A crate's `lib.rs` doc writes its layers in one paragraph that starts
//! with "Layers, top to bottom" and ends at the first `.`: segments separated by `;`, each
//! naming its top-level modules in backticks. [`check`] reads every path from the crate root
//! (`crate::x`, and `super::x` where the `super`s climb to the root) in the crate's `.rs`
//! files and reports an import of a module in a higher layer, or imports among
//! the modules of one layer that close a circle. [`check_test_files`] checks where test
//! modules live: each in a `<topic>_tests.rs` file beside the file that declares it, the only
//! place `#[path]` may appear.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers written in `lib`'s `//!` doc, top first.
pub fn layers(lib: &str) -> Vec<Vec<String>> {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let Some(start) = doc.find("Layers, top to bottom") else {
        return Vec::new();
    };
    let para = &doc[start..];
    let para = &para[..para.find('.').unwrap_or(para.len())];
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

/// The top-level modules `lib` declares outside tests: `mod x;` and `pub mod x;` not under a
/// `#[cfg(test)]`-like attribute, and the modules it re-exports from the wire crate as
/// `pub use inferperf_wire::{a, b};` or `pub use inferperf_wire::a;`.
pub fn declared_modules(lib: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut test_only = false;
    for line in lib.lines().map(str::trim) {
        if line.starts_with("#[cfg(") {
            test_only = line.contains("test");
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
            if !test_only {
                out.insert(name.to_string());
            }
        } else if let Some(list) = line.strip_prefix("pub use inferperf_wire::") {
            let list = list.trim_end_matches(';');
            let list = list.trim_start_matches('{').trim_end_matches('}');
            out.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_'))
                    .map(str::to_string),
            );
        }
        test_only = false;
    }
    out
}

/// Every `.rs` file under `dir`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules named right after a path's root: `NAME` or the first names of a
/// `{A, B::..}` group.
fn names_after(rest: &str, out: &mut BTreeSet<String>) {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        for part in group.split(',') {
            if depth == 0 {
                let name = ident(part.trim());
                if !name.is_empty() && name != "self" {
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

/// Whether the path root at byte `i` of `s` starts a path (not `$crate::`, `x_crate::` or
/// `a::super::`).
fn starts_path(s: &str, i: usize) -> bool {
    let before = s[..i].chars().last();
    !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':')
}

/// Top-level modules a line names as `crate::NAME` or inside `crate::{A, B::..}`; comment
/// lines name none.
pub fn crate_paths(line: &str, out: &mut BTreeSet<String>) {
    root_paths(line, usize::MAX, out);
}

/// [`crate_paths`], and the top-level modules named through `super::` chains that climb to
/// the crate root from a module `depth` levels below it (`depth` 1: a top-level module's own
/// file, where `super::x` is `crate::x`).
pub fn root_paths(line: &str, depth: usize, out: &mut BTreeSet<String>) {
    let code = line.trim_start();
    if code.starts_with("//") {
        return;
    }
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let i = at + i;
        at = i + "crate::".len();
        if starts_path(code, i) {
            names_after(&code[at..], out);
        }
    }
    let mut at = 0;
    while let Some(i) = code[at..].find("super::") {
        let i = at + i;
        let mut rest = &code[i..];
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            climbs += 1;
        }
        at = code.len() - rest.len();
        if starts_path(code, i) && climbs == depth {
            names_after(rest, out);
        }
    }
}

/// How deep below the crate root the module of a file under `src/` is: `a.rs` and
/// `a/mod.rs` 1, `a/b.rs` 2; `x_tests.rs` holds the `tests` child of `x`, one deeper.
pub fn file_depth(rel: &str) -> usize {
    let parts: Vec<&str> = rel.split('/').collect();
    let stem = parts.last().map_or("", |p| p.trim_end_matches(".rs"));
    let mut depth = parts.len();
    if stem == "mod" {
        depth -= 1;
    }
    if stem.ends_with("_tests") {
        depth += 1;
    }
    depth
}

/// Top-level modules a file's text names through `crate::` or through `super::` chains that
/// reach the root; an inline `mod name {` block (rustfmt layout: it closes with a `}` at its
/// own indentation) is one level deeper than the lines around it.
pub fn file_paths(rel: &str, text: &str) -> BTreeSet<String> {
    let base = file_depth(rel);
    let mut open: Vec<String> = Vec::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        root_paths(line, base + open.len(), &mut out);
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let decl = code
            .strip_prefix("pub(crate) ")
            .or_else(|| code.strip_prefix("pub "))
            .unwrap_or(code);
        if decl.starts_with("mod ") && decl.ends_with('{') {
            open.push(indent.to_string());
        } else if open.last().is_some_and(|i| i == indent) && code == "}" {
            open.pop();
        }
    }
    out
}

/// What [`scan`] found in a crate's sources.
#[derive(Debug, Default)]
pub struct Scan {
    /// (file under `src/`, top-level module of a higher layer it names).
    pub upward: BTreeSet<(String, String)>,
    /// Modules of one layer whose imports of each other close a circle, each circle's
    /// modules sorted and joined with `" <-> "`.
    pub circles: BTreeSet<String>,
}

/// The top-level module a file under `src/` belongs to: its first folder, or the module of a
/// crate-level file; `x_tests.rs` and `x_topic_tests.rs` belong to `x` where `ranked` names `x`.
fn owner(rel: &str, ranked: &BTreeMap<String, usize>) -> String {
    let first = rel.split('/').next().unwrap_or(rel).trim_end_matches(".rs");
    let Some(stem) = first.strip_suffix("_tests") else {
        return first.to_string();
    };
    let mut name = stem;
    while !ranked.contains_key(name) {
        match name.rsplit_once('_') {
            Some((head, _)) => name = head,
            None => return stem.to_string(),
        }
    }
    name.to_string()
}

/// Reads `src/lib.rs`'s layers and every file under `src`. Files of modules the layers do not
/// name (`lib.rs`, crate-level test modules) are not checked.
pub fn scan(src: &Path) -> Scan {
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let rank: BTreeMap<String, usize> = layers(&lib)
        .into_iter()
        .enumerate()
        .flat_map(|(i, names)| names.into_iter().map(move |n| (n, i)))
        .collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Scan::default();
    let mut same_layer: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file
            .strip_prefix(src)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        let top = owner(&rel, &rank);
        let Some(&own) = rank.get(&top) else {
            continue;
        };
        let text = fs::read_to_string(file).unwrap_or_default();
        for target in file_paths(&rel, &text) {
            match rank.get(&target) {
                Some(&r) if r < own => {
                    found.upward.insert((rel.clone(), target));
                }
                Some(&r) if r == own && target != top => {
                    same_layer.entry(top.clone()).or_default().insert(target);
                }
                _ => {}
            }
        }
    }
    found.circles = circles(&same_layer);
    found
}

/// The strongly connected parts (two modules or more) of the import graph `edges`.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|k| (k, reach(k))).collect();
    let mut out = BTreeSet::new();
    for (a, from_a) in &reached {
        if !from_a.contains(*a) {
            continue;
        }
        let part: Vec<&str> = from_a
            .iter()
            .filter(|b| reached.get(b).is_some_and(|r| r.contains(*a)))
            .map(String::as_str)
            .collect();
        out.insert(part.join(" <-> "));
    }
    out
}

/// Panics with one message per finding unless `src`'s layer doc names exactly the modules
/// `lib.rs` declares, every import goes down or across its written order, and imports across
/// one layer close no circle, apart from the listed exceptions. An exception that no longer
/// occurs fails too, so the lists only shrink.
pub fn check(src: &Path, known_upward: &[(&str, &str)], known_circles: &[&str]) {
    let lib = fs::read_to_string(src.join("lib.rs")).expect("the crate has src/lib.rs");
    let layers = layers(&lib);
    assert!(
        !layers.is_empty(),
        "lib.rs's doc writes no 'Layers, top to bottom' list"
    );
    let named: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<String> = named.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        named.len(),
        unique.len(),
        "a module in two layers: {layers:?}"
    );
    assert_eq!(
        declared_modules(&lib),
        unique,
        "lib.rs's modules and its layer list differ"
    );
    let found = scan(src);
    let known: BTreeSet<(String, String)> = known_upward
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let new: Vec<_> = found.upward.difference(&known).collect();
    assert!(
        new.is_empty(),
        "imports up the layer order of lib.rs (move the item down, or the import): {new:?}"
    );
    let gone: Vec<_> = known.difference(&found.upward).collect();
    assert!(
        gone.is_empty(),
        "fixed: drop from the known upward imports: {gone:?}"
    );
    let known: BTreeSet<String> = known_circles.iter().map(|c| c.to_string()).collect();
    let new: Vec<_> = found.circles.difference(&known).collect();
    assert!(
        new.is_empty(),
        "modules of one layer import each other in a circle: {new:?}"
    );
    let gone: Vec<_> = known.difference(&found.circles).collect();
    assert!(
        gone.is_empty(),
        "fixed: drop from the known circles: {gone:?}"
    );
}

/// The test-file layout of one crate's `src/`: one line per finding, empty when every test
/// module is a `<topic>_tests.rs` file beside the file that declares it. `files` holds each
/// `.rs` file's path under `src/` (with `/`) and its text. Findings: a file named `tests.rs`
/// or `tests_*.rs`; a `*_tests.rs` file that no file of its own folder declares (with
/// `#[path = "NAME"]`, or `mod NAME;` from `mod.rs` or `lib.rs`); a `mod x_tests;` that
/// puts the file in a subfolder; a `#[path]` that is not a `#[cfg(test)]` module declaration
/// (or one inside a test file) naming a `*_tests.rs` file of the same folder.
pub fn test_file_findings(files: &[(String, String)]) -> Vec<String> {
    let mut findings = Vec::new();
    let mut declared = BTreeSet::new();
    for (rel, text) in files {
        let (dir, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (format!("{d}/"), n),
            None => (String::new(), rel.as_str()),
        };
        let stem = name.trim_end_matches(".rs");
        if stem == "tests" || stem.starts_with("tests_") {
            findings.push(format!(
                "{rel}: name test files `<topic>_tests.rs`, beside the module they test"
            ));
        }
        let in_test_file = stem.ends_with("_tests");
        let folder_module = matches!(stem, "mod" | "lib" | "main");
        let mut cfg_test = false;
        let mut path: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            let code = line.trim();
            if code.starts_with("//") || code.is_empty() {
                continue;
            }
            if code.starts_with("#[") {
                cfg_test |= code == "#[cfg(test)]";
                if let Some(rest) = code.strip_prefix("#[path = \"") {
                    let value = rest.split('"').next().unwrap_or_default();
                    path = Some((n + 1, value.to_string()));
                }
                continue;
            }
            let module = code
                .strip_prefix("pub(crate) ")
                .or_else(|| code.strip_prefix("pub "))
                .unwrap_or(code)
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'));
            if let Some((at, value)) = path.take() {
                if module.is_none() || !(cfg_test || in_test_file) {
                    findings.push(format!(
                        "{rel}:{at}: #[path] only on a #[cfg(test)] module declaration"
                    ));
                }
                if value.contains('/') || !value.ends_with("_tests.rs") {
                    findings.push(format!(
                        "{rel}:{at}: #[path] names `{value}`; it may only name a \
                         `<topic>_tests.rs` file in this folder"
                    ));
                }
                declared.insert(format!("{dir}{value}"));
            } else if let Some(m) = module.filter(|m| m.ends_with("_tests")) {
                if folder_module {
                    declared.insert(format!("{dir}{m}.rs"));
                } else {
                    findings.push(format!(
                        "{rel}:{}: `mod {m};` puts the test file in `{dir}{stem}/`; declare it \
                         with #[path = \"{stem}_..._tests.rs\"] beside `{name}`",
                        n + 1
                    ));
                }
            }
            cfg_test = false;
        }
    }
    for (rel, _) in files {
        if rel.trim_end_matches(".rs").ends_with("_tests") && !declared.contains(rel) {
            findings.push(format!(
                "{rel}: no file of its folder declares it (its tests never compile)"
            ));
        }
    }
    findings
}

/// Panics with one line per [`test_file_findings`] finding in the crate sources under each
/// of `srcs` (each a crate's `src/` folder).
pub fn check_test_files(srcs: &[PathBuf]) {
    let mut findings = Vec::new();
    for src in srcs {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        paths.sort();
        assert!(!paths.is_empty(), "no .rs files under {}", src.display());
        let files: Vec<(String, String)> = paths
            .iter()
            .map(|p| {
                let rel = p.strip_prefix(src).unwrap_or(p).to_string_lossy();
                (
                    rel.replace('\\', "/"),
                    fs::read_to_string(p).unwrap_or_default(),
                )
            })
            .collect();
        for finding in test_file_findings(&files) {
            findings.push(format!("{}/{finding}", src.display()));
        }
    }
    assert!(
        findings.is_empty(),
        "test files out of place:\n{}",
        findings.join("\n")
    );
}
