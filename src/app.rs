//! Top-level dispatch: `inferperf [perf_analyzer flags]`, `inferperf serve ...`,
//! `inferperf demo [perf_analyzer flags]`, `inferperf profile ...` (LLM benchmark),
//! `inferperf compare RUN...`, `inferperf completions SHELL`, `inferperf man [--out-dir DIR]`.

use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::cli::{parse_run_args, Parsed};
use crate::error::Error;

/// Runs the command line `args` (argv, including the program name) and returns the exit code.
pub fn main_with_args(args: Vec<OsString>) -> i32 {
    let cmd = args.get(1).and_then(|a| a.to_str()).unwrap_or_default();
    if let Some(e) = feature_error(cmd, &BUILT_FEATURES) {
        return fail(&e);
    }
    match cmd {
        #[cfg(feature = "server")]
        "serve" => crate::server::serve_main(args[1..].to_vec()),
        #[cfg(feature = "server")]
        "demo" => crate::demo::demo(args),
        #[cfg(feature = "llm")]
        "profile" => crate::llm::profile_main(args[1..].to_vec()),
        #[cfg(feature = "llm")]
        "compare" => crate::report::plot::compare::compare_main(args[1..].to_vec()),
        "completions" => crate::completions::completions_main(args[1..].to_vec()),
        "man" => crate::completions::man_main(args[1..].to_vec()),
        #[cfg(feature = "mpi")]
        "mpi-probe" => crate::mpi::world::probe_main(args[1..].to_vec()),
        _ => run_cli(args),
    }
}

/// The optional features and whether this build has each.
const BUILT_FEATURES: [(&str, bool); 3] = [
    ("server", cfg!(feature = "server")),
    ("llm", cfg!(feature = "llm")),
    ("mpi", cfg!(feature = "mpi")),
];

/// The usage error for subcommand `cmd` when `built` lacks the feature it needs.
fn feature_error(cmd: &str, built: &[(&str, bool)]) -> Option<Error> {
    let feature = match cmd {
        "serve" | "demo" => "server",
        "profile" | "compare" => "llm",
        "mpi-probe" => "mpi",
        _ => return None,
    };
    let have = built.iter().any(|&(f, on)| f == feature && on);
    (!have).then(|| Error::without_feature(cmd, feature))
}

/// perf_analyzer mode: parses the flags and runs the measurement.
pub(crate) fn run_cli(args: Vec<OsString>) -> i32 {
    let cfg = match parse_run_args(args) {
        Ok(Parsed::Run(cfg)) => cfg,
        Ok(Parsed::Exit {
            text,
            to_stderr,
            code,
        }) => {
            if to_stderr {
                eprint!("{text}");
            } else {
                print!("{text}");
            }
            return code;
        }
        Err(e) => return fail(&e),
    };
    crate::signal::install();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let stop = Arc::new(AtomicBool::new(false));
    let result = if cfg.enable_mpi {
        crate::mpi::run::main_mpi(&cfg, &mut out, stop)
    } else {
        crate::run::run(&cfg, &mut out, stop)
    };
    match result {
        Ok(res) => {
            let _ = out.flush();
            res.error.as_ref().map_or(0, fail)
        }
        Err(e) => {
            let _ = out.flush();
            fail(&e)
        }
    }
}

pub(crate) fn fail(e: &Error) -> i32 {
    eprintln!("error: {e}");
    e.exit_code()
}

#[cfg(test)]
mod tests {
    use super::{feature_error, BUILT_FEATURES};

    const SUBCOMMANDS: [(&str, &str); 5] = [
        ("serve", "server"),
        ("demo", "server"),
        ("profile", "llm"),
        ("compare", "llm"),
        ("mpi-probe", "mpi"),
    ];

    #[test]
    #[cfg(all(feature = "server", feature = "llm", feature = "mpi"))]
    fn the_default_build_has_every_subcommand() {
        for (cmd, _) in SUBCOMMANDS {
            assert!(feature_error(cmd, &BUILT_FEATURES).is_none(), "{cmd}");
        }
    }

    #[test]
    fn a_subcommand_without_its_feature_is_a_usage_error() {
        for (cmd, feature) in SUBCOMMANDS {
            let built = BUILT_FEATURES.map(|(f, _)| (f, f != feature));
            let e = feature_error(cmd, &built).expect(cmd);
            assert_eq!(e.exit_code(), 99);
            assert_eq!(
                e.to_string(),
                format!("inferperf was built without the `{feature}` feature; `{cmd}` needs it")
            );
        }
        let none = BUILT_FEATURES.map(|(f, _)| (f, false));
        for cmd in ["", "-m", "simple", "--enable-mpi"] {
            assert!(feature_error(cmd, &none).is_none(), "{cmd}");
        }
    }
}
