#!/usr/bin/env python3
"""A minimal Python LLM streaming client, the way vLLM bench and AIPerf measure (aiohttp,
asyncio, one event loop): N concurrent streams against an OpenAI chat endpoint, per-event
timestamps, json.loads per event, TTFT and ITL per request. It is the baseline that
benches/llm_side_by_side.sh compares inferperf's client CPU per streamed token with.

usage: llm_aiohttp.py URL MODEL CONCURRENCY REQUESTS MAX_TOKENS
"""
import asyncio
import json
import sys
import time

import aiohttp


async def one(session, url, body, out):
    start = time.perf_counter_ns()
    stamps = []
    tokens = 0
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
        buf = b""
        async for data in r.content.iter_any():
            now = time.perf_counter_ns()
            buf += data
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        continue
                    msg = json.loads(payload)
                    choices = msg.get("choices") or []
                    text = choices[0].get("delta", {}).get("content") if choices else None
                    if text:
                        stamps.append(now)
                        tokens += len(text.split())
    out.append((start, stamps, tokens))


async def main():
    url, model, conc, total, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    body = json.dumps({"model": model, "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "hello " * 64}]})
    out = []
    left = [total]
    conn = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(connector=conn) as session:
        async def worker():
            while left[0] > 0:
                left[0] -= 1
                await one(session, url, body, out)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        wall = time.perf_counter() - t0
    ttft = sorted((s[0] - st) / 1e6 for st, s, _ in out if s)
    itl = sorted(((s[-1] - s[0]) / (len(s) - 1)) / 1e6 for _, s, _ in out if len(s) > 1)
    tokens = sum(t for _, _, t in out)
    cpu = time.process_time()
    pct = lambda v, p: v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float("nan")
    print(f"requests={len(out)} tokens={tokens} wall_s={wall:.2f} cpu_s={cpu:.2f} "
          f"cpu_us_per_token={cpu / max(tokens, 1) * 1e6:.2f} "
          f"ttft_p50_ms={pct(ttft, 50):.2f} ttft_p99_ms={pct(ttft, 99):.2f} "
          f"itl_p50_ms={pct(itl, 50):.3f} itl_p99_ms={pct(itl, 99):.3f}")


asyncio.run(main())
