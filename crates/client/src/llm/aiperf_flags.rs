//! Every flag of AIPerf 0.13's `aiperf profile` and what `inferperf profile` does with it:
//! the table `inferperf profile --help-aiperf-flags` prints and `docs/aiperf-flags.md` holds.
//!
//! The flag list (`aiperf_flags.tsv`: its `--help` group, then the flag's names) is AIPerf's;
//! each row's status is read from this program's own definitions, never written by hand: a
//! name the `profile` parser knows works (with the first line of its help), a name
//! [`super::cli_compat::refusal`] refuses is refused with that reason, and any other name is
//! unknown (a test keeps that list empty).

use clap::CommandFactory;

use super::cli::ProfileArgs;

/// AIPerf 0.13's flags: `group<TAB>names` lines, `#` comments.
const FLAGS: &str = include_str!("aiperf_flags.tsv");

/// One AIPerf flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// Its `--help` group ("Endpoint", "Load Generator", ...).
    pub group: &'static str,
    /// Its names, the primary first (`--model-names`, `--model`, `-m`).
    pub names: Vec<&'static str>,
}

/// What `profile` does with a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Accepted: the names the parser knows, and the first line of the flag's help here.
    Works {
        known: Vec<&'static str>,
        help: String,
    },
    /// Refused with exit 99 and this reason.
    Refused(String),
    /// Neither accepted nor refused: clap's "unexpected argument".
    Unknown,
}

/// AIPerf's flags in its `--help` order.
pub fn flags() -> Vec<Flag> {
    FLAGS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (group, names) = l.split_once('\t')?;
            Some(Flag {
                group,
                names: names.split(' ').filter(|n| !n.is_empty()).collect(),
            })
        })
        .collect()
}

/// The status of `flag` against the `profile` parser's definitions.
pub fn status(flag: &Flag) -> Status {
    let cmd = ProfileArgs::command();
    let mut known = Vec::new();
    let mut help = String::new();
    for name in &flag.names {
        let arg = cmd.get_arguments().find(|a| {
            if let Some(long) = name.strip_prefix("--") {
                a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long))
            } else {
                let short = name.trim_start_matches('-').chars().next();
                name.len() == 2 && a.get_short() == short
            }
        });
        if let Some(arg) = arg {
            known.push(*name);
            if help.is_empty() {
                let text = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                help = first_sentence(&text);
            }
        }
    }
    if !known.is_empty() {
        return Status::Works { known, help };
    }
    let refused = flag
        .names
        .iter()
        .find_map(|n| super::cli_compat::refusal(n));
    match refused {
        Some(line) => Status::Refused(reason(&line)),
        None => Status::Unknown,
    }
}

/// The reason part of a refusal line ("profile: FLAG is not supported: WHY").
fn reason(line: &str) -> String {
    line.split_once(" is not supported: ")
        .map_or(line, |(_, why)| why)
        .to_string()
}

/// The first sentence of a help text, on one line.
fn first_sentence(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // A sentence ends at ". " unless the word before is an abbreviation ("e.g.").
    let end = one_line.match_indices(". ").map(|(i, _)| i).find(|&i| {
        let word = one_line[..i].rsplit(' ').next().unwrap_or("");
        !matches!(word, "e.g" | "(e.g" | "i.e" | "(i.e" | "vs")
    });
    match end {
        Some(end) => one_line[..=end].to_string(),
        None => one_line,
    }
}

/// The page `--help-aiperf-flags` prints and `docs/aiperf-flags.md` holds: a title, how the
/// table is made, and the [`table`].
pub fn page() -> String {
    format!(
        "# AIPerf's flags in `inferperf profile`\n\n\
         Every flag of AIPerf 0.13's `aiperf profile --help`, by its group, and what \
         `inferperf profile` does with it. The status is read from inferperf's own flag \
         definitions: this page is the output of `inferperf profile --help-aiperf-flags`, \
         and a test fails when the two differ. A flag that works takes AIPerf's meaning unless \
         its line says otherwise; GenAI-Perf's spellings are listed in the LLM guide's \
         [GenAI-Perf and AIPerf flags](llm-guide.md#genai-perf-and-aiperf-flags).\n\n{}",
        table()
    )
}

/// The Markdown table of every AIPerf flag and its status here, by AIPerf's groups, with a
/// count line at the top.
pub fn table() -> String {
    let rows: Vec<(Flag, Status)> = flags()
        .into_iter()
        .map(|f| {
            let s = status(&f);
            (f, s)
        })
        .collect();
    let works = rows
        .iter()
        .filter(|(_, s)| matches!(s, Status::Works { .. }))
        .count();
    let refused = rows
        .iter()
        .filter(|(_, s)| matches!(s, Status::Refused(_)))
        .count();
    let mut out = format!(
        "{} flags of AIPerf 0.13's `aiperf profile`: {works} work in `inferperf profile`, \
         {refused} are refused (exit 99, one line naming the flag and the reason), {} are \
         unknown.\n\n| Group | AIPerf flag | In `inferperf profile` |\n|---|---|---|\n",
        rows.len(),
        rows.len() - works - refused
    );
    for (flag, status) in &rows {
        let names = flag
            .names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let here = match status {
            Status::Works { known, help } if known.len() == flag.names.len() => {
                format!("works: {help}")
            }
            Status::Works { known, help } => {
                let as_names: Vec<String> = known.iter().map(|n| format!("`{n}`")).collect();
                format!("works as {}: {help}", as_names.join(", "))
            }
            Status::Refused(why) => format!("refused: {why}"),
            Status::Unknown => "unknown".to_string(),
        };
        out.push_str(&format!(
            "| {} | {names} | {} |\n",
            flag.group,
            here.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
#[path = "aiperf_flags_tests.rs"]
mod tests;
