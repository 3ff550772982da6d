#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The throughput frontier, for scripts/bench.sh: the highest rate of requests a
path carries while the p99 latency it adds to the direct path stays under each
limit (1, 5 and 10 ms by default).

Load: wrk with scripts/bench/frontier.lua, --conns connections, each pausing a
random (exponential) time between an answer and its next request, so that the
requests arrive as independent arrivals at about conns / (pause + latency) per
second. The pause's mean is set from each step's nominal rate (--rates, rising);
what counts is the rate achieved, which wrk measures (it falls short of the
nominal one by the latency and wrk's whole-millisecond timers).

At each step, --reps rounds, each running every path still in the sweep for
--seconds, in turn (the order turns each round, so that no path always follows
another); a path's figures at a step are the medians over its rounds, and its
added p99 is the median of (its p99 - the reference's p99) of each round. The
first --path is the reference (direct: the upstream itself).

A limit holds at a step when the added p99 is under it, the path answered every
request, and it carried at least 90 % of what the reference carried in the same
step (below that it is the path that sets the pace: it fell behind). A path's
frontier for a limit is the rate it achieved at the last step before the first
step where the limit did not hold ("while it stays under"); a path leaves the
sweep once no limit holds, the sweep ends once no path is left, or once the
reference itself carries less than --ceiling of the nominal rate (the load core
is full: every limit still holding then is a lower bound, marked "lower_bound").

Bounded: every wrk run has its duration and a 10 s timeout per request, and the
steps are a fixed list. Prints one JSON object:

  conns, seconds, reps, limits_ms, reference
  steps     [{nominal, paths: {NAME: {rps, p50_us, p99_us, added_p99_us, errors,
            rounds: [...]}}}]
  frontier  {NAME: {LIMIT: {rps, step, lower_bound}}} (rps None: not even the
            first step held)
  ceiling   the reference's highest achieved rate, and whether it was reached
"""
import argparse
import json
import statistics
import subprocess


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def run_wrk(wrk_script, port, conns, seconds, mean_ms):
    """One wrk run: its WRKJSON line as a dict, or None."""
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s", "-s", wrk_script,
           f"http://127.0.0.1:{port}/v1/chat/completions", "--", f"{mean_ms:.3f}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    except subprocess.TimeoutExpired:
        return None
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[len("WRKJSON "):])
    return None


def summarize(rounds, ref_rounds):
    """A path's figures at a step from its rounds (and the reference's, paired by
    round)."""
    ok = [r for r in rounds if r]
    rps = [r["requests"] * 1e6 / r["duration_us"] for r in ok if r["duration_us"]]
    added = [a["p99_us"] - b["p99_us"] for a, b in zip(rounds, ref_rounds) if a and b]
    return {"rps": median(rps), "p50_us": median([r["p50_us"] for r in ok]),
            "p99_us": median([r["p99_us"] for r in ok]), "added_p99_us": median(added),
            "errors": sum(sum(r["errors"].values()) for r in ok) + len(rounds) - len(ok),
            "rounds": rounds}


def holds(step, ref, limit_ms):
    """Whether a path's figures at a step keep a limit (see the module comment)."""
    if step["rps"] is None or step["added_p99_us"] is None or ref["rps"] is None:
        return False
    return (step["errors"] == 0 and step["rps"] >= 0.9 * ref["rps"]
            and step["added_p99_us"] < limit_ms * 1000)


def frontier_of(steps, names, ref, limits):
    """{NAME: {LIMIT: {rps, step, lower_bound}}} from the steps as they were run;
    lower_bound: the limit still held at the last step (the sweep ended at the load
    core's ceiling or at the last rate)."""
    out = {}
    for name in names:
        f = {}
        for lim in limits:
            best, last, broke = None, None, False
            for i, st in enumerate(steps):
                e = st["paths"].get(name)
                if e is None:
                    break
                if not holds(e, st["paths"][ref], lim):
                    broke = True
                    break
                best, last = e["rps"], i
            f[str(lim)] = {"rps": None if best is None else round(best),
                           "step": None if last is None else steps[last]["nominal"],
                           "lower_bound": not broke and last is not None and last == len(steps) - 1}
        out[name] = f
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", action="append", required=True, metavar="NAME=PORT",
                    help="a path to measure; the first is the reference")
    ap.add_argument("--wrk-script", default="scripts/bench/frontier.lua")
    ap.add_argument("--conns", type=int, default=128)
    ap.add_argument("--seconds", type=int, default=1, help="per run (wrk takes whole seconds)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rates", default="1000 2500 5000 7500 10000 12500 15000 17500 20000 "
                                       "25000 30000 35000 40000 50000")
    ap.add_argument("--limits", default="1 5 10", help="added p99 limits, milliseconds")
    ap.add_argument("--ceiling", type=float, default=0.6,
                    help="the sweep ends when the reference carries less than this share of the nominal rate")
    a = ap.parse_args()
    paths = []
    for p in a.path:
        name, _, port = p.partition("=")
        paths.append((name, int(port)))
    ref = paths[0][0]
    names = [n for n, _ in paths[1:]]
    limits = [float(x) if "." in x else int(x) for x in a.limits.split()]

    steps, active = [], set(names)
    ceiling = {"rps": None, "reached": False}
    for nominal in [int(x) for x in a.rates.split()]:
        if not active:
            break
        mean_ms = a.conns * 1000.0 / nominal
        run_now = [(n, p) for n, p in paths if n == ref or n in active]
        rounds = {n: [] for n, _ in run_now}
        for r in range(a.reps):
            k = r % len(run_now)
            for name, port in run_now[k:] + run_now[:k]:
                rounds[name].append(run_wrk(a.wrk_script, port, a.conns, a.seconds, mean_ms))
        st = {"nominal": nominal, "paths": {}}
        st["paths"][ref] = summarize(rounds[ref], rounds[ref])
        st["paths"][ref]["added_p99_us"] = 0
        for name in names:
            if name in rounds:
                st["paths"][name] = summarize(rounds[name], rounds[ref])
        steps.append(st)
        r_rps = st["paths"][ref]["rps"]
        if r_rps is not None:
            ceiling["rps"] = max(ceiling["rps"] or 0, round(r_rps))
        for name in list(active):
            if not any(holds(st["paths"][name], st["paths"][ref], lim) for lim in limits):
                active.discard(name)
        if r_rps is None or r_rps < a.ceiling * nominal:
            ceiling["reached"] = True
            break
    print(json.dumps({"conns": a.conns, "seconds": a.seconds, "reps": a.reps, "limits_ms": limits,
                      "reference": ref, "steps": steps,
                      "frontier": frontier_of(steps, names, ref, limits), "ceiling": ceiling}))


if __name__ == "__main__":
    main()
