/* SPDX-License-Identifier: Apache-2.0 */
/* config — YAML configuration (DESIGN §10): parsing, complete validation with
 * file:line:column errors, PACERD_* environment overrides, built-in defaults.
 *
 * A struct config is immutable once loaded (but for its providers' model
 * memos, which only remember answers of its rules): reload builds a new one
 * and swaps it only when it is valid. Every string it holds is owned by it.
 * What requests look up is resolved or indexed at load, never scanned per
 * request: the plans' time zones, the keys: entries by hash prefix. */
#ifndef PACERD_CONFIG_H
#define PACERD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct daily_zone;
struct key_index;
struct model_memo;

enum key_source {
	KEY_AUTHORIZATION,  /* "authorization": Authorization: Bearer <key> */
	KEY_X_API_KEY,      /* "x-api-key" */
	KEY_API_KEY,        /* "api-key" (Azure) */
	KEY_X_GOOG_API_KEY, /* "x-goog-api-key" */
	KEY_QUERY_KEY,      /* "query:key": ?key=<key> (Gemini) */
};

enum dialect { DIALECT_OPENAI, DIALECT_ANTHROPIC, DIALECT_AZURE, DIALECT_IETF, DIALECT_NONE };
enum jitter_mode { JITTER_ADDITIVE, JITTER_FULL };
enum agents_mode { AGENTS_OFF, AGENTS_SERIALIZE, AGENTS_REJECT };
/* Whom a lane shares fairly between, inside one priority: the agent id (the
 * agents.header), else the client's address; or only one of them (requests
 * without it share one turn); or nobody (FIFO). */
enum fair_share { FAIR_AGENT_OR_ADDRESS, FAIR_AGENT, FAIR_ADDRESS, FAIR_OFF };

/* agents.priorities: the priority of an agent's requests that do not say
 * (x-pacer-priority wins). */
struct agent_priority {
	char *id;
	int priority;
};
enum stream_usage { STREAM_USAGE_INJECT, STREAM_USAGE_OFF };
/* What sets a lane's concurrency limit (sched/aimd.h, sched/gradient.h):
 * refusals alone; the latency of its answers as well; or the latency where
 * the provider is silent (no rate-limit headers, no refusal yet). */
enum concurrency_mode { CONCURRENCY_AUTO, CONCURRENCY_AIMD, CONCURRENCY_GRADIENT };
enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum store_kind { STORE_LOCAL, STORE_REDIS };
/* What a lane does while the shared store cannot answer. */
enum store_on_error { STORE_ON_ERROR_LOCAL, STORE_ON_ERROR_FAIL };

struct plan_conf {
	char *name;
	double max_requests_per_second; /* 0 = no limit */
	double max_requests_per_minute;
	double max_requests_per_hour;
	double min_ms_per_request;
	unsigned burst; /* >= 1 */
	double max_tokens_per_minute;
	double token_burst;                  /* 0 = tpm / 60 */
	double max_input_tokens_per_minute;  /* 0 = none; the prompt's part of the estimate */
	double max_output_tokens_per_minute; /* 0 = none; the requested output's part */
	double max_requests_per_day; /* 0 = none: a budget, spent as fast as the gates allow */
	double max_tokens_per_day;
	char *day_resets_at;  /* "HH:MM" local time of day_time_zone */
	char *day_time_zone;  /* IANA name, "UTC" by default */
	int day_reset_minute; /* day_resets_at in minutes after midnight (resolved at load) */
	const struct daily_zone *day_zone; /* day_time_zone resolved at load (daily.h): one of
	                                    * config.zones */
	unsigned default_output_tokens;
	unsigned max_concurrent;        /* >= 1, hard ceiling */
	unsigned max_concurrent_global; /* 0 = none; across replicas (store.kind: redis) */
	struct {
		bool adaptive;
		unsigned min;            /* >= 1 */
		double decrease_factor;  /* in (0, 1) */
		unsigned reopen_after_s; /* idle this long: open again; 0 in the file =
		                          * limits.idle_ttl_s / 2 (resolved at load) */
		enum concurrency_mode mode;
		unsigned slow_start; /* >= 1: the gradient's first limit (at most max_concurrent) */
		double tolerance;    /* >= 0: a first token this much over queue-free is no wait */
	} concurrency;
	struct {
		bool adaptive;
		unsigned min_ms;
		unsigned max_ms;           /* >= min_ms */
		double backoff_multiplier; /* >= 1 */
		double recovery_rps;       /* >= 0: rate gained per second of successes */
	} dispatch_delay;
	double proactive_threshold; /* in [0, 1] */
	unsigned quota_probe_s;     /* >= 1: one probe upstream this often while the quota is out */
	enum stream_usage stream_usage; /* meter OpenAI streams on token-paced lanes (issue 8.3) */
	struct {
		unsigned max_depth; /* >= 1 */
		unsigned max_wait_s;
	} queue;
	struct {
		unsigned max_attempts; /* >= 1 */
		unsigned initial_delay_ms;
		unsigned max_delay_ms;
		enum jitter_mode jitter;
		unsigned deadline_s;
	} retry;
};

