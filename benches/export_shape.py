#!/usr/bin/env python3
"""Structural difference of two profile exports (perf_analyzer's first, inferperf's second).

    python3 benches/export_shape.py pa.json inferperf.json

Prints the field paths (with JSON types) that only one of them has, over the top level, the
experiments and every request, e.g. `-requests[].sequence_id:int` (only perf_analyzer writes
it) or `+requests[].intended_timestamp:int` (only inferperf). Prints `same` when they agree. Values
are not compared: the two tools send different data at different times.
"""
import json
import sys


def kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "obj"
    return "null"


def walk(v, path, out):
    out.add(f"{path}:{kind(v)}")
    if isinstance(v, dict):
        for k, x in v.items():
            # Tensor names are data, not fields: keep one level under inputs and outputs.
            walk(x, f"{path}.{k}", out)
    elif isinstance(v, list):
        for x in v[:200]:
            walk(x, f"{path}[]", out)


def shape(doc):
    out = set()
    walk(doc, "", out)
    return out


def main():
    a, b = (shape(json.load(open(p))) for p in sys.argv[1:3])
    diff = sorted("-" + p for p in a - b) + sorted("+" + p for p in b - a)
    print(" ".join(diff) if diff else "same")


if __name__ == "__main__":
    main()
