//! One extra CSV per composing model of an ensemble (or `--bls-composing-models` model):
//! the server-side split of that model at every point.
//!
//! perf_analyzer names the file by gluing `<model>_v<version>.` to the whole `-f` path, so
//! `-f out/x.csv` writes `model_v1.out/x.csv` (a directory that usually does not exist). inferperf
//! puts the prefix on the file name instead: `out/model_v1.x.csv`, beside the main file.
//! Model names and versions come from the server: the prefix is made a safe file name
//! (`report::fmt::safe_file_stem`), and two models whose prefixes clash get `-2`, `-3`, ...

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::super::fmt::{fmt_g, safe_file_stem, us, UniqueStems};
use super::super::server::ServerAverages;
use super::super::{LoadValue, PointReport};
use crate::error::Result;
use crate::measure::server_stats::ComposingStats;

/// Where the CSV of composing model `model` (version `version`) goes for `-f csv`: always in
/// the directory of `csv`, whatever the server named the model.
pub fn composing_csv_path(csv: &Path, model: &str, version: &str) -> PathBuf {
    prefixed(csv, &safe_file_stem(&format!("{model}_v{version}")))
}

/// `csv` with `<stem>.` before its file name; `stem` is a safe file stem.
fn prefixed(csv: &Path, stem: &str) -> PathBuf {
    let file = csv
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    csv.with_file_name(format!("{stem}.{file}"))
}

/// Server-side averages of a composing model in µs: (queue, compute input, compute infer,
/// compute output, cache hit, cache miss). A nested ensemble sums its composing models'.
fn parts_us(c: &ComposingStats) -> [u64; 6] {
    if c.composing.is_empty() {
        let a = ServerAverages::of_model(&c.model);
        return [
            a.queue_ns,
            a.compute_input_ns,
            a.compute_infer_ns,
            a.compute_output_ns,
            a.cache_hit_ns,
            a.cache_miss_ns,
        ]
        .map(us);
    }
    c.composing.iter().map(parts_us).fold([0; 6], |mut sum, p| {
        for (s, v) in sum.iter_mut().zip(p) {
            *s += v;
        }
        sum
    })
}

/// The composing model's server overhead (µs), as its console line computes it.
fn overhead_us(c: &ComposingStats, cache: bool) -> u64 {
    let a = ServerAverages::of_model(&c.model);
    let [queue, cin, cinf, cout, ..] = parts_us(c);
    let busy = if cache && c.composing.is_empty() {
        us(a.cache_compute_ns)
    } else if c.composing.is_empty() {
        us(a.compute_ns)
    } else {
        cin + cinf + cout
    };
    us(a.request_ns).saturating_sub(queue).saturating_sub(busy)
}

/// Writes the CSV of composing model `model`: header, then one row per point (sorted by the
/// profiled model's throughput, like the main file). `composing[i]` holds point `i`'s
/// composing statistics; a point without the model gets a row of zeros.
pub fn write_composing_csv(
    w: &mut impl Write,
    points: &[PointReport],
    composing: &[Vec<ComposingStats>],
    model: &str,
) -> io::Result<()> {
    let Some(first) = points.first() else {
        return Ok(());
    };
    let cache = points
        .iter()
        .any(|p| p.server.as_ref().is_some_and(|s| s.cache_enabled));
    let mode = match first.load {
        LoadValue::Concurrency(_) => "Concurrency",
        LoadValue::RequestRate(_) => "Request Rate",
    };
    let cache_cols = if cache {
        ",Server Cache Hit,Server Cache Miss"
    } else {
        ""
    };
    writeln!(
        w,
        "{mode},Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
         Server Compute Input,Server Compute Infer,Server Compute Output{cache_cols},Client Recv"
    )?;
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        points[a]
            .client
            .throughput
            .total_cmp(&points[b].client.throughput)
    });
    for i in order {
        let p = &points[i];
        let found = composing
            .get(i)
            .and_then(|list| list.iter().find(|c| c.model.name == model));
        let empty = ComposingStats::default();
        let c = found.unwrap_or(&empty);
        let top_count = p.server.as_ref().map_or(0, |s| s.model.success.count);
        let share = if top_count == 0 {
            0.0
        } else {
            c.model.success.count as f64 / top_count as f64
        };
        let [queue, cin, cinf, cout, hit, miss] = parts_us(c);
        let mut cells = vec![
            p.load.value_text(),
            fmt_g(p.client.throughput * share),
            "0".to_string(),
            overhead_us(c, cache).to_string(),
        ];
        let mut server = vec![queue, cin, cinf, cout];
        if cache {
            server.extend([hit, miss]);
        }
        cells.extend(server.iter().map(u64::to_string));
        cells.push("0".to_string());
        writeln!(w, "{}", cells.join(","))?;
    }
    Ok(())
}

