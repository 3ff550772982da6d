#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""SSE through a proxy, for scripts/bench.sh: one streaming chat completion from
pacerd-mock (x-mock-chunks N, x-mock-chunk-ms MS), read with a plain socket so
that every recv() is seen. Prints one JSON object:

  content_events   events carrying a content delta (expected: N)
  events           all `data:` events (role, contents, finish, [DONE])
  distinct_reads   recv() calls in which a content event was completed: N when
                   every event arrived on its own, fewer when a proxy held some back
  first_event_ms   request sent -> first content event complete
  total_ms         request sent -> [DONE]
  gap_ms_p50/max   spacing of the content events as received

Bounded: gives up after --timeout seconds (then "timed_out": true).
"""
import argparse
import json
import socket
import statistics
import time


def dechunk(reads):
    """(decoded bytes, read index of each decoded byte) from the raw reads of a
    chunked body."""
    out, owner = bytearray(), []
    state, size, line = "size", 0, bytearray()
    for i, data in enumerate(reads):
        pos = 0
        while pos < len(data):
            if state == "size":
                nl = data.find(b"\n", pos)
                if nl < 0:
                    line += data[pos:]
                    break
                line += data[pos:nl]
                pos = nl + 1
                size = int(bytes(line).split(b";")[0].strip() or b"0", 16)
                line = bytearray()
                state = "data" if size else "end"
            elif state == "data":
                take = min(size, len(data) - pos)
                out += data[pos:pos + take]
                owner += [i] * take
                pos += take
                size -= take
                if size == 0:
                    state = "crlf"
            elif state == "crlf":
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break
                pos = nl + 1
                state = "size"
            else:
                return out, owner
    return out, owner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument("--ms", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=15)
    a = ap.parse_args()

    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "count to fifty"}]}).encode()
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Authorization: Bearer sk-bench-sse\r\nContent-Type: application/json\r\n"
           f"x-mock-chunks: {a.chunks}\r\nx-mock-chunk-ms: {a.ms}\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    deadline = time.monotonic() + a.timeout
    s = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.monotonic()
    s.sendall(req)
    head, reads, times, timed_out, in_body = b"", [], [], False, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        s.settimeout(left)
        try:
            data = s.recv(65536)
        except socket.timeout:
            timed_out = True
            break
        now = time.monotonic()
        if not data:
            break
        if not in_body:
            head += data
            if b"\r\n\r\n" not in head:
                continue
            head, data = head.split(b"\r\n\r\n", 1)
            in_body = True
            if not data:
                continue
        reads.append(data)
        times.append(now)
        if b"[DONE]" in data or b"0\r\n\r\n" in data[-7:]:
            break
    s.close()

    chunked = b"transfer-encoding: chunked" in head.lower()
    if chunked:
        text, owner = dechunk(reads)
    else:
        text, owner = bytearray(b"".join(reads)), [i for i, d in enumerate(reads) for _ in d]
    content_reads, events, pos = [], 0, 0
    while True:
        end = text.find(b"\n\n", pos)
        if end < 0:
            break
        ev = bytes(text[pos:end])
        if ev.startswith(b"data:"):
            events += 1
            if b'"delta":{"content"' in ev:
                content_reads.append(owner[end + 1])
        pos = end + 2
    ev_times = [times[i] for i in content_reads]
    gaps = [(b - a_) * 1000 for a_, b in zip(ev_times, ev_times[1:])]
    status = head.split(b"\r\n", 1)[0].decode("latin-1")
    print(json.dumps({
        "status_line": status,
        "chunked": chunked,
        "content_events": len(content_reads),
        "events": events,
        "reads": len(reads),
        "distinct_reads": len(set(content_reads)),
        "first_event_ms": round((ev_times[0] - t0) * 1000, 2) if ev_times else None,
        "total_ms": round(((times[-1] if times else time.monotonic()) - t0) * 1000, 2),
        "gap_ms_p50": round(statistics.median(gaps), 2) if gaps else None,
        "gap_ms_max": round(max(gaps), 2) if gaps else None,
        "timed_out": timed_out,
    }))


if __name__ == "__main__":
    main()
