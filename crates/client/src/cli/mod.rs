//! The perf_analyzer-compatible command line: argv to a validated `Config`.
//!
//! `args` holds the clap definitions, `validate` turns raw values into a `Config`, `help` holds
//! the headings, notes and the table of unimplemented flags (empty).

pub mod args;
pub mod help;
pub mod kinds;
pub mod load;
pub mod metrics;
pub mod net;
pub(crate) mod number;
pub mod openai;
pub mod transport;
pub mod validate;

use std::ffi::OsString;

use clap::FromArgMatches;

use crate::config::Config;
use crate::error::{Error, Result};

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    /// Run a measurement with this configuration.
    Run(Box<Config>),
    /// Print `text` (to stderr when `to_stderr`) and exit with `code`: `--help`, `--version`.
    Exit {
        text: String,
        to_stderr: bool,
        code: i32,
    },
}

/// Parses perf_analyzer's flags. `args` includes argv[0].
///
/// `-h/--help` gives `Exit` on stdout with code 0; `--version` gives `Exit` on stderr with code 0
/// (perf_analyzer prints its version to stderr too). Bad usage gives `Error::usage` with a
/// one-line message naming the flag.
pub fn parse_run_args(args: Vec<OsString>) -> Result<Parsed> {
    let mut command = args::command();
    let matches = command
        .try_get_matches_from_mut(args)
        .map_err(usage_from_clap)?;
    let run_args = args::RunArgs::from_arg_matches(&matches).map_err(usage_from_clap)?;
    if run_args.help {
        let text = command.render_help().to_string();
        return Ok(Parsed::Exit {
            text,
            to_stderr: false,
            code: 0,
        });
    }
    if run_args.version {
        let text = format!("inferperf {} (perf_analyzer-compatible)\n", crate::VERSION);
        return Ok(Parsed::Exit {
            text,
            to_stderr: true,
            code: 0,
        });
    }
    if let Some(flag) = args::first_planned_flag(&matches) {
        return Err(help::not_supported(&flag));
    }
    validate::to_config(&run_args).map(|config| Parsed::Run(Box::new(config)))
}

/// Keeps clap's first line ("error: unexpected argument '--foo' found"), without the "error: "
/// prefix the caller adds its own way, and points to `--help`.
fn usage_from_clap(err: clap::Error) -> Error {
    let rendered = err.to_string();
    let first_line = rendered
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty());
    let message = first_line.unwrap_or("invalid command line");
    let message = message.strip_prefix("error: ").unwrap_or(message);
    Error::usage(format!("{message} (see --help)"))
}

#[cfg(test)]
mod errors_tests;
#[cfg(test)]
mod help_tests;
#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
