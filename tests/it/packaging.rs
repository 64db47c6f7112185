//! Optional tier: what users install without a Rust toolchain. With `INFERPERF_PACKAGING_TIER=1`
//! it builds the Python wheel and the portable tarball with `packaging/wheel.sh` (maturin and
//! ziglang from PyPI, the `dist` profile; the first build takes minutes), installs the wheel into
//! a fresh venv with nothing else, and runs `inferperf --version`, `python -m inferperf --version`
//! and a short `inferperf demo` from it; it checks that the installed binary needs no glibc newer
//! than the stated 2.17 (`objdump -T`), no RPATH/RUNPATH and no shared library beyond the C
//! runtime (`readelf -d`), and that the tarball holds the binary, completions and man pages.
//!
//!     INFERPERF_PACKAGING_TIER=1 cargo test --profile ci --test it packaging -- --nocapture
//!
//! `INFERPERF_PACKAGING_WHEELS=DIR` checks the wheel and tarball in DIR (as `wheel.sh` names
//! them) instead of building them.
//!
//! Otherwise, or when a tool it needs is absent, it prints one line saying it skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::common::Scratch;

/// The newest glibc the portable binary may need (manylinux2014).
const GLIBC_STATED: [u32; 2] = [2, 17];

/// Shared libraries the binary may name in `DT_NEEDED`: the C runtime only.
const ALLOWED_NEEDED: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
];

