//! `profile`'s reports people look at, end to end against the reference server: reasoning
//! tokens and TTFO, the token-count warnings, per-time-slice statistics, and the HTML pages
//! (parsed here; opened in a real headless browser when one is installed).

use crate::common;
use crate::run_profile::{profile, start_llm, MODEL};

use std::path::Path;
use std::process::Command;

use common::temp_dir;
use inferperf::report::html_check::{scan, Outline};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn read_page(path: &Path) -> (String, Outline) {
    let page = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let outline = scan(&page).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        outline.external_references().is_empty(),
        "{} references {:?}",
        path.display(),
        outline.external_references()
    );
    assert_eq!(outline.count("script"), 0);
    (page, outline)
}

/// The body of the table in the section with `id`.
fn section_table<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let rest = &page[at..];
    &rest[..rest.find("</table>").unwrap()]
}

#[test]
fn reasoning_tokens_and_time_to_first_output_token() {
    // 3 of the 8 tokens are reasoning, one per chunk, at least 3 ms apart.
    let server = start_llm(20, 3, 1);
    let dir = temp_dir("profile-reasoning");
    let args = [
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "8",
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "8",
        "--extra-inputs",
        "inferperf_reasoning_tokens:3",
    ];
    let (outcomes, stdout) = profile(&server, &dir, &args).unwrap();
    let reqs = &outcomes[0].requests;
    assert_eq!(reqs.len(), 8);
    let mut gaps_ms = Vec::new();
    for r in reqs {
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!((r.osl, r.reasoning_tokens, r.chunks.len()), (8, 3, 8));
        // The answer starts with the fourth chunk, after three reasoning chunks.
        assert_eq!(r.first_output_ns, Some(r.chunks[3].arrival_ns));
        gaps_ms.push((r.chunks[3].arrival_ns - r.chunks[0].arrival_ns) as f64 / 1e6);
    }
    // The server sent the answer's first token three ITLs after the first reasoning token.
    let sent = server.token_times();
    assert!(
        sent.iter().all(|t| t.len() == 8),
        "8 chunks sent per request"
    );
    assert!(sent.iter().all(|t| t[3] - t[0] >= 9_000_000), "{sent:?}");
    for needle in ["Time To First Output Token", "Reasoning Token Count"] {
        assert!(stdout.contains(needle), "{needle}:\n{stdout}");
    }
    let run_dir = &outcomes[0].dir;
    let s = read_json(&run_dir.join("profile_export_genai_perf.json"));
    assert_eq!(s["reasoning_token_count"]["avg"], 3.0);
    assert_eq!(s["total_reasoning_tokens"]["avg"], 24.0);
    assert_eq!(s["output_sequence_length"]["avg"], 8.0);
    let ttfo = s["time_to_first_output_token"]["avg"].as_f64().unwrap();
    let ttft = s["time_to_first_token"]["avg"].as_f64().unwrap();
    let mean_gap = gaps_ms.iter().sum::<f64>() / gaps_ms.len() as f64;
    assert!(
        (ttfo - ttft - mean_gap).abs() < 1e-6,
        "{ttfo} - {ttft} vs {mean_gap}"
    );
    let records = outcomes[0].aiperf_dir.join("profile_export.jsonl");
    let lines = std::fs::read_to_string(records).unwrap();
    for line in lines.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["metrics"]["reasoning_token_count"]["value"], 3);
        assert!(
            v["metrics"]["time_to_first_output_token"]["value"]
                .as_f64()
                .unwrap()
                > 20.0
        );
    }
    let (page, _) = read_page(&run_dir.join("report.html"));
    let table = section_table(&page, "request-metrics");
    assert!(table.contains("Time To First Output Token (ms)"));
    assert!(table.contains("<td>Reasoning Token Count (tokens)</td><td>3.00</td>"));
    server.stop();
}

