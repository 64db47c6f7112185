#!/usr/bin/env python3
"""Compares a client's timing with a loopback packet capture (Python standard library only).

    capture_proof.py requests --pcap F --port P --proto http|grpc --export E [--json]
    capture_proof.py chunks   --pcap F --port P --export E [--json]

Reads a pcap file (nanosecond or microsecond stamps; Ethernet, Linux cooked v1/v2, BSD
loopback or raw IP link types), keeps the TCP segments to or from the server port P and
reassembles both directions of every connection by sequence number.

`requests`: each request is timed on the wire from the capture time of the segment holding its
first byte to that of the segment holding its response's last byte. HTTP/1.1: requests whose
path holds `/infer`, paired with responses in order per connection (keep-alive). gRPC
(cleartext HTTP/2): streams by id, from the first HEADERS/DATA frame the client sends to the
frame that ends the stream on the server's side. E is a perf_analyzer-format profile export
(`experiments[].requests[]` with `timestamp` and `response_timestamps`, ns since the epoch):
each export entry is paired with a wire request whose interval it contains (within --slack-us),
wire requests taken in send order and each given the unused entry that ended first. The error
of an entry is its latency (last response time minus request time) minus the wire latency.

`chunks`: each streamed (SSE) response's events are located in the reassembled server stream
(HTTP/1.1, chunked or not) and each event is timed by the capture time of the segment that
holds its last byte. E is `inferperf profile`'s raw `profile_export.json`; export requests are
paired with wire requests by their JSON body (same bodies, and bodies not found on the wire
against the wire requests left: in send order), then each exported
chunk with the wire event that carries the same data. The error of a chunk is its time in the
export minus its wire time.

Prints one line of counts and error percentiles (µs), for `requests` also the two ends of the
error apart (send_*: first wire byte minus the request time; recv_*: response time minus the
last wire byte); --json prints one JSON object instead.
Exit status 2 for unusable input (a file that is not a pcap, an export without requests).
"""

import argparse
import bisect
import json
import struct
import sys

NS = 1_000_000_000


class Unusable(Exception):
    """Input the comparison cannot use; the message names the file and what is wrong."""


# ---------------------------------------------------------------------------------------------
# pcap reading and TCP reassembly