#[test]
fn packaging_tier() {
    if std::env::var("INFERPERF_PACKAGING_TIER").as_deref() != Ok("1") {
        println!("packaging: skipped (INFERPERF_PACKAGING_TIER unset; see packaging/wheel.sh)");
        return;
    }
    for tool in ["python3", "objdump", "readelf", "rustup", "tar"] {
        if !on_path(tool) {
            println!("packaging: skipped ({tool} is not on PATH)");
            return;
        }
    }
    let scratch = Scratch::new("inferperf-packaging");
    let venv = scratch.join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .expect("python3 runs");
    if !made.status.success() {
        println!(
            "packaging: skipped (python3 -m venv fails: {})",
            first_line(&made.stderr)
        );
        return;
    }

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = match std::env::var_os("INFERPERF_PACKAGING_WHEELS") {
        // A folder `packaging/wheel.sh` already filled (e.g. a release build's artifacts).
        Some(dir) => PathBuf::from(dir),
        None => {
            // The build's progress goes straight to the terminal: a first build takes most
            // of an hour on two cores, a later one rebuilds only what changed (wheel.sh keeps
            // its venv and the `dist` build in the target folder).
            let started = Instant::now();
            let built = Command::new("bash")
                .arg(root.join("packaging/wheel.sh"))
                .current_dir(root)
                .status()
                .expect("bash runs");
            assert!(
                built.success(),
                "packaging/wheel.sh failed ({built}); its output is above"
            );
            println!(
                "packaging: packaging/wheel.sh built the wheel and the tarball in {:.0} s",
                started.elapsed().as_secs_f64()
            );
            target_dir(root).join("wheels")
        }
    };

    let version = env!("CARGO_PKG_VERSION");
    // maturin names both tags of manylinux2014 (glibc 2.17), in either order.
    let wheel = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&format!("inferperf-{version}-py3-none-"))
                && name.ends_with(".whl")
                && name.contains("manylinux_2_17_x86_64")
                && name.contains("manylinux2014_x86_64")
        })
        .unwrap_or_else(|| panic!("no manylinux2014 wheel in {}", out.display()));
    let tarball = out.join(format!("inferperf-{version}-x86_64-linux-gnu.tar.gz"));
    assert!(tarball.is_file(), "{} is missing", tarball.display());

    // The wheel alone, from the file: nothing fetched from an index.
    let pip = run(Command::new(venv.join("bin/pip")).args([
        "install",
        "--no-index",
        "--no-deps",
        "--disable-pip-version-check",
        wheel.to_str().unwrap(),
    ]));
    assert!(pip.status.success(), "pip install: {}", text(&pip));
    let exe = venv.join("bin/inferperf");
    assert!(
        exe.is_file(),
        "the wheel put no inferperf in {}",
        venv.display()
    );

    // The version line goes to stderr, as perf_analyzer's does.
    let want = format!("inferperf {version} ");
    let v = run(Command::new(&exe).arg("--version"));
    assert!(v.status.success(), "{}", text(&v));
    let line = String::from_utf8_lossy(&[v.stdout.as_slice(), &v.stderr].concat()).into_owned();
    assert!(line.starts_with(&want), "{}", text(&v));
    let m = run(Command::new(venv.join("bin/python")).args(["-m", "inferperf", "--version"]));
    assert!(m.status.success(), "{}", text(&m));
    let by_python =
        String::from_utf8_lossy(&[m.stdout.as_slice(), &m.stderr].concat()).into_owned();
    assert_eq!(by_python, line, "python -m inferperf --version");

    let demo = run(Command::new(&exe).args([
        "demo",
        "--measurement-mode",
        "count_windows",
        "--measurement-request-count",
        "200",
        "-s",
        "1000",
    ]));
    assert!(demo.status.success(), "demo: {}", text(&demo));
    let report = String::from_utf8_lossy(&demo.stdout);
    assert!(
        report.contains("inferperf demo: reference server on http://"),
        "{report}"
    );
    assert!(report.contains("Concurrency: 1, throughput: "), "{report}");

    let need = glibc_needed(root, &exe);
    assert!(
        need <= GLIBC_STATED.to_vec(),
        "the installed binary needs glibc {need:?}, newer than {GLIBC_STATED:?}"
    );
    let dynamic = run(Command::new("readelf").arg("-d").arg(&exe));
    assert!(dynamic.status.success(), "readelf: {}", text(&dynamic));
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(
        !dynamic.contains("(RPATH)") && !dynamic.contains("(RUNPATH)"),
        "{dynamic}"
    );
    for line in dynamic.lines().filter(|l| l.contains("(NEEDED)")) {
        let lib = line.rsplit('[').next().unwrap_or("").trim_end_matches(']');
        assert!(ALLOWED_NEEDED.contains(&lib), "needs {lib}: {dynamic}");
    }

    let listing = run(Command::new("tar").arg("-tzf").arg(&tarball));
    assert!(listing.status.success(), "tar: {}", text(&listing));
    let listing = String::from_utf8_lossy(&listing.stdout);
    let top = format!("inferperf-{version}-x86_64-linux-gnu");
    for member in [
        "inferperf",
        "README.md",
        "completions/inferperf.bash",
        "completions/inferperf.zsh",
        "completions/inferperf.fish",
        "man/inferperf.1",
        "man/inferperf-profile.1",
    ] {
        let path = format!("{top}/{member}");
        assert!(
            listing.lines().any(|l| l == path),
            "{path} not in the tarball:\n{listing}"
        );
    }
}

