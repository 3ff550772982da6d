/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/config.c: defaults, a file with every key, every rejection
 * with its exact file:line:column message, environment overrides, provider
 * activation, the shipped configuration files, host:port parsing. */
#include "unit.h"

#include "core/config.h"
#include "core/daily.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ERRLEN 512

/* Writes text to a new file under /tmp; returns its malloc'd path. */
static char *tmp_write(const char *text)
{
	char tmpl[] = "/tmp/pacerd-test-config-XXXXXX";
	int fd = mkstemp(tmpl);
	size_t len = strlen(text);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return strdup(tmpl);
}

/* Loads yaml (NULL: no file) with env; the file is removed before returning. */
static struct config *load(const char *yaml, char *const *env, char *err, char **path_out)
{
	char *path = yaml ? tmp_write(yaml) : NULL;
	struct config *cfg = config_load(path, env, err, ERRLEN);
	if (path)
		unlink(path);
	if (path_out)
		*path_out = path;
	else
		free(path);
	return cfg;
}

static struct config *load_ok(const char *yaml, char *const *env)
{
	char err[ERRLEN];
	struct config *cfg = load(yaml, env, err, NULL);
	ck_assert_msg(cfg != NULL, "unexpected error: %s", err);
	ck_assert_str_eq(err, "");
	return cfg;
}

/* Expects yaml to be rejected with "PATH:" + suffix. */
static void expect_file_error(const char *yaml, char *const *env, const char *suffix)
{
	char err[ERRLEN], want[ERRLEN], *path = NULL;
	struct config *cfg = load(yaml, env, err, &path);
	ck_assert_msg(cfg == NULL, "accepted:\n%s", yaml);
	snprintf(want, sizeof(want), "%s:%s", path, suffix);
	ck_assert_str_eq(err, want);
	free(path);
}

/* Expects a rejection whose message does not name the file (a variable). */
static void expect_error(const char *yaml, char *const *env, const char *exact)
{
	char err[ERRLEN];
	struct config *cfg = load(yaml, env, err, NULL);
	ck_assert_msg(cfg == NULL, "accepted");
	ck_assert_str_eq(err, exact);
}

static const char *const builtin_order[] = {"openai", "anthropic", "gemini",  "openrouter",
                                            "groq",   "mistral",   "together"};

/* ------------------------------------------------------------- defaults */

static void check_default_plan(const struct plan_conf *p)
{
	ck_assert_double_eq(p->max_requests_per_second, 0);
	ck_assert_double_eq(p->max_requests_per_minute, 0);
	ck_assert_double_eq(p->max_requests_per_hour, 0);
	ck_assert_double_eq(p->min_ms_per_request, 0);
	ck_assert_uint_eq(p->burst, 1);
	ck_assert_double_eq(p->max_tokens_per_minute, 0);
	ck_assert_double_eq(p->token_burst, 0);
	ck_assert_uint_eq(p->default_output_tokens, 1024);
	ck_assert_uint_eq(p->max_concurrent, 64);
	ck_assert(p->concurrency.adaptive);
	ck_assert_uint_eq(p->concurrency.min, 1);
	ck_assert_double_eq(p->concurrency.decrease_factor, 0.5);
	ck_assert_uint_eq(p->concurrency.reopen_after_s, 450); /* idle_ttl_s / 2 */
	ck_assert_int_eq(p->concurrency.mode, CONCURRENCY_AUTO);
	ck_assert_uint_eq(p->concurrency.slow_start, 20);
	ck_assert_double_eq(p->concurrency.tolerance, 1.0);
	ck_assert_uint_eq(p->quota_probe_s, 10);
	ck_assert(p->dispatch_delay.adaptive);
	ck_assert_uint_eq(p->dispatch_delay.min_ms, 0);
	ck_assert_uint_eq(p->dispatch_delay.max_ms, 5000);
	ck_assert_double_eq(p->dispatch_delay.backoff_multiplier, 1.5);
	ck_assert_double_eq(p->dispatch_delay.recovery_rps, 3);
	ck_assert_double_eq(p->proactive_threshold, 0.10);
	ck_assert_uint_eq(p->queue.max_depth, 10000);
	ck_assert_uint_eq(p->queue.max_wait_s, 600);
	ck_assert_uint_eq(p->retry.max_attempts, 3);
	ck_assert_uint_eq(p->retry.initial_delay_ms, 1000);
	ck_assert_uint_eq(p->retry.max_delay_ms, 60000);
	ck_assert_int_eq(p->retry.jitter, JITTER_ADDITIVE);
	ck_assert_uint_eq(p->retry.deadline_s, 300);
}

static void check_provider(const struct provider_conf *p, const char *upstream, const char *prefix,
                           enum key_source ks, enum dialect d, const char *host)
{
	ck_assert_ptr_nonnull(p);
	if (upstream)
		ck_assert_str_eq(p->upstream, upstream);
	else
		ck_assert_ptr_null(p->upstream);
	ck_assert_str_eq(p->prefix, prefix);
	ck_assert_int_eq(p->key_source, ks);
	ck_assert_int_eq(p->dialect, d);
	if (host) {
		ck_assert_uint_eq(p->n_hosts, 1);
		ck_assert_str_eq(p->hosts[0], host);
	} else {
		ck_assert_uint_eq(p->n_hosts, 0);
	}
	ck_assert_str_eq(p->plan, "default");
	ck_assert(p->tls.verify);
	ck_assert_str_eq(p->tls.ca_file, "");
	ck_assert_uint_eq(p->timeouts.connect_s, 10);
	ck_assert_uint_eq(p->timeouts.first_byte_s, 300);
	ck_assert_uint_eq(p->timeouts.idle_s, 300);
	ck_assert(!p->http2);
}

/* Everything config_load(NULL) promises (DESIGN §10). */
static void check_defaults(const struct config *c)
{
	ck_assert_str_eq(c->listen, "127.0.0.1:8080");
	ck_assert_str_eq(c->admin.listen, "127.0.0.1:9090");
	ck_assert_str_eq(c->admin.token, "");
	ck_assert_uint_eq(c->admin.top_lanes, 100);
	ck_assert_int_eq(c->log.level, LOG_INFO);
	ck_assert_str_eq(c->log.file, "-");
	ck_assert_uint_eq(c->limits.max_body_bytes, 33554432);
	ck_assert_uint_eq(c->limits.max_upload_bytes, 2147483648ULL);
	ck_assert_uint_eq(c->limits.max_header_bytes, 65536);
	ck_assert_uint_eq(c->limits.max_connections, 4096);
	ck_assert_uint_eq(c->limits.client_timeout_s, 900);
	ck_assert_uint_eq(c->limits.max_lanes, 100000);
	ck_assert_uint_eq(c->limits.idle_ttl_s, 900);
	ck_assert_uint_eq(c->drain_timeout_s, 30);
	ck_assert_str_eq(c->default_provider, "openai");
	ck_assert_uint_eq(c->n_providers, 7);
	for (size_t i = 0; i < 7; i++)
		ck_assert_str_eq(c->providers[i].name, builtin_order[i]);
	check_provider(config_provider(c, "openai"), "https://api.openai.com", "/",
	               KEY_AUTHORIZATION, DIALECT_OPENAI, "api.openai.com");
	check_provider(config_provider(c, "anthropic"), "https://api.anthropic.com", "/anthropic",
	               KEY_X_API_KEY, DIALECT_ANTHROPIC, "api.anthropic.com");
	check_provider(config_provider(c, "gemini"), "https://generativelanguage.googleapis.com",
	               "/gemini", KEY_X_GOOG_API_KEY, DIALECT_NONE,
	               "generativelanguage.googleapis.com");
	check_provider(config_provider(c, "openrouter"), "https://openrouter.ai/api", "/openrouter",
	               KEY_AUTHORIZATION, DIALECT_OPENAI, "openrouter.ai");
	check_provider(config_provider(c, "groq"), "https://api.groq.com/openai", "/groq",
	               KEY_AUTHORIZATION, DIALECT_OPENAI, "api.groq.com");
	check_provider(config_provider(c, "mistral"), "https://api.mistral.ai", "/mistral",
	               KEY_AUTHORIZATION, DIALECT_OPENAI, "api.mistral.ai");
	check_provider(config_provider(c, "together"), "https://api.together.xyz", "/together",
	               KEY_AUTHORIZATION, DIALECT_OPENAI, "api.together.xyz");
	ck_assert_ptr_null(config_provider(c, "azure"));
	ck_assert_uint_eq(c->n_plans, 1);
	ck_assert_str_eq(c->plans[0].name, "default");
	check_default_plan(config_plan(c, "default"));
	ck_assert_uint_eq(c->n_keys, 0);
	ck_assert_str_eq(c->agents.header, "x-agent-id");
	ck_assert_int_eq(c->agents.mode, AGENTS_OFF);
}

START_TEST(defaults_without_file)
{
	struct config *c = load_ok(NULL, NULL);
	ck_assert_str_eq(c->source, "(built-in defaults)");
	check_defaults(c);
	config_free(c);
}
END_TEST

START_TEST(empty_file_is_defaults)
{
	static const char *const texts[] = {"", "# only a comment\n", "---\n", "~\n"};
	for (size_t i = 0; i < 4; i++) {
		struct config *c = load_ok(texts[i], NULL);
		ck_assert_str_ne(c->source, "(built-in defaults)");
		check_defaults(c);
		config_free(c);
	}
}
END_TEST

START_TEST(shipped_default_config_is_the_defaults)
{
	char err[ERRLEN];
	struct config *c = config_load("conf/pacerd.yaml", NULL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->source, "conf/pacerd.yaml");
	check_defaults(c);
	config_free(c);
}
END_TEST

static const char *const examples[] = {"conf/examples/openai.yaml", "conf/examples/anthropic.yaml",
                                       "conf/examples/azure.yaml", "conf/examples/gemini.yaml",
                                       "conf/examples/multi-provider.yaml"};

