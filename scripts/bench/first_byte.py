#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time to first byte of streams, direct and through proxies, for scripts/bench.sh
and tests/integration/cases/first_byte.mjs.

Streaming chat completions from pacerd-mock (x-mock-chunks, x-mock-chunk-ms), each
on a connection of its own ("connection: close": the stream ends with the
connection), --streams of them, --concurrency at a time (a new one starts as one
ends), all from one thread on one selector: nothing starts up between two
requests, and the client costs every path the same. The first byte is the first
byte of the response (its status line), timed from just before connect().

--path NAME=PORT, repeated: the first is the reference (direct: the mock itself).
First one warm-up round per path (its lane in a proxy is then warm, its provider
heard from, its upstream connections open), then --rounds rounds, each going
through the paths in turn, so that every path sees the same machine. Every round
uses the warm-up's key (--fresh: a key of its own per round, a new lane each time;
--no-warm-up: no warm-up round). Every stream carries an x-request-id of its own
(fb-NAME-ROUND-I), so that a proxy's debug log can be read beside the figures.
Prints one JSON object:

  concurrency, streams, rounds, reference
  paths    {NAME: {p50_ms, p99_ms, n, errors}} over every stream of every round
  added    {NAME: {p50_ms, p99_ms, rounds_p50_ms}} for every path but the
           reference: its percentile minus the reference's, and the p50
           difference of each round (how much one round swings)

Bounded: a round gives up after --timeout seconds (its unfinished streams count
as errors).
"""
import argparse
import json
import selectors
import socket
import time


def percentile(xs, p):
    """Nearest rank."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def request_bytes(key, rid, chunks, chunk_ms):
    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "first byte"}]}).encode()
    return ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"x-mock-chunks: {chunks}\r\nx-mock-chunk-ms: {chunk_ms}\r\n"
            f"x-request-id: {rid}\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def run(port, make_request, n, concurrency, timeout):
    """n streams, concurrency at a time: (first-byte ms of each stream that was
    answered 200, streams that were not)."""
    sel = selectors.DefaultSelector()
    started = done = errors = 0
    ttfb = []

    def start():
        nonlocal started
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        st = {"t0": time.monotonic(), "first": None, "req": make_request(started), "ok": False}
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, st)
        started += 1

    def end(s, st):
        nonlocal done, errors
        sel.unregister(s)
        s.close()
        done += 1
        if st["ok"]:
            ttfb.append(st["first"])
        else:
            errors += 1
        if started < n:
            start()

    while started < min(n, concurrency):
        start()
    deadline = time.monotonic() + timeout
    while done < n:
        events = sel.select(timeout=max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        if not events and now >= deadline:
            for key in list(sel.get_map().values()):
                key.data["ok"] = False
                end(key.fileobj, key.data)
            break
        for key, _ in events:
            s, st = key.fileobj, key.data
            if st["req"] is not None:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    end(s, st)
                    continue
                s.sendall(st["req"])  # a few hundred bytes into an empty socket
                st["req"] = None
                sel.modify(s, selectors.EVENT_READ, st)
                continue
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                st["ok"] = False
                end(s, st)
                continue
            if data and st["first"] is None:
                st["first"] = (now - st["t0"]) * 1000
                st["ok"] = data.startswith(b"HTTP/1.1 200")
            if not data:
                end(s, st)
    sel.close()
    return ttfb, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", action="append", required=True, metavar="NAME=PORT",
                    help="a path to measure; the first is the reference")
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--streams", type=int, default=40, help="streams per path per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=5)
    ap.add_argument("--chunk-ms", type=int, default=20)
    ap.add_argument("--key", default="sk-bench-first-byte")
    ap.add_argument("--fresh", action="store_true", help="every round on a key (a lane) of its own")
    ap.add_argument("--no-warm-up", action="store_true")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    paths = []
    for p in a.path:
        name, _, port = p.partition("=")
        paths.append((name, int(port)))
    ref = paths[0][0]

    def measure(name, port, key, tag):
        make = lambda i: request_bytes(key, f"fb-{name}-{tag}-{i}", a.chunks, a.chunk_ms)  # noqa: E731
        return run(port, make, a.streams, a.concurrency, a.timeout)

    if not a.no_warm_up:
        for name, port in paths:
            measure(name, port, a.key, "warm")
    got = {name: ([], 0) for name, _ in paths}
    rounds = {name: [] for name, _ in paths}
    for r in range(a.rounds):
        key = f"{a.key}-{a.concurrency}-{r}" if a.fresh else a.key
        for name, port in paths:
            xs, errs = measure(name, port, key, r)
            got[name] = (got[name][0] + xs, got[name][1] + errs)
            rounds[name].append(percentile(xs, 50))
    out = {"concurrency": a.concurrency, "streams": a.streams, "rounds": a.rounds,
           "reference": ref, "paths": {}, "added": {}}
    for name, _ in paths:
        xs, errs = got[name]
        out["paths"][name] = {"p50_ms": percentile(xs, 50), "p99_ms": percentile(xs, 99),
                              "n": len(xs), "errors": errs}
    r0 = out["paths"][ref]
    for name, _ in paths[1:]:
        e = out["paths"][name]
        diff = lambda x, y: None if x is None or y is None else round(x - y, 3)  # noqa: E731
        out["added"][name] = {
            "p50_ms": diff(e["p50_ms"], r0["p50_ms"]),
            "p99_ms": diff(e["p99_ms"], r0["p99_ms"]),
            "rounds_p50_ms": [diff(x, y) for x, y in zip(rounds[name], rounds[ref])]}
    for e in out["paths"].values():
        for k in ("p50_ms", "p99_ms"):
            e[k] = None if e[k] is None else round(e[k], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
