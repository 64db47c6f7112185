//! `inferperf completions bash|zsh|fish` and `inferperf man [--out-dir DIR]`: shell
//! completions and man pages generated from the clap definitions every subcommand parses its
//! own flags with, so they list exactly the flags `--help` shows.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{Arg, Command};
use clap_complete::Shell;

use crate::error::Error;

/// The shells `completions` writes for.
const SHELLS: [(&str, Shell); 3] = [
    ("bash", Shell::Bash),
    ("zsh", Shell::Zsh),
    ("fish", Shell::Fish),
];

/// The whole command line as one clap tree: perf_analyzer mode's flags at the top, and every
/// subcommand this build has, each with the flags its own parser takes.
pub fn command_tree() -> Command {
    let root = crate::cli::args::command()
        .name("inferperf")
        .bin_name("inferperf")
        .about("Load generator and profiler for inference servers; a drop-in for Triton's perf_analyzer")
        .version(crate::VERSION)
        .subcommand_negates_reqs(true);
    #[cfg(feature = "server")]
    let root = root
        .subcommand(
            crate::server::serve_command()
                .name("serve")
                .about("Run the reference inference server (KServe v2 HTTP and gRPC, OpenAI, TF Serving, TorchServe)"),
        )
        .subcommand(
            crate::cli::args::command()
                .name("demo")
                .about("Start the reference server in-process and measure it with perf_analyzer flags"),
        );
    #[cfg(feature = "llm")]
    let root = {
        use clap::CommandFactory;
        root.subcommand(crate::llm::cli::ProfileArgs::command().name("profile"))
            .subcommand(crate::report::plot::compare::compare_command().name("compare"))
    };
    root.subcommand(completions_command())
        .subcommand(man_command())
}

fn completions_command() -> Command {
    Command::new("completions")
        .about("Print the shell completion script for bash, zsh or fish")
        .arg(
            Arg::new("shell")
                .required(true)
                .value_parser(SHELLS.map(|(name, _)| name)),
        )
}

fn man_command() -> Command {
    Command::new("man")
        .about("Print the man page, or write one page per subcommand into a folder")
        .arg(
            Arg::new("out-dir")
                .long("out-dir")
                .value_name("DIR")
                .value_parser(clap::value_parser!(PathBuf))
                .help(
                    "Write inferperf.1 and inferperf-<subcommand>.1 into DIR (created if missing)",
                ),
        )
}

/// `inferperf completions SHELL`: the script on standard output.
pub fn completions_main(args: Vec<OsString>) -> i32 {
    let matches = match completions_command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => return clap_exit(e),
    };
    let name = matches.get_one::<String>("shell").expect("required");
    let shell = SHELLS
        .iter()
        .find(|(n, _)| n == name)
        .map(|&(_, s)| s)
        .expect("value parser");
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command_tree(), "inferperf", &mut out);
    write_stdout(&out)
}

/// `inferperf man [--out-dir DIR]`.
pub fn man_main(args: Vec<OsString>) -> i32 {
    let matches = match man_command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => return clap_exit(e),
    };
    match matches.get_one::<PathBuf>("out-dir") {
        Some(dir) => match write_pages(dir) {
            Ok(n) => {
                println!("{n} man pages written to {}", dir.display());
                0
            }
            Err(e) => crate::app::fail(&e),
        },
        None => {
            let mut out = Vec::new();
            let page = clap_mangen::Man::new(command_tree());
            page.render(&mut out).expect("rendering into memory");
            write_stdout(&out)
        }
    }
}

/// Writes one page per command into `dir` (`inferperf.1`, `inferperf-<subcommand>.1`) and
/// returns how many. Each subcommand is built on its own, so its page lists the `--help` and
/// `--version` flags clap adds.
fn write_pages(dir: &std::path::Path) -> Result<usize, Error> {
    let io = |e: std::io::Error| Error::usage(format!("--out-dir {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    let root = command_tree();
    let mut pages = vec![root.clone()];
    for sub in root.get_subcommands() {
        let name = sub.get_name().to_string();
        pages.push(
            sub.clone()
                .display_name(format!("inferperf-{name}"))
                .bin_name(format!("inferperf {name}")),
        );
    }
    for mut page in pages.iter().cloned() {
        page.build();
        clap_mangen::Man::new(page).generate_to(dir).map_err(io)?;
    }
    Ok(pages.len())
}

fn write_stdout(bytes: &[u8]) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => 0,
        // A closed pipe (`| head`) is not a failure of the generator.
        Err(_) => 0,
    }
}

/// Prints clap's help or error and returns its exit code (99 for a usage error, as the other
/// subcommands do).
fn clap_exit(e: clap::Error) -> i32 {
    let _ = e.print();
    if e.use_stderr() {
        99
    } else {
        0
    }
}
