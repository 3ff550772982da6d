-- SPDX-License-Identifier: Apache-2.0
-- wrk script for scripts/bench.sh: POST /v1/chat/completions with a chat body of
-- 1 KiB and a bearer key (one pacerd lane); done() prints one JSON line,
-- "WRKJSON {...}", that bench.sh records (latencies in microseconds).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench-0123456789abcdef0123456789abcdef"

-- The body: scripts/bench/chat.json (1024 bytes: 870 characters of prompt), which
-- h2load sends too (the frontier); wrk runs in the repository's root.
local f = assert(io.open("scripts/bench/chat.json", "rb"))
wrk.body = f:read("*a")
f:close()

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,'
		.. '"body_bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
		.. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
		summary.requests, summary.duration, summary.bytes, #wrk.body,
		e.connect, e.read, e.write, e.status, e.timeout,
		latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