START_TEST(shipped_examples_load)
{
	char err[ERRLEN];
	struct config *c = config_load(examples[_i], NULL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	config_free(c);
}
END_TEST

START_TEST(example_contents)
{
	char err[ERRLEN];
	struct config *c = config_load("conf/examples/azure.yaml", NULL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->n_providers, 1);
	ck_assert_str_eq(c->default_provider, "azure");
	ck_assert_str_eq(c->providers[0].upstream, "https://YOUR-RESOURCE.openai.azure.com");
	ck_assert_str_eq(c->providers[0].hosts[0], "your-resource.openai.azure.com");
	ck_assert_int_eq(c->providers[0].key_source, KEY_API_KEY);
	config_free(c);
	c = config_load("conf/examples/openai.yaml", NULL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->n_providers, 7);
	ck_assert_double_eq(c->plans[0].max_requests_per_minute, 500);
	config_free(c);
	c = config_load("conf/examples/multi-provider.yaml", NULL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(config_provider(c, "local")->prefix, "/local");
	ck_assert_str_eq(c->keys[0].plan, "batch");
	config_free(c);
}
END_TEST

/* ------------------------------------------------------------ full file */

static const char full_yaml[] =
    "listen: '[::1]:8081'\n"
    "admin:\n"
    "  listen: 0.0.0.0:9091\n"
    "  token: s3cret\n"
    "  top_lanes: 7\n"
    "log: {level: debug, file: /var/log/pacerd.log}\n"
    "limits:\n"
    "  max_body_bytes: 1048576\n"
    "  max_upload_bytes: 0\n"
    "  max_header_bytes: 8192\n"
    "  max_connections: 100\n"
    "  client_timeout_s: 60\n"
    "  max_lanes: 50\n"
    "  idle_ttl_s: 120\n"
    "drain_timeout_s: 0\n"
    "default_provider: local\n"
    "providers:\n"
    "  local:\n"
    "    upstream: http://127.0.0.1:11434/v1/\n"
    "    prefix: /\n"
    "    key_header: query:key\n"
    "    dialect: ietf\n"
    "    hosts:\n"
    "      - LLM.Internal\n"
    "      - 10.0.0.7\n"
    "    plan: gold\n"
    "    tls: {verify: false, ca_file: /etc/ssl/ca.pem}\n"
    "    timeouts: {connect_s: 1, first_byte_s: 2, idle_s: 3}\n"
    "    http2: true\n"
    "  anthropic:\n"
    "    key_header: authorization\n"
    "plans:\n"
    "  gold:\n"
    "    max_requests_per_second: 2.5\n"
    "    max_requests_per_minute: 100\n"
    "    max_requests_per_hour: 5000\n"
    "    min_ms_per_request: 20\n"
    "    burst: 3\n"
    "    max_tokens_per_minute: 90000\n"
    "    token_burst: 500\n"
    "    default_output_tokens: 0\n"
    "    max_concurrent: 10\n"
    "    concurrency: {adaptive: false, min: 2, decrease_factor: 0.75, reopen_after_s: 30,\n"
    "                  mode: gradient, slow_start: 8, tolerance: 0.5}\n"
    "    quota_probe_s: 3\n"
    "    dispatch_delay:\n"
    "      adaptive: false\n"
    "      min_ms: 10\n"
    "      max_ms: 10\n"
    "      backoff_multiplier: 1\n"
    "      recovery_rps: 0.5\n"
    "    proactive_threshold: 1\n"
    "    queue: {max_depth: 1, max_wait_s: 7}\n"
    "    retry: {max_attempts: 9, initial_delay_ms: 0, max_delay_ms: 100, jitter: full, "
    "deadline_s: 60}\n"
    "  default:\n"
    "    max_requests_per_minute: 60\n"
    "keys:\n"
    "  - {provider: local, key_sha256: 3F9A1C0B7D2E, plan: gold}\n"
    "  - provider: anthropic\n"
    "    key_sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
    "agents:\n"
    "  header: X-Agent\n"
    "  mode: serialize\n";

START_TEST(full_file_every_key)
{
	struct config *c = load_ok(full_yaml, NULL);
	const struct provider_conf *p;
	const struct plan_conf *g;
	ck_assert_str_eq(c->listen, "[::1]:8081");
	ck_assert_str_eq(c->admin.listen, "0.0.0.0:9091");
	ck_assert_str_eq(c->admin.token, "s3cret");
	ck_assert_uint_eq(c->admin.top_lanes, 7);
	ck_assert_int_eq(c->log.level, LOG_DEBUG);
	ck_assert_str_eq(c->log.file, "/var/log/pacerd.log");
	ck_assert_uint_eq(c->limits.max_body_bytes, 1048576);
	ck_assert_uint_eq(c->limits.max_upload_bytes, 0);
	ck_assert_uint_eq(c->limits.max_header_bytes, 8192);
	ck_assert_uint_eq(c->limits.max_connections, 100);
	ck_assert_uint_eq(c->limits.client_timeout_s, 60);
	ck_assert_uint_eq(c->limits.max_lanes, 50);
	ck_assert_uint_eq(c->limits.idle_ttl_s, 120);
	ck_assert_uint_eq(c->drain_timeout_s, 0);
	ck_assert_str_eq(c->default_provider, "local");
	ck_assert_uint_eq(c->n_providers, 2);
	p = &c->providers[0];
	ck_assert_str_eq(p->name, "local");
	ck_assert_str_eq(p->upstream, "http://127.0.0.1:11434/v1");
	ck_assert_str_eq(p->prefix, "/");
	ck_assert_int_eq(p->key_source, KEY_QUERY_KEY);
	ck_assert_int_eq(p->dialect, DIALECT_IETF);
	ck_assert_uint_eq(p->n_hosts, 2);
	ck_assert_str_eq(p->hosts[0], "llm.internal");
	ck_assert_str_eq(p->hosts[1], "10.0.0.7");
	ck_assert_str_eq(p->plan, "gold");
	ck_assert(!p->tls.verify);
	ck_assert_str_eq(p->tls.ca_file, "/etc/ssl/ca.pem");
	ck_assert_uint_eq(p->timeouts.connect_s, 1);
	ck_assert_uint_eq(p->timeouts.first_byte_s, 2);
	ck_assert_uint_eq(p->timeouts.idle_s, 3);
	ck_assert(p->http2);
	/* A listed built-in keeps its built-in values except what the file sets. */
	p = config_provider(c, "anthropic");
	ck_assert_str_eq(p->upstream, "https://api.anthropic.com");
	ck_assert_int_eq(p->key_source, KEY_AUTHORIZATION);
	ck_assert_int_eq(p->dialect, DIALECT_ANTHROPIC);
	ck_assert_uint_eq(c->n_plans, 2);
	ck_assert_str_eq(c->plans[0].name, "default");
	ck_assert_double_eq(c->plans[0].max_requests_per_minute, 60);
	ck_assert_uint_eq(c->plans[0].max_concurrent, 64);
	g = config_plan(c, "gold");
	ck_assert_ptr_nonnull(g);
	ck_assert_double_eq(g->max_requests_per_second, 2.5);
	ck_assert_double_eq(g->max_requests_per_minute, 100);
	ck_assert_double_eq(g->max_requests_per_hour, 5000);
	ck_assert_double_eq(g->min_ms_per_request, 20);
	ck_assert_uint_eq(g->burst, 3);
	ck_assert_double_eq(g->max_tokens_per_minute, 90000);
	ck_assert_double_eq(g->token_burst, 500);
	ck_assert_uint_eq(g->default_output_tokens, 0);
	ck_assert_uint_eq(g->max_concurrent, 10);
	ck_assert(!g->concurrency.adaptive);
	ck_assert_uint_eq(g->concurrency.reopen_after_s, 30);
	ck_assert_uint_eq(g->quota_probe_s, 3);
	ck_assert_uint_eq(g->concurrency.min, 2);
	ck_assert_double_eq(g->concurrency.decrease_factor, 0.75);
	ck_assert_int_eq(g->concurrency.mode, CONCURRENCY_GRADIENT);
	ck_assert_uint_eq(g->concurrency.slow_start, 8);
	ck_assert_double_eq(g->concurrency.tolerance, 0.5);
	ck_assert(!g->dispatch_delay.adaptive);
	ck_assert_uint_eq(g->dispatch_delay.min_ms, 10);
	ck_assert_uint_eq(g->dispatch_delay.max_ms, 10);
	ck_assert_double_eq(g->dispatch_delay.backoff_multiplier, 1);
	ck_assert_double_eq(g->dispatch_delay.recovery_rps, 0.5);
	ck_assert_double_eq(g->proactive_threshold, 1);
	ck_assert_uint_eq(g->queue.max_depth, 1);
	ck_assert_uint_eq(g->queue.max_wait_s, 7);
	ck_assert_uint_eq(g->retry.max_attempts, 9);
	ck_assert_uint_eq(g->retry.initial_delay_ms, 0);
	ck_assert_uint_eq(g->retry.max_delay_ms, 100);
	ck_assert_int_eq(g->retry.jitter, JITTER_FULL);
	ck_assert_uint_eq(g->retry.deadline_s, 60);
	ck_assert_uint_eq(c->n_keys, 2);
	ck_assert_str_eq(c->keys[0].provider, "local");
	ck_assert_str_eq(c->keys[0].key_sha256, "3f9a1c0b7d2e");
	ck_assert_str_eq(c->keys[0].plan, "gold");
	ck_assert_str_eq(c->keys[1].provider, "anthropic");
	ck_assert_uint_eq(strlen(c->keys[1].key_sha256), 64);
	ck_assert_str_eq(c->keys[1].plan, "default");
	ck_assert_str_eq(c->agents.header, "x-agent");
	ck_assert_int_eq(c->agents.mode, AGENTS_SERIALIZE);
	config_free(c);
}
END_TEST

START_TEST(agents_mode_off_and_reject)
{
	/* `off` is a YAML 1.1 boolean; here it is the mode's name, quoted or not. */
	struct config *c = load_ok("agents: {mode: off}\n", NULL);
	ck_assert_int_eq(c->agents.mode, AGENTS_OFF);
	config_free(c);
	c = load_ok("agents: {mode: 'reject'}\n", NULL);
	ck_assert_int_eq(c->agents.mode, AGENTS_REJECT);
	config_free(c);
}
END_TEST

START_TEST(store_section_and_its_variable)
{
	struct config *c = load_ok(NULL, NULL);
	ck_assert_int_eq(c->store.kind, STORE_LOCAL);
	ck_assert_str_eq(c->store.redis.address, "127.0.0.1:6379");
	ck_assert_str_eq(c->store.redis.key_prefix, "pacerd:");
	ck_assert_uint_eq(c->store.redis.timeout_ms, 50);
	ck_assert_int_eq(c->store.redis.on_error, STORE_ON_ERROR_LOCAL);
	ck_assert_uint_eq(c->store.redis.replicas, 1);
	ck_assert_uint_eq(c->store.redis.lease_ms, 10000);
	ck_assert_uint_eq(config_plan(c, "default")->max_concurrent_global, 0);
	config_free(c);
	c = load_ok("store:\n  kind: redis\n  redis: {address: '[::1]:7000', on_error: fail, "
	            "replicas: 3, key_prefix: 'team-a:', timeout_ms: 20}\n"
	            "plans: {default: {max_concurrent_global: 4}}\n",
	            NULL);
	ck_assert_int_eq(c->store.kind, STORE_REDIS);
	ck_assert_str_eq(c->store.redis.address, "[::1]:7000");
	ck_assert_int_eq(c->store.redis.on_error, STORE_ON_ERROR_FAIL);
	ck_assert_uint_eq(c->store.redis.replicas, 3);
	ck_assert_str_eq(c->store.redis.key_prefix, "team-a:");
	ck_assert_uint_eq(config_plan(c, "default")->max_concurrent_global, 4);
	config_free(c);
	char *env1[] = {"PACERD_STORE=redis://10.0.0.7:6380", NULL};
	c = load_ok(NULL, env1);
	ck_assert_int_eq(c->store.kind, STORE_REDIS);
	ck_assert_str_eq(c->store.redis.address, "10.0.0.7:6380");
	config_free(c);
	char *env2[] = {"PACERD_STORE=unix:/run/redis/redis.sock", NULL};
	c = load_ok("store: {kind: local}\n", env2);
	ck_assert_int_eq(c->store.kind, STORE_REDIS);
	ck_assert_str_eq(c->store.redis.address, "unix:/run/redis/redis.sock");
	config_free(c);
	char *env3[] = {"PACERD_STORE=local", NULL};
	c = load_ok("store: {kind: redis}\n", env3);
	ck_assert_int_eq(c->store.kind, STORE_LOCAL);
	config_free(c);
	char *env4[] = {"PACERD_STORE=redis://redis", NULL};
	expect_error(NULL, env4,
	             "PACERD_STORE: expected redis://HOST:PORT, rediss://HOST:PORT, unix:/path or "
	             "local, got 'redis://redis'");
	/* names are resolved at every connect (store/redis_conn.c); rediss:// is TLS */
	char *env5[] = {"PACERD_STORE=rediss://cache.example.com:6380", NULL};
	c = load_ok(NULL, env5);
	ck_assert_int_eq(c->store.kind, STORE_REDIS);
	ck_assert_str_eq(c->store.redis.address, "cache.example.com:6380");
	ck_assert(c->store.redis.tls.enabled);
	config_free(c);
	c = load_ok("store:\n  kind: redis\n  redis: {address: 'redis.internal:6379'}\n", NULL);
	ck_assert_str_eq(c->store.redis.address, "redis.internal:6379");
	ck_assert(!c->store.redis.tls.enabled);
	ck_assert_str_eq(c->store.redis.tls.ca_file, "");
	ck_assert_str_eq(c->store.redis.tls.server_name, "");
	ck_assert_str_eq(c->store.redis.resolv_conf, "/etc/resolv.conf");
	ck_assert_str_eq(c->store.redis.username, "");
	ck_assert_ptr_null(c->store.redis.password);
	ck_assert_ptr_null(c->store.redis.password_from);
	config_free(c);
}
END_TEST

/* The store's password: the first line of password_file, else
 * PACERD_STORE_PASSWORD (a file wins), never a YAML value; read only for
 * kind: redis. */
START_TEST(store_password_sources)
{
	char *pw = tmp_write("s3cret-from-file\nsecond line ignored\n");
	char yaml[512];
	snprintf(yaml, sizeof(yaml),
	         "store:\n  kind: redis\n  redis: {username: pacer, password_file: '%s'}\n", pw);
	char *env[] = {"PACERD_STORE_PASSWORD=from-env", NULL};
	struct config *c = load_ok(yaml, env);
	ck_assert_str_eq(c->store.redis.password, "s3cret-from-file");
	ck_assert_str_eq(c->store.redis.password_from, "password_file");
	ck_assert_str_eq(c->store.redis.username, "pacer");
	config_free(c);
	c = load_ok("store: {kind: redis}\n", env);
	ck_assert_str_eq(c->store.redis.password, "from-env");
	ck_assert_str_eq(c->store.redis.password_from, "PACERD_STORE_PASSWORD");
	config_free(c);
	c = load_ok("store: {kind: local}\n", env);
	ck_assert_ptr_null(c->store.redis.password);
	config_free(c);
	/* a file without a password on its first line is an error at its key */
	unlink(pw);
	free(pw);
	pw = tmp_write("\n");
	snprintf(yaml, sizeof(yaml), "store:\n  kind: redis\n  redis: {password_file: '%s'}\n", pw);
	char err[ERRLEN];
	ck_assert_ptr_null(load(yaml, NULL, err, NULL));
	ck_assert_msg(strstr(err, "store.redis.password_file") != NULL &&
	                  strstr(err, "holds no password") != NULL,
	              "%s", err);
	/* a FIFO (nobody writing) is refused at once, not waited on: a reload
	 * reads this on the event loop */
	char fifo[] = "/tmp/pacerd-test-fifo-XXXXXX";
	int tfd = mkstemp(fifo);
	ck_assert_int_ge(tfd, 0);
	close(tfd);
	unlink(fifo);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(yaml, sizeof(yaml), "store:\n  kind: redis\n  redis: {password_file: '%s'}\n",
	         fifo);
	ck_assert_ptr_null(load(yaml, NULL, err, NULL));
	ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
	unlink(fifo);
	/* there is no password key in the YAML */
	ck_assert_ptr_null(load("store: {redis: {password: x}}\n", NULL, err, NULL));
	ck_assert_msg(strstr(err, "password") != NULL, "%s", err);
	unlink(pw);
	free(pw);
}
END_TEST

START_TEST(agents_priorities_and_fair_share)
{
	struct config *c = load_ok("agents:\n"
	                           "  fair_share: agent\n"
	                           "  priorities: {chatbot: 50, nightly-batch: -20, 'a b': +3}\n",
	                           NULL);
	ck_assert_int_eq(c->agents.fair_share, FAIR_AGENT);
	ck_assert_uint_eq(c->agents.n_priorities, 3);
	int p = 0;
	ck_assert(config_agent_priority(c, "chatbot", &p) && p == 50);
	ck_assert(config_agent_priority(c, "nightly-batch", &p) && p == -20);
	ck_assert(config_agent_priority(c, "a b", &p) && p == 3);
	ck_assert(!config_agent_priority(c, "other", &p));
	config_free(c);
	c = load_ok("agents: {priorities: ~, fair_share: 'off'}\n", NULL);
	ck_assert_uint_eq(c->agents.n_priorities, 0);
	ck_assert_int_eq(c->agents.fair_share, FAIR_OFF);
	ck_assert(!config_agent_priority(c, "chatbot", &p));
	config_free(c);
	c = load_ok(NULL, NULL);
	ck_assert_int_eq(c->agents.fair_share, FAIR_AGENT_OR_ADDRESS);
	config_free(c);
}
END_TEST

START_TEST(admin_beyond_loopback_with_token_or_disabled)
{
	struct config *c = load_ok("admin: {listen: ':9090', token: t}\n", NULL);
	ck_assert_str_eq(c->admin.listen, ":9090");
	config_free(c);
	c = load_ok("admin: {listen: ''}\n", NULL);
	ck_assert_str_eq(c->admin.listen, "");
	config_free(c);
	c = load_ok("admin: {listen: 'localhost:9'}\n", NULL);
	config_free(c);
	c = load_ok("admin: {listen: '[::1]:9'}\n", NULL);
	config_free(c);
}
END_TEST

START_TEST(forward_defaults_and_lists)
{
	struct config *c = load_ok("", NULL);
	ck_assert(c->forward.intercept);
	ck_assert_str_eq(c->forward.ca_cert, "");
	ck_assert_str_eq(c->forward.ca_key, "");
	ck_assert_str_eq(c->forward.state_dir, "");
	ck_assert_str_eq(c->state_dir, "");
	ck_assert_ptr_null(c->deprecated);
	ck_assert_uint_eq(c->forward.n_tunnel, 0);
	config_free(c);
	c = load_ok("forward:\n  intercept: false\n  tunnel: [PyPI.org, files.pythonhosted.org]\n"
	            "  ca_cert: /a.pem\n  ca_key: /a.key\n  state_dir: /var/lib/x\n",
	            NULL);
	ck_assert(!c->forward.intercept);
	ck_assert_uint_eq(c->forward.n_tunnel, 2);
	ck_assert_str_eq(c->forward.tunnel[0], "pypi.org");
	ck_assert_str_eq(c->forward.ca_key, "/a.key");
	config_free(c);
	/* "*" on loopback only. */
	c = load_ok("listen: 127.0.0.1:8080\nforward: {tunnel: ['*']}\n", NULL);
	ck_assert_str_eq(c->forward.tunnel[0], "*");
	config_free(c);
}
END_TEST

/* state_dir: top level, absolute; forward.state_dir is its old name, read
 * for one release with a note for the log, never beside it. */
START_TEST(state_dir_and_its_old_name)
{
	struct config *c = load_ok("state_dir: /var/lib/x\n", NULL);
	ck_assert_str_eq(c->state_dir, "/var/lib/x");
	ck_assert_ptr_null(c->deprecated);
	config_free(c);
	char err[ERRLEN], *path = NULL;
	c = load("listen: 127.0.0.1:8080\nforward:\n  state_dir: /srv/old\n", NULL, err, &path);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->state_dir, "/srv/old");
	ck_assert_ptr_nonnull(c->deprecated);
	char want[ERRLEN];
	snprintf(want, sizeof(want), "%s:3:14: forward.state_dir is deprecated", path);
	ck_assert_msg(strncmp(c->deprecated, want, strlen(want)) == 0, "%s", c->deprecated);
	ck_assert_ptr_nonnull(strstr(c->deprecated, "state_dir (top level)"));
	config_free(c);
	free(path);
	expect_file_error("state_dir: /a\nforward: {state_dir: /b}\n", NULL,
	                  "2:22: forward.state_dir: the old name of state_dir, which is set too: "
	                  "keep state_dir alone");
	expect_file_error("state_dir: var/lib/x\n", NULL,
	                  "1:12: state_dir: expected an absolute path, or \"\" for the default");
	expect_file_error("forward: {state_dir: rel}\n", NULL,
	                  "1:22: forward.state_dir: expected an absolute path, or \"\" for the "
	                  "default");
}
END_TEST

START_TEST(reopen_follows_idle_ttl_when_unset)
{
	struct config *c = load_ok("limits: {idle_ttl_s: 60}\n"
	                           "plans:\n"
	                           "  default: {max_concurrent: 2}\n"
	                           "  set: {concurrency: {reopen_after_s: 5}}\n",
	                           NULL);
	ck_assert_uint_eq(config_plan(c, "default")->concurrency.reopen_after_s, 30);
	ck_assert_uint_eq(config_plan(c, "set")->concurrency.reopen_after_s, 5);
	config_free(c);
}
END_TEST

START_TEST(aliases_and_null_values)
{
	struct config *c = load_ok("plans:\n"
	                           "  a: &p {max_concurrent: 3, max_requests_per_minute: -0}\n"
	                           "  b: *p\n"
	                           "admin: {listen: ~, token: null}\n"
	                           "limits:\n"
	                           "agents: {}\n",
	                           NULL);
	ck_assert_uint_eq(config_plan(c, "a")->max_concurrent, 3);
	ck_assert_uint_eq(config_plan(c, "b")->max_concurrent, 3);
	ck_assert(!signbit(config_plan(c, "a")->max_requests_per_minute));
	ck_assert_str_eq(c->admin.listen, "");
	ck_assert_str_eq(c->admin.token, "");
	ck_assert_uint_eq(c->limits.max_lanes, 100000);
	config_free(c);
}
END_TEST

/* Thousands of keys load quickly; a duplicate is found however far apart. */
START_TEST(many_keys)
{
	enum { N_KEYS = 5000 };
	size_t cap = 64 * N_KEYS + 64, used;
	char *yaml = malloc(cap);
	struct config *c;
	used = (size_t)snprintf(yaml, cap, "keys:\n");
	for (unsigned i = 0; i < N_KEYS; i++)
		used += (size_t)snprintf(yaml + used, cap - used,
		                         "  - {provider: openai, key_sha256: %012x}\n", i);
	c = load_ok(yaml, NULL);
	ck_assert_uint_eq(c->n_keys, N_KEYS);
	ck_assert_str_eq(c->keys[N_KEYS - 1].key_sha256, "000000001387");
	config_free(c);
	snprintf(yaml + used, cap - used, "  - {provider: openai, key_sha256: 000000000007}\n");
	expect_file_error(yaml, NULL,
	                  "5002:36: keys[5000]: same provider and key_sha256 as keys[7]");
	free(yaml);
}
END_TEST

/* The entry config_key_for() found by a scan of every entry, before the index. */
static const struct key_conf *key_by_scan(const struct config *c, const char *provider,
                                          const char *key_hash)
{
	if (key_hash == NULL || key_hash[0] == '\0')
		return NULL;
	for (size_t i = 0; i < c->n_keys; i++) {
		const struct key_conf *k = &c->keys[i];
		if (strcmp(k->provider, provider) == 0 &&
		    strncmp(k->key_sha256, key_hash, strlen(k->key_sha256)) == 0)
			return k;
	}
	return NULL;
}

/* 4,000 entries over two providers, prefixes of 12 to 24 digits that prefix
 * one another (the first in the file wins): the index answers every hash as
 * the scan did. */
START_TEST(keys_index_answers_as_the_scan)
{
	enum { N = 4000 };
	size_t cap = 128 * N + 64, used;
	char *yaml = malloc(cap);
	used = (size_t)snprintf(yaml, cap, "providers: {openai: {}, anthropic: {}}\nkeys:\n");
	for (unsigned i = 0; i < N; i++) {
		/* In each group of four: a 12-digit entry of its own, then three
		 * sharing one head: head+hex(i)+7, head+the first digit of the
		 * previous one's suffix (a prefix of it, later in the file), and
		 * head+hex(i)+hex(i) (run on). Some 12-digit heads meet a group's. */
		unsigned head = (i / 4) * 0x1111u;
		char hex[80], prev[16];
		snprintf(prev, sizeof prev, "%x", i - 1);
		if (i % 4 == 0)
			snprintf(hex, sizeof hex, "%012x", 0x100000u + i);
		else if (i % 4 == 1)
			snprintf(hex, sizeof hex, "%012x%x7", head, i);
		else if (i % 4 == 2)
			snprintf(hex, sizeof hex, "%012x%c", head, prev[0]);
		else
			snprintf(hex, sizeof hex, "%012x%x%x", head, i, i);
		used += (size_t)snprintf(yaml + used, cap - used,
		                         "  - {provider: %s, key_sha256: %s, scope: s%u}\n",
		                         i % 3 ? "openai" : "anthropic", hex, i);
	}
	struct config *c = load_ok(yaml, NULL);
	const struct provider_conf *prov[2] = {config_provider(c, "openai"),
	                                       config_provider(c, "anthropic")};
	size_t found = 0;
	for (unsigned i = 0; i < 4 * N; i++) {
		/* a hash whose start is an entry's (cut short or run on), or not */
		const struct key_conf *k = &c->keys[i % N];
		char h[65];
		size_t kl = strlen(k->key_sha256);
		memcpy(h, k->key_sha256, kl);
		for (size_t j = kl; j < 64; j++)
			h[j] = "0123456789abcdef"[(i * 7 + j) % 16];
		h[64] = '\0';
		if (i % 4 == 1)
			h[kl - 1] = h[kl - 1] == 'f' ? '0' : 'f'; /* its last digit changed */
		if (i % 4 == 2)
			h[3] = 'x'; /* not hex */
		for (int pv = 0; pv < 2; pv++) {
			const struct key_conf *want = key_by_scan(c, prov[pv]->name, h);
			ck_assert_ptr_eq(config_key_for(c, prov[pv], h), want);
			found += want != NULL;
		}
	}
	ck_assert_uint_gt(found, N);
	/* and what is never an entry's */
	const char *none[] = {NULL, "", "0000", "00000000000", "ABCDEF000000111122223333"};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		ck_assert_ptr_null(config_key_for(c, prov[0], none[i]));
	config_free(c);
	free(yaml);
}
END_TEST

/* ------------------------------------------------ time zones */

START_TEST(zones_resolved_at_load)
{
	struct config *c =
	    load_ok("plans:\n"
	            "  default: {max_requests_per_day: 10}\n"
	            "  ny: {max_requests_per_day: 10, day_time_zone: America/New_York}\n"
	            "  ny2: {day_time_zone: America/New_York, day_resets_at: \"07:30\"}\n"
	            "  lh: {day_time_zone: Australia/Lord_Howe}\n",
	            NULL);
	const struct plan_conf *d = config_plan(c, "default"), *ny = config_plan(c, "ny"),
	                       *ny2 = config_plan(c, "ny2"), *lh = config_plan(c, "lh");
	ck_assert_uint_eq(c->n_zones, 3); /* UTC, New York once, Lord Howe */
	ck_assert_ptr_nonnull(d->day_zone);
	ck_assert_ptr_eq(ny->day_zone, ny2->day_zone);
	ck_assert_ptr_ne(ny->day_zone, lh->day_zone);
	ck_assert_int_eq(ny2->day_reset_minute, 450);
	/* 2026-03-08 07:00Z New York springs forward; midnight after noon EST */
	ck_assert_int_eq(daily_zone_offset(ny->day_zone, 1772953200), -4 * 3600);
	ck_assert_int_eq(daily_next_reset_ms(INT64_C(1772902800000), 0, ny->day_zone),
	                 INT64_C(1772946000000));
	ck_assert_int_eq(daily_zone_offset(d->day_zone, 1772953200), 0);
	config_free(c);
	/* a directory of the database is not a zone; the error points at it */
	expect_file_error("plans:\n  default:\n    day_time_zone: America\n", NULL,
	                  "3:20: plans.default.day_time_zone: unknown time zone 'America' (an IANA "
	                  "name such as America/Los_Angeles, or UTC)");
}
END_TEST

/* ------------------------------------------------ models and scopes */

START_TEST(models_and_scopes)
{
	struct config *c =
	    load_ok("plans:\n"
	            "  small: {max_requests_per_second: 20}\n"
	            "  big: {max_requests_per_second: 2}\n"
	            "  pinned: {}\n"
	            "providers:\n"
	            "  openai:\n"
	            "    plan: big\n"
	            "    model_groups:\n"
	            "      \"gpt-4o*\": gpt-4o\n"
	            "      \"gpt-4o-mini*\": gpt-4o-mini\n"
	            "    model_plans:\n"
	            "      \"gpt-4o-mini*\": small\n"
	            "      \"gpt-4o-mini-2024-07-18\": big\n"
	            "      \"o[134]*\": small\n"
	            "  anthropic: {cached_input: charged}\n"
	            "  groq: {}\n"
	            "keys:\n"
	            "  - {provider: openai, key_sha256: aaaaaaaaaaaa, scope: proj-1}\n"
	            "  - {provider: openai, key_sha256: bbbbbbbbbbbb, scope: proj-1}\n"
	            "  - {provider: openai, key_sha256: cccccccccccc, plan: pinned}\n"
	            "  - {provider: openai, key_sha256: dddddddddddd}\n",
	            NULL);
	const struct provider_conf *o = config_provider(c, "openai");
	ck_assert_uint_eq(o->n_model_groups, 2);
	ck_assert_str_eq(o->model_groups[1].pattern, "gpt-4o-mini*");
	ck_assert_str_eq(o->model_groups[1].value, "gpt-4o-mini");
	ck_assert_uint_eq(o->model_groups[1].literal, 11);
	ck_assert_uint_eq(o->model_groups[1].prefix, 11);
	ck_assert(!o->model_groups[1].exact);
	ck_assert(o->model_plans[1].exact);
	ck_assert_int_eq(o->cached_input, CACHED_INPUT_CHARGED);
	ck_assert_int_eq(config_provider(c, "anthropic")->cached_input, CACHED_INPUT_CHARGED);
	ck_assert_int_eq(config_provider(c, "groq")->cached_input, CACHED_INPUT_FREE);
	ck_assert_str_eq(config_model_rule(o->model_groups, 2, "gpt-4o-mini-tts")->value,
	                 "gpt-4o-mini");
	ck_assert_str_eq(config_model_rule(o->model_groups, 2, "gpt-4o")->value, "gpt-4o");
	/* plans: the key's own, then by model, then the provider's */
	const char *kh = "aaaaaaaaaaaa0123456789";
	ck_assert_str_eq(config_plan_for(c, o, kh, "gpt-4o-mini")->name, "small");
	ck_assert_str_eq(config_plan_for(c, o, kh, "gpt-4o-mini-2024-07-18")->name, "big");
	ck_assert_str_eq(config_plan_for(c, o, kh, "o3-mini")->name, "small");
	ck_assert_str_eq(config_plan_for(c, o, kh, "gpt-4.1")->name, "big");
	ck_assert_str_eq(config_plan_for(c, o, kh, NULL)->name, "big");
	ck_assert_str_eq(config_plan_for(c, o, NULL, "gpt-4o-mini")->name, "small");
	ck_assert_str_eq(config_plan_for(c, o, "cccccccccccc99", "gpt-4o-mini")->name, "pinned");
	/* an entry without plan and scope pins "default", as it always has */
	ck_assert_str_eq(config_plan_for(c, o, "dddddddddddd", "gpt-4o-mini")->name, "default");
	/* scopes */
	ck_assert_str_eq(config_scope_for(c, o, kh), "proj-1");
	ck_assert_str_eq(config_scope_for(c, o, "bbbbbbbbbbbb"), "proj-1");
	ck_assert_ptr_null(config_scope_for(c, o, "cccccccccccc"));
	ck_assert_ptr_null(config_scope_for(c, o, "eeeeeeeeeeee"));
	ck_assert_ptr_null(config_scope_for(c, o, NULL));
	/* a scope-only entry: no plan of its own; registry_plan_for sees the provider's */
	const struct key_conf *k = config_key_for(c, o, kh);
	ck_assert(!k->own_plan);
	ck_assert_str_eq(k->plan, "big");
	ck_assert(config_key_for(c, o, "cccccccccccc")->own_plan);
	config_free(c);
	/* built-in defaults: cache reads free at anthropic and groq only; no rows */
	c = load_ok(NULL, NULL);
	for (size_t i = 0; i < c->n_providers; i++) {
		const struct provider_conf *p = &c->providers[i];
		bool free_ = !strcmp(p->name, "anthropic") || !strcmp(p->name, "groq");
		ck_assert_int_eq(p->cached_input, free_ ? CACHED_INPUT_FREE : CACHED_INPUT_CHARGED);
		ck_assert_uint_eq(p->n_model_groups, 0);
		ck_assert_uint_eq(p->n_model_plans, 0);
	}
	ck_assert_str_eq(config_cached_input_name(CACHED_INPUT_FREE), "free");
	ck_assert_str_eq(config_cached_input_name(CACHED_INPUT_CHARGED), "charged");
	config_free(c);
	/* an empty table, and a table set twice in one provider is a duplicate key */
	c = load_ok("providers:\n  openai:\n    model_groups: {}\n    model_plans:\n", NULL);
	ck_assert_uint_eq(config_provider(c, "openai")->n_model_groups, 0);
	config_free(c);
}
END_TEST

START_TEST(model_patterns)
{
	struct model_rule r;
	char msg[256];
	ck_assert_int_eq(config_model_pattern("claude-sonnet-4*", &r, msg, sizeof msg), 0);
	ck_assert_uint_eq(r.literal, 15);
	ck_assert_uint_eq(r.prefix, 15);
	ck_assert_int_eq(config_model_pattern("gpt-[!3]?-*x", &r, msg, sizeof msg), 0);
	ck_assert_uint_eq(r.literal, 6);
	ck_assert_uint_eq(r.prefix, 4);
	ck_assert(!r.exact);
	ck_assert_int_eq(config_model_pattern("a[]b]c", &r, msg, sizeof msg),
	                 0); /* ']' first is a member */
	ck_assert_uint_eq(r.literal, 2);
	ck_assert_int_eq(config_model_pattern("meta-llama/Llama-3.3-70B", &r, msg, sizeof msg), 0);
	ck_assert(r.exact);
	char longp[CONFIG_MODEL_MAX + 2];
	memset(longp, 'a', sizeof longp);
	longp[CONFIG_MODEL_MAX + 1] = '\0';
	ck_assert_int_eq(config_model_pattern(longp, &r, msg, sizeof msg), -1);
	longp[CONFIG_MODEL_MAX] = '\0';
	ck_assert_int_eq(config_model_pattern(longp, &r, msg, sizeof msg), 0);
	ck_assert_int_eq(config_model_pattern("a\\*", &r, msg, sizeof msg), -1);
	ck_assert_int_eq(config_model_pattern("caf\xc3\xa9", &r, msg, sizeof msg), -1);
	/* ties: the first row */
	struct model_rule rows[2];
	rows[0].pattern = (char *)"gpt-4?";
	rows[0].value = (char *)"first";
	rows[1].pattern = (char *)"gpt-?o";
	rows[1].value = (char *)"second";
	config_model_pattern(rows[0].pattern, &rows[0], msg, sizeof msg);
	config_model_pattern(rows[1].pattern, &rows[1], msg, sizeof msg);
	ck_assert_str_eq(config_model_rule(rows, 2, "gpt-4o")->value, "first");
	ck_assert_ptr_null(config_model_rule(rows, 2, NULL));
	ck_assert_ptr_null(config_model_rule(rows, 2, "gpt-4"));
}
END_TEST

/* ------------------------------------------------------ rejected files */

static const struct bad {
	const char *yaml;
	const char *error; /* after "FILE:" */
} bad_files[] = {
    /* model_groups, model_plans, cached_input, keys' scope (issue 18) */
    {"providers:\n  openai:\n    model_groups:\n      \"\": g\n",
     "4:7: providers.openai.model_groups: expected a model pattern of 1 to 128 characters, got ''"},
    {"providers:\n  openai:\n    model_groups: {\"gpt 4o*\": g}\n",
     "3:20: providers.openai.model_groups: model pattern 'gpt 4o*': character 4 cannot be in a "
     "model name (printable ASCII but space, '\"' and '\\\\')"},
    {"providers:\n  openai:\n    model_groups:\n      \"gpt-[45o*\": g\n",
     "4:7: providers.openai.model_groups: model pattern 'gpt-[45o*': '[' at character 5 is not "
     "closed"},
    {"providers:\n  openai:\n    model_groups:\n      \"gpt-[]*\": g\n",
     "4:7: providers.openai.model_groups: model pattern 'gpt-[]*': '[' at character 5 is not "
     "closed"},
    {"providers:\n  openai:\n    model_groups:\n      gpt-4o*: \"a b\"\n",
     "4:16: providers.openai.model_groups.gpt-4o*: expected a group name of 1 to 128 printable "
     "characters (no space, '\"' or '\\\\'), got 'a b'"},
    {"providers:\n  openai:\n    model_groups:\n      gpt-4o*: [a]\n",
     "4:16: providers.openai.model_groups.gpt-4o*: expected a scalar, got a list"},
    {"providers:\n  openai:\n    model_groups: [a]\n",
     "3:19: providers.openai.model_groups: expected a mapping, got a list"},
    {"providers:\n  openai:\n    model_groups:\n      a*: x\n      a*: y\n",
     "5:7: duplicate key 'a*' in 'providers.openai.model_groups'"},
    {"providers:\n  openai:\n    model_plans:\n      \"gpt-4o-mini*\": small\n",
     "4:23: providers.openai.model_plans: unknown plan 'small'"},
    {"plans: {small: {}}\nproviders:\n  openai:\n    model_plans:\n      \"gpt-4o-mini*\": "
     "sm@ll\n",
     "5:23: providers.openai.model_plans.gpt-4o-mini*: expected a name of 1 to 64 letters, "
     "digits, '.', '-' or '_', got 'sm@ll'"},
    {"providers:\n  anthropic:\n    cached_input: sometimes\n",
     "3:19: providers.anthropic.cached_input: expected one of free, charged, got 'sometimes'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2e, scope: \"team a\"}\n",
     "2:57: keys[0].scope: expected a name of 1 to 64 letters, digits, '.', '-' or '_', got "
     "'team a'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2e, scope: a, plan: nope}\n",
     "2:66: keys[0]: unknown plan 'nope'"},
    /* unknown keys, at several depths */
    {"lisen: 1\n", "1:1: unknown key 'lisen' at the top level"},
    {"limits:\n  max_body_bytes: 5\n  lisen: 1\n", "3:3: unknown key 'lisen' in 'limits'"},
    {"plans:\n  default:\n    retry: {max_attempts: 2, jiter: full}\n",
     "3:30: unknown key 'jiter' in 'plans.default.retry'"},
    {"providers:\n  openai:\n    tls:\n      verfy: true\n",
     "4:7: unknown key 'verfy' in 'providers.openai.tls'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2e, plna: x}\n",
     "2:50: unknown key 'plna' in 'keys[0]'"},
    {"listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", "2:1: duplicate key 'listen' at the top level"},
    {"plans:\n  a: {}\n  a: {}\n", "3:3: duplicate key 'a' in 'plans'"},
    /* wrong types */
    {"listen: [a, b]\n", "1:9: listen: expected a scalar, got a list"},
    {"limits: 5\n", "1:9: limits: expected a mapping, got a scalar"},
    {"- a\n", "1:1: expected a mapping of settings at the top level"},
    {"keys: {a: b}\n", "1:7: keys: expected a list, got a mapping"},
    {"keys: [x]\n", "1:8: keys[0]: expected a mapping, got a scalar"},
    {"providers:\n  openai: {hosts: api.openai.com}\n",
     "2:19: providers.openai.hosts: expected a list, got a scalar"},
    {"providers:\n  openai: {hosts: [[a]]}\n",
     "2:20: providers.openai.hosts: expected a scalar, got a list"},
    {"{[a]: 1}\n", "1:2: expected a scalar key at the top level, got a list"},
    /* integers */
    {"drain_timeout_s: 1.5\n", "1:18: drain_timeout_s: expected a non-negative integer, got '1.5'"},
    {"drain_timeout_s: -1\n", "1:18: drain_timeout_s: expected a non-negative integer, got '-1'"},
    {"drain_timeout_s: abc\n", "1:18: drain_timeout_s: expected a non-negative integer, got 'abc'"},
    {"drain_timeout_s: 4294967296\n",
     "1:18: drain_timeout_s: expected a non-negative integer, got '4294967296'"},
    {"drain_timeout_s: \"5\"\n",
     "1:18: drain_timeout_s: expected a non-negative integer, got the quoted string '5'"},
    {"limits:\n  max_body_bytes: 99999999999999999999\n",
     "2:19: limits.max_body_bytes: expected an integer >= 1, got '99999999999999999999'"},
    {"limits: {max_connections: 0}\n",
     "1:27: limits.max_connections: expected an integer >= 1, got '0'"},
    {"admin:\n  top_lanes: 100001\n",
     "2:14: admin.top_lanes: expected an integer in [0, 100000], got '100001'"},
    {"admin:\n  top_lanes: -1\n",
     "2:14: admin.top_lanes: expected an integer in [0, 100000], got '-1'"},
    {"plans:\n  default:\n    burst: 0\n",
     "3:12: plans.default.burst: expected an integer >= 1, got '0'"},
    {"plans: {p: {max_concurrent: 0}}\n",
     "1:29: plans.p.max_concurrent: expected an integer >= 1, got '0'"},
    {"plans: {p: {concurrency: {min: 0}}}\n",
     "1:32: plans.p.concurrency.min: expected an integer >= 1, got '0'"},
    {"plans: {p: {queue: {max_depth: 0}}}\n",
     "1:32: plans.p.queue.max_depth: expected an integer >= 1, got '0'"},
    {"plans: {p: {retry: {max_attempts: 0}}}\n",
     "1:35: plans.p.retry.max_attempts: expected an integer >= 1, got '0'"},
    {"providers: {openai: {timeouts: {connect_s: 0}}}\n",
     "1:44: providers.openai.timeouts.connect_s: expected an integer >= 1, got '0'"},
    /* numbers */
    {"plans: {p: {max_requests_per_minute: -5}}\n",
     "1:38: plans.p.max_requests_per_minute: expected a non-negative number, got '-5'"},
    {"plans: {p: {max_requests_per_minute: .inf}}\n",
     "1:38: plans.p.max_requests_per_minute: expected a non-negative number, got '.inf'"},
    {"plans: {p: {max_tokens_per_minute: 1e999}}\n",
     "1:36: plans.p.max_tokens_per_minute: expected a non-negative number, got '1e999'"},
    {"plans: {p: {concurrency: {decrease_factor: 1}}}\n",
     "1:44: plans.p.concurrency.decrease_factor: expected a number in (0, 1), got '1'"},
    {"plans: {p: {concurrency: {decrease_factor: 0}}}\n",
     "1:44: plans.p.concurrency.decrease_factor: expected a number in (0, 1), got '0'"},
    {"plans: {p: {concurrency: {mode: latency}}}\n",
     "1:33: plans.p.concurrency.mode: expected one of auto, aimd, gradient, got 'latency'"},
    {"plans: {p: {concurrency: {slow_start: 0}}}\n",
     "1:39: plans.p.concurrency.slow_start: expected an integer >= 1, got '0'"},
    {"plans: {p: {concurrency: {tolerance: -0.5}}}\n",
     "1:38: plans.p.concurrency.tolerance: expected a number in [0, 100], got '-0.5'"},
    {"plans: {p: {dispatch_delay: {recovery_step_ms: 50}}}\n",
     "1:30: 'recovery_step_ms' in 'plans.p.dispatch_delay' was replaced by recovery_rps: the "
     "rate gained per second of successes"},
    {"plans: {p: {dispatch_delay: {backoff_multiplier: 0.5}}}\n",
     "1:50: plans.p.dispatch_delay.backoff_multiplier: expected a number >= 1, got '0.5'"},
    {"plans: {p: {proactive_threshold: 1.5}}\n",
     "1:34: plans.p.proactive_threshold: expected a number in [0, 1], got '1.5'"},
    /* booleans and enums */
    {"providers:\n  openai:\n    http2: yes\n",
     "3:12: providers.openai.http2: expected true or false, got 'yes'"},
    {"providers: {openai: {tls: {verify: 'true'}}}\n",
     "1:36: providers.openai.tls.verify: expected true or false, got the quoted string 'true'"},
    {"log:\n  level: verbose\n",
     "2:10: log.level: expected one of debug, info, warn, error, got 'verbose'"},
    {"providers: {openai: {key_header: bearer}}\n",
     "1:34: providers.openai.key_header: expected one of authorization, x-api-key, api-key, "
     "x-goog-api-key, query:key, got 'bearer'"},
    {"providers: {openai: {dialect: groq}}\n",
     "1:31: providers.openai.dialect: expected one of openai, anthropic, azure, ietf, none, "
     "got 'groq'"},
    {"agents: {mode: on}\n", "1:16: agents.mode: expected one of off, serialize, reject, got 'on'"},
    {"agents: {fair_share: ip}\n",
     "1:22: agents.fair_share: expected one of agent_or_address, agent, address, off, got 'ip'"},
    {"agents:\n  priorities:\n    batch: 101\n",
     "3:12: agents.priorities.batch: expected an integer from -100 to 100, got '101'"},
    {"agents:\n  priorities: {a: 1, b: high}\n",
     "2:25: agents.priorities.b: expected an integer from -100 to 100, got 'high'"},
    {"agents:\n  priorities: {a: 1, a: 2}\n", "2:22: duplicate key 'a' in 'agents.priorities'"},
    {"agents:\n  priorities: [a, b]\n", "2:15: agents.priorities: expected a mapping, got a list"},
    {"agents:\n  priorities: {a: [1]}\n",
     "2:19: agents.priorities.a: expected a scalar, got a list"},
    {"store: {kind: etcd}\n", "1:15: store.kind: expected one of local, redis, got 'etcd'"},
    {"store:\n  redis: {address: 'redis.example.com'}\n",
     "2:20: store.redis.address: expected host:port (redis.example.com:6379, 127.0.0.1:6379, "
     "[::1]:6379) or unix:/path, got 'redis.example.com'"},
    {"store:\n  redis: {username: 'a b'}\n",
     "2:21: store.redis.username: expected up to 255 printable characters without spaces, "
     "got 'a b'"},
    {"store:\n  redis:\n    tls: {enabled: true, cert_file: /etc/c.pem}\n",
     "3:37: store.redis.tls: cert_file and key_file go together (a client certificate and "
     "its key)"},
    {"store:\n  kind: redis\n  redis: {password_file: /nonexistent/pw}\n",
     "3:26: store.redis.password_file: cannot open '/nonexistent/pw': No such file or "
     "directory"},
    {"store:\n  redis: {address: 'unix:redis.sock'}\n",
     "2:20: store.redis.address: expected unix:/absolute/path (under 100 bytes), got "
     "'unix:redis.sock'"},
    {"store: {redis: {on_error: maybe}}\n",
     "1:27: store.redis.on_error: expected one of local, fail, got 'maybe'"},
    {"store: {redis: {replicas: 0}}\n",
     "1:27: store.redis.replicas: expected an integer in [1, 10000], got '0'"},
    {"store: {redis: {key_prefix: 'a b'}}\n",
     "1:29: store.redis.key_prefix: expected up to 64 printable characters without spaces, got "
     "'a b'"},
    {"plans: {p: {max_concurrent_global: -1}}\n",
     "1:36: plans.p.max_concurrent_global: expected a non-negative integer, got '-1'"},
    {"plans: {p: {retry: {jitter: none}}}\n",
     "1:29: plans.p.retry.jitter: expected one of additive, full, got 'none'"},
    /* strings */
    {"listen: 8080\n",
     "1:9: listen: expected host:port, [v6]:port or :port (port 1-65535), got '8080'"},
    {"listen: '::1:8080'\n",
     "1:9: listen: expected host:port, [v6]:port or :port (port 1-65535), got '::1:8080'"},
    {"admin: {listen: 'localhost:70000'}\n",
     "1:17: admin.listen: expected host:port, [v6]:port or :port (port 1-65535), got "
     "'localhost:70000'"},
    {"log: {file: ''}\n", "1:13: log.file: expected a non-empty string"},
    {"log:\n  file: \"a\\0b\"\n", "2:9: log.file: NUL character in value"},
    {"agents: {header: 'x y'}\n", "1:18: agents.header: expected an HTTP header name, got 'x y'"},
    {"default_provider: 'a b'\n",
     "1:19: default_provider: expected a name of 1 to 64 letters, digits, '.', '-' or '_', got "
     "'a b'"},
    {"providers:\n  'my provider': {upstream: 'http://x'}\n",
     "2:3: providers: expected a name of 1 to 64 letters, digits, '.', '-' or '_', got 'my "
     "provider'"},
    /* upstream URLs and prefixes */
    {"providers:\n  openai:\n    upstream: ftp://x\n",
     "3:15: providers.openai.upstream: expected an http:// or https:// URL with a host, got "
     "'ftp://x'"},
    {"providers: {openai: {upstream: 'https://'}}\n",
     "1:32: providers.openai.upstream: expected an http:// or https:// URL with a host, got "
     "'https://'"},
    {"providers: {openai: {upstream: 'https:///v1'}}\n",
     "1:32: providers.openai.upstream: expected an http:// or https:// URL with a host, got "
     "'https:///v1'"},
    {"providers: {openai: {upstream: 'https://h:99999'}}\n",
     "1:32: providers.openai.upstream: expected an http:// or https:// URL with a host, got "
     "'https://h:99999'"},
    {"providers: {openai: {upstream: 'https://h/v1?x=1'}}\n",
     "1:32: providers.openai.upstream: an upstream must not have a query or fragment, got "
     "'https://h/v1?x=1'"},
    {"providers: {openai: {prefix: anthropic}}\n",
     "1:30: providers.openai.prefix: expected a path starting with '/', got 'anthropic'"},
    {"providers: {openai: {hosts: ['a b']}}\n",
     "1:30: providers.openai.hosts: expected a host name, got 'a b'"},
    /* providers as a whole */
    {"providers:\n  openai: {}\n  anthropic: {prefix: /}\n",
     "3:23: providers.anthropic: prefix '/' is already used by provider 'openai'"},
    {"providers:\n  openai: {}\n  groq: {prefix: '//'}\n",
     "3:18: providers.groq: prefix '/' is already used by provider 'openai'"},
    {"providers:\n  openai: {}\n  mine: {upstream: 'http://m', hosts: [API.openai.com]}\n",
     "3:39: providers.mine: host 'api.openai.com' is already used by provider 'openai'"},
    {"providers:\n  local: {}\n",
     "2:3: providers.local: 'upstream' is required for a provider without built-in defaults"},
    {"providers:\n  azure:\n",
     "2:3: providers.azure: 'upstream' is required (this provider has no built-in upstream)"},
    {"providers: {}\n", "1:1: providers: at least one provider is required"},
    {"default_provider: groq\nproviders:\n  openai: {}\n  anthropic: {}\n",
     "1:19: default_provider: 'groq' is not an active provider (active: openai, anthropic)"},
    {"default_provider: azure\n",
     "1:19: default_provider: 'azure' is not an active provider (active: openai, anthropic, "
     "gemini, openrouter, groq, mistral, together)"},
    /* plan references and relations */
    {"providers:\n  openai: {plan: gold}\n", "2:18: providers.openai: unknown plan 'gold'"},
    {"plans:\n  default:\n    concurrency: {initial: 2}\n",
     "3:19: 'initial' in 'plans.default.concurrency' was removed: a lane is open up to "
     "max_concurrent until its first capacity signal"},
    {"plans:\n  default:\n    quota_probe_s: 0\n",
     "3:20: plans.default.quota_probe_s: expected an integer >= 1, got '0'"},
    {"plans:\n  default:\n    max_concurrent: 2\n    concurrency: {min: 3}\n",
     "4:24: plans.default: concurrency.min (3) is above max_concurrent (2)"},
    {"plans:\n  default:\n    dispatch_delay: {min_ms: 100, max_ms: 10}\n",
     "3:43: plans.default: dispatch_delay.max_ms (10) is below dispatch_delay.min_ms (100)"},
    {"plans:\n  default:\n    dispatch_delay: {min_ms: 6000}\n",
     "3:30: plans.default: dispatch_delay.max_ms (5000) is below dispatch_delay.min_ms (6000)"},
    /* keys */
    {"keys:\n  - {provider: openai, key_sha256: xyz}\n",
     "2:36: keys[0].key_sha256: expected 12 to 64 hex digits, got 'xyz'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2}\n",
     "2:36: keys[0].key_sha256: expected 12 to 64 hex digits, got '3f9a1c0b7d2'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2g}\n",
     "2:36: keys[0].key_sha256: expected 12 to 64 hex digits, got '3f9a1c0b7d2g'"},
    {"keys:\n  - {provider: openai}\n", "2:5: keys[0]: 'key_sha256' is required"},
    {"keys:\n  - {key_sha256: 3f9a1c0b7d2e}\n", "2:5: keys[0]: 'provider' is required"},
    {"keys:\n  - {provider: azure, key_sha256: 3f9a1c0b7d2e}\n",
     "2:16: keys[0]: 'azure' is not an active provider"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2e, plan: gold}\n",
     "2:56: keys[0]: unknown plan 'gold'"},
    {"keys:\n  - {provider: openai, key_sha256: 3f9a1c0b7d2e}\n"
     "  - {provider: groq, key_sha256: 3f9a1c0b7d2e}\n"
     "  - {provider: openai, key_sha256: 3F9A1C0B7D2E}\n",
     "4:36: keys[2]: same provider and key_sha256 as keys[0]"},
    /* admin */
    {"admin:\n  listen: 0.0.0.0:9090\n",
     "2:11: admin.listen: admin.token is required when admin.listen is not a loopback address"},
    {"admin: {listen: ':9090', token: ''}\n",
     "1:17: admin.listen: admin.token is required when admin.listen is not a loopback address"},
    /* forward */
    {"forward:\n  ca_cert: /etc/pacerd/ca.pem\n",
     "2:12: forward: ca_cert and ca_key are given together, or neither (a CA made at first "
     "start)"},
    {"forward: {ca_key: /k}\n",
     "1:19: forward: ca_cert and ca_key are given together, or neither (a CA made at first "
     "start)"},
    {"listen: 0.0.0.0:8080\nforward:\n  tunnel: [pypi.org, '*']\n",
     "3:11: forward.tunnel: \"*\" (tunnel to any host) only when listen is a loopback address; "
     "list the hosts instead: pacerd is never an open proxy"},
    {"forward: {tunnel: ['pypi.org:99999']}\n",
     "1:20: forward.tunnel: expected a host name, got 'pypi.org:99999'"},
    {"forward: {tunnel: ['https://pypi.org']}\n",
     "1:20: forward.tunnel: expected a host name, got 'https://pypi.org'"},
    {"forward: {intercept: maybe}\n",
     "1:22: forward.intercept: expected true or false, got 'maybe'"},
    {"forward: {ca: x}\n", "1:11: unknown key 'ca' in 'forward'"},
    /* YAML itself */
    {"listen: [a, b\n", "2:1: did not find expected ',' or ']'"},
    {"a: b\n c: d\n", "2:3: mapping values are not allowed in this context"},
    {"limits:\n\tmax_lanes: 1\n", "2:1: found character that cannot start any token"},
    {"listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "3:1: only one YAML document is allowed"},
    {"listen: 127.0.0.1:1\n\xff\n", "2:1: invalid leading UTF-8 octet"},
};

START_TEST(rejected_file)
{
	expect_file_error(bad_files[_i].yaml, NULL, bad_files[_i].error);
}
END_TEST

START_TEST(io_errors)
{
	char err[ERRLEN];
	ck_assert_ptr_null(config_load("/nonexistent/pacerd.yaml", NULL, err, sizeof(err)));
	ck_assert_str_eq(err, "/nonexistent/pacerd.yaml: cannot open: No such file or directory");
	ck_assert_ptr_null(config_load("/tmp", NULL, err, sizeof(err)));
	ck_assert_str_eq(err, "/tmp: cannot read: Is a directory");
	/* A tiny or absent error buffer is not written past. */
	err[0] = 'x';
	err[1] = 'y';
	ck_assert_ptr_null(config_load("/nonexistent/pacerd.yaml", NULL, err, 1));
	ck_assert_int_eq(err[0], '\0');
	ck_assert_int_eq(err[1], 'y');
	ck_assert_ptr_null(config_load("/nonexistent/pacerd.yaml", NULL, NULL, 0));
}
END_TEST

START_TEST(messages_stay_on_one_line)
{
	char err[ERRLEN];
	struct config *c = load("log: {level: \"a\\nb\"}\n", NULL, err, NULL);
	ck_assert_msg(c == NULL, "accepted");
	ck_assert_ptr_null(strchr(err, '\n'));
	ck_assert_ptr_nonnull(strstr(err, "got 'a?b'"));
}
END_TEST

/* ----------------------------------------------------------- environment */

START_TEST(env_overrides_file_and_defaults)
{
	char *env[] = {"PATH=/bin",
	               "PACERD_LISTEN=0.0.0.0:8000",
	               "PACERD_ADMIN_LISTEN=",
	               "PACERD_LOG_LEVEL=warn",
	               "PACERD_UPSTREAM=http://mock:9999/base/",
	               "PACERD_RPS=1.5",
	               "PACERD_RPM=200",
	               "PACERD_RPH=3000",
	               "PACERD_MIN_MS=25",
	               "PACERD_TPM=40000",
	               "PACERD_MAX_CONCURRENT=16",
	               "PACERD_QUEUE_MAX_DEPTH=5",
	               "PACERD_RETRY_MAX_ATTEMPTS=7",
	               "PACERD_RETRY_INITIAL_DELAY_MS=10",
	               "PACERD_RETRY_MAX_DELAY_MS=20",
	               "PACERD_SOMETHING_NEW=1",
	               "PACERD_NOEQUALS",
	               "PACERD_RPM=999", /* the first one wins, as with getenv */
	               NULL};
	struct config *c = load_ok("listen: 127.0.0.1:7000\n"
	                           "log: {level: error}\n"
	                           "plans: {default: {max_requests_per_minute: 100, burst: 4}}\n",
	                           env);
	const struct plan_conf *p = config_plan(c, "default");
	ck_assert_str_eq(c->listen, "0.0.0.0:8000");
	ck_assert_str_eq(c->admin.listen, "");
	ck_assert_int_eq(c->log.level, LOG_WARN);
	ck_assert_str_eq(config_provider(c, "openai")->upstream, "http://mock:9999/base");
	ck_assert_str_eq(config_provider(c, "anthropic")->upstream, "https://api.anthropic.com");
	ck_assert_double_eq(p->max_requests_per_second, 1.5);
	ck_assert_double_eq(p->max_requests_per_minute, 200);
	ck_assert_double_eq(p->max_requests_per_hour, 3000);
	ck_assert_double_eq(p->min_ms_per_request, 25);
	ck_assert_double_eq(p->max_tokens_per_minute, 40000);
	ck_assert_uint_eq(p->max_concurrent, 16);
	ck_assert_uint_eq(p->queue.max_depth, 5);
	ck_assert_uint_eq(p->retry.max_attempts, 7);
	ck_assert_uint_eq(p->retry.initial_delay_ms, 10);
	ck_assert_uint_eq(p->retry.max_delay_ms, 20);
	ck_assert_uint_eq(p->burst, 4); /* from the file, untouched */
	config_free(c);
}
END_TEST

START_TEST(env_without_file)
{
	char *env[] = {"PACERD_RPM=60", "PACERD_MAX_CONCURRENT=2", NULL};
	struct config *c = load_ok(NULL, env);
	ck_assert_double_eq(c->plans[0].max_requests_per_minute, 60);
	ck_assert_uint_eq(c->plans[0].max_concurrent, 2);
	config_free(c);
}
END_TEST

START_TEST(env_targets_default_provider_and_its_plan)
{
	char *env[] = {"PACERD_UPSTREAM=https://proxy.example", "PACERD_RPM=30", NULL};
	struct config *c = load_ok("default_provider: anthropic\n"
	                           "providers:\n"
	                           "  openai: {}\n"
	                           "  anthropic: {plan: slow}\n"
	                           "plans: {slow: {max_requests_per_minute: 5}}\n",
	                           env);
	ck_assert_str_eq(config_provider(c, "anthropic")->upstream, "https://proxy.example");
	ck_assert_str_eq(config_provider(c, "openai")->upstream, "https://api.openai.com");
	ck_assert_double_eq(config_plan(c, "slow")->max_requests_per_minute, 30);
	ck_assert_double_eq(config_plan(c, "default")->max_requests_per_minute, 0);
	config_free(c);
}
END_TEST

START_TEST(env_supplies_azure_upstream)
{
	char *env[] = {"PACERD_UPSTREAM=https://r.openai.azure.com", NULL};
	struct config *c = load_ok("providers: {azure: {}}\n", env);
	ck_assert_str_eq(c->default_provider, "azure");
	ck_assert_str_eq(c->providers[0].upstream, "https://r.openai.azure.com");
	config_free(c);
}
END_TEST

static const struct bad_env {
	const char *var;
	const char *error;
} bad_envs[] = {
    {"PACERD_RPM=abc", "PACERD_RPM: expected a non-negative number, got 'abc'"},
    {"PACERD_RPS=-1", "PACERD_RPS: expected a non-negative number, got '-1'"},
    {"PACERD_TPM=", "PACERD_TPM: expected a non-negative number, got ''"},
    {"PACERD_MAX_CONCURRENT=0", "PACERD_MAX_CONCURRENT: expected an integer >= 1, got '0'"},
    {"PACERD_QUEUE_MAX_DEPTH=1.5", "PACERD_QUEUE_MAX_DEPTH: expected an integer >= 1, got '1.5'"},
    {"PACERD_RETRY_MAX_DELAY_MS=9999999999",
     "PACERD_RETRY_MAX_DELAY_MS: expected a non-negative integer, got '9999999999'"},
    {"PACERD_LOG_LEVEL=loud",
     "PACERD_LOG_LEVEL: expected one of debug, info, warn, error, got 'loud'"},
    {"PACERD_LISTEN=localhost",
     "PACERD_LISTEN: expected host:port, [v6]:port or :port (port 1-65535), got 'localhost'"},
    {"PACERD_UPSTREAM=api.openai.com",
     "PACERD_UPSTREAM: expected an http:// or https:// URL with a host, got 'api.openai.com'"},
    {"PACERD_ADMIN_LISTEN=0.0.0.0:9090",
     "PACERD_ADMIN_LISTEN: admin.listen: admin.token is required when admin.listen is not a "
     "loopback address"},
};

START_TEST(rejected_env)
{
	char *env[] = {(char *)bad_envs[_i].var, NULL};
	expect_error(NULL, env, bad_envs[_i].error);
}
END_TEST

START_TEST(env_conflicting_with_file_blames_the_file_value)
{
	char *env[] = {"PACERD_MAX_CONCURRENT=2", NULL};
	expect_file_error("plans:\n  default:\n    concurrency: {min: 4}\n", env,
	                  "3:24: plans.default: concurrency.min (4) is above max_concurrent (2)");
}
END_TEST

START_TEST(env_admin_listen_needs_file_token)
{
	char *env[] = {"PACERD_ADMIN_LISTEN=0.0.0.0:9090", NULL};
	struct config *c = load_ok("admin: {token: t}\n", env);
	ck_assert_str_eq(c->admin.listen, "0.0.0.0:9090");
	config_free(c);
}
END_TEST

/* ---------------------------------------------------- provider activation */

START_TEST(listed_providers_only)
{
	struct config *c = load_ok("providers:\n  anthropic:\n", NULL);
	ck_assert_uint_eq(c->n_providers, 1);
	ck_assert_ptr_null(config_provider(c, "openai"));
	/* openai inactive, no provider at "/": the first one listed. */
	ck_assert_str_eq(c->default_provider, "anthropic");
	check_provider(&c->providers[0], "https://api.anthropic.com", "/anthropic", KEY_X_API_KEY,
	               DIALECT_ANTHROPIC, "api.anthropic.com");
	config_free(c);
}
END_TEST

START_TEST(default_provider_falls_back_to_root_prefix)
{
	struct config *c = load_ok("providers:\n"
	                           "  anthropic: {}\n"
	                           "  local: {upstream: 'http://h:1', prefix: /}\n",
	                           NULL);
	ck_assert_str_eq(c->default_provider, "local");
	config_free(c);
	c = load_ok("providers: {groq: {}, openai: {prefix: /oai}}\n", NULL);
	ck_assert_str_eq(c->default_provider, "openai"); /* openai wins when active */
	config_free(c);
}
END_TEST

START_TEST(unknown_provider_gets_generic_defaults)
{
	struct config *c =
	    load_ok("providers:\n  vllm: {upstream: 'HTTPS://Gpu.Example:8443//'}\n", NULL);
	const struct provider_conf *p = config_provider(c, "vllm");
	check_provider(p, "https://Gpu.Example:8443", "/vllm", KEY_AUTHORIZATION, DIALECT_OPENAI,
	               NULL);
	ck_assert_str_eq(c->default_provider, "vllm");
	config_free(c);
}
END_TEST

START_TEST(builtin_overrides_and_normalisation)
{
	struct config *c = load_ok("providers:\n"
	                           "  openai: {prefix: /oai/, hosts: [Api.OpenAI.com, '[::1]:8']}\n"
	                           "  azure: {upstream: 'https://r.openai.azure.com/', hosts: []}\n"
	                           "  gemini: {upstream: 'http://[::1]:8080', hosts: }\n",
	                           NULL);
	const struct provider_conf *p = config_provider(c, "openai");
	ck_assert_str_eq(p->prefix, "/oai");
	ck_assert_uint_eq(p->n_hosts, 2);
	ck_assert_str_eq(p->hosts[0], "api.openai.com");
	ck_assert_str_eq(p->hosts[1], "[::1]:8");
	check_provider(config_provider(c, "azure"), "https://r.openai.azure.com", "/azure",
	               KEY_API_KEY, DIALECT_AZURE, NULL);
	p = config_provider(c, "gemini");
	ck_assert_str_eq(p->upstream, "http://[::1]:8080");
	ck_assert_uint_eq(p->n_hosts, 0);
	ck_assert_int_eq(p->key_source, KEY_X_GOOG_API_KEY);
	config_free(c);
}
END_TEST

START_TEST(lookups)
{
	struct config *c = load_ok("plans: {p: {}}\n", NULL);
	ck_assert_ptr_eq(config_plan(c, "p"), &c->plans[1]);
	ck_assert_ptr_null(config_plan(c, "q"));
	ck_assert_ptr_null(config_plan(c, NULL));
	ck_assert_ptr_null(config_provider(NULL, "openai"));
	ck_assert_ptr_eq(config_provider(c, "groq"), &c->providers[4]);
	config_free(c);
	config_free(NULL);
}
END_TEST

/* ---------------------------------------------------------- host:port */

START_TEST(split_hostport_valid)
{
	char host[64];
	unsigned port = 0;
	ck_assert_int_eq(config_split_hostport("127.0.0.1:8080", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_uint_eq(port, 8080);
	ck_assert_int_eq(config_split_hostport("[::1]:9090", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_uint_eq(port, 9090);
	ck_assert_int_eq(config_split_hostport(":1", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "");
	ck_assert_uint_eq(port, 1);
	ck_assert_int_eq(config_split_hostport("my-host.example:65535", host, sizeof(host), &port),
	                 0);
	ck_assert_str_eq(host, "my-host.example");
	ck_assert_uint_eq(port, 65535);
}
END_TEST

static const char *const bad_hostports[] = {
    "host",    "host:",  "host:0",  "host:65536", "host:80x", "host:-1",    "::1:80",
    "[::1]80", "[::1]:", "[zz]:80", "[::1:80",    "ho st:80", "host:+80",   "",
    "a:b:80",  ":",      "[]:80",   "h/x:80",     "h:080800", "[::1]:80:1",
};

START_TEST(split_hostport_invalid)
{
	char host[64];
	unsigned port = 0;
	ck_assert_msg(config_split_hostport(bad_hostports[_i], host, sizeof(host), &port) == -1,
	              "accepted '%s'", bad_hostports[_i]);
}
END_TEST

START_TEST(split_hostport_edges)
{
	char small[4];
	unsigned port = 0;
	ck_assert_int_eq(config_split_hostport(NULL, small, sizeof(small), &port), -1);
	ck_assert_int_eq(config_split_hostport("abcd:1", small, sizeof(small), &port), -1);
	ck_assert_int_eq(config_split_hostport("abc:1", small, sizeof(small), &port), 0);
	ck_assert_str_eq(small, "abc");
}
END_TEST

START_TEST(loopback)
{
	ck_assert(config_host_is_loopback("127.0.0.1"));
	ck_assert(config_host_is_loopback("127.255.0.9"));
	ck_assert(config_host_is_loopback("::1"));
	ck_assert(config_host_is_loopback("[::1]"));
	ck_assert(config_host_is_loopback("localhost"));
	ck_assert(config_host_is_loopback("LocalHost"));
	ck_assert(config_host_is_loopback("::ffff:127.0.0.1"));
	ck_assert(!config_host_is_loopback(""));
	ck_assert(!config_host_is_loopback("0.0.0.0"));
	ck_assert(!config_host_is_loopback("::"));
	ck_assert(!config_host_is_loopback("128.0.0.1"));
	ck_assert(!config_host_is_loopback("10.0.0.1"));
	ck_assert(!config_host_is_loopback("localhost.example.com"));
	ck_assert(!config_host_is_loopback(NULL));
}
END_TEST

START_TEST(enum_names)
{
	ck_assert_str_eq(config_key_source_name(KEY_AUTHORIZATION), "authorization");
	ck_assert_str_eq(config_key_source_name(KEY_X_API_KEY), "x-api-key");
	ck_assert_str_eq(config_key_source_name(KEY_API_KEY), "api-key");
	ck_assert_str_eq(config_key_source_name(KEY_X_GOOG_API_KEY), "x-goog-api-key");
	ck_assert_str_eq(config_key_source_name(KEY_QUERY_KEY), "query:key");
	ck_assert_str_eq(config_dialect_name(DIALECT_OPENAI), "openai");
	ck_assert_str_eq(config_dialect_name(DIALECT_ANTHROPIC), "anthropic");
	ck_assert_str_eq(config_dialect_name(DIALECT_AZURE), "azure");
	ck_assert_str_eq(config_dialect_name(DIALECT_IETF), "ietf");
	ck_assert_str_eq(config_dialect_name(DIALECT_NONE), "none");
}
END_TEST

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *t = tcase_create("defaults");
	tcase_add_test(t, defaults_without_file);
	tcase_add_test(t, empty_file_is_defaults);
	tcase_add_test(t, shipped_default_config_is_the_defaults);
	tcase_add_loop_test(t, shipped_examples_load, 0, COUNT(examples));
	tcase_add_test(t, example_contents);
	suite_add_tcase(s, t);

	t = tcase_create("file");
	tcase_add_test(t, full_file_every_key);
	tcase_add_test(t, agents_mode_off_and_reject);
	tcase_add_test(t, agents_priorities_and_fair_share);
	tcase_add_test(t, store_section_and_its_variable);
	tcase_add_test(t, store_password_sources);
	tcase_add_test(t, admin_beyond_loopback_with_token_or_disabled);
	tcase_add_test(t, forward_defaults_and_lists);
	tcase_add_test(t, state_dir_and_its_old_name);
	tcase_add_test(t, reopen_follows_idle_ttl_when_unset);
	tcase_add_test(t, aliases_and_null_values);
	tcase_add_test(t, many_keys);
	tcase_add_test(t, keys_index_answers_as_the_scan);
	tcase_add_test(t, zones_resolved_at_load);
	tcase_add_test(t, models_and_scopes);
	tcase_add_test(t, model_patterns);
	tcase_add_loop_test(t, rejected_file, 0, COUNT(bad_files));
	tcase_add_test(t, io_errors);
	tcase_add_test(t, messages_stay_on_one_line);
	suite_add_tcase(s, t);

	t = tcase_create("env");
	tcase_add_test(t, env_overrides_file_and_defaults);
	tcase_add_test(t, env_without_file);
	tcase_add_test(t, env_targets_default_provider_and_its_plan);
	tcase_add_test(t, env_supplies_azure_upstream);
	tcase_add_loop_test(t, rejected_env, 0, COUNT(bad_envs));
	tcase_add_test(t, env_conflicting_with_file_blames_the_file_value);
	tcase_add_test(t, env_admin_listen_needs_file_token);
	suite_add_tcase(s, t);

	t = tcase_create("providers");
	tcase_add_test(t, listed_providers_only);
	tcase_add_test(t, default_provider_falls_back_to_root_prefix);
	tcase_add_test(t, unknown_provider_gets_generic_defaults);
	tcase_add_test(t, builtin_overrides_and_normalisation);
	tcase_add_test(t, lookups);
	suite_add_tcase(s, t);

	t = tcase_create("hostport");
	tcase_add_test(t, split_hostport_valid);
	tcase_add_loop_test(t, split_hostport_invalid, 0, COUNT(bad_hostports));
	tcase_add_test(t, split_hostport_edges);
	tcase_add_test(t, loopback);
	tcase_add_test(t, enum_names);
	suite_add_tcase(s, t);
	return s;
}

UNIT_MAIN("config", config_suite)
