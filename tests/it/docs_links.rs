//! The documents link where they say: every relative link in `README.md`, `benches/README.md`
//! and `docs/*.md` names a file of the repository and, with a `#anchor`, a heading of that file
//! (GitHub's heading ids). Links inside code blocks and code spans are not links.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files this check reads: the README, the benchmark results and every page
/// under `docs/`.
fn documents() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md"), root.join("benches/README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// The lines of a Markdown text that are prose: fenced and indented code blocks become empty
/// lines (so line numbers stay), and code spans are removed.
fn prose_lines(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return String::new();
            }
            if fenced || line.starts_with("    ") || line.starts_with('\t') {
                return String::new();
            }
            without_code_spans(line)
        })
        .collect()
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let target = &after[..end];
                if !target.is_empty() && !target.contains(char::is_whitespace) {
                    targets.push(target.to_string());
                }
                rest = &after[end..];
            }
            None => break,
        }
    }
    targets
}

/// GitHub's id for a heading: the text as rendered (links as their text, no backticks),
/// lower case, only letters, digits, spaces, `-` and `_` kept, spaces made `-`.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading renders as its text.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The ids of every heading of a Markdown file, a repeated id numbered as GitHub numbers it.
fn heading_ids(path: &Path) -> HashSet<String> {
    let text = std::fs::read_to_string(path).expect("document is readable");
    let mut ids = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let id = heading_id(&line[hashes + 1..]);
            let mut unique = id.clone();
            let mut n = 0;
            while ids.contains(&unique) {
                n += 1;
                unique = format!("{id}-{n}");
            }
            ids.insert(unique);
        }
    }
    ids
}

/// Every broken relative link of `file`, as `file:line: target: why`.
fn broken_links(file: &Path) -> Vec<String> {
    let root = repo_root();
    let text = std::fs::read_to_string(file).expect("document is readable");
    let shown = file
        .strip_prefix(&root)
        .unwrap_or(file)
        .display()
        .to_string();
    let mut broken = Vec::new();
    for (i, line) in prose_lines(&text).iter().enumerate() {
        for target in link_targets(line) {
            let scheme = target.split_once(':').map(|(s, _)| s);
            if scheme.is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic())) {
                continue; // https:, mailto: and the like
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.to_path_buf()
            } else {
                file.parent().expect("a document has a folder").join(path)
            };
            if !dest.exists() {
                broken.push(format!("{shown}:{}: {target}: no such file", i + 1));
                continue;
            }
            if let Some(anchor) = anchor {
                if !heading_ids(&dest).contains(anchor) {
                    broken.push(format!("{shown}:{}: {target}: no heading #{anchor}", i + 1));
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_names_a_file_and_heading() {
    let docs = documents();
    assert!(
        docs.len() >= 4,
        "README, benches/README.md and docs/ pages: {docs:?}"
    );
    let broken: Vec<String> = docs.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_links_every_docs_page() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let linked: Vec<String> = prose_lines(&readme)
        .iter()
        .flat_map(|l| link_targets(l))
        .collect();
    let docs_dir = repo_root().join("docs");
    for page in documents()
        .iter()
        .filter(|p| p.parent() == Some(docs_dir.as_path()))
    {
        let name = format!("docs/{}", page.file_name().unwrap().to_string_lossy());
        assert!(
            linked
                .iter()
                .any(|t| t == &name || t.starts_with(&format!("{name}#"))),
            "README.md does not link {name}"
        );
    }
}

#[test]
fn the_check_finds_a_missing_file_and_a_missing_heading() {
    let dir = std::env::temp_dir().join(format!("inferperf-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("b.md"),
        "# The `b` page: one\n\n## Twice\n\n## Twice\n\n```\n# not a heading\n```\n",
    )
    .unwrap();
    let a = dir.join("a.md");
    std::fs::write(
        &a,
        "[ok](b.md#the-b-page-one) [ok](b.md#twice-1) [ok](https://example.com/x)\n\
         [gone](c.md) [no](b.md#not-a-heading) [no](b.md#twice-2)\n\
         `[code](d.md)`\n\n    [indented](e.md)\n",
    )
    .unwrap();
    let broken = broken_links(&a);
    std::fs::remove_dir_all(&dir).unwrap();
    let found: Vec<&str> = broken
        .iter()
        .map(|b| b.rsplit_once(": ").unwrap().1)
        .collect();
    assert_eq!(
        found,
        [
            "no such file",
            "no heading #not-a-heading",
            "no heading #twice-2"
        ],
        "{broken:?}"
    );
    assert!(
        broken[0].ends_with("a.md:2: c.md: no such file"),
        "{broken:?}"
    );
}
