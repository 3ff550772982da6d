// Helpers of the integration suite: processes (mock, pacerd), ports, HTTP clients
// (node:http, raw sockets, curl), test certificates. Everything talks to 127.0.0.1
// only; every wait is bounded in time; processes are stopped by PID.
export * from './lib/util.mjs';
export * from './lib/proc.mjs';
export * from './lib/http.mjs';
