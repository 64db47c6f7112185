//! Top-level dispatch: `inferperf [perf_analyzer flags]`, `inferperf serve ...`,
//! `inferperf demo [perf_analyzer flags]`.

use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::cli::{parse_run_args, Parsed};
use crate::error::Error;
use crate::server::{self, ServeConfig};

/// Runs the command line `args` (argv, including the program name) and returns the exit code.
pub fn main_with_args(args: Vec<OsString>) -> i32 {
    match args.get(1).and_then(|a| a.to_str()) {
        Some("serve") => server::serve_main(args[1..].to_vec()),
        Some("demo") => demo(args),
        _ => run_cli(args),
    }
}

fn run_cli(args: Vec<OsString>) -> i32 {
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
    match crate::run::run(&cfg, &mut out, Arc::new(AtomicBool::new(false))) {
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

fn fail(e: &Error) -> i32 {
    eprintln!("error: {e}");
    e.exit_code()
}

/// Flags the demo sets before the user's own (which override them): the `simple` model, 1 s
/// windows and a 20 % stability band, so the demo finishes quickly on a small, noisy machine.
const DEMO_PRESETS: [&str; 7] = ["inferperf", "-m", "simple", "-p", "1000", "-s", "20"];

/// Starts the reference server in-process on a free loopback port (pinned to the last core
/// when there are several) and measures it with the given perf_analyzer flags.
fn demo(args: Vec<OsString>) -> i32 {
    let cores = crate::engine::available_cores();
    let server_core: Vec<usize> = if cores.len() > 1 {
        vec![cores[cores.len() - 1].id]
    } else {
        vec![]
    };
    let cfg = ServeConfig {
        addr: "127.0.0.1:0".parse().expect("literal address"),
        threads: 1,
        pin_cores: server_core.clone(),
        ..ServeConfig::default()
    };
    let handle = match server::start(cfg) {
        Ok(h) => h,
        Err(e) => return fail(&e),
    };
    if let Some(&core) = server_core.first() {
        // Keep the client's workers off the server's core.
        let rest: Vec<_> = cores.iter().filter(|c| c.id != core).copied().collect();
        restrict_affinity(&rest);
    }
    println!("inferperf demo: reference server on http://{} (models simple, identity_fp32, identity_bytes)", handle.addr);
    let mut argv: Vec<OsString> = DEMO_PRESETS.iter().map(OsString::from).collect();
    argv.extend(args.into_iter().skip(2));
    argv.push("-u".into());
    argv.push(handle.addr.to_string().into());
    let code = run_cli(argv);
    handle.stop();
    code
}

/// Limits the calling thread (and the threads it starts later) to `cores`.
fn restrict_affinity(cores: &[core_affinity::CoreId]) {
    if cores.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for c in cores {
            libc::CPU_SET(c.id, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
