-- SPDX-License-Identifier: Apache-2.0
-- wrk script for the frontier (scripts/bench/frontier.py): chat.lua's requests, each
-- connection pausing between an answer and its next request for a random time
-- (exponential, mean given as the script's argument in milliseconds), so that the
-- connections' requests interleave as independent arrivals at about
-- connections / (mean + latency) per second, not as waves. The first request of a
-- connection waits too. The pause is not timed: wrk starts a request's clock when it
-- writes it.
dofile("scripts/bench/chat.lua")

local mean_ms = 10

function init(args)
	mean_ms = tonumber(args[1]) or mean_ms
	math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

-- wrk's timers count whole milliseconds: rounding up with a probability of the
-- fraction keeps the mean.
function delay()
	local d = -mean_ms * math.log(1 - math.random())
	return math.floor(d + math.random())
end