def read_pcap(path, port):
    """Yields (time_ns, src, sport, dst, dport, seq, flags, payload) for TCP segments on `port`."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise Unusable(f"{path}: not a pcap file (shorter than its 24-byte header)")
    magic = data[:4]
    table = {
        b"\xd4\xc3\xb2\xa1": ("<", 1000),
        b"\xa1\xb2\xc3\xd4": (">", 1000),
        b"\x4d\x3c\xb2\xa1": ("<", 1),
        b"\xa1\xb2\x3c\x4d": (">", 1),
    }
    if magic not in table:
        raise Unusable(f"{path}: not a pcap file (magic {magic.hex()}; pcapng is not read)")
    endian, frac_ns = table[magic]
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    rec = struct.Struct(endian + "IIII")
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, pos)
        pos += 16
        pkt = data[pos : pos + incl]
        pos += incl
        t = sec * NS + frac * frac_ns
        ip, proto = link_payload(pkt, linktype)
        if ip is None:
            continue
        seg = tcp_of(ip, proto)
        if seg is None:
            continue
        src, sport, dst, dport, seq, flags, payload = seg
        if sport == port or dport == port:
            yield t, src, sport, dst, dport, seq, flags, payload


def link_payload(pkt, linktype):
    """The IP packet in a link-layer frame and its ethertype-like version (4 or 6)."""
    if linktype == 1:  # Ethernet
        off, etype = 14, pkt[12:14]
        while etype == b"\x81\x00" and len(pkt) >= off + 4:
            etype, off = pkt[off + 2 : off + 4], off + 4
    elif linktype == 113:  # Linux cooked v1
        off, etype = 16, pkt[14:16]
    elif linktype == 276:  # Linux cooked v2
        off, etype = 20, pkt[0:2]
    elif linktype == 0:  # BSD loopback: a 4-byte address family
        off = 4
        etype = b"\x08\x00" if pkt[:4] in (b"\x02\x00\x00\x00", b"\x00\x00\x00\x02") else b"\x86\xdd"
    elif linktype in (12, 101, 228, 229):  # raw IP
        off = 0
        etype = b"\x08\x00" if pkt[:1] and pkt[0] >> 4 == 4 else b"\x86\xdd"
    else:
        raise Unusable(f"link type {linktype} is not read (Ethernet, cooked or raw IP only)")
    if etype == b"\x08\x00":
        return pkt[off:], 4
    if etype == b"\x86\xdd":
        return pkt[off:], 6
    return None, None


def tcp_of(ip, version):
    if version == 4:
        if len(ip) < 20 or ip[9] != 6:
            return None
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        src, dst = ip[12:16], ip[16:20]
        tcp = ip[ihl:total] if total else ip[ihl:]
    else:
        if len(ip) < 40 or ip[6] != 6:
            return None
        plen = struct.unpack_from(">H", ip, 4)[0]
        src, dst = ip[8:24], ip[24:40]
        tcp = ip[40 : 40 + plen]
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
    doff = (tcp[12] >> 4) * 4
    flags = tcp[13]
    return src, sport, dst, dport, seq, flags, tcp[doff:]


SYN, FIN, RST = 0x02, 0x01, 0x04


class Direction:
    """One direction of a connection: its bytes and the capture time of every byte."""

    def __init__(self):
        self.isn = None
        self.first_seq = None
        self.segs = []  # (relative offset, payload, time)

    def add(self, t, seq, flags, payload):
        if flags & SYN:
            self.isn = seq
        if payload:
            if self.first_seq is None:
                self.first_seq = seq
            self.segs.append((seq, payload, t))

    def finish(self):
        """Builds `data`, the piece starts/ends/times, and the count of missing bytes."""
        base = (self.isn + 1) if self.isn is not None else self.first_seq
        pieces = []
        for seq, payload, t in self.segs:
            pieces.append(((seq - base) % (1 << 32), payload, t))
        pieces.sort(key=lambda p: (p[0], p[2]))
        out = bytearray()
        self.starts, self.ends, self.times = [], [], []
        self.gap_bytes = 0
        for off, payload, t in pieces:
            end = off + len(payload)
            have = len(out)
            if end <= have:
                continue  # a retransmission of bytes already placed
            if off > have:
                self.gap_bytes += off - have
                out.extend(b"\0" * (off - have))
                have = off
            out.extend(payload[have - off :])
            self.starts.append(have)
            self.ends.append(end)
            self.times.append(t)
        self.data = bytes(out)
        self.segs = None

    def time_of(self, offset):
        """Capture time of the segment that brought byte `offset`."""
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0 or offset >= self.ends[i]:
            raise Unusable(f"byte {offset} of a stream was never captured")
        return self.times[i]


def connections(pcap, port):
    """{(client addr, client port): (client->server Direction, server->client Direction)}."""
    conns = {}
    for t, src, sport, dst, dport, seq, flags, payload in read_pcap(pcap, port):
        if dport == port:
            key, side = (src, sport), 0
        else:
            key, side = (dst, dport), 1
        if flags & SYN and not flags & 0x10 and key in conns and conns[key][0].segs:
            # A new connection reusing the client port: keep the old one under another key.
            conns[(key, len(conns))] = conns.pop(key)
        pair = conns.setdefault(key, (Direction(), Direction()))
        pair[side].add(t, seq, flags, payload)
    for c2s, s2c in conns.values():
        c2s.finish()
        s2c.finish()
    return conns


# ---------------------------------------------------------------------------------------------
# HTTP/1.1 and HTTP/2 message boundaries


def http_messages(data, is_request):
    """[(start offset, end offset, start line, body bytes, body pieces)] of the HTTP/1.1
    messages in `data`. Body pieces: (body offset, stream offset, length) for chunked bodies,
    so a body byte can be traced to its stream offset."""
    msgs = []
    pos = 0
    while pos < len(data):
        he = data.find(b"\r\n\r\n", pos)
        if he < 0:
            break
        head = data[pos:he].decode("latin-1").split("\r\n")
        start_line = head[0]
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        body_start = he + 4
        body = b""
        pieces = []
        if "chunked" in headers.get("transfer-encoding", "").lower():
            p = body_start
            parts = []
            decoded = 0
            while True:
                le = data.find(b"\r\n", p)
                if le < 0:
                    p = len(data)
                    break
                size = int(data[p:le].split(b";")[0].strip() or b"0", 16)
                p = le + 2
                if size == 0:
                    te = data.find(b"\r\n\r\n", p - 2)
                    p = len(data) if te < 0 else te + 4
                    break
                parts.append(data[p : p + size])
                pieces.append((decoded, p, size))
                decoded += size
                p += size + 2
            body = b"".join(parts)
            end = p
        elif "content-length" in headers:
            n = int(headers["content-length"])
            body = data[body_start : body_start + n]
            pieces.append((0, body_start, len(body)))
            end = body_start + n
        elif is_request or start_line.split(" ")[1:2] in (["204"], ["304"]):
            end = body_start
        else:
            body = data[body_start:]
            pieces.append((0, body_start, len(body)))
            end = len(data)
        if not is_request and start_line.split(" ")[1:2] and start_line.split(" ")[1].startswith("1"):
            pos = body_start  # an interim 1xx answer
            continue
        msgs.append((pos, min(end, len(data)), start_line, body, pieces))
        pos = end
    return msgs


def body_to_stream(pieces, body_off):
    for dec, raw, n in reversed(pieces):
        if dec <= body_off < dec + n:
            return raw + body_off - dec
    raise Unusable(f"body byte {body_off} is outside the captured message")


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frames(data):
    pos = len(PREFACE) if data.startswith(PREFACE) else 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        ftype, flags = data[pos + 3], data[pos + 4]
        sid = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
        end = pos + 9 + length
        if end > len(data):
            break
        yield pos, end, ftype, flags, sid
        pos = end


def wire_requests(conns, proto):
    """[(first request byte time, last response byte time)] of every complete exchange."""
    out = []
    for c2s, s2c in conns.values():
        if proto == "http":
            reqs = http_messages(c2s.data, True)
            resps = http_messages(s2c.data, False)
            for req, resp in zip(reqs, resps):
                if "/infer" not in req[2]:
                    continue
                out.append((c2s.time_of(req[0]), s2c.time_of(resp[1] - 1)))
        else:
            first = {}
            for start, _end, ftype, _flags, sid in h2_frames(c2s.data):
                if ftype in (0, 1) and sid and sid not in first:
                    first[sid] = start
            done = {}
            pending_end = set()
            for _start, end, ftype, flags, sid in h2_frames(s2c.data):
                if not sid or sid in done:
                    continue
                if ftype == 3 or (ftype == 0 and flags & 1):
                    done[sid] = end
                elif ftype == 1 and flags & 1:
                    if flags & 4:
                        done[sid] = end
                    else:
                        pending_end.add(sid)
                elif ftype == 9 and sid in pending_end and flags & 4:
                    done[sid] = end
            for sid, start in first.items():
                if sid in done:
                    out.append((c2s.time_of(start), s2c.time_of(done[sid] - 1)))
    out.sort()
    return out


# ---------------------------------------------------------------------------------------------
# Export reading and matching


def export_requests(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise Unusable(f"{path}: {e}")
    reqs = [r for e in doc.get("experiments", []) for r in e.get("requests", [])]
    if not reqs:
        raise Unusable(f"{path}: no requests under experiments[].requests")
    return reqs


def match_requests(wire, entries, slack_ns):
    """Pairs export (start, end) entries with wire (t0, t1) exchanges; returns the
    (entry, wire) index pairs. Wire exchanges in send order each take, among the unused
    entries that contain them (start <= t0 + slack, end >= t1 - slack), the one that ended
    first."""
    order = sorted(range(len(entries)), key=lambda i: entries[i][0])
    active = []  # sorted (end, index) of entries started by now and not yet used
    k = 0
    pairs = []
    for w, (t0, t1) in enumerate(wire):
        while k < len(order) and entries[order[k]][0] <= t0 + slack_ns:
            i = order[k]
            bisect.insort(active, (entries[i][1], i))
            k += 1
        j = bisect.bisect_left(active, (t1 - slack_ns, -1))
        if j < len(active):
            _, i = active.pop(j)
            pairs.append((i, w))
    return pairs


def percentiles(values_ns):
    if not values_ns:
        return {}
    v = sorted(values_ns)

    def rank(p):
        return v[min(len(v) - 1, max(0, -(-p * len(v) // 100) - 1))]

    return {
        "p50_us": rank(50) / 1000,
        "p99_us": rank(99) / 1000,
        "max_us": v[-1] / 1000,
        "min_us": v[0] / 1000,
        "mean_us": sum(v) / len(v) / 1000,
    }


def cmd_requests(args):
    conns = connections(args.pcap, args.port)
    wire = wire_requests(conns, args.proto)
    raw = export_requests(args.export)
    entries = []
    for r in raw:
        stamps = r.get("response_timestamps") or []
        if stamps:
            entries.append((int(r["timestamp"]), int(stamps[-1])))
    pairs = match_requests(wire, entries, int(args.slack_us * 1000))
    errors = [
        (entries[i][1] - entries[i][0]) - (wire[w][1] - wire[w][0]) for i, w in pairs
    ]
    out = {
        "connections": len(conns),
        "wire_requests": len(wire),
        "export_requests": len(raw),
        "export_answered": len(entries),
        "matched": len(pairs),
        "unmatched_export": len(entries) - len(pairs),
        "missing_bytes": sum(a.gap_bytes + b.gap_bytes for a, b in conns.values()),
        "wire_p50_us": percentiles([t1 - t0 for t0, t1 in wire]).get("p50_us"),
    }
    out.update(percentiles(errors))
    # The two ends of the error: request time before the first wire byte, and response time
    # after the last.
    for name, parts in (
        ("send", [wire[w][0] - entries[i][0] for i, w in pairs]),
        ("recv", [entries[i][1] - wire[w][1] for i, w in pairs]),
    ):
        for k, v in percentiles(parts).items():
            if k in ("p50_us", "p99_us", "max_us"):
                out[f"{name}_{k}"] = v
    return out


def sse_events(body):
    """[(data text, offset of the event's last byte in body)] of an SSE body."""
    events = []
    pos = 0
    while pos < len(body):
        a = body.find(b"\n\n", pos)
        b = body.find(b"\r\n\r\n", pos)
        if a < 0 and b < 0:
            break
        if b >= 0 and (a < 0 or b < a):
            end, sep = b, 4
        else:
            end, sep = a, 2
        block = body[pos:end].replace(b"\r\n", b"\n")
        data = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if data:
            events.append((b"\n".join(data).decode("utf-8", "replace"), end + sep - 1))
        pos = end + sep
    return events


def canonical(body):
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return body
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def cmd_chunks(args):
    conns = connections(args.pcap, args.port)
    wire = []  # (t0, canonical body, [(data, time)])
    for c2s, s2c in conns.values():
        reqs = http_messages(c2s.data, True)
        resps = http_messages(s2c.data, False)
        for req, resp in zip(reqs, resps):
            if not req[2].startswith("POST"):
                continue
            events = [
                (text, s2c.time_of(body_to_stream(resp[4], off))) for text, off in sse_events(resp[3])
            ]
            wire.append((c2s.time_of(req[0]), canonical(req[3].decode("utf-8", "replace")), events))
    raw = export_requests(args.export)
    by_body = {}
    for w in sorted(range(len(wire)), key=lambda i: wire[i][0]):
        by_body.setdefault(wire[w][1], []).append(w)
    order = sorted(range(len(raw)), key=lambda i: int(raw[i]["timestamp"]))
    pairs, left = [], []
    for i in order:
        key = canonical(raw[i].get("request_inputs", {}).get("payload", ""))
        queue = by_body.get(key)
        if queue:
            pairs.append((i, queue.pop(0)))
        else:
            left.append(i)
    # Requests whose body is not on the wire as exported: paired in send order with the wire
    # requests no body matched.
    spare = sorted((w for q in by_body.values() for w in q), key=lambda w: wire[w][0])
    by_time = list(zip(left, spare))
    pairs.extend(by_time)
    errors, first_errors = [], []
    chunks = unmatched_chunks = 0
    for i, w in pairs:
        r = raw[i]
        events = wire[w][2]
        j = 0
        for k, (at, resp) in enumerate(zip(r.get("response_timestamps", []), r.get("response_outputs", []))):
            text = resp.get("response", "")
            text = text[len("data: ") :] if text.startswith("data: ") else text
            text = text.rstrip("\n")
            while j < len(events) and events[j][0] != text:
                j += 1
            chunks += 1
            if j == len(events):
                unmatched_chunks += 1
                continue
            err = int(at) - events[j][1]
            errors.append(err)
            if k == 0:
                first_errors.append(err)
            j += 1
    out = {
        "connections": len(conns),
        "wire_requests": len(wire),
        "export_requests": len(raw),
        "matched": len(pairs),
        "matched_by_time": len(by_time),
        "unmatched_export": len(raw) - len(pairs),
        "chunks": chunks,
        "unmatched_chunks": unmatched_chunks,
        "missing_bytes": sum(a.gap_bytes + b.gap_bytes for a, b in conns.values()),
    }
    out.update(percentiles(errors))
    first = percentiles(first_errors)
    out.update({"first_" + k: v for k, v in first.items()})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("requests", "chunks"):
        p = sub.add_parser(name)
        p.add_argument("--pcap", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--export", required=True)
        p.add_argument("--json", action="store_true")
        if name == "requests":
            p.add_argument("--proto", choices=("http", "grpc"), default="http")
            p.add_argument("--slack-us", type=float, default=50.0)
    args = ap.parse_args()
    try:
        out = cmd_requests(args) if args.cmd == "requests" else cmd_chunks(args)
    except Unusable as e:
        print(f"capture_proof: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
    else:
        print(" ".join(f"{k}={round(v, 1) if isinstance(v, float) else v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
