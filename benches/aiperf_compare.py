"""Compares two profile_export_aiperf.json files key by key: AIPerf's and inferperf's.

    python3 benches/aiperf_compare.py AIPERF.json INFERPERF.json [STAT [AIPERF_LOG INFERPERF_LOG]]

Prints a markdown table with one row per metric key of either file (STAT, default `avg`,
or the plain value of a key that has no statistics), the relative difference, and the keys
only one file has. With the reference server's token logs of both runs (its own write time
of every chunk), prints the inter-token latency the server wrote at, beside each client's.
Exit status 0; the table is the result.
"""
import json
import sys

SKIP = {"schema_version", "aiperf_version", "benchmark_id", "input_config", "run_info",
        "telemetry_data", "start_time", "end_time", "error_summary"}


def value(entry, stat):
    if isinstance(entry, dict):
        if stat in entry:
            return entry[stat], entry.get("unit", "")
        if "avg" in entry:
            return entry["avg"], entry.get("unit", "")
        return None, entry.get("unit", "")
    return entry, ""


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return f"{v:.6g}"
    return str(v)


def main():
    theirs = json.load(open(sys.argv[1]))
    ours = json.load(open(sys.argv[2]))
    stat = sys.argv[3] if len(sys.argv) > 3 else "avg"
    keys = [k for k in theirs if k not in SKIP] + [k for k in ours if k not in theirs and k not in SKIP]
    print(f"| key | unit | AIPerf {stat} | inferperf {stat} | difference |")
    print("|---|---|---|---|---|")
    for k in keys:
        a, unit_a = value(theirs.get(k), stat) if k in theirs else (None, "")
        b, unit_b = value(ours.get(k), stat) if k in ours else (None, "")
        if k not in ours:
            diff = "missing in inferperf"
        elif k not in theirs:
            diff = "only inferperf"
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            diff = "0 %" if a == b else (f"{100 * (b - a) / abs(a):+.1f} %" if a else f"{b - a:+.3g}")
        else:
            diff = "same" if a == b else "differs"
        unit = unit_a or unit_b
        if unit_a and unit_b and unit_a != unit_b:
            unit = f"{unit_a} / {unit_b}"
        print(f"| {k} | {unit} | {fmt(a)} | {fmt(b)} | {diff} |")
    if len(sys.argv) > 5:
        print()
        itl_lines(theirs, ours, sys.argv[4:6])


def server_itl(path):
    """Mean over requests of (last chunk write - first chunk write) / (chunks - 1), in ms."""
    written = json.load(open(path))["written"]
    per = [(w[-1] - w[0]) / (len(w) - 1) / 1e6 for w in written if len(w) > 1]
    return sum(per) / len(per) if per else float("nan")


def itl_lines(theirs, ours, logs):
    for name, export, log in (("AIPerf", theirs, logs[0]), ("inferperf", ours, logs[1])):
        server = server_itl(log)
        client = export.get("inter_token_latency", {}).get("avg", float("nan"))
        print(f"{name}: inter_token_latency {client:.3f} ms, the server wrote at {server:.3f} ms "
              f"(client - server {client - server:+.3f} ms)")


if __name__ == "__main__":
    main()
