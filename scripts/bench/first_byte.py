#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time to first byte and first token of streams, and the gaps between their
chunks, direct and through proxies, for scripts/bench.sh and
tests/integration/cases/first_byte.mjs.

Streaming chat completions from pacerd-mock (x-mock-chunks, x-mock-chunk-ms), each
on a connection of its own ("connection: close": the stream ends with the
connection), --streams of them, --concurrency at a time (a new one starts as one
ends), all from one thread on one selector: nothing starts up between two
requests, and the client costs every path the same. The first byte is the first
byte of the response (its status line), timed from just before connect(); the
first token is the first content delta's arrival ("delta":{"content", not the
role's opening event), timed the same way; a gap is the time between the
arrivals of two successive content deltas of a stream (two that arrive in one
read are 0 apart: a proxy that holds chunks back shows as gaps of 0 and longer
ones).

--path NAME=PORT, repeated: the first is the reference (direct: the mock itself).
First one warm-up round per path (its lane in a proxy is then warm, its provider
heard from, its upstream connections open), then --rounds rounds, each going
through the paths in turn, so that every path sees the same machine. Every round
uses the warm-up's key (--fresh: a key of its own per round, a new lane each time;
--no-warm-up: no warm-up round). Every stream carries an x-request-id of its own
(fb-NAME-ROUND-I), so that a proxy's debug log can be read beside the figures.
Prints one JSON object:

  concurrency, streams, rounds, chunks, chunk_ms, reference
  paths    {NAME: {p50_ms, p99_ms, n, errors, first_token_p50_ms,
           first_token_p99_ms, gap_p50_ms, gap_p99_ms, gaps}} over every stream
           of every round (p50_ms, p99_ms: the first byte)
  added    {NAME: {p50_ms, p99_ms, rounds_p50_ms, first_token_p50_ms,
           first_token_p99_ms, gap_p50_ms, gap_p99_ms}} for every path but the
           reference: its percentile minus the reference's, and the first byte's
           p50 difference of each round (how much one round swings)

Bounded: a round gives up after --timeout seconds (its unfinished streams count
as errors).
"""
import argparse
import json
import selectors
import socket
import time

# What opens a content delta in an OpenAI chat chunk (the role's event has "role" first).
CONTENT = b'"delta":{"content"'


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
    """n streams, concurrency at a time: ({first_byte, first_token, gaps}: the
    first-byte and first-token ms of each stream that was answered 200 and the
    gaps between its content deltas, streams that were not)."""
    sel = selectors.DefaultSelector()
    started = done = errors = 0
    got = {"first_byte": [], "first_token": [], "gaps": []}

    def start():
        nonlocal started
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        st = {"t0": time.monotonic(), "first": None, "req": make_request(started), "ok": False,
              "tail": b"", "tokens": []}
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE, st)
        started += 1

    def end(s, st):
        nonlocal done, errors
        sel.unregister(s)
        s.close()
        done += 1
        if st["ok"]:
            got["first_byte"].append(st["first"])
            ts = st["tokens"]
            if ts:
                got["first_token"].append(ts[0])
                got["gaps"].extend(b - a for a, b in zip(ts, ts[1:]))
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
            if data:
                # the pattern may straddle two reads: the tail is one byte short of it
                window = st["tail"] + data
                st["tokens"] += [(now - st["t0"]) * 1000] * window.count(CONTENT)
                st["tail"] = window[-(len(CONTENT) - 1):]
            if not data:
                end(s, st)
    sel.close()
    return got, errors


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
    got = {name: ({"first_byte": [], "first_token": [], "gaps": []}, 0) for name, _ in paths}
    rounds = {name: [] for name, _ in paths}
    for r in range(a.rounds):
        key = f"{a.key}-{a.concurrency}-{r}" if a.fresh else a.key
        for name, port in paths:
            xs, errs = measure(name, port, key, r)
            for k, v in xs.items():
                got[name][0][k].extend(v)
            got[name] = (got[name][0], got[name][1] + errs)
            rounds[name].append(percentile(xs["first_byte"], 50))
    out = {"concurrency": a.concurrency, "streams": a.streams, "rounds": a.rounds,
           "chunks": a.chunks, "chunk_ms": a.chunk_ms, "reference": ref, "paths": {}, "added": {}}
    pcts = (("p50_ms", "first_byte", 50), ("p99_ms", "first_byte", 99),
            ("first_token_p50_ms", "first_token", 50), ("first_token_p99_ms", "first_token", 99),
            ("gap_p50_ms", "gaps", 50), ("gap_p99_ms", "gaps", 99))
    for name, _ in paths:
        xs, errs = got[name]
        e = {k: percentile(xs[what], p) for k, what, p in pcts}
        e.update(n=len(xs["first_byte"]), errors=errs, gaps=len(xs["gaps"]))
        out["paths"][name] = e
    r0 = out["paths"][ref]
    diff = lambda x, y: None if x is None or y is None else round(x - y, 3)  # noqa: E731
    for name, _ in paths[1:]:
        e = out["paths"][name]
        out["added"][name] = {k: diff(e[k], r0[k]) for k, _, _ in pcts}
        out["added"][name]["rounds_p50_ms"] = [diff(x, y) for x, y in zip(rounds[name], rounds[ref])]
    for e in out["paths"].values():
        for k, _, _ in pcts:
            e[k] = None if e[k] is None else round(e[k], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
