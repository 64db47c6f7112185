#!/usr/bin/env python3
"""Idle-connection flood and slow bodies against `inferperf serve` (loopback only, bounded).

Usage: python3 benches/idle_flood.py INFERPERF [IDLE] [MAX_CONNECTIONS] [SLOW_BODIES]
       [SERVE FLAGS...]

1. Starts `INFERPERF serve --port 0 --max-connections MAX_CONNECTIONS` (1000 by default) with
   the extra serve flags (e.g. `--request-read-timeout 10`).
2. Opens IDLE connections (2400 by default): one in four to the HTTP port sending nothing, the
   others to the gRPC port sending nothing, half an HTTP/2 preface, or a preface and SETTINGS;
   prints the server's RSS.
3. Sends a real HTTP request (raw socket) and a real gRPC run (`INFERPERF -i grpc
   --request-count 20`) while the idle connections are open.
4. Opens SLOW_BODIES (100 by default) HTTP requests announcing a 4 MiB body, sends all of it
   but the last 64 bytes, then drips those at one byte per second; prints the RSS while they
   are held and after 15 s of dripping.
Every wait is bounded; the server is stopped (by PID) at the end.
"""

import re
import socket
import subprocess
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
BODY = 4 << 20


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


def start_server(inferperf, max_connections, extra):
    cmd = [inferperf, "serve", "--port", "0", "--max-connections", str(max_connections),
           "--duration", "300"] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+) and gRPC 127\.0\.0\.1:(\d+)", line)
    if not found:
        proc.kill()
        sys.exit(f"unexpected startup line: {line!r}")
    return proc, int(found.group(1)), int(found.group(2))


def open_idle(n, http_port, grpc_port):
    conns = []
    for i in range(n):
        kind = i % 4
        s = socket.create_connection(("127.0.0.1", http_port if kind == 0 else grpc_port), 5)
        if kind == 2:
            s.sendall(PREFACE[:12])
        elif kind == 3:
            s.sendall(PREFACE + SETTINGS)
        conns.append(s)
    return conns


def still_open(conns):
    n = 0
    for s in conns:
        s.setblocking(False)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def http_ready(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 5) as s:
            s.settimeout(5)
            s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            return s.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        return f"failed: {e}"


def grpc_run(inferperf, port):
    cmd = ["timeout", "30", inferperf, "-m", "simple", "-u", f"127.0.0.1:{port}", "-i", "grpc",
           "--request-count", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    tput = re.search(r"Throughput: ([0-9.]+ infer/sec)", done.stdout)
    return f"exit {done.returncode}" + (f", {tput.group(1)}" if tput else "")


def slow_bodies(n, port):
    head = (f"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
            f"Content-Length: {BODY}\r\n\r\n").encode()
    chunk = b"x" * (1 << 20)
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), 5)
        s.sendall(head)
        left = BODY - 64
        while left:
            left -= s.send(chunk[:min(left, len(chunk))])
        conns.append(s)
    return conns


def drip(conns, seconds):
    for _ in range(seconds):
        for s in conns:
            try:
                s.send(b"x")
            except OSError:
                pass
        time.sleep(1)


def main():
    inferperf = sys.argv[1]
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 2400
    max_connections = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    slow = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    extra = sys.argv[5:]
    proc, http_port, grpc_port = start_server(inferperf, max_connections, extra)
    try:
        time.sleep(0.5)
        print(f"server RSS at start: {rss_mb(proc.pid):.1f} MB")
        t0 = time.time()
        conns = open_idle(idle, http_port, grpc_port)
        time.sleep(1)
        print(f"{idle} idle connections opened in {time.time() - t0:.1f} s; "
              f"server RSS {rss_mb(proc.pid):.1f} MB")
        print(f"real HTTP request: {http_ready(http_port)}")
        print(f"real gRPC run: {grpc_run(inferperf, grpc_port)}")
        print(f"idle connections still open: {still_open(conns)} of {idle}; "
              f"server RSS {rss_mb(proc.pid):.1f} MB")
        for s in conns:
            s.close()
        time.sleep(1)
        print(f"after closing them: server RSS {rss_mb(proc.pid):.1f} MB")
        bodies = slow_bodies(slow, http_port)
        drip(bodies, 3)
        print(f"{slow} slow 4 MiB bodies held: server RSS {rss_mb(proc.pid):.1f} MB")
        drip(bodies, 12)
        print(f"15 s of dripping: {still_open(bodies)} of {slow} still open; "
              f"server RSS {rss_mb(proc.pid):.1f} MB")
        for s in bodies:
            s.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
