#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load through pacerd for scripts/bench.sh: N keep-alive connections sending the
same 1 KiB POST /v1/chat/completions as chat.lua, either to pacerd's port in clear
(--mode base, the base-URL way) or inside a CONNECT tunnel that pacerd terminates
(--mode tunnel: CONNECT api.openai.com:443, TLS with pacerd's CA, then the
requests). wrk cannot send CONNECT, so both rows use this client, and the
comparison that holds is pacerd's CPU per request (measured by bench.sh from
/proc), not req/s: this client, on one core, is the slower side.

Prints one JSON line: {"requests", "duration_us", "errors"}."""
import argparse
import asyncio
import json
import ssl
import time

TEXT = ("Summarise the following text in one sentence. Lorem ipsum dolor sit amet, "
        "consectetur adipiscing elit. " * 10)[:870]
BODY = ('{"model":"gpt-4o-mini","max_tokens":64,"temperature":0,"messages":['
        '{"role":"system","content":"You are a terse assistant."},'
        '{"role":"user","content":"' + TEXT + '"}]}').encode()
HOST = "api.openai.com"


def request_bytes():
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {HOST}\r\n"
            "Content-Type: application/json\r\n"
            "Authorization: Bearer sk-bench-0123456789abcdef0123456789abcdef\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY


async def one_conn(a, ctx, stop, counts):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", a.port)
        if a.mode == "tunnel":
            writer.write(f"CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head[:80])
            await writer.start_tls(ctx, server_hostname=HOST)
        req = request_bytes()
        while time.monotonic() < stop:
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":", 1)[1])
            if not head.startswith(b"HTTP/1.1 200"):
                counts["errors"] += 1
            await reader.readexactly(n)
            counts["requests"] += 1
        writer.close()
    except Exception:  # noqa: BLE001 - a failed connection is counted, the run goes on
        counts["errors"] += 1


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["base", "tunnel"], required=True)
    ap.add_argument("--ca")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    ctx = ssl.create_default_context(cafile=a.ca) if a.mode == "tunnel" else None
    counts = {"requests": 0, "errors": 0}
    t0 = time.monotonic()
    stop = t0 + a.seconds
    await asyncio.gather(*(one_conn(a, ctx, stop, counts) for _ in range(a.conns)))
    dur = time.monotonic() - t0
    print(json.dumps({"requests": counts["requests"], "duration_us": int(dur * 1e6),
                      "errors": counts["errors"]}))


asyncio.run(main())
