-- SPDX-License-Identifier: Apache-2.0
-- wrk script for scripts/bench.sh: POST /v1/chat/completions with a chat body of
-- about 1 KiB and a bearer key (one pacerd lane); done() prints one JSON line,
-- "WRKJSON {...}", that bench.sh records (latencies in microseconds).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench-0123456789abcdef0123456789abcdef"

-- 870 characters of prompt: the body is exactly 1024 bytes.
local text = string.sub(string.rep("Summarise the following text in one sentence. Lorem ipsum "
	.. "dolor sit amet, consectetur adipiscing elit. ", 10), 1, 870)
wrk.body = '{"model":"gpt-4o-mini","max_tokens":64,"temperature":0,"messages":['
	.. '{"role":"system","content":"You are a terse assistant."},'
	.. '{"role":"user","content":"' .. text .. '"}]}'

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,'
		.. '"body_bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
		.. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
		summary.requests, summary.duration, summary.bytes, #wrk.body,
		e.connect, e.read, e.write, e.status, e.timeout,
		latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
