#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Idle streaming connections through a proxy, for scripts/bench.sh.

Opens --n connections to the proxy on --port, each a streaming chat completion
that pacerd-mock answers with its headers and one chunk and then keeps open
without sending anything more (x-mock-hang: body). Once every stream has
delivered its first chunk (or --timeout passed), reads the proxy's VmRSS from
/proc/--pid/status and its open descriptors, asks the mock how many requests it
holds open, keeps every stream open --hold seconds more watching for any the
proxy closes, closes every connection, and prints one JSON object:

  opened, streaming       connections made / streams that delivered their first chunk
  connect_errors          connections that could not be made (the first ends the opening)
  held                    streams still open after the hold (streaming - closed meanwhile)
  hold_s                  the hold
  rss_before_kib, rss_after_kib, kib_per_conn   (after - before) / streaming
  fds_before, fds_after   the proxy's open descriptors (/proc/PID/fd)
  nofile                  the proxy's limit of open files [soft, hard]
  upstream_in_flight      the mock's in_flight count while all were open

Opening stops at the first connection that cannot be made (this process's own
limit of open files, or the proxy's listener full for 5 s).
"""
import argparse
import json
import os
import selectors
import socket
import time
import urllib.request


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def nofile(pid):
    """[soft, hard] limit of open files of a process (/proc/PID/limits)."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    t = line.split()
                    return [int(t[3]), int(t[4])]
    except (OSError, ValueError, IndexError):
        pass
    return None


def mock_in_flight(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_mock/stats", timeout=5) as r:
            return json.load(r).get("in_flight")
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--mock-port", type=int, required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--hold", type=float, default=0, help="seconds to keep the streams open once all stream")
    a = ap.parse_args()

    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "wait"}]}).encode()
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Authorization: Bearer sk-bench-idle\r\nContent-Type: application/json\r\n"
           "x-mock-hang: body\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    deadline = time.monotonic() + a.timeout
    rss_before, fds_before = rss_kib(a.pid), fds(a.pid)
    sel = selectors.DefaultSelector()
    socks, got = [], {}
    connect_errors = 0
    t0 = time.monotonic()
    for _ in range(a.n):
        if time.monotonic() > deadline:
            break
        try:
            s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
            s.sendall(req)
        except OSError:
            connect_errors += 1
            break
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
        got[s] = b""
    waiting = set(socks)
    while waiting and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # closed by the proxy: not streaming
                sel.unregister(s)
                waiting.discard(s)
                got[s] = None
                continue
            got[s] += data
            if b"data:" in got[s]:
                sel.unregister(s)
                waiting.discard(s)
    setup_s = time.monotonic() - t0
    streaming = sum(1 for s in socks if got[s] and b"data:" in got[s])
    time.sleep(1.0)  # let the proxy settle (freed buffers, deferred work)
    rss_after, fds_after = rss_kib(a.pid), fds(a.pid)
    in_flight = mock_in_flight(a.mock_port)
    # The hold: a stream the proxy closes (or breaks) reads as the end of its socket.
    live = [s for s in socks if got[s] and b"data:" in got[s]]
    live_set = set(live)
    for s in live:
        sel.register(s, selectors.EVENT_READ)
    closed = set()
    hold_end = time.monotonic() + a.hold
    while a.hold > 0 and len(closed) < len(live_set):
        left = hold_end - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(timeout=min(1.0, left)):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                if s in live_set:
                    closed.add(s)
    statuses = {}
    for s in socks:
        if got[s]:
            line = got[s].split(b"\r\n", 1)[0].decode("latin-1")
            statuses[line] = statuses.get(line, 0) + 1
    for s in socks:
        s.close()
    print(json.dumps({
        "opened": len(socks),
        "streaming": streaming,
        "connect_errors": connect_errors,
        "held": streaming - len(closed),
        "hold_s": a.hold,
        "status_lines": statuses,
        "setup_s": round(setup_s, 2),
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "kib_per_conn": round((rss_after - rss_before) / streaming, 2) if streaming else None,
        "fds_before": fds_before,
        "fds_after": fds_after,
        "nofile": nofile(a.pid),
        "upstream_in_flight": in_flight,
    }))


if __name__ == "__main__":
    main()
