//! `inferperf serve`: flags, the startup line, and running until a signal or `--duration`.

use std::ffi::OsString;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;

use super::{model_names, parse_delay, start, ServeConfig};
use crate::error::{Error, Result};

/// How often the main thread checks for a stop signal or the end of `--duration`.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Run the reference KServe v2 (Triton-compatible) HTTP server with models simple,
/// identity_fp32 and identity_bytes.
#[derive(Parser, Debug)]
#[command(name = "inferperf serve", version)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Server threads, each with its own event loop.
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// Pin server threads to these cores (round-robin).
    #[arg(long, value_delimiter = ',', value_name = "CORE[,CORE]")]
    pin: Vec<usize>,
    /// Add a compute delay to a model: MODEL=2ms or MODEL=500us..3ms (uniform). Repeatable.
    #[arg(long = "delay", value_name = "MODEL=SPEC")]
    delays: Vec<String>,
    /// Run MODEL's executions one at a time per server thread (a single model instance):
    /// requests queue behind each other's delay, so latency grows with concurrency. Repeatable.
    #[arg(long = "serial", value_name = "MODEL")]
    serial: Vec<String>,
    /// Stop after this many seconds (default: run until Ctrl-C/SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Parsed {
    /// `--help` / `--version` text to print on stdout.
    Info(String),
    Run(ServeConfig, Option<Duration>),
}

/// Drops the program name and the `serve` word, however the caller passed them.
fn flag_args(args: Vec<OsString>) -> Vec<OsString> {
    let mut rest = args.into_iter().peekable();
    if rest
        .peek()
        .is_some_and(|a| !a.to_string_lossy().starts_with('-'))
    {
        rest.next();
    }
    if rest.peek().is_some_and(|a| a == "serve") {
        rest.next();
    }
    rest.collect()
}

fn parse(args: Vec<OsString>) -> Result<Parsed> {
    let argv = std::iter::once(OsString::from("inferperf serve")).chain(flag_args(args));
    let flags = match ServeArgs::try_parse_from(argv) {
        Ok(flags) => flags,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                return Ok(Parsed::Info(e.to_string()));
            }
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            return Err(Error::usage(line.trim_start_matches("error: ").to_string()));
        }
    };
    let addr: SocketAddr = (flags.host.as_str(), flags.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| Error::usage(format!("--host '{}': cannot resolve", flags.host)))?;
    let duration = match flags.duration {
        None => None,
        Some(secs) => Some(
            Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    Error::usage(format!(
                        "--duration {secs}: expected a positive number of seconds"
                    ))
                })?,
        ),
    };
    let delays = flags
        .delays
        .iter()
        .map(|d| parse_delay(d))
        .collect::<Result<Vec<_>>>()?;
    let cfg = ServeConfig {
        addr,
        threads: flags.threads,
        pin_cores: flags.pin,
        delays,
        serial: flags.serial,
    };
    Ok(Parsed::Run(cfg, duration))
}

/// Set from the signal handler; read by the main thread's wait loop.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

fn install_stop_handlers() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores to an
        // atomic, which is async-signal-safe; SA_RESTART keeps the server threads' syscalls
        // from failing with EINTR more than necessary (they retry anyway).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

fn run(cfg: ServeConfig, duration: Option<Duration>) -> Result<()> {
    let handle = start(cfg)?;
    println!(
        "inferperf serve: listening on http://{} (models: {})",
        handle.addr,
        model_names()
    );
    let _ = std::io::stdout().flush();
    install_stop_handlers();
    let started = Instant::now();
    while !STOP_REQUESTED.load(Ordering::SeqCst) && duration.map_or(true, |d| started.elapsed() < d)
    {
        std::thread::sleep(STOP_CHECK);
    }
    handle.stop();
    Ok(())
}

/// `inferperf serve [flags]`. `args` as the process got them (program name and the `serve`
/// word are skipped if present). Returns the exit code: 0, or 99 with a one-line message.
pub fn serve_main(args: Vec<OsString>) -> i32 {
    let result = parse(args).and_then(|parsed| match parsed {
        Parsed::Info(text) => {
            print!("{text}");
            Ok(())
        }
        Parsed::Run(cfg, duration) => run(cfg, duration),
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("inferperf serve: {e}");
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Delay;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn parses_flags() {
        let Parsed::Run(cfg, duration) = parse(args(
            "inferperf serve --port 0 --threads 2 --pin 0,1 --delay simple=2ms --duration 0.5",
        ))
        .unwrap() else {
            panic!("expected a run")
        };
        assert_eq!(cfg.addr.to_string(), "127.0.0.1:0");
        assert_eq!((cfg.threads, cfg.pin_cores.clone()), (2, vec![0, 1]));
        assert_eq!(
            cfg.delays,
            vec![("simple".to_string(), Delay::Fixed(Duration::from_millis(2)))]
        );
        assert_eq!(duration, Some(Duration::from_millis(500)));
        let Parsed::Run(cfg, duration) = parse(args("serve")).unwrap() else {
            panic!()
        };
        assert_eq!((cfg, duration), (ServeConfig::default(), None));
        let Parsed::Run(cfg, _) = parse(args("--port 9")).unwrap() else {
            panic!()
        };
        assert_eq!(cfg.addr.port(), 9);
    }

    #[test]
    fn errors_are_one_line_usage() {
        for line in [
            "inferperf serve --bogus",
            "inferperf serve --port x",
            "inferperf serve --delay simple",
            "inferperf serve --duration -1",
            "inferperf serve --host no.such.host.invalid",
        ] {
            let err = parse(args(line)).unwrap_err();
            assert_eq!(err.exit_code(), 99, "{line}");
            assert!(
                !err.msg.contains('\n') && !err.msg.is_empty(),
                "{line}: {:?}",
                err.msg
            );
        }
        assert_eq!(serve_main(args("inferperf serve --threads 0 --port 0")), 99);
    }

    #[test]
    fn help_is_real() {
        let Parsed::Info(text) = parse(args("inferperf serve --help")).unwrap() else {
            panic!()
        };
        for flag in [
            "--host",
            "--port",
            "--threads",
            "--pin",
            "--delay",
            "--duration",
        ] {
            assert!(text.contains(flag), "{flag} missing from help");
        }
    }

    #[test]
    fn runs_for_duration() {
        let started = Instant::now();
        assert_eq!(
            serve_main(args("inferperf serve --port 0 --duration 0.2")),
            0
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }
}