/* One row of a provider's model_groups or model_plans: a model name pattern
 * and what the models it matches get. */
struct model_rule {
	char *pattern;    /* an fnmatch(3) glob (* ? [...]), or an exact name */
	char *value;      /* the group name, or the plan's name (validated) */
	unsigned literal; /* characters outside wildcards: the more, the more specific */
	unsigned prefix;  /* the literal characters before the first wildcard */
	bool exact;       /* no wildcard: beats every pattern */
};

/* Longest pattern or group name (the longest model name tokens.h takes). */
#define CONFIG_MODEL_MAX 128

/* Whether cache reads of a prompt count toward a provider's input-token
 * limits (PROVIDERS.md §10): free at Anthropic and Groq. */
enum cached_input { CACHED_INPUT_FREE, CACHED_INPUT_CHARGED };

/* What a built-in provider starts from before the file's values: a
 * providers: entry with its name gets these, and without a providers: section
 * every row with an upstream is active, in the rows' order. The rows are
 * provider/profile.c's (what a provider IS lives there); core cannot include
 * provider (DESIGN §8), so they are handed over with config_set_builtins. */
struct config_builtin {
	const char *name;
	const char *upstream; /* NULL: none (the user's own resource: azure) */
	const char *prefix;
	const char *host; /* the forward-proxy host; NULL: none */
	enum key_source key_source;
	enum dialect dialect;
	enum cached_input cached_input;
};

struct provider_conf {
	char *name;
	char *upstream; /* http(s)://host[:port][/base/path], no trailing '/' */
	char *prefix;   /* starts with '/', no trailing '/' except the root "/" */
	enum key_source key_source;
	enum dialect dialect;
	char **hosts; /* lower-case host names for the forward-proxy form */
	size_t n_hosts;
	char *plan; /* name of an entry of config.plans (validated) */
	struct {
		bool verify;
		char *ca_file; /* "" = system store */
	} tls;
	struct {
		unsigned connect_s;
		unsigned first_byte_s;
		unsigned idle_s;
	} timeouts;
	bool http2; /* opt-in HTTP/2 to the upstream (DESIGN §11: 1.1 by default) */
	struct model_rule *model_groups; /* models that share a budget (model.h adds built-ins) */
	size_t n_model_groups;
	struct model_rule *model_plans; /* plans by model pattern */
	size_t n_model_plans;
	enum cached_input cached_input;       /* free for anthropic and groq, else charged */
	const struct config_builtin *builtin; /* the row it started from; NULL: a name
	                                       * with no built-in row */
	/* What the rules above (and model.h's built-in rows) answered per model
	 * name: made empty at load, filled by requests (model_memo.h). NULL in a
	 * provider_conf made by hand: every answer is then a scan. */
	struct model_memo *memo;
};

