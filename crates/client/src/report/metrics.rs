//! `--collect-metrics` in the reports: the console's "Server
//! Prometheus Metrics" block and the four verbose-CSV GPU columns, in perf_analyzer's format,
//! plus inferperf's client CPU line and, with `--csv-extra-columns`, its CSV column.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::fmt::{escape_control, fmt_g};
use crate::measure::metrics::{GpuMetrics, PointMetrics};

/// perf_analyzer prints per-GPU lines only up to this many GPUs.
const MAX_GPUS_ON_CONSOLE: usize = 16;

/// perf_analyzer's GPU columns, after `response wait` in `--verbose-csv` files.
pub const GPU_CSV_COLUMNS: [&str; 4] = [
    "Avg GPU Utilization",
    "Avg GPU Power Usage",
    "Max GPU Memory Usage",
    "Total GPU Memory",
];

/// inferperf only: its CPU use, the last `--csv-extra-columns` column.
pub const CLIENT_CPU_CSV_COLUMN: &str = "Client CPU Usage (% of one core)";

/// The console block that follows a point's "Server:" block.
pub fn console_block(m: &PointMetrics) -> String {
    let mut out = String::from("  Server Prometheus Metrics: \n");
    let g = &m.gpu;
    let widest = [
        g.utilization.len(),
        g.power_watts.len(),
        g.memory_used_bytes.len(),
        g.memory_total_bytes.len(),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    if widest > MAX_GPUS_ON_CONSOLE {
        out.push_str(
            "Too many GPUs on system to print out individual Prometheus metrics, use the CSV \
             output feature to see metrics.\n",
        );
    } else {
        // Utilization is a fraction; the console shows it in %.
        gpu_lines(&mut out, "Avg GPU Utilization", &g.utilization, |v| {
            format!("{}%", fmt_g(v * 100.0))
        });
        gpu_lines(&mut out, "Avg GPU Power Usage", &g.power_watts, |v| {
            format!("{} watts", fmt_g(*v))
        });
        gpu_lines(
            &mut out,
            "Max GPU Memory Usage",
            &g.memory_used_bytes,
            |v| format!("{v} bytes"),
        );
        gpu_lines(&mut out, "Total GPU Memory", &g.memory_total_bytes, |v| {
            format!("{v} bytes")
        });
    }
    if let Some(pct) = m.client_cpu_pct {
        let _ = writeln!(
            out,
            "  Client CPU usage (inferperf): {}% of one core",
            fmt_g(pct)
        );
    }
    out
}

fn gpu_lines<T>(
    out: &mut String,
    title: &str,
    per_gpu: &BTreeMap<String, T>,
    show: impl Fn(&T) -> String,
) {
    let _ = writeln!(out, "    {title}:");
    for (uuid, v) in per_gpu {
        let _ = writeln!(out, "      {} : {}", escape_control(uuid), show(v));
    }
}

/// The four GPU cells, each `uuid:value;` per GPU (utilization as a 0..1 fraction), empty
/// when the metric was never seen.
pub fn gpu_csv_cells(g: &GpuMetrics) -> [String; 4] {
    [
        cell(&g.utilization, |v| fmt_g(*v)),
        cell(&g.power_watts, |v| fmt_g(*v)),
        cell(&g.memory_used_bytes, u64::to_string),
        cell(&g.memory_total_bytes, u64::to_string),
    ]
}

fn cell<T>(per_gpu: &BTreeMap<String, T>, show: impl Fn(&T) -> String) -> String {
    per_gpu
        .iter()
        .map(|(uuid, v)| format!("{uuid}:{};", show(v)))
        .collect()
}

/// The client CPU cell: % of one core, empty when it was not measured.
pub fn client_cpu_cell(m: &PointMetrics) -> String {
    m.client_cpu_pct.map(fmt_g).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(gpus: usize) -> PointMetrics {
        let mut g = GpuMetrics::default();
        for i in 0..gpus {
            let uuid = format!("GPU-{i:02}");
            g.utilization.insert(uuid.clone(), 0.875);
            g.power_watts.insert(uuid.clone(), 250.3);
            g.memory_used_bytes.insert(uuid.clone(), 12_345_678);
            g.memory_total_bytes.insert(uuid, 85_899_345_920);
        }
        PointMetrics {
            gpu: g,
            client_cpu_pct: Some(37.5),
        }
    }

    #[test]
    fn console_block_in_perf_analyzer_format() {
        let want = "  Server Prometheus Metrics: \n\
                    \x20   Avg GPU Utilization:\n\
                    \x20     GPU-00 : 87.5%\n\
                    \x20     GPU-01 : 87.5%\n\
                    \x20   Avg GPU Power Usage:\n\
                    \x20     GPU-00 : 250.3 watts\n\
                    \x20     GPU-01 : 250.3 watts\n\
                    \x20   Max GPU Memory Usage:\n\
                    \x20     GPU-00 : 12345678 bytes\n\
                    \x20     GPU-01 : 12345678 bytes\n\
                    \x20   Total GPU Memory:\n\
                    \x20     GPU-00 : 85899345920 bytes\n\
                    \x20     GPU-01 : 85899345920 bytes\n\
                    \x20 Client CPU usage (inferperf): 37.5% of one core\n";
        assert_eq!(console_block(&metrics(2)), want);
    }

    #[test]
    fn console_block_without_gpus_or_cpu() {
        let m = PointMetrics::default();
        assert_eq!(
            console_block(&m),
            "  Server Prometheus Metrics: \n    Avg GPU Utilization:\n    Avg GPU Power \
             Usage:\n    Max GPU Memory Usage:\n    Total GPU Memory:\n"
        );
    }

    #[test]
    fn more_than_sixteen_gpus_are_not_listed() {
        let text = console_block(&metrics(17));
        assert!(text.contains("Too many GPUs on system"), "{text}");
        assert!(!text.contains("GPU-00"), "{text}");
        assert!(console_block(&metrics(16)).contains("GPU-15 : 87.5%"));
    }

    #[test]
    fn csv_cells() {
        let m = metrics(2);
        assert_eq!(
            gpu_csv_cells(&m.gpu),
            [
                "GPU-00:0.875;GPU-01:0.875;",
                "GPU-00:250.3;GPU-01:250.3;",
                "GPU-00:12345678;GPU-01:12345678;",
                "GPU-00:85899345920;GPU-01:85899345920;",
            ]
        );
        assert_eq!(gpu_csv_cells(&GpuMetrics::default()), ["", "", "", ""]);
        assert_eq!(client_cpu_cell(&m), "37.5");
        assert_eq!(client_cpu_cell(&PointMetrics::default()), "");
    }
}
