#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The table and the JSON of scripts/bench.sh, from the records it collected
(one JSON object a line: throughput, rss, frontier, tunnel, latency, strace, sse,
idle, first_byte, broken, section) and the bench-lanes output. Medians over the
repetitions; ratios are pacerd / nginx. Its last part, "what LLM-gateway
benchmarks compare", gathers the figures users compare between gateways: the
latency added to the direct path, the frontier, first token and chunk gaps,
streams held, memory."""
import argparse
import json
import statistics


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def fmt(x, nd=0, unit=""):
    if x is None:
        return "-"
    return f"{x:,.{nd}f}{unit}"


def fx(r):
    return "-" if r is None else f"{r:.2f}x"


def wrk_errors(w):
    return sum(w["errors"].values()) if w else None


def parse_strace(path):
    """strace -c table -> (total calls, {syscall: calls})."""
    calls, total = {}, None
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None, {}
    for line in lines:
        t = line.split()
        if len(t) < 5 or not t[0][0].isdigit():
            continue
        if t[-1] == "total":
            total = int(t[3])
        else:
            calls[t[-1]] = int(t[3])
    return total, calls


def mib(kib):
    return None if kib is None else kib / 1024


def slash(xs, nd=0, unit=""):
    """"a / b" of figures, "-" for a missing one."""
    return " / ".join(fmt(x, nd) for x in xs) + unit


def compare(out, recs, meta, p):
    """The figures LLM-gateway benchmarks compare, gathered from the sections above
    and the frontier and memory records, as out["compare"] and a table: one row a
    figure, a column each for pacerd, nginx and direct (the upstream itself)."""
    c = {}
    lat = out.get("latency", {})
    if lat:
        c["latency_1conn_us"] = {
            path: {"p50": lat[path]["p50_us"], "p99": lat[path]["p99_us"],
                   "added_p50": lat[path]["added_p50_us"], "added_p99": lat[path]["added_p99_us"]}
            for path in ("direct", "pacerd", "nginx") if path in lat}
    fr = next((r["result"] for r in recs if r["kind"] == "frontier"), None)
    out["frontier"] = fr
    if fr:
        c["frontier_rps"] = {"limits_ms": fr["limits_ms"], "paths": fr["frontier"], "ceiling": fr["ceiling"],
                             "conns": fr["conns"]}
    fb = out.get("first_byte", {})
    if fb:
        c["streams_ms"] = {}
        for conc, x in fb.items():
            if not x:
                continue
            c["streams_ms"][conc] = {"chunk_ms": x.get("chunk_ms"),
                                     "paths": {path: dict(x["paths"][path], added=x["added"].get(path))
                                               for path in x["paths"]}}
    idle = out.get("idle", {})
    if idle:
        c["idle_streams"] = {"asked": int(meta.get("idle_asked") or 0), "opened_each": int(meta.get("idle") or 0),
                             "nofile": int(meta.get("nofile") or 0), "hold_s": meta.get("hold_s"),
                             "paths": {k: {f: v.get(f) for f in ("held", "streaming", "kib_per_conn", "fds_after",
                                                                   "setup_s", "upstream_in_flight")}
                                       for k, v in idle.items()}}
    rss = {}
    for r in recs:
        if r["kind"] != "rss":
            continue
        e = rss.setdefault(r["proxy"], {})
        e[r["phase"]] = max(e.get(r["phase"], 0), r["kib"]) if r["phase"] == "load" else r["kib"]
    if rss:
        c["rss_kib"] = rss
    out["compare"] = c
    if not c:
        return

    p.append("")
    p.append("what LLM-gateway benchmarks compare (added = the path's figure - direct's, in the same run;")
    p.append("  direct = the upstream itself, no proxy between)")
    w = 52
    p.append(f"  {'':{w}} {'pacerd':>17} {'nginx':>17} {'direct':>17}")

    def row(label, cells):
        p.append(f"  {label:{w}} " + " ".join(f"{x:>17}" for x in cells))

    lc = c.get("latency_1conn_us")
    if lc:
        d = lc.get("direct", {})
        row("added latency at 1 connection, p50 / p99 us",
            [slash([lc.get(k, {}).get("added_p50"), lc.get(k, {}).get("added_p99")]) for k in ("pacerd", "nginx")]
            + [slash([d.get("p50"), d.get("p99")]) + " abs"])
    if fr:
        ceiling = fr["ceiling"]
        for lim in fr["limits_ms"]:
            cells = []
            for k in ("pacerd", "nginx"):
                e = fr["frontier"].get(k, {}).get(str(lim))
                if not e or e["rps"] is None:
                    cells.append("none")
                else:
                    cells.append(("≥ " if e["lower_bound"] else "") + fmt(e["rps"]))
            top = fmt(ceiling["rps"]) + (" max" if ceiling["reached"] else "")
            row(f"frontier: req/s with added p99 < {lim} ms", cells + [top if lim == fr["limits_ms"][0] else ""])
    sm = c.get("streams_ms")
    if sm:
        for gaps in (False, True):
            for conc in sorted(sm, key=int):
                x = sm[conc]["paths"]
                d = x.get("direct", {})
                add = {k: (x.get(k) or {}).get("added") or {} for k in ("pacerd", "nginx")}
                if not gaps:
                    row(f"added time to first token, {conc} at once, p50 / p99 ms",
                        [slash([add[k].get("first_token_p50_ms"), add[k].get("first_token_p99_ms")], 2)
                         for k in ("pacerd", "nginx")]
                        + [slash([d.get("first_token_p50_ms"), d.get("first_token_p99_ms")], 2) + " abs"])
                elif d.get("gaps") and sm[conc]["chunk_ms"]:  # chunks sent at once have no gaps
                    row(f"added inter-chunk gap, {conc} at once ({sm[conc]['chunk_ms']} ms), p50 / p99 ms",
                        [slash([add[k].get("gap_p50_ms"), add[k].get("gap_p99_ms")], 2) for k in ("pacerd", "nginx")]
                        + [slash([d.get("gap_p50_ms"), d.get("gap_p99_ms")], 2) + " abs"])
    ic = c.get("idle_streams")
    if ic:
        ps = ic["paths"]
        row(f"idle streams held {ic['hold_s']} s, of {fmt(ic['opened_each'])} opened",
            [fmt(ps.get(k, {}).get("held")) for k in ("pacerd", "nginx")] + ["-"])
        row("RSS per idle stream, KiB",
            [fmt(ps.get(k, {}).get("kib_per_conn"), 1) for k in ("pacerd", "nginx")] + ["-"])
    rs = c.get("rss_kib")
    if rs:
        row("RSS idle / under load / after load, MiB",
            [slash([mib(rs.get(k, {}).get(ph)) for ph in ("idle", "load", "after")], 1) for k in ("pacerd", "nginx")]
            + ["-"])
    p.append("  added latency at 1 connection: wrk, 1 connection, the plain upstream (the latency section above)")
    if fr:
        p.append(f"  frontier: the highest rate achieved (wrk, {fr['conns']} connections pausing at random: independent")
        p.append(f"  arrivals) at rising steps, {fr['reps']} rounds of {fr['seconds']} s a step, while the p99 added to")
        p.append("  direct's in the same step stays under the limit (and the path carries >= 90 % of what direct")
        p.append("  does); '≥': still under it at the last step; direct: the highest rate the load core reached")
    if sm:
        p.append("  first token: the first content delta of a pacerd-mock stream, from connect(); gaps: between a")
        p.append("  stream's content deltas as they arrive, sent 20 ms apart (the first-byte section above)")
    if ic:
        p.append(f"  idle streams: {fmt(ic['asked'])} asked; a proxy holds 2 descriptors a stream (its client's and its")
        p.append(f"  upstream's) under a limit of {fmt(ic['nofile'])} open files a process: {fmt(ic['opened_each'])} opened"
                 " (see the idle section above)")
    if rs:
        p.append("  RSS: pacerd (no plan) and nginx's worker (which also carries the HTTPS rows): idle before the")
        p.append("  throughput runs, under load the highest VmRSS read every 0.2 s during their plain runs, after")
        p.append(f"  load {meta.get('recover_s')} s after the last throughput run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lanes")
    ap.add_argument("--meta", nargs="*", default=[])
    a = ap.parse_args()
    meta = dict(zip(a.meta[0::2], a.meta[1::2]))
    clk = int(meta.get("clk_tck", 100))
    recs = [json.loads(line) for line in open(a.results) if line.strip()]
    out = {"machine": {k: meta.get(k) for k in ("nproc", "cpu", "kernel")},
           "versions": {k: meta.get(k) for k in ("pacerd", "nginx", "wrk", "libcurl", "openssl")},
           "settings": {k: meta.get(k) for k in ("duration_s", "warmup_s", "reps", "strace_s", "idle",
                                                  "idle_asked", "nofile", "hold_s", "recover_s",
                                                  "proxy_cpu", "load_cpu", "sse_chunks", "sse_ms", "fb_rounds")},
           "load_avg": {"start": meta.get("load_start"), "end": meta.get("load_end")},
           "date": meta.get("date"), "elapsed_s": int(meta.get("elapsed_s", 0))}
    p = []  # the printed lines

    p.append(f"pacerd vs nginx — {meta.get('date')}")
    p.append(f"machine: {meta.get('nproc')} CPUs, {meta.get('cpu')}, kernel {meta.get('kernel')}; "
             f"proxy pinned to CPU {meta.get('proxy_cpu')}, wrk + upstream to CPU {meta.get('load_cpu')}")
    p.append(f"versions: {meta.get('pacerd')}; {meta.get('nginx')}; {meta.get('wrk')}; "
             f"{meta.get('libcurl')}; {meta.get('openssl')}")
    p.append(f"runs: {meta.get('duration_s')} s each after {meta.get('warmup_s')} s warm-up, "
             f"{meta.get('reps')} repetitions interleaved, medians")
    p.append(f"load average (the machine may be shared): {meta.get('load_start')} at the start,"
             f" {meta.get('load_end')} at the end")
    broken = {r["path"]: r["why"] for r in recs if r["kind"] == "broken"}
    out["left_out"] = broken
    for path, why in broken.items():
        p.append(f"LEFT OUT: {path} {why}")

    # --- throughput
    groups = {}
    for r in recs:
        if r["kind"] != "throughput":
            continue
        w = r["wrk"]
        run = {"rep": r["rep"], "cpu_ticks": r["cpu_ticks"], "wrk": w}
        if w and w["requests"]:
            run["rps"] = round(w["requests"] * 1e6 / w["duration_us"], 1)
            if r.get("redis_commands", -1) >= 0:
                run["redis_commands_per_req"] = round(r["redis_commands"] / w["requests"], 3)
            run["cpu_us_per_req"] = round(r["cpu_ticks"] * 1e6 / clk / w["requests"], 2)
            run["proxy_cpu_util"] = round(r["cpu_ticks"] / clk / (w["duration_us"] / 1e6), 3)
        groups.setdefault((r["upstream"], r["conns"], r["proxy"]), []).append(run)
    rows = []
    for (up, conns, proxy), runs in groups.items():
        rows.append({"upstream": up, "connections": conns, "proxy": proxy,
                     "rps": med([x.get("rps") for x in runs]),
                     "cpu_us_per_req": med([x.get("cpu_us_per_req") for x in runs]),
                     "proxy_cpu_util": med([x.get("proxy_cpu_util") for x in runs]),
                     "redis_commands_per_req": med([x.get("redis_commands_per_req") for x in runs]),
                     "rps_min": min((x["rps"] for x in runs if "rps" in x), default=None),
                     "rps_max": max((x["rps"] for x in runs if "rps" in x), default=None),
                     "errors": sum(wrk_errors(x["wrk"]) or 0 for x in runs),
                     "failed_runs": sum(1 for x in runs if "rps" not in x),
                     "runs": runs})
    by = {(r["upstream"], r["connections"], r["proxy"]): r for r in rows}
    for r in rows:
        n = by.get((r["upstream"], r["connections"], "nginx"))
        r["rps_vs_nginx"] = ratio(r["rps"], n and n["rps"])
        r["cpu_vs_nginx"] = ratio(r["cpu_us_per_req"], n and n["cpu_us_per_req"])
    order = {"nginx": 0, "floor": 1, "pacerd": 2, "pacerd+plan": 3, "pacerd+wide": 4, "pacerd+store": 5,
             "pacerd+batch": 6}
    rows.sort(key=lambda r: (r["upstream"] != "plain", r["connections"], order.get(r["proxy"], 9)))
    out["throughput"] = rows
    p.append("")
    p.append("throughput: POST /v1/chat/completions, 1 KiB body, 613-byte answer")
    p.append("  pacerd = the default plan (at most 64 requests in flight upstream); pacerd+plan = rate and token")
    p.append("  limits far above the load (1e6/s, 6e7/min, 1e9 tokens/min), same concurrency; pacerd+wide =")
    p.append("  max_concurrent 1e5: as many upstream connections as clients, as nginx; pacerd+store = pacerd+plan")
    p.append("  with its gates decided in Redis on loopback (store.kind: redis; burst 1: one script per dispatch);")
    p.append("  pacerd+batch = the same with burst 1000 (a batch of permits per script on a busy lane); floor =")
    p.append("  libevent's evhttp in, libcurl multi out, nothing between (tests/bench/floor.c: the stack's ceiling)")
    p.append(f"  {'upstream':8} {'conns':>5}  {'proxy':12} {'req/s':>9} {'(min-max)':>15} {'x nginx':>8}"
             f" {'CPU us/req':>10} {'x nginx':>8} {'core':>5} {'errors':>6}")
    for r in rows:
        rng = f"({fmt(r['rps_min'])}-{fmt(r['rps_max'])})" if r["rps_min"] is not None else ""
        p.append(f"  {r['upstream']:8} {r['connections']:>5}  {r['proxy']:12} {fmt(r['rps']):>9} {rng:>15}"
                 f" {fx(r['rps_vs_nginx']):>8} {fmt(r['cpu_us_per_req'], 1):>10} {fx(r['cpu_vs_nginx']):>8}"
                 f" {fmt(r['proxy_cpu_util'] and r['proxy_cpu_util'] * 100, 0, '%'):>5} {r['errors']:>6}")
    for r in rows:
        if r.get("redis_commands_per_req") is not None:
            p.append(f"  {r['proxy']} at {r['connections']} connections: {r['redis_commands_per_req']:.3f}"
                     " Redis commands per request (EVALSHA calls Redis counted over the run)")
    p.append("  core: the proxy's CPU use during the run; below 100 % something else set the pace"
             " (the other core: wrk + upstream; or waits inside the proxy); CPU us/req compares fairly")

    # --- through a CONNECT tunnel, beside base-URL requests (tunnel_load.py)
    tun = {}
    for r in recs:
        if r["kind"] != "tunnel" or not r.get("result") or not r["result"].get("requests"):
            continue
        res = r["result"]
        tun.setdefault(r["mode"], []).append({
            "rps": round(res["requests"] * 1e6 / res["duration_us"], 1),
            "cpu_us_per_req": round(r["cpu_ticks"] * 1e6 / clk / res["requests"], 2),
            "proxy_cpu_util": round(r["cpu_ticks"] / clk / (res["duration_us"] / 1e6), 3),
            "errors": res.get("errors", 0)})
    if tun:
        rows = {m: {"rps": med([x["rps"] for x in v]), "cpu_us_per_req": med([x["cpu_us_per_req"] for x in v]),
                    "proxy_cpu_util": med([x["proxy_cpu_util"] for x in v]),
                    "errors": sum(x["errors"] for x in v), "runs": v} for m, v in tun.items()}
        out["tunnel"] = rows
        base = rows.get("base", {}).get("cpu_us_per_req")
        p.append("")
        p.append("through a CONNECT tunnel (HTTPS_PROXY: TLS terminated by pacerd) beside base-URL requests,")
        p.append("  one pacerd, plain upstream, 64 keep-alive connections of tunnel_load.py (the client is the")
        p.append("  slower side: compare CPU per request)")
        p.append(f"  {'path':8} {'req/s':>9} {'CPU us/req':>10} {'x base':>7} {'core':>5} {'errors':>6}")
        for m in ("base", "tunnel"):
            if m not in rows:
                continue
            r = rows[m]
            p.append(f"  {m:8} {fmt(r['rps']):>9} {fmt(r['cpu_us_per_req'], 1):>10}"
                     f" {fx(ratio(r['cpu_us_per_req'], base)):>7}"
                     f" {fmt(r['proxy_cpu_util'] and r['proxy_cpu_util'] * 100, 0, '%'):>5} {r['errors']:>6}")

    # --- latency
    lat = {}
    for r in recs:
        if r["kind"] == "latency":
            lat.setdefault(r["path"], []).append(r["wrk"])
    out["latency"] = {}
    if lat:
        d50 = med([w["p50_us"] for w in lat.get("direct", []) if w and w["requests"]])
        d99 = med([w["p99_us"] for w in lat.get("direct", []) if w and w["requests"]])
        p.append("")
        p.append("latency at 1 connection (plain upstream), microseconds")
        p.append(f"  {'path':12} {'p50':>7} {'p99':>7} {'added p50':>10} {'added p99':>10} {'req/s':>8}")
        for path in ("direct", "pacerd", "nginx", "pacerd+store"):
            ws = [w for w in lat.get(path, []) if w and w["requests"]]  # a run that answered nothing has no latency
            p50, p99 = med([w["p50_us"] for w in ws]), med([w["p99_us"] for w in ws])
            rps = med([round(w["requests"] * 1e6 / w["duration_us"], 1) for w in ws])
            e = {"p50_us": p50, "p99_us": p99, "rps": rps,
                 "added_p50_us": None if path == "direct" or p50 is None or d50 is None else p50 - d50,
                 "added_p99_us": None if path == "direct" or p99 is None or d99 is None else p99 - d99,
                 "runs": lat.get(path, [])}
            out["latency"][path] = e
            p.append(f"  {path:12} {fmt(p50):>7} {fmt(p99):>7} {fmt(e['added_p50_us']):>10}"
                     f" {fmt(e['added_p99_us']):>10} {fmt(rps):>8}")

    # --- system calls
    out["syscalls"] = {}
    for r in recs:
        if r["kind"] != "strace":
            continue
        total, calls = parse_strace(r["file"])
        reqs = r.get("requests") or (r["wrk"]["requests"] if r["wrk"] else 0)
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:6]
        out["syscalls"][r["proxy"]] = {
            "requests": reqs, "syscalls": total,
            "per_request": round(total / reqs, 2) if total and reqs else None,
            "top": [{"syscall": s, "calls": c, "per_request": round(c / reqs, 2) if reqs else None}
                    for s, c in top],
            "wrk": r["wrk"]}
    if out["syscalls"]:
        sc = out["syscalls"]
        n = sc.get("nginx", {}).get("per_request")
        p.append("")
        p.append(f"system calls per proxied request (strace -c -f, {meta.get('strace_s')} s of 64 connections)")
        for proxy in ("pacerd", "nginx"):
            e = sc.get(proxy)
            if not e:
                continue
            e["vs_nginx"] = ratio(e["per_request"], n)
            tops = ", ".join(f"{t['syscall']} {t['per_request']}" for t in e["top"])
            p.append(f"  {proxy:8} {fmt(e['per_request'], 2):>6} {fx(e['vs_nginx']):>7}  "
                     f"({fmt(e['requests'])} requests)  top: {tops}")

    # --- SSE
    out["sse"] = {}
    sse = [r for r in recs if r["kind"] == "sse"]
    if sse:
        want = int(meta.get("sse_chunks", 50))
        p.append("")
        p.append(f"SSE: {want} events {meta.get('sse_ms')} ms apart from pacerd-mock")
        p.append(f"  {'path':8} {'events':>6} {'reads':>6} {'first ms':>9} {'total ms':>9} {'gap p50/max ms':>15}")
        for r in sse:
            x = r["result"] or {}
            ok = x.get("content_events") == want and x.get("distinct_reads") == want
            out["sse"][r["path"]] = dict(x, separate=ok)
            gap = f"{fmt(x.get('gap_ms_p50'), 1)}/{fmt(x.get('gap_ms_max'), 1)}"
            p.append(f"  {r['path']:8} {fmt(x.get('content_events')):>6} {fmt(x.get('distinct_reads')):>6}"
                     f" {fmt(x.get('first_event_ms'), 1):>9} {fmt(x.get('total_ms'), 0):>9} {gap:>15}"
                     f"  {'separate' if ok else 'NOT SEPARATE' if x else 'FAILED'}")

    # --- time to first byte of streams
    out["first_byte"] = {}
    fb = [r for r in recs if r["kind"] == "first_byte"]
    if fb:
        p.append("")
        p.append(f"added time to first byte, p50/p99, at 1 and 20 concurrent streams: pacerd-mock SSE,"
                 f" {meta.get('fb_rounds')} rounds alternating the paths, milliseconds")
        p.append(f"  {'at once':>7} {'path':8} {'p50':>7} {'p99':>7} {'added p50':>10} {'added p99':>10}")
        for r in fb:
            x = r["result"] or {}
            out["first_byte"][str(r["concurrency"])] = x or None
            if not x:
                p.append(f"  {r['concurrency']:>7} FAILED")
                continue
            for i, (path, e) in enumerate(x["paths"].items()):
                add = x["added"].get(path, {})
                errs = f"  ({e['errors']} not answered)" if e["errors"] else ""
                p.append(f"  {r['concurrency'] if i == 0 else '':>7} {path:8} {fmt(e['p50_ms'], 2):>7}"
                         f" {fmt(e['p99_ms'], 2):>7} {fmt(add.get('p50_ms'), 2):>10}"
                         f" {fmt(add.get('p99_ms'), 2):>10}{errs}")

    # --- idle streams
    out["idle"] = {}
    idle = [r for r in recs if r["kind"] == "idle"]
    if idle:
        p.append("")
        p.append(f"idle streams: {meta.get('idle')} open SSE streams that send nothing more"
                 f" ({meta.get('idle_asked')} asked; open files: {meta.get('nofile')} a process),"
                 f" held {meta.get('hold_s')} s")
        n = next((r["result"] for r in idle if r["proxy"] == "nginx" and r["result"]), None)
        for r in idle:
            x = r["result"] or {}
            x["vs_nginx"] = ratio(x.get("kib_per_conn"), n and n.get("kib_per_conn"))
            out["idle"][r["proxy"]] = x
            p.append(f"  {r['proxy']:8} {fmt(x.get('kib_per_conn'), 1):>6} KiB/conn {fx(x['vs_nginx']):>7}"
                     f"  (RSS {fmt(x.get('rss_before_kib') and x['rss_before_kib'] / 1024, 1)} ->"
                     f" {fmt(x.get('rss_after_kib') and x['rss_after_kib'] / 1024, 1)} MiB;"
                     f" {fmt(x.get('streaming'))}/{fmt(x.get('opened'))} streaming,"
                     f" {fmt(x.get('held'))} held, upstream holds {fmt(x.get('upstream_in_flight'))},"
                     f" {fmt(x.get('fds_after'))} descriptors, {fmt(x.get('setup_s'), 1)} s to open)")

    # --- lanes
    out["lanes"] = None
    p.append("")
    if a.lanes:
        try:
            out["lanes"] = json.load(open(a.lanes))
        except (OSError, ValueError) as e:
            p.append(f"lane microbenchmark: failed ({e})")
    if out["lanes"]:
        lj = out["lanes"]
        p.append("lane microbenchmark (bench-lanes)")
        for x in lj.get("lanes", []):
            p.append(f"  {fmt(x.get('n')):>8} lanes: {fmt(x.get('bytes_per_lane'))} bytes/lane,"
                     f" dispatch {fmt(x.get('dispatch_ns'), 0)} ns")
        for x in lj.get("queues", []):
            p.append(f"  queue depth {fmt(x.get('depth')):>8}: dispatch {fmt(x.get('dispatch_ns'), 0)} ns")
    elif not a.lanes:
        p.append("lane microbenchmark: not built")

    compare(out, recs, meta, p)

    sections = [(r["name"], r["s"]) for r in recs if r["kind"] == "section"]
    out["sections_s"] = dict(sections)
    p.append("")
    p.append(f"total time {out['elapsed_s']} s (" + ", ".join(f"{n} {t}" for n, t in sections) + f"); JSON: {a.out}")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("\n".join(p))


if __name__ == "__main__":
    main()
