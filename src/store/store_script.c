/* SPDX-License-Identifier: Apache-2.0 */
/* store_script — the Lua scripts of the shared store; see store_script.h. */
#include "store/store_script.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What every script starts with: the server's clock in ms, and keep(), which
 * makes a key live at least `ms` more (never shortens what another call
 * set: a hold or a debt may outlast this call's own state).
 *
 * charged(): gcra.c's charge. From the TAT while behind schedule or late by
 * less than the slack, min(10, (burst - cost) T), none when that is not
 * positive; else from now. A gate without slack (burst 1, min_ms) starts
 * from now plus the deciding replica's margin, the most its request takes
 * from this instant to the wire: the next decision, by any replica, is then
 * at least T after that request's send. */
#define LUA_PRELUDE                                                                                \
	"local t = redis.call('TIME')\n"                                                           \
	"local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000\n"                              \
	"local function keep(k, ms)\n"                                                             \
	"  ms = math.ceil(ms)\n"                                                                   \
	"  local cur = redis.call('PTTL', k)\n"                                                    \
	"  if cur < ms then redis.call('PEXPIRE', k, ms) end\n"                                    \
	"end\n"                                                                                    \
	"local function fmt(x) return string.format('%.3f', x) end\n"                              \
	"local function charged(tat, T, cost, burst, margin)\n"                                    \
	"  local slack = math.max(0, math.min(10, (burst - cost) * T))\n"                          \
	"  local base = now\n"                                                                     \
	"  if tat and now < tat + slack then base = tat end\n"                                     \
	"  if slack == 0 then base = math.max(base, now + margin) end\n"                           \
	"  return base + cost * T\n"                                                               \
	"end\n"

/* KEYS: lane hash, leases, lease queue, lease queue's last asks. ARGV: idle_ms,
 * lease_cap, member, lease_ms, margin_ms, n, then n × (field, T, burst, cost).
 * Reply: {go, wait_ms as a string, quota, the lane's strict margin ("" when
 * none)}: go after wait_ms (a go's wait is at most RESERVE_MS), or ask again
 * after it.
 *
 * Leases go first come, first served: a decision that finds no lease for it
 * (every one taken, or every free one owed to an older waiter) queues its
 * member, scored by its first ask; asked again under the same member
 * (shared.c keeps it while the request waits) it keeps its place, and it
 * takes a lease only when fewer older waiters are queued than leases are free.
 * A waiter that has not asked for QUEUE_STALE ms (its request left, its
 * replica died) leaves the queue. A replica that gives a lease back asks with
 * a new member: behind everyone waiting. */
#define QUEUE_STALE "150"
/* A decision whose gates open within this many ms is a "go" at that instant
 * (the reply's wait): the replica sends exactly then, where asking again
 * would come late, and a gate without slack would add that lateness to its
 * interval. Replicas ask a little early for it (shared.c). */
#define RESERVE_MS "5"
static const char decide_src[] = LUA_PRELUDE
    "local key, idle = KEYS[1], tonumber(ARGV[1])\n"
    "local cap, member, margin = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[5])\n"
    "local n = tonumber(ARGV[6])\n"
    "if not (margin and margin > 0) then margin = 0 end\n"
    "local wait, horizon = 0, now\n"
    "local quota = redis.call('HEXISTS', key, 'quota')\n"
    "local sm = redis.call('HGET', key, 'sm') or ''\n"
    "local hold = tonumber(redis.call('HGET', key, 'hold'))\n"
    "if hold and hold > now then wait = hold - now; horizon = hold end\n"
    "local gates = {}\n"
    "for i = 0, n - 1 do\n"
    "  local a = 7 + i * 4\n"
    "  local f, T, burst, cost = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), "
    "tonumber(ARGV[a + 3])\n"
    "  local v = redis.call('HMGET', key, f, f .. ':T', f .. ':B')\n"
    "  local learned = string.sub(f, 1, 1) == 'l'\n"
    "  if learned and T <= 0 then T = tonumber(v[2]) or 0; burst = tonumber(v[3]) or 1 end\n"
    "  if T > 0 then\n"
    "    local tat = tonumber(v[1])\n"
    "    if tat then\n"
    /* gcra_ready_at: an oversize cost waits only for an idle gate */
    "      local tol = burst * T\n"
    "      if T < 1 and tol < 1 then tol = 1 end\n"
    "      local w = tat + math.min(cost, burst) * T - tol - now\n"
    "      if w > wait then wait = w end\n"
    "    end\n"
    "    gates[#gates + 1] = {f, T, burst, cost, tat, learned}\n"
    "  end\n"
    "end\n"
    "local full = false\n"
    "if cap > 0 then\n"
    "  local L, Q, S = KEYS[2], KEYS[3], KEYS[4]\n"
    "  redis.call('ZREMRANGEBYSCORE', L, '-inf', now)\n"
    "  local gone = redis.call('ZRANGEBYSCORE', S, '-inf', now - " QUEUE_STALE ")\n"
    "  for _, m in ipairs(gone) do redis.call('ZREM', Q, m); redis.call('ZREM', S, m) end\n"
    "  local free = cap - redis.call('ZCARD', L)\n"
    "  local since = redis.call('ZSCORE', Q, member)\n"
    "  local ahead = 0\n"
    "  if since then ahead = redis.call('ZCOUNT', Q, '-inf', '(' .. since)\n"
    "  else ahead = redis.call('ZCARD', Q) end\n"
    "  if free <= ahead then\n"
    "    full = true\n"
    "    redis.call('ZADD', Q, 'NX', now, member)\n"
    "    redis.call('ZADD', S, now, member)\n"
    "    keep(Q, idle)\n"
    "    keep(S, idle)\n"
    /* a lease frees when its replica gives it back (unannounced here) or
     * expires, and an older waiter takes it at its next ask: ask again
     * soon, at the latest at the first expiry */
    "    local w = 25\n"
    "    if free <= 0 then\n"
    "      local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')\n"
    "      w = math.min(tonumber(first[2]) - now, 25)\n"
    "    end\n"
    "    if w > wait then wait = w end\n"
    "  end\n"
    "end\n"
    "if full or wait > " RESERVE_MS " then return {0, fmt(math.max(wait, 1)), quota, sm} end\n"
    /* a go at now + wait: charged as if decided then */
    "local at = wait\n"
    "now = now + wait\n"
    "for _, g in ipairs(gates) do\n"
    "  local nt = charged(g[5], g[2], g[4], g[3], margin)\n"
    "  if g[6] then\n"
    "    redis.call('HSET', key, g[1], fmt(nt), g[1] .. ':T', fmt(g[2]), g[1] .. ':B', fmt(g[3]))\n"
    "  else\n"
    "    redis.call('HSET', key, g[1], fmt(nt))\n"
    "  end\n"
    "  if nt > horizon then horizon = nt end\n"
    "end\n"
    "if #gates > 0 then keep(key, horizon - now + idle) end\n"
    "if cap > 0 then\n"
    "  local lease = tonumber(ARGV[4])\n"
    "  redis.call('ZADD', KEYS[2], now + lease, member)\n"
    "  keep(KEYS[2], lease + idle)\n"
    "  if redis.call('ZREM', KEYS[3], member) == 1 then redis.call('ZREM', KEYS[4], member) end\n"
    "end\n"
    "return {1, fmt(at), quota, sm}\n";

/* KEYS: lane hash. ARGV: idle_ms, n, then n × (field, T, burst, delta). A
 * charge follows the gate's slack (gcra_adjust: gcra_charge), without a
 * margin (it sends nothing); a refund never moves a TAT below now. */
static const char adjust_src[] =
    LUA_PRELUDE "local key, idle, n = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])\n"
                "local horizon = now\n"
                "for i = 0, n - 1 do\n"
                "  local a = 3 + i * 4\n"
                "  local f, T, B = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])\n"
                "  local d = tonumber(ARGV[a + 3])\n"
                "  local v = redis.call('HMGET', key, f, f .. ':T', f .. ':B')\n"
                "  if T <= 0 then T = tonumber(v[2]) or 0; B = tonumber(v[3]) or 1 end\n"
                "  local tat = tonumber(v[1])\n"
                "  local nt = nil\n"
                "  if T > 0 and d > 0 then nt = charged(tat, T, d, B, 0)\n"
                "  elseif T > 0 and d < 0 and tat then nt = math.max(tat + d * T, now) end\n"
                "  if nt then\n"
                "    redis.call('HSET', key, f, fmt(nt))\n"
                "    if nt > horizon then horizon = nt end\n"
                "  end\n"
                "end\n"
                "keep(key, horizon - now + idle)\n"
                "return 1\n";

/* KEYS: lane hash. ARGV: idle_ms, field, T, capacity, remaining. The bucket
 * holds `remaining` now (TAT = now + (capacity - remaining) T) unless the
 * charges of every replica already say it holds less: evidence only ever
 * slows the shared gate; the charges speed it up again as it refills. */
static const char observe_src[] =
    LUA_PRELUDE "local key, idle, f = KEYS[1], tonumber(ARGV[1]), ARGV[2]\n"
                "local T, cap, rem = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])\n"
                "if not (T > 0 and cap > 0) then return 0 end\n"
                "if rem < 0 then rem = 0 end\n"
                "if rem > cap then rem = cap end\n"
                "local tat = tonumber(redis.call('HGET', key, f))\n"
                "local obs = now + (cap - rem) * T\n"
                "redis.call('HSET', key, f .. ':T', fmt(T), f .. ':B', fmt(cap))\n"
                "if not tat or obs > tat then redis.call('HSET', key, f, fmt(obs)); tat = obs end\n"
                "keep(key, math.max(tat - now, 0) + idle)\n"
                "return 1\n";

/* KEYS: lane hash. ARGV: idle_ms, hold_ms. */
static const char hold_src[] =
    LUA_PRELUDE "local key, idle = KEYS[1], tonumber(ARGV[1])\n"
                "local h = now + tonumber(ARGV[2])\n"
                "local cur = tonumber(redis.call('HGET', key, 'hold'))\n"
                "if not cur or h > cur then redis.call('HSET', key, 'hold', fmt(h)); cur = h end\n"
                "keep(key, cur - now + idle)\n"
                "return 1\n";

/* KEYS: lane hash. ARGV: idle_ms, '1' (out) or '0' (back). */
static const char quota_src[] = LUA_PRELUDE "local key, idle = KEYS[1], tonumber(ARGV[1])\n"
                                            "if ARGV[2] == '1' then\n"
                                            "  redis.call('HSET', key, 'quota', '1')\n"
                                            "  keep(key, idle)\n"
                                            "else\n"
                                            "  redis.call('HDEL', key, 'quota')\n"
                                            "end\n"
                                            "return 1\n";

/* KEYS: leases. ARGV: lease_ms, member. XX: a lease already expired (and
 * perhaps taken by another replica) is not brought back. XX alone does not
 * ensure it: an expired lease stays in the set until a decide prunes it, and
 * ZADD XX would revive it (test_store_script caught that), so the expired
 * ones go first, as in decide. */
static const char renew_src[] =
    LUA_PRELUDE "local lease = tonumber(ARGV[1])\n"
                "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
                "local r = redis.call('ZADD', KEYS[1], 'XX', 'CH', now + lease, ARGV[2])\n"
                "keep(KEYS[1], lease)\n"
                "return r\n";

/* KEYS: the fleet's sorted set. ARGV: member, ttl_ms. The member's score is
 * its last beat on the server's clock; members older than ttl_ms go (a
 * replica that died, or one restarted under a new name); the key lives as
 * long as a beat is that recent. Reply: the members left. */
static const char beat_src[] =
    LUA_PRELUDE "local key, member, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])\n"
                "redis.call('ZADD', key, now, member)\n"
                "redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(now - ttl))\n"
                "redis.call('PEXPIRE', key, math.ceil(ttl))\n"
                "return redis.call('ZCARD', key)\n";

/* KEYS: lane hash. ARGV: idle_ms, from, to. A widening (to > from) is
 * written unless a wider margin is there; a narrowing only while what is
 * there is no more than `from` (nobody widened since this replica read it)
 * and more than `to`. Six decimals: the replicas compare what they read. */
static const char margin_src[] =
    LUA_PRELUDE "local key, idle = KEYS[1], tonumber(ARGV[1])\n"
                "local from, to = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
                "local cur = tonumber(redis.call('HGET', key, 'sm'))\n"
                "local set\n"
                "if to > from then set = not cur or cur < to\n"
                "else set = not cur or (cur <= from + 1e-6 and cur > to) end\n"
                "if set then redis.call('HSET', key, 'sm', string.format('%.6f', to)) end\n"
                "keep(key, idle)\n"
                "if set then return 1 end\n"
                "return 0\n";

static const struct {
	const char *name, *src;
} scripts[SCRIPT_N] = {
    [SCRIPT_DECIDE] = {"decide", decide_src},    [SCRIPT_ADJUST] = {"adjust", adjust_src},
    [SCRIPT_OBSERVE] = {"observe", observe_src}, [SCRIPT_HOLD] = {"hold", hold_src},
    [SCRIPT_QUOTA] = {"quota", quota_src},       [SCRIPT_RENEW] = {"renew", renew_src},
    [SCRIPT_BEAT] = {"beat", beat_src},          [SCRIPT_MARGIN] = {"margin", margin_src},
};

static char shas[SCRIPT_N][41];

const char *store_script_source(enum store_script_id id)
{
	return scripts[id].src;
}

const char *store_script_name(enum store_script_id id)
{
	return scripts[id].name;
}

const char *store_script_sha(enum store_script_id id)
{
	if (shas[id][0] == '\0') {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned len = 0;
		const char *src = scripts[id].src;
		if (EVP_Digest(src, strlen(src), md, &len, EVP_sha1(), NULL) != 1 || len != 20)
			abort(); /* SHA-1 is always there in libcrypto */
		for (unsigned i = 0; i < len; i++)
			snprintf(shas[id] + 2 * i, 3, "%02x", md[i]);
	}
	return shas[id];
}

bool store_lane_keys(const char *prefix, const char *provider, const char *key_id,
                     const char *model, char *key, size_t keylen, char *leases, size_t leaseslen)
{
	const char *id = key_id != NULL && key_id[0] != '\0' ? key_id : "-";
	int a, b;
	/* The lane's name in braces: Redis Cluster hashes only what is between
	 * the first '{' and the next '}', so every key of the lane is in one
	 * slot (a script may touch only one). A '}' inside the name ends the
	 * tag early, at the same place in every key of the lane: still one slot. */
	if (model != NULL && model[0] != '\0') {
		a = snprintf(key, keylen, "%s{%s:%s:m%zu:%s}", prefix, provider, id, strlen(model),
		             model);
		b = snprintf(leases, leaseslen, "%s{%s:%s:m%zu:%s}:leases", prefix, provider, id,
		             strlen(model), model);
	} else {
		a = snprintf(key, keylen, "%s{%s:%s}", prefix, provider, id);
		b = snprintf(leases, leaseslen, "%s{%s:%s}:leases", prefix, provider, id);
	}
	return a > 0 && (size_t)a < keylen && b > 0 && (size_t)b < leaseslen;
}

bool store_lane_names_of(const char *prefix, const char *provider, const char *key_id,
                         const char *model, struct store_lane_names *out)
{
	if (!store_lane_keys(prefix, provider, key_id, model, out->key, sizeof(out->key),
	                     out->leases, sizeof(out->leases)))
		return false;
	snprintf(out->queue, sizeof(out->queue), "%s:queue", out->leases);
	snprintf(out->asked, sizeof(out->asked), "%s:asked", out->leases);
	return true;
}

static void arg_str(struct store_cmd *c, const char *s)
{
	c->argv[c->argc] = s;
	c->argvlen[c->argc] = strlen(s);
	c->argc++;
}

/* A number as Lua's tonumber reads it; not finite becomes 0. */
static void arg_num(struct store_cmd *c, double v)
{
	char *b = c->buf[c->argc];
	if (!isfinite(v))
		v = 0;
	int n = snprintf(b, STORE_ARG_LEN, "%.10g", v);
	c->argv[c->argc] = b;
	c->argvlen[c->argc] = (size_t)n;
	c->argc++;
}

static void begin(struct store_cmd *c, enum store_script_id id, int numkeys)
{
	c->argc = 0;
	arg_str(c, "EVALSHA");
	arg_str(c, store_script_sha(id));
	arg_num(c, numkeys);
}

void store_cmd_decide(struct store_cmd *cmd, const struct store_lane_names *names, double idle_ms,
                      unsigned lease_cap, const char *member, double lease_ms, double margin_ms,
                      const struct store_gate *gates, size_t n)
{
	if (n > STORE_MAX_GATES)
		n = STORE_MAX_GATES;
	begin(cmd, SCRIPT_DECIDE, 4);
	arg_str(cmd, names->key);
	arg_str(cmd, names->leases);
	arg_str(cmd, names->queue);
	arg_str(cmd, names->asked);
	arg_num(cmd, idle_ms);
	arg_num(cmd, lease_cap);
	arg_str(cmd, member != NULL ? member : "");
	arg_num(cmd, lease_ms);
	arg_num(cmd, margin_ms);
	arg_num(cmd, (double)n);
	for (size_t i = 0; i < n; i++) {
		arg_str(cmd, gates[i].field);
		arg_num(cmd, gates[i].t_ms);
		arg_num(cmd, gates[i].burst);
		arg_num(cmd, gates[i].cost);
	}
}

void store_cmd_adjust(struct store_cmd *cmd, const char *key, double idle_ms,
                      const struct store_gate *gates, size_t n)
{
	if (n > STORE_MAX_GATES)
		n = STORE_MAX_GATES;
	begin(cmd, SCRIPT_ADJUST, 1);
	arg_str(cmd, key);
	arg_num(cmd, idle_ms);
	arg_num(cmd, (double)n);
	for (size_t i = 0; i < n; i++) {
		arg_str(cmd, gates[i].field);
		arg_num(cmd, gates[i].t_ms);
		arg_num(cmd, gates[i].burst);
		arg_num(cmd, gates[i].cost);
	}
}

void store_cmd_observe(struct store_cmd *cmd, const char *key, double idle_ms, const char *field,
                       double t_ms, double burst, double remaining)
{
	begin(cmd, SCRIPT_OBSERVE, 1);
	arg_str(cmd, key);
	arg_num(cmd, idle_ms);
	arg_str(cmd, field);
	arg_num(cmd, t_ms);
	arg_num(cmd, burst);
	arg_num(cmd, remaining);
}

void store_cmd_hold(struct store_cmd *cmd, const char *key, double idle_ms, double hold_ms)
{
	begin(cmd, SCRIPT_HOLD, 1);
	arg_str(cmd, key);
	arg_num(cmd, idle_ms);
	arg_num(cmd, hold_ms);
}

void store_cmd_quota(struct store_cmd *cmd, const char *key, double idle_ms, bool out)
{
	begin(cmd, SCRIPT_QUOTA, 1);
	arg_str(cmd, key);
	arg_num(cmd, idle_ms);
	arg_str(cmd, out ? "1" : "0");
}

void store_cmd_margin(struct store_cmd *cmd, const char *key, double idle_ms, double from,
                      double to)
{
	begin(cmd, SCRIPT_MARGIN, 1);
	arg_str(cmd, key);
	arg_num(cmd, idle_ms);
	arg_num(cmd, from);
	arg_num(cmd, to);
}

void store_cmd_renew(struct store_cmd *cmd, const char *leases, double lease_ms, const char *member)
{
	begin(cmd, SCRIPT_RENEW, 1);
	arg_str(cmd, leases);
	arg_num(cmd, lease_ms);
	arg_str(cmd, member);
}

bool store_fleet_key(const char *prefix, char *key, size_t keylen)
{
	int n = snprintf(key, keylen, "%sreplicas", prefix);
	return n > 0 && (size_t)n < keylen;
}

void store_cmd_beat(struct store_cmd *cmd, const char *fleet_key, const char *member, double ttl_ms)
{
	begin(cmd, SCRIPT_BEAT, 1);
	arg_str(cmd, fleet_key);
	arg_str(cmd, member);
	arg_num(cmd, ttl_ms);
}

void store_cmd_release(struct store_cmd *cmd, const char *leases, const char *member)
{
	cmd->argc = 0;
	arg_str(cmd, "ZREM");
	arg_str(cmd, leases);
	arg_str(cmd, member);
}

void store_cmd_as_eval(struct store_cmd *cmd, enum store_script_id id)
{
	cmd->argv[0] = "EVAL";
	cmd->argvlen[0] = 4;
	cmd->argv[1] = store_script_source(id);
	cmd->argvlen[1] = strlen(cmd->argv[1]);
}

bool store_parse_verdict(long long go, const char *wait, size_t wait_len, long long quota,
                         struct store_verdict *v)
{
	char b[STORE_ARG_LEN];
	if (wait == NULL || wait_len == 0 || wait_len >= sizeof(b) || (go != 0 && go != 1))
		return false;
	memcpy(b, wait, wait_len);
	b[wait_len] = '\0';
	char *end;
	double w = strtod(b, &end);
	if (*end != '\0' || !isfinite(w) || w < 0)
		return false;
	v->go = go == 1;
	v->wait_ms = w;
	v->quota = quota != 0;
	return true;
}

bool store_parse_margin(const char *s, size_t len, double *out)
{
	char b[STORE_ARG_LEN];
	if (s == NULL || len == 0 || len >= sizeof(b))
		return false;
	memcpy(b, s, len);
	b[len] = '\0';
	char *end;
	double m = strtod(b, &end);
	if (*end != '\0' || !(m > 0 && m < 1))
		return false;
	*out = m;
	return true;
}