struct key_conf {
	char *provider;
	char *key_sha256; /* lower-case hex prefix, 12 to 64 digits */
	char *plan;       /* never NULL: the entry's plan, or the provider's when !own_plan */
	char *scope;      /* keys of one provider with the same scope share one budget
	                   * per model group; NULL: the key is its own scope */
	bool own_plan;    /* the entry named a plan (or named neither plan nor scope:
	                   * then "default", as always) */
};

struct config {
	char *source; /* path of the file, or "(built-in defaults)" */
	char *listen; /* host:port; [v6]:port */
	struct {
		char *listen; /* "" = disabled */
		char *token;
		unsigned top_lanes; /* /metrics: pacerd_lane_* series for this many lanes at most */
	} admin;
	struct {
		enum log_level level;
		char *file; /* "-" = stderr */
	} log;
	struct {
		uint64_t max_body_bytes;
		uint64_t max_upload_bytes; /* a streamed upload's body; 0: no limit */
		unsigned max_header_bytes;
		unsigned max_connections;
		unsigned client_timeout_s;
		unsigned max_lanes;
		unsigned idle_ttl_s;
	} limits;
	unsigned drain_timeout_s;
	/* Where pacerd keeps what it keeps (core/state_dir.h): the CA it makes,
	 * what the lanes learned. "" = $STATE_DIRECTORY, else /var/lib/pacerd
	 * when writable, else none; an absolute path otherwise. */
	char *state_dir;
	/* A key the file used that is deprecated, as one line for the log
	 * ("FILE:LINE:COLUMN: forward.state_dir is …"); NULL: none. */
	char *deprecated;
	char *default_provider;          /* name of an entry of providers */
	struct provider_conf *providers; /* the active providers */
	size_t n_providers;
	struct plan_conf *plans; /* always holds "default" */
	size_t n_plans;
	struct key_conf *keys;
	size_t n_keys;
	struct key_index *key_index; /* keys by provider and hash prefix (key_index.h) */
	struct daily_zone **zones;   /* each distinct day_time_zone of the plans, resolved */
	size_t n_zones;
	struct {
		char *header; /* lower-case */
		enum agents_mode mode;
		enum fair_share fair_share;
		struct agent_priority *priorities; /* sorted by id */
		size_t n_priorities;
	} agents;
	struct {
		enum store_kind kind;
		struct {
			char *address; /* host:port, IP:port, [v6]:port or unix:/path */
			char *key_prefix;
			char *username;      /* "" = AUTH with the password alone (or none) */
			char *password_file; /* "" = PACERD_STORE_PASSWORD, or no AUTH */
			/* Read from password_file or PACERD_STORE_PASSWORD by config_load,
			 * never from the YAML; NULL = no AUTH. Never logged nor shown:
			 * password_from says where it came from (--check-config). */
			char *password;
			const char *password_from; /* "password_file" | "PACERD_STORE_PASSWORD" */
			char *resolv_conf;         /* the resolver's nameservers for host names */
			struct {
				bool enabled;
				char *ca_file;     /* "" = the system's store */
				char *server_name; /* "" = the host of address */
				char *cert_file;   /* a client certificate: both or neither */
				char *key_file;
			} tls;
			unsigned timeout_ms; /* per command */
			enum store_on_error on_error;
			unsigned replicas; /* >= 1: local fallback gates at limit / replicas */
			unsigned
			    lease_ms; /* max_concurrent_global leases live this long unrenewed */
		} redis;
	} store;
	struct {
		bool intercept; /* CONNECT to a provider's host is terminated with the CA */
		char *ca_cert;  /* "" = made in state_dir at first start */
		char *ca_key;   /* with ca_cert */
		/* state_dir's old name, read for one release (config_load moves it
		 * to state_dir and notes it in deprecated); read nothing else. */
		char *state_dir;
		/* host[:port] (lower case; 443 when none) tunnelled blindly; "*" = any
		 * host on 443 (loopback only) */
		char **tunnel;
		size_t n_tunnel;
	} forward;
};