/// `packaging/glibc_needed.sh BINARY` as version numbers, e.g. `[2, 17]`.
fn glibc_needed(root: &Path, binary: &Path) -> Vec<u32> {
    let o = run(Command::new("bash")
        .arg(root.join("packaging/glibc_needed.sh"))
        .arg(binary));
    assert!(o.status.success(), "glibc_needed.sh: {}", text(&o));
    let need = String::from_utf8_lossy(&o.stdout);
    let parts: Vec<u32> = need
        .trim()
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("glibc version {need:?}"))
        })
        .collect();
    assert!(parts.len() >= 2, "glibc version {need:?}");
    parts
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("target"))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{:?} does not start: {e}", cmd.get_program()))
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cargo package --list` of each published crate holds what its build reads: the wire crate
/// its generated prost messages and the `.proto` files their digest test reads (every one of
/// the top-level `proto/`), the client the
/// files it embeds, each crate the README its manifest names; nothing from `target/`.
#[test]
fn published_crates_list_what_they_build_from() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut protos: Vec<String> = std::fs::read_dir(root.join("proto"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".proto"))
        .map(|n| format!("proto/{n}"))
        .collect();
    protos.sort();
    assert!(!protos.is_empty(), "no .proto files in proto/");
    let mut wire: Vec<String> = [
        "src/lib.rs",
        "src/protocol/grpc/pb/inference.rs",
        "src/protocol/grpc/pb/health.rs",
        "src/tfserving/pb.rs",
    ]
    .map(String::from)
    .to_vec();
    wire.extend(protos);
    let cases: [(&str, Vec<String>); 4] = [
        ("inferperf-wire", wire),
        (
            "inferperf-client",
            ["assets/DejaVuSans.ttf", "assets/DejaVuSans-LICENSE.txt"]
                .into_iter()
                .chain(["src/llm/aiperf_flags.tsv", "src/inputs/corpus.txt"])
                .map(String::from)
                .collect(),
        ),
        ("inferperf-server", vec!["src/lib.rs".to_string()]),
        (
            "inferperf",
            vec!["src/main.rs".to_string(), "LICENSE".to_string()],
        ),
    ];
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for (krate, wanted) in cases {
        let o = run(Command::new(&cargo)
            .args([
                "package",
                "--list",
                "--offline",
                "--allow-dirty",
                "-p",
                krate,
            ])
            .current_dir(root));
        assert!(
            o.status.success(),
            "cargo package --list -p {krate}: {}",
            text(&o)
        );
        let listed = String::from_utf8_lossy(&o.stdout);
        let listed: Vec<&str> = listed.lines().collect();
        for want in wanted
            .iter()
            .map(String::as_str)
            .chain(["Cargo.toml", "README.md"])
        {
            assert!(listed.contains(&want), "{krate} lacks {want}: {listed:?}");
        }
        assert!(
            !listed.iter().any(|l| l.starts_with("target/")),
            "{krate}: {listed:?}"
        );
    }
}

/// The four published crates as crates.io would serve them (optional tier, with
/// `INFERPERF_PACKAGING_TIER=1`): `cargo package --workspace` packs each one and builds it from
/// its `.crate` alone, the workspace crates it depends on taken from the other `.crate` files
/// (cargo's temporary local registry) rather than from the source tree. The verify build is
/// the dev profile in the target folder's `debug/`, kept between runs: the first one builds
/// every dependency (minutes), a later one the four crates.
///
///     INFERPERF_PACKAGING_TIER=1 cargo test --profile ci --test it published_crates_build -- --nocapture
#[test]
fn published_crates_build_from_their_packages() {
    if std::env::var("INFERPERF_PACKAGING_TIER").as_deref() != Ok("1") {
        println!(
            "packaging: skipped (INFERPERF_PACKAGING_TIER unset; see `cargo package --workspace`)"
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let o = run(Command::new(&cargo)
        .args(["package", "--workspace", "--offline", "--allow-dirty"])
        .current_dir(root));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "cargo package --workspace: {}",
        text(&o)
    );
    println!(
        "packaging: cargo package --workspace packed and built the four crates in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let version = env!("CARGO_PKG_VERSION");
    let packages = target_dir(root).join("package");
    for krate in [
        "inferperf-wire",
        "inferperf-client",
        "inferperf-server",
        "inferperf",
    ] {
        let verifying = format!("Verifying {krate} v{version} ");
        assert!(
            log.lines().any(|l| l.trim_start().starts_with(&verifying)),
            "{krate} was not built from its package:\n{log}"
        );
        let file = packages.join(format!("{krate}-{version}.crate"));
        assert!(file.is_file(), "{} is missing:\n{log}", file.display());
    }
}