#[test]
fn token_count_warnings_on_the_console_and_in_the_json() {
    let server = start_llm(1, 0, 1);
    let dir = temp_dir("profile-warnings");
    // The server counts prompt words; cl100k gives the vocabulary words one token each and
    // the long words several.
    let short = "the of and to in is that it for on";
    let long = "antidisestablishmentarianism internationalization counterrevolutionaries";
    let tok = inferperf::inputs::tokenizer::Tokenizer::load("cl100k_base").unwrap();
    assert_eq!(tok.count(short), 10);
    let long_tokens = tok.count(long) as f64;
    assert!(long_tokens > 4.0);
    let input = dir.join("prompts.jsonl");
    let file = format!("{{\"text\": \"{short}\"}}\n{{\"text\": \"{long}\"}}\n");
    std::fs::write(&input, file).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_inferperf"))
        .args(["profile", "-m", MODEL, "-u", &server.addr.to_string()])
        .arg("--artifact-dir")
        .arg(&dir)
        .arg("--input-file")
        .arg(&input)
        .args([
            "--tokenizer",
            "cl100k_base",
            "--streaming",
            "--request-count",
            "6",
        ])
        .args(["--output-tokens-mean", "10", "--use-server-token-count"])
        .args(["--extra-inputs", "inferperf_stop_after:6"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // No progress line: stderr is a pipe here, and --quiet was not given.
    assert!(!stderr.contains('\r'), "{stderr:?}");
    let osl_line = "Warning: concurrency1: 6 of 6 requests got another output length than they \
                    asked for (max_tokens): 10.0 tokens asked and 6.0 received on average";
    assert_eq!(stderr.matches(osl_line).count(), 1, "{stderr}");
    let run_dir = dir.join(format!("{MODEL}-openai-chat-concurrency1"));
    let s = read_json(&run_dir.join("profile_export_genai_perf.json"));
    let c = &s["token_checks"];
    assert_eq!(c["osl_compared_count"], 6);
    assert_eq!(c["osl_mismatch_count"], 6);
    assert_eq!(c["requested_osl_avg"], 10.0);
    assert_eq!(c["received_osl_avg"], 6.0);
    assert_eq!(c["osl_mismatch_diff_pct"]["max"], 40.0);
    // ISL is the server's word count here: 3 for the long prompt, 10 for the short one.
    let lines = std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap();
    let isls: Vec<u64> = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            v["metrics"]["input_sequence_length"]["value"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let long_sent = isls.iter().filter(|&&i| i == 3).count();
    assert!(long_sent > 0 && long_sent < 6, "{isls:?}");
    assert_eq!(isls.iter().filter(|&&i| i == 10).count(), 6 - long_sent);
    assert_eq!(c["usage_compared_count"], 6);
    assert_eq!(c["usage_discrepancy_count"], long_sent as u64);
    let worst = (long_tokens - 3.0) * 100.0 / long_tokens;
    let max = c["usage_prompt_tokens_diff_pct"]["max"].as_f64().unwrap();
    assert!((max - worst).abs() < 1e-9, "{max} vs {worst}");
    assert_eq!(c["usage_completion_tokens_diff_pct"]["max"], 0.0);
    let usage_line = format!(
        "Warning: concurrency1: {} of 6 requests: the server's usage token counts differ",
        long_sent
    );
    assert_eq!(stderr.matches(&usage_line).count(), 1, "{stderr}");
    let warnings = s["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2);
    let (page, _) = read_page(&run_dir.join("report.html"));
    assert_eq!(page.matches("<p class=\"warning\">").count(), 2);
    server.stop();
}

#[test]
fn per_time_slice_ttft_and_itl() {
    let server = start_llm(20, 2, 1);
    let dir = temp_dir("profile-slices");
    let args = [
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "20",
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "8",
        "--slice-duration",
        "0.1",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    let reqs = &outcomes[0].requests;
    let first = reqs.iter().map(|r| r.start_ns).min().unwrap();
    // Per slice: requests, and the sums of their TTFT and ITL (ms) from the chunk times.
    let mut per_slice = std::collections::BTreeMap::<u64, (u64, f64, f64)>::new();
    for r in reqs {
        let e = per_slice
            .entry((r.start_ns - first) / 100_000_000)
            .or_default();
        let (first_chunk, last_chunk) = (r.chunks[0].arrival_ns, r.chunks[7].arrival_ns);
        e.0 += 1;
        e.1 += (first_chunk - r.start_ns) as f64 / 1e6;
        e.2 += (last_chunk - first_chunk) as f64 / 1e6 / 7.0;
    }
    assert!(per_slice.len() >= 2, "the run spans several slices");
    let run_dir = &outcomes[0].dir;
    let t = read_json(&run_dir.join("profile_export_timeslices.json"));
    assert_eq!(t["slice_duration"], 0.1);
    let slices = t["timeslices"].as_array().unwrap();
    assert_eq!(slices.len(), per_slice.len());
    for (s, (index, (count, ttft_sum, itl_sum))) in slices.iter().zip(&per_slice) {
        assert_eq!(s["index"], *index);
        assert_eq!(s["request_count"], *count);
        assert_eq!(s["time_to_first_token"]["count"], *count);
        let start = s["start"].as_f64().unwrap();
        assert!((start - *index as f64 * 0.1).abs() < 1e-9);
        let avg = |m: &str| s[m]["avg"].as_f64().unwrap();
        assert!((avg("time_to_first_token") - ttft_sum / *count as f64).abs() < 1e-6);
        assert!((avg("inter_token_latency") - itl_sum / *count as f64).abs() < 1e-6);
        // The server cannot answer before its TTFT.
        assert!(s["time_to_first_token"]["min"].as_f64().unwrap() >= 20.0);
    }
    let csv = std::fs::read_to_string(run_dir.join("profile_export_timeslices.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * slices.len());
    let (page, _) = read_page(&run_dir.join("report.html"));
    let table = section_table(&page, "time-slices");
    assert_eq!(table.matches("<tr>").count(), 1 + slices.len());
    server.stop();
}

#[test]
fn html_reports_per_level_and_comparison() {
    let server = start_llm(5, 1, 1);
    let dir = temp_dir("profile-html");
    let args = [
        "--streaming",
        "--concurrency",
        "1,2",
        "--request-count",
        "6",
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        "6",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    assert_eq!(outcomes.len(), 2);
    for o in &outcomes {
        let (page, outline) = read_page(&o.dir.join("report.html"));
        for id in [
            "request-metrics",
            "run-metrics",
            "token-checks",
            "plots",
            "configuration",
            "definitions",
        ] {
            assert!(outline.ids.iter().any(|i| i == id), "{id}");
        }
        assert_eq!(outline.count("svg"), 5, "the five charts inline");
        // The page's TTFT row carries the summary JSON's numbers.
        let s = read_json(&o.dir.join("profile_export_genai_perf.json"));
        let avg = s["time_to_first_token"]["avg"].as_f64().unwrap();
        let row = format!("<td>Time To First Token (ms)</td><td>{avg:.2}</td>");
        assert!(
            section_table(&page, "request-metrics").contains(&row),
            "{row}"
        );
        assert!(page.contains(&o.point.label()));
    }
    let (page, outline) = read_page(&dir.join("report.html"));
    let table = section_table(&page, "levels");
    assert_eq!(table.matches("<tr>").count(), 3);
    let links: Vec<&String> = outline
        .references
        .iter()
        .filter(|r| !r.starts_with('#'))
        .collect();
    assert_eq!(links.len(), 2);
    for link in links {
        assert!(dir.join(link).is_file(), "{link} does not resolve");
    }
    assert!(outline.count("svg") >= 1);

    let quiet = temp_dir("profile-no-html");
    let mut no_html = args.to_vec();
    no_html.push("--no-html-report");
    let (outcomes, _) = profile(&server, &quiet, &no_html).unwrap();
    assert!(!quiet.join("report.html").exists());
    assert!(!outcomes[0].dir.join("report.html").exists());
    server.stop();
}

/// A headless browser on this machine, if one is installed (`chromium` from the
/// distribution); `INFERPERF_BROWSER` names another.
fn browser() -> Option<std::path::PathBuf> {
    if let Some(b) = std::env::var_os("INFERPERF_BROWSER") {
        return Some(b.into());
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Hosts the browser itself calls (updates, sign-in, network time) whatever the page is;
/// font hosts are never among them.
fn browser_service(host: &str) -> bool {
    let host = host.split(':').next().unwrap_or(host);
    !host.starts_with("fonts.")
        && [
            ".google.com",
            ".googleapis.com",
            ".gvt1.com",
            ".gstatic.com",
        ]
        .iter()
        .any(|s| host.ends_with(s))
}

/// Opens `page` in the headless `browser` with every network request sent to a local proxy;
/// returns the DOM the browser built and the hosts the page asked for.
fn open_in_browser(browser: &Path, page: &Path, profile_dir: &Path) -> (String, Vec<String>) {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = proxy.local_addr().unwrap().port();
    proxy.set_nonblocking(true).unwrap();
    let (stop, seen) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(Mutex::new(Vec::<String>::new())),
    );
    let watcher = {
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match proxy.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(1)));
                        let mut head = [0u8; 512];
                        let n = c.read(&mut head).unwrap_or(0);
                        seen.lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&head[..n]).into());
                        // Dropped unanswered: the browser sees a failed fetch at once.
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        })
    };
    // Bounded: a browser that hangs is killed after a minute.
    let out = Command::new("timeout")
        .arg("60")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .args([
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
        ])
        .arg(format!("--proxy-server=http://127.0.0.1:{port}"))
        .arg("--proxy-bypass-list=<-loopback>")
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    // `GET http://host/path HTTP/1.1` or `CONNECT host:443 HTTP/1.1`: the host.
    let hosts = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|head| {
            head.lines()
                .next()?
                .split_whitespace()
                .nth(1)
                .map(str::to_string)
        })
        .map(|target| {
            let t = target.split("://").last().unwrap_or(&target).to_string();
            t.split('/').next().unwrap_or(&t).to_string()
        })
        .filter(|host| !browser_service(host))
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), hosts)
}

