// SPDX-License-Identifier: Apache-2.0
// Helpers of the integration suite: processes (mock, pacerd), ports, HTTP clients
// (node:http, raw sockets, curl), test certificates. Everything talks to 127.0.0.1
// only; every wait is bounded in time; processes are stopped by PID. lib/redis.mjs: a
// real redis-server per test and a tiny RESP client (cases/store.mjs).
export * from './lib/util.mjs';
export * from './lib/proc.mjs';
export * from './lib/http.mjs';
export * from './lib/redis.mjs';
