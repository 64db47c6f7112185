//! The `inferperf` binary: everything lives in the library; this only hands over argv and
//! turns the outcome into an exit code.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    std::process::exit(inferperf::app::main_with_args(args));
}