/// Optional tier: the page opened in a real headless browser, every network request sent to
/// a local proxy that records it. Skips (passes with a note) without a browser.
#[test]
fn html_report_in_a_headless_browser_fetches_nothing() {
    let Some(browser) = browser() else {
        eprintln!("skipped: no headless browser installed (apt-get install chromium)");
        return;
    };
    let server = start_llm(5, 1, 1);
    let dir = temp_dir("profile-browser");
    let args = [
        "--streaming",
        "--request-count",
        "4",
        "--output-tokens-mean",
        "4",
    ];
    let (outcomes, _) = profile(&server, &dir, &args).unwrap();
    server.stop();
    // The proxy sees what a page fetches: a page with one remote image.
    let control = dir.join("control.html");
    std::fs::write(
        &control,
        "<html><body><img src=\"http://example.invalid/x.png\"/></body></html>",
    )
    .unwrap();
    let (_, hosts) = open_in_browser(&browser, &control, &dir.join("profile-a"));
    assert_eq!(
        hosts,
        ["example.invalid"],
        "the proxy records a page's fetch"
    );

    let page = outcomes[0].dir.join("report.html");
    let (dom, hosts) = open_in_browser(&browser, &page, &dir.join("profile-b"));
    assert!(hosts.is_empty(), "the report fetched from {hosts:?}");
    // The browser built the whole page: every chart and table is in its DOM.
    let original = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        dom.matches("<svg").count(),
        original.matches("<svg").count()
    );
    assert_eq!(
        dom.matches("<table").count(),
        original.matches("<table").count()
    );
    assert!(dom.matches("<svg").count() >= 4, "{}", dom.len());
}
