// SPDX-License-Identifier: Apache-2.0
// WebSocket helpers of the integration suite (cases/websocket*.mjs): a `ws` client
// through pacerd (on the base URL, or over a CONNECT tunnel's TLS), turns, the upgrade
// and frames by hand on raw sockets, and what pacerd and the mock tell about sockets.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import WebSocket from 'ws';
import { request } from './http.mjs';
import { SLOW, waitFor } from './util.mjs';

export const wsStats = (mock) => mock.admin('GET', '/_mock/ws');
export const status = async (p) => JSON.parse((await request(`${p.admin}/status`)).body.toString());
export const metrics = async (p) => (await request(`${p.admin}/metrics`)).body.toString();
export const fds = (p) => fs.readdirSync(`/proc/${p.pid}/fd`).length;
export const turnLines = (p) => p.logs().filter((l) => l.event === 'request' && l.transport === 'websocket');

/**
 * A `ws` client through pacerd; resolves once open. Messages go to `got` as parsed JSON.
 * tunnel: a TLS socket over a CONNECT tunnel (tunnelTls): the socket goes to
 * wss://HOST over it, as a client with HTTPS_PROXY=pacerd does.
 */
export function open(p, { path = '/v1/responses', key = 'sk-ws-test-0001', headers = {}, tunnel = null, host = 'api.openai.com' } = {}) {
  return new Promise((resolve, reject) => {
    const url = tunnel ? `wss://${host}${path}` : `ws://127.0.0.1:${p.port}${path}`;
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${key}`, ...headers }, perMessageDeflate: false,
      ...(tunnel ? { createConnection: () => tunnel } : {}),
    });
    ws.got = [];
    ws.on('message', (data, binary) => { if (!binary) ws.got.push(JSON.parse(data.toString())); });
    ws.closed = new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, headers: res.headers, body })));
    });
    ws.once('error', reject);
  });
}

/** CONNECT host:443 through pacerd, then TLS trusting pacerd's CA (p.stateDir/ca.pem). */
export function tunnelTls(p, host = 'api.openai.com') {
  return new Promise((resolve, reject) => {
    const s = net.connect(p.port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => { s.destroy(); reject(new Error('CONNECT: no answer')); }, 5000 * SLOW);
    s.on('error', (e) => { clearTimeout(timer); reject(e); });
    s.on('data', function onData(d) {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(timer);
      s.off('data', onData);
      const head = buf.subarray(0, end).toString('latin1');
      if (!head.startsWith('HTTP/1.1 200')) { s.destroy(); reject(new Error(head)); return; }
      const c = tls.connect({ socket: s, servername: host, ca: fs.readFileSync(`${p.stateDir}/ca.pem`), ALPNProtocols: ['http/1.1'] });
      c.once('secureConnect', () => resolve(c));
      c.once('error', reject);
    });
    s.write(`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`);
  });
}

/** Sends a response.create and waits for the event that ends it. */
export async function turn(ws, body = {}, { end = 'response.completed', timeout_ms = 10000 } = {}) {
  const before = ws.got.filter((e) => e.type === end || e.type === 'error').length;
  ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-mock', input: 'hello over a socket', ...body }));
  await waitFor(() => ws.got.filter((e) => e.type === end || e.type === 'error').length > before,
    { timeout_ms: timeout_ms * SLOW, what: end });
  return ws.got.filter((e) => e.type === end || e.type === 'error').at(-1);
}

/** The upgrade by hand on a raw socket: resolves with the socket once the 101 is read. */
export function rawUpgrade(port, path = '/v1/responses', key = 'sk-ws-raw-0001', headers = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    s.on('error', reject);
    s.on('data', function onData(d) {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      const head = buf.subarray(0, end).toString();
      s.rest = buf.subarray(end + 4);
      if (!head.startsWith('HTTP/1.1 101')) reject(new Error(head));
      else resolve(s);
    });
    s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\n` +
      `Authorization: Bearer ${key}\r\n` + Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n');
  });
}

/** One frame: opcode, payload, masked or not, FIN or not. */
export function frame(opcode, payload, { mask = true, fin = true } = {}) {
  const p = Buffer.from(payload);
  const len = p.length;
  const head = [(fin ? 0x80 : 0) | opcode];
  let ext = Buffer.alloc(0);
  if (len < 126) head.push((mask ? 0x80 : 0) | len);
  else if (len < 65536) { head.push((mask ? 0x80 : 0) | 126); ext = Buffer.alloc(2); ext.writeUInt16BE(len); }
  else { head.push((mask ? 0x80 : 0) | 127); ext = Buffer.alloc(8); ext.writeBigUInt64BE(BigInt(len)); }
  if (!mask) return Buffer.concat([Buffer.from(head), ext, p]);
  const key = crypto.randomBytes(4);
  const body = Buffer.alloc(len);
  for (let i = 0; i < len; i++) body[i] = p[i] ^ key[i % 4];
  return Buffer.concat([Buffer.from(head), ext, key, body]);
}

/** The text messages a raw socket receives (unmasked server frames), parsed, as they come. */
export function messages(s) {
  const got = [];
  let buf = s.rest ?? Buffer.alloc(0);
  s.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 2) {
      let len = buf[1] & 0x7f, off = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
      if (buf.length < off + len) return;
      if ((buf[0] & 0x0f) === 0x1) got.push(JSON.parse(buf.subarray(off, off + len).toString()));
      buf = buf.subarray(off + len);
    }
  });
  return got;
}

/** Reads frames from a raw socket until a close frame: its code. */
export function closeCode(s, timeout_ms = 5000) {
  return new Promise((resolve, reject) => {
    let buf = s.rest ?? Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error('no close frame')), timeout_ms * SLOW);
    const look = () => {
      while (buf.length >= 2) {
        let len = buf[1] & 0x7f, off = 2;
        if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
        else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
        if (buf.length < off + len) return;
        if ((buf[0] & 0x0f) === 0x8) { clearTimeout(timer); resolve(len >= 2 ? buf.readUInt16BE(off) : 1005); return; }
        buf = buf.subarray(off + len);
      }
    };
    s.on('data', (d) => { buf = Buffer.concat([buf, d]); look(); });
    s.on('close', () => { clearTimeout(timer); resolve(null); });
    look();
  });
}