/* Loads `path` (NULL: built-in defaults only), then applies the PACERD_* variables
 * found in `env` (a NULL-terminated array of "NAME=value" strings, like environ;
 * NULL: none), then validates everything. On failure returns NULL and writes one
 * line to err: "FILE:LINE:COLUMN: message" for errors in the file (1-based),
 * "PACERD_X: message" for a bad variable, "FILE: message" for I/O errors. */
struct config *config_load(const char *path, char *const *env, char *err, size_t errlen);

/* The built-in providers config_load knows from now on: rows[0..n), which
 * must outlive every configuration loaded (static tables). Set once, before
 * the first load (main, and every test's main, call profile_install()).
 * Without it config_load knows no built-in provider. */
void config_set_builtins(const struct config_builtin *const *rows, size_t n);
void config_free(struct config *cfg);

/* Every key of the file, one line each: "path<TAB>type<TAB>bounds<TAB>default"
 * ("-" where there is none), straight from the option tables, so that
 * pacerd.yaml(5) is checked against what the parser accepts (pacerd
 * --config-keys; tests/man/check-keys.sh). */
void config_keys_print(FILE *out);

/* A configuration and the number of its holders: the server (the current
 * one), every request accepted under it (its route points into it), and every
 * lane whose provider or plan does. Freed when the last holder lets go, so a
 * reload never pulls a configuration from under a request in flight. */
struct config_ref {
	struct config *cfg;
	unsigned refs;
};

/* Takes cfg over (frees it on failure). NULL when out of memory. */
struct config_ref *config_ref_new(struct config *cfg);
struct config_ref *config_ref_get(struct config_ref *r);
void config_ref_put(struct config_ref *r);

const struct provider_conf *config_provider(const struct config *cfg, const char *name);
const struct plan_conf *config_plan(const struct config *cfg, const char *name);
/* The agents.priorities entry of agent `id`; false when it has none. */
bool config_agent_priority(const struct config *cfg, const char *id, int *priority);

/* Splits "host:port", "[v6]:port" or ":port" (host "" = any). 0 on success, -1 on error. */
int config_split_hostport(const char *s, char *host, size_t hostlen, unsigned *port);
/* Whether a listen host is a loopback address (127.0.0.0/8, ::1, localhost). */
bool config_host_is_loopback(const char *host);

/* The best rule of rules[0..n) for `model` (NUL-terminated): an exact name
 * first, then the pattern with the most literal characters, ties to the first
 * in the file. NULL when none matches. */
const struct model_rule *config_model_rule(const struct model_rule *rules, size_t n,
                                           const char *model);
/* Checks a model pattern and fills rule->literal, prefix and exact (pattern and
 * value untouched). 0, or -1 with the reason in msg: empty, longer than
 * CONFIG_MODEL_MAX, a character a model name cannot hold (space, control,
 * non-ASCII, '"', '\\'), or a '[' left open. */
int config_model_pattern(const char *pattern, struct model_rule *rule, char *msg, size_t msglen);

/* The keys: entry for (prov, key_hash): the first whose key_sha256 prefixes
 * key_hash; NULL when none does (or key_hash is NULL or ""). A binary search
 * of the index made at load. */
const struct key_conf *config_key_for(const struct config *cfg, const struct provider_conf *prov,
                                      const char *key_hash);
/* The plan a request for `model` (NULL: none) with key key_hash gets at prov:
 * the key's own plan; else the provider's model_plans row that matches best
 * (remembered per model in prov->memo); else the provider's plan. Never NULL
 * for a loaded configuration. */
const struct plan_conf *config_plan_for(const struct config *cfg, const struct provider_conf *prov,
                                        const char *key_hash, const char *model);
/* The scope named by the key's keys: entry, or NULL: the key is its own. */
const char *config_scope_for(const struct config *cfg, const struct provider_conf *prov,
                             const char *key_hash);

const char *config_key_source_name(enum key_source k);
const char *config_cached_input_name(enum cached_input c);
const char *config_dialect_name(enum dialect d);

#endif
