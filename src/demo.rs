//! `inferperf demo [perf_analyzer flags]`: the reference server in-process, measured by the
//! perf_analyzer mode (the `server` feature).

use std::ffi::OsString;

use crate::app::{fail, run_cli};
use crate::server::{self, ServeConfig};

/// Flags the demo sets before the user's own (which override them): the `simple` model, 1 s
/// windows and a 20 % stability band, so the demo finishes quickly on a small, noisy machine.
const DEMO_PRESETS: [&str; 7] = ["inferperf", "-m", "simple", "-p", "1000", "-s", "20"];

/// Starts the reference server in-process on a free loopback port (pinned to the last core
/// when there are several) and measures it with the given perf_analyzer flags.
pub(crate) fn demo(args: Vec<OsString>) -> i32 {
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
        grpc_addr: Some("127.0.0.1:0".parse().expect("literal address")),
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
    let grpc = handle.grpc_addr.map(|a| a.to_string()).unwrap_or_default();
    println!(
        "inferperf demo: reference server on http://{} and gRPC {grpc} (models {})",
        handle.addr,
        server::model_names()
    );
    let user: Vec<OsString> = args.into_iter().skip(2).collect();
    let url = if wants_grpc(&user) {
        grpc
    } else {
        handle.addr.to_string()
    };
    let mut argv: Vec<OsString> = DEMO_PRESETS.iter().map(OsString::from).collect();
    argv.extend(user);
    argv.push("-u".into());
    argv.push(url.into());
    let code = run_cli(argv);
    handle.stop();
    code
}

/// The user's flags choose gRPC (`-i grpc`, `-igrpc`, `-i=grpc`; the last one wins).
fn wants_grpc(args: &[OsString]) -> bool {
    let mut grpc = false;
    let mut iter = args.iter().map(|a| a.to_string_lossy());
    while let Some(arg) = iter.next() {
        let value = match arg.strip_prefix("-i") {
            Some("") => iter.next().map(|v| v.to_string()),
            Some(rest) => Some(rest.trim_start_matches('=').to_string()),
            None => None,
        };
        if let Some(v) = value {
            grpc = v.eq_ignore_ascii_case("grpc");
        }
    }
    grpc
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

#[cfg(test)]
mod tests {
    use super::wants_grpc;
    use std::ffi::OsString;

    #[test]
    fn demo_protocol_follows_the_last_i_flag() {
        let cases: [(&[&str], bool); 6] = [
            (&[], false),
            (&["-i", "gRPC"], true),
            (&["-igrpc"], true),
            (&["-i=grpc"], true),
            (&["-i", "grpc", "-i", "http"], false),
            (&["--concurrency-range", "1:2"], false),
        ];
        for (args, want) in cases {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            assert_eq!(wants_grpc(&args), want, "{args:?}");
        }
    }
}