/// Writes one CSV per composing model (the first level under the profiled model) next to
/// `csv` (see [`composing_csv_path`]); returns the paths written, in name order. The version
/// in a file name is the one reported at the first point. Nothing is written without points.
pub fn write_composing_csvs(
    csv: &Path,
    points: &[PointReport],
    composing: &[Vec<ComposingStats>],
) -> Result<Vec<PathBuf>> {
    if points.is_empty() {
        return Ok(Vec::new());
    }
    let mut models: Vec<(&str, &str)> = Vec::new();
    for c in composing.iter().flatten() {
        if !models.iter().any(|(name, _)| *name == c.model.name) {
            models.push((&c.model.name, &c.model.version));
        }
    }
    models.sort();
    let mut written = Vec::with_capacity(models.len());
    let mut stems = UniqueStems::default();
    for (name, version) in models {
        let path = prefixed(csv, &stems.claim(&format!("{name}_v{version}")));
        crate::report::write::write_atomic_with("-f", &path, |mut w| {
            write_composing_csv(&mut w, points, composing, name)
        })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::server_stats::{ModelStats, ServerStats, StatDuration};
    use crate::measure::stats::ClientStats;

    fn d(count: u64, us_each: u64) -> StatDuration {
        StatDuration {
            count,
            ns: count * us_each * 1000,
        }
    }

    /// `n` requests of 1000 µs: queue 100, compute 10 + 600 + 20 (overhead 270).
    fn leaf(name: &str, version: &str, n: u64) -> ComposingStats {
        ComposingStats {
            model: ModelStats {
                name: name.into(),
                version: version.into(),
                success: d(n, 1000),
                queue: d(n, 100),
                compute_input: d(n, 10),
                compute_infer: d(n, 600),
                compute_output: d(n, 20),
                cache_hit: d(n, 7),
                ..ModelStats::default()
            },
            composing: Vec::new(),
        }
    }

    fn point(c: u64, throughput: f64, top_count: u64, cache: bool) -> PointReport {
        PointReport {
            load: LoadValue::Concurrency(c),
            batch_size: 1,
            client: ClientStats {
                throughput,
                ..ClientStats::default()
            },
            server: Some(ServerStats {
                model: ModelStats {
                    success: d(top_count, 5000),
                    ..ModelStats::default()
                },
                cache_enabled: cache,
                composing: Vec::new(),
            }),
            metrics: None,
        }
    }

    fn render(points: &[PointReport], composing: &[Vec<ComposingStats>], model: &str) -> String {
        let mut out = Vec::new();
        write_composing_csv(&mut out, points, composing, model).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn columns_rows_and_throughput_share() {
        // Point c=2 is slower: it comes first. `net` ran twice per request at c=1.
        let points = [point(1, 300.0, 100, false), point(2, 150.0, 50, false)];
        let composing = vec![
            vec![leaf("net", "2", 200), leaf("tok", "1", 100)],
            vec![leaf("net", "2", 25), leaf("tok", "1", 50)],
        ];
        assert_eq!(
            render(&points, &composing, "net"),
            "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
             Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv\n\
             2,75,0,270,100,10,600,20,0\n\
             1,600,0,270,100,10,600,20,0\n"
        );
        // A point without the model: zeros. Cache on: two more columns, and the overhead
        // counts the cache time like the console does.
        let mut points = points;
        points[0].server.as_mut().unwrap().cache_enabled = true;
        let text = render(&points, &[vec![leaf("tok", "1", 100)], vec![]], "tok");
        let mut lines = text.lines();
        assert!(lines
            .next()
            .unwrap()
            .ends_with("Server Compute Output,Server Cache Hit,Server Cache Miss,Client Recv"));
        assert_eq!(lines.next(), Some("2,0,0,0,0,0,0,0,0,0,0"));
        // cache/compute = (630 + 7) x 100 / (100 + 100) = 318 µs; overhead 1000 - 100 - 318.
        assert_eq!(lines.next(), Some("1,300,0,582,100,10,600,20,7,0,0"));
        assert_eq!(render(&[], &[], "tok"), "");
    }

    #[test]
    fn nested_ensemble_sums_its_parts() {
        let mut mid = leaf("mid", "1", 100);
        mid.composing = vec![leaf("a", "1", 100), leaf("b", "1", 100)];
        let text = render(&[point(1, 10.0, 100, false)], &[vec![mid]], "mid");
        // queue 200, compute 20 + 1200 + 40: overhead 1000 - 200 - 1260 clamps to 0.
        assert!(text.ends_with("\n1,10,0,0,200,20,1200,40,0\n"), "{text}");
    }

    #[test]
    fn file_names_prefix_the_file_not_the_path() {
        let cases = [
            ("out/x.csv", "net", "2", "out/net_v2.x.csv"),
            ("x.csv", "tok", "1", "tok_v1.x.csv"),
            ("/tmp/a/b.csv", "m", "", "/tmp/a/m_v.b.csv"),
            ("out/x.csv", "../../etc/m", "1", "out/___.._etc_m_v1.x.csv"),
            ("out/x.csv", "/abs/m", "../v", "out/_abs_m_v.._v.x.csv"),
        ];
        for (csv, model, version, want) in cases {
            assert_eq!(
                composing_csv_path(Path::new(csv), model, version),
                PathBuf::from(want)
            );
        }
    }

    #[test]
    fn writes_one_file_per_composing_model() {
        let dir = std::env::temp_dir().join(format!("inferperf-srvseq-csv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("r.csv");
        // Names from the server: each lands in `dir`; a clash after cleaning gets a suffix.
        let hostile = vec![vec![
            leaf("../../x", "1", 100),
            leaf("/abs/x", "1", 100),
            leaf("a/b", "..", 100),
            leaf("a_b", "..", 100),
            leaf("esc\x1b[2J", "\x07", 100),
        ]];
        let points = [point(1, 300.0, 100, false)];
        let written = write_composing_csvs(&csv, &points, &hostile).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| {
                assert_eq!(p.parent(), Some(dir.as_path()), "{p:?}");
                p.file_name().unwrap().to_string_lossy().into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "___.._x_v1.r.csv",
                "_abs_x_v1.r.csv",
                "a_b_v...r.csv",
                "a_b_v..-2.r.csv",
                "esc_[2J_v_.r.csv"
            ]
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 5);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let composing = vec![vec![leaf("tok", "1", 100), leaf("net", "3", 100)]];
        let written = write_composing_csvs(&csv, &points, &composing).unwrap();
        assert_eq!(
            written,
            [dir.join("net_v3.r.csv"), dir.join("tok_v1.r.csv")]
        );
        let text = std::fs::read_to_string(&written[1]).unwrap();
        assert!(text.ends_with("\n1,300,0,270,100,10,600,20,0\n"), "{text}");
        assert!(write_composing_csvs(&csv, &[], &composing)
            .unwrap()
            .is_empty());
        let missing = dir.join("no/such/dir/r.csv");
        let err = write_composing_csvs(&missing, &points, &composing).unwrap_err();
        assert!(err.msg.starts_with("-f: cannot write "), "{}", err.msg);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
