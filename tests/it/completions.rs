//! `inferperf completions` and `inferperf man`: every flag each command's `--help` lists is in
//! the bash, zsh and fish scripts and in that command's man page.

use crate::common::Scratch;

use std::collections::BTreeSet;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(args)
        .output()
        .expect("binary runs")
}

fn stdout(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// The long flags `--help` lists as options: the first `--name` of each option line (clap
/// indents those by 2 to 6 spaces, descriptions by 10), not flags named in prose.
fn help_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if !(2..=6).contains(&indent) || !trimmed.starts_with('-') {
            continue;
        }
        let Some(at) = trimmed.find("--") else {
            continue;
        };
        // `-m, --model <MODEL>` or `--model <MODEL>`; a short flag alone (`-m <MODEL>`) has none.
        let head = &trimmed[..at];
        if !(head.is_empty() || head.ends_with(", ")) {
            continue;
        }
        let name: String = trimmed[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if !name.is_empty() {
            flags.insert(name);
        }
    }
    flags
}

/// (help command line, man page file) for every command.
const COMMANDS: [(&[&str], &str); 5] = [
    (&["--help"], "inferperf.1"),
    (&["serve", "--help"], "inferperf-serve.1"),
    (&["demo", "--help"], "inferperf-demo.1"),
    (&["profile", "--help"], "inferperf-profile.1"),
    (&["compare", "--help"], "inferperf-compare.1"),
];

#[test]
fn every_flag_of_every_help_is_in_the_completions_and_the_man_pages() {
    let scripts: Vec<(&str, String)> = ["bash", "zsh", "fish"]
        .into_iter()
        .map(|shell| (shell, stdout(&["completions", shell])))
        .collect();
    let scratch = Scratch::new("inferperf-it-man");
    let dir = scratch.join("pages");
    let written = stdout(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert!(written.contains("man pages written"), "{written}");
    let mut checked = 0;
    for (help_args, page) in COMMANDS {
        let flags = help_flags(&stdout(help_args));
        assert!(flags.contains("help"), "{help_args:?} lists {flags:?}");
        let man = std::fs::read_to_string(dir.join(page)).expect(page);
        // roff escapes a hyphen as `\-`.
        let man = man.replace("\\-", "-");
        for flag in &flags {
            let dashed = format!("--{flag}");
            for (shell, script) in &scripts {
                // fish names long flags `-l name`; bash and zsh write `--name`.
                let found = if *shell == "fish" {
                    script.contains(&format!("-l {flag} "))
                        || script.contains(&format!("-l {flag}\n"))
                } else {
                    script.contains(&dashed)
                };
                assert!(found, "{shell} completions lack {dashed} of {help_args:?}");
            }
            assert!(man.contains(&dashed), "{page} lacks {dashed}");
            checked += 1;
        }
    }
    // perf_analyzer mode alone has well over a hundred flags.
    assert!(checked > 300, "only {checked} flags checked");
}

#[test]
fn the_completions_offer_every_subcommand() {
    let bash = stdout(&["completions", "bash"]);
    let fish = stdout(&["completions", "fish"]);
    for sub in ["serve", "demo", "profile", "compare", "completions", "man"] {
        assert!(bash.contains(sub), "bash lacks {sub}");
        assert!(fish.contains(&format!("-a \"{sub}\"")), "fish lacks {sub}");
    }
    let page = stdout(&["man"]);
    assert!(
        page.starts_with(".ie") && page.contains(".TH inferperf 1"),
        "{page:.200}"
    );
}

#[test]
fn a_shell_that_is_not_offered_is_a_usage_error() {
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(99));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tcsh"));
    let o = run(&["completions"]);
    assert_eq!(o.status.code(), Some(99));
}
