//! A real tritonserver for the optional test tier: its install (from `env.sh`), one server
//! process on free loopback ports, and the runs of the inferperf binary (and perf_analyzer's)
//! against it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest any one run may take before `timeout` ends it.
const RUN_LIMIT_S: &str = "180";
/// The server's whole life, whatever happens to the test.
const SERVER_LIMIT_S: &str = "1800";

/// Paths from the `env.sh` that `benches/peers/triton.sh setup` writes.
pub struct TritonEnv {
    server: PathBuf,
    backends: PathBuf,
    models: PathBuf,
    libs: PathBuf,
    capi: PathBuf,
}

impl TritonEnv {
    /// `None` when `INFERPERF_TRITON_DIR` is unset; a set variable whose `env.sh` cannot be
    /// read fails the test (the tier was asked for).
    pub fn from_env() -> Option<TritonEnv> {
        let dir = PathBuf::from(std::env::var_os("INFERPERF_TRITON_DIR")?);
        let path = dir.join("env.sh");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("INFERPERF_TRITON_DIR: cannot read {}: {e}", path.display())
        });
        let var = |name: &str| -> PathBuf {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("export "))
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| PathBuf::from(v.split('#').next().unwrap().trim().trim_matches('"')))
                .unwrap_or_else(|| panic!("{} has no {name}", path.display()))
        };
        Some(TritonEnv {
            server: var("TRITONSERVER"),
            backends: var("TRITON_BACKENDS"),
            models: var("TRITON_MODELS"),
            libs: var("TRITON_LIBS"),
            capi: var("TRITON_CAPI_DIR"),
        })
    }
}

/// A running tritonserver; stopped when dropped.
pub struct Triton {
    child: Child,
    pub http: u16,
    pub grpc: u16,
    libs: PathBuf,
    capi: PathBuf,
    models: PathBuf,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

impl Triton {
    pub fn start(env: &TritonEnv) -> Triton {
        let (http, grpc, metrics) = (free_port(), free_port(), free_port());
        let log = temp_dir("server").join("tritonserver.log");
        let child = Command::new("timeout")
            .arg(SERVER_LIMIT_S)
            .arg(&env.server)
            .arg(format!("--model-repository={}", env.models.display()))
            .arg(format!("--backend-directory={}", env.backends.display()))
            .args([
                "--http-port",
                &http.to_string(),
                "--grpc-port",
                &grpc.to_string(),
            ])
            .args([
                "--metrics-port",
                &metrics.to_string(),
                "--exit-timeout-secs",
                "5",
            ])
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::null())
            .spawn()
            .expect("tritonserver starts");
        let triton = Triton {
            child,
            http,
            grpc,
            libs: env.libs.clone(),
            capi: env.capi.clone(),
            models: env.models.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_get(http, "/v2/health/ready").0 != 200 {
            assert!(
                Instant::now() < deadline,
                "tritonserver not ready in 120 s; log {}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        triton
    }

    /// `inference_stats.success.count` of `model`.
    pub fn success_count(&self, model: &str) -> u64 {
        let (status, body) = http_get(self.http, &format!("/v2/models/{model}/stats"));
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("stats JSON");
        v["model_stats"][0]["inference_stats"]["success"]["count"]
            .as_u64()
            .expect("success count")
    }

    /// The flags that point a run at this install through the C API.
    pub fn capi_args(&self) -> Vec<String> {
        vec![
            "--service-kind".into(),
            "triton_c_api".into(),
            "--triton-server-directory".into(),
            self.capi.display().to_string(),
            "--model-repository".into(),
            self.models.display().to_string(),
        ]
    }

    /// `-u` for the protocol that `args` choose (`-i grpc` or HTTP).
    fn url_for(&self, args: &[&str]) -> String {
        let grpc = args.windows(2).any(|w| w == ["-i", "grpc"]);
        format!("127.0.0.1:{}", if grpc { self.grpc } else { self.http })
    }
}

impl Drop for Triton {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on the pid of the `timeout` process this test started; it
        // passes SIGTERM on to tritonserver.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET over a fresh connection: status and body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("inferperf-triton-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `bin` (inferperf when `None`) with `args`, pointed at `triton` unless the args choose the
/// C API, bounded by `timeout`.
fn run_tool(triton: &Triton, bin: Option<&Path>, args: &[&str]) -> Output {
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_inferperf"));
    let mut cmd = Command::new("timeout");
    cmd.arg(RUN_LIMIT_S).arg(bin.unwrap_or(&ours)).args(args);
    if args.contains(&"triton_c_api") {
        cmd.env("LD_LIBRARY_PATH", &triton.libs);
    } else {
        cmd.args(["-u", &triton.url_for(args)]);
    }
    cmd.output().expect("tool runs")
}

pub fn ours(triton: &Triton, args: &[&str]) -> Output {
    run_tool(triton, None, args)
}

/// Runs inferperf on `model` with `args` then `load`, writing a profile export; returns the parsed
/// export and the console text. The run must exit 0.
pub fn export(triton: &Triton, model: &str, args: &[&str], load: &[&str]) -> (Value, String) {
    let dir = temp_dir(&format!("export-{model}"));
    let file = dir.join("export.json");
    let mut all = vec!["-m", model];
    all.extend_from_slice(args);
    all.extend_from_slice(load);
    all.extend(["--profile-export-file", file.to_str().unwrap()]);
    let out = ours(triton, &all);
    let console = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all:?}: {console}");
    let doc = serde_json::from_str(&std::fs::read_to_string(&file).expect("export written"))
        .expect("export is JSON");
    (doc, console)
}

/// The first line of the `-f` CSV that `bin` (inferperf when `None`) writes for `model` and
/// `flags`.
pub fn csv_header(triton: &Triton, bin: Option<&Path>, model: &str, flags: &[&str]) -> String {
    let dir = temp_dir(&format!("csv-{model}"));
    let file = dir.join("out.csv");
    let mut args = vec!["-m", model, "-p", "500", "-s", "50", "--max-trials", "6"];
    args.extend_from_slice(flags);
    args.extend(["-f", file.to_str().unwrap()]);
    let out = run_tool(triton, bin, &args);
    let who = if bin.is_some() {
        "perf_analyzer"
    } else {
        "inferperf"
    };
    assert_eq!(out.status.code(), Some(0), "{who} {args:?}: {}", text(&out));
    let csv = std::fs::read_to_string(&file).expect("CSV written");
    csv.lines().next().unwrap_or_default().to_string()
}
