// SPDX-License-Identifier: Apache-2.0
// The status page on the admin listener (issue 32 item 1): GET / serves one
// self-contained HTML document whose view the server fills (the page without
// JavaScript), GET /events streams /status snapshots as server-sent events (the
// page's script redraws from them), both behind admin.token (a bearer token, or
// the token as HTTP Basic's password, which a browser asks for). Every value is
// escaped: model and agent names come from clients. A real browser (headless
// Chromium, skipped with one line where it is absent) loads it under traffic.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { SLOW, keyHash, request, sleep, waitFor } from '../lib.mjs';
import { chromiumBin, launchChromium } from '../lib/chromium.mjs';
import { chatBody, runLoad, startPacerdWithAdmin } from '../load.mjs';
import { open as openWs, turn as wsTurn } from '../lib/ws.mjs';

const TOKEN = 'page-admin-token-7f3c';
const XSS_MODEL = "<img/src/onerror=alert(1)>&'x"; // a model name: printable, no space or '"'
const XSS_AGENT = `<script>alert("agent")</script> & 'b'`;

const basic = (user, pass) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;
/** Every www-authenticate field of a response, in order. */
const challenges = (r) => r.rawHeaders.filter((_, i) => i % 2 === 1 && r.rawHeaders[i - 1].toLowerCase() === 'www-authenticate');

function chat(p, key, { model = 'gpt-mock', headers = {} } = {}) {
  const body = JSON.parse(chatBody());
  body.model = model;
  return request(`${p.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

/**
 * GET /events as a stream: {status, headers, next() (the next data event, parsed),
 * raw() (every byte so far), close()}.
 */
function openEvents(url, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers, agent: false }, (res) => {
      let text = '';
      let raw = '';
      const events = [];
      const waiters = [];
      res.setEncoding('utf8');
      res.on('data', (d) => {
        raw += d;
        text += d;
        for (let i = text.indexOf('\n\n'); i >= 0; i = text.indexOf('\n\n')) {
          const block = text.slice(0, i);
          text = text.slice(i + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
          if (!data) continue;
          const ev = { at: Date.now(), json: JSON.parse(data) };
          if (waiters.length) waiters.shift()(ev); else events.push(ev);
        }
      });
      res.on('error', () => {});
      resolve({
        status: res.statusCode,
        headers: res.headers,
        raw: () => raw,
        next: (timeout_ms = 5000 * SLOW) => {
          if (events.length) return Promise.resolve(events.shift());
          return new Promise((res2, rej2) => {
            const timer = setTimeout(() => rej2(new Error(`no event within ${timeout_ms} ms`)), timeout_ms);
            waiters.push((ev) => { clearTimeout(timer); res2(ev); });
          });
        },
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The rows of the server-rendered lanes table: {key, model, cells[]} per row. */
function laneRows(html) {
  const table = html.match(/<table id="lanes">[\s\S]*?<\/table>/);
  assert.ok(table, 'no lanes table in the page');
  return [...table[0].matchAll(/<tr class="lane[^"]*"[^>]*>([\s\S]*?)<\/tr>/g)].map((m) => {
    const cells = [...m[1].matchAll(/<td class="([^"]*)"[^>]*>([\s\S]*?)<\/td>/g)].map((c) => ({ cls: c[1], html: c[2] }));
    const cell = (cls) => cells.find((c) => c.cls.split(' ').includes(cls))?.html;
    return { key: cell('key'), model: cell('model'), rate: cell('rate'), provider: cell('provider'), cells };
  });
}

export const tests = [
  {
    name: 'GET / serves the page: 200 text/html, a CSP that allows its own script and style by digest and nothing from elsewhere; the server-drawn table lists the lanes with traffic',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock);
      const a = 'sk-page-lane-a-0001', b = 'sk-page-lane-b-0002';
      for (let i = 0; i < 3; i++) assert.equal((await chat(p, a)).status, 200);
      for (let i = 0; i < 2; i++) assert.equal((await chat(p, b, { model: 'gpt-mock-2' })).status, 200);

      const r = await request(`${p.admin}/`);
      assert.equal(r.status, 200);
      assert.equal(r.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(r.headers['cache-control'], 'no-store');
      assert.equal(r.headers['x-content-type-options'], 'nosniff');
      assert.equal(r.headers['referrer-policy'], 'no-referrer');
      const csp = r.headers['content-security-policy'];
      assert.ok(csp, 'no content-security-policy');
      const html = r.text();
      // default-src 'none': fonts, images, frames, objects… come from nowhere; the one
      // connection allowed is to this origin (the event stream).
      const directives = Object.fromEntries(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
      assert.deepEqual(directives['default-src'], ["'none'"]);
      assert.deepEqual(directives['connect-src'], ["'self'"]);
      assert.deepEqual(directives['frame-ancestors'], ["'none'"]);
      assert.deepEqual(directives['base-uri'], ["'none'"]);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:|\*/, csp);
      // The script and style are allowed by the digest of exactly what the page holds.
      const digest = (s) => `'sha256-${crypto.createHash('sha256').update(s).digest('base64')}'`;
      const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
      const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]);
      assert.equal(scripts.length, 1);
      assert.equal(styles.length, 1);
      assert.deepEqual(directives['script-src'], [digest(scripts[0])]);
      assert.deepEqual(directives['style-src'], [digest(styles[0])]);
      // Self-contained: nothing to load from anywhere.
      assert.doesNotMatch(html, /<script[^>]*\ssrc=|<link[^>]*stylesheet|@import|url\(|<iframe|<img/i);
      for (const m of html.matchAll(/\s(?:src|href)="([^"]*)"/g)) assert.match(m[1], /^data:/, `a load: ${m[0]}`);

      const rows = laneRows(html);
      const ra = rows.find((x) => x.key === `key ${keyHash(a)}`);
      const rb = rows.find((x) => x.key === `key ${keyHash(b)}`);
      assert.ok(ra && rb, `lanes of both keys in ${JSON.stringify(rows.map((x) => x.key))}`);
      assert.equal(ra.provider, 'openai');
      assert.equal(ra.model, 'gpt-mock');
      assert.equal(rb.model, 'gpt-mock-2');
      assert.match(ra.rate, /\b3 sent\b/);
      assert.match(rb.rate, /\b2 sent\b/);
      assert.ok(!html.includes(a) && !html.includes(b), 'the page shows an API key');
      assert.equal(ra.cells.length, 11, 'one cell per column');
      assert.match(html, /<table id="errors">/);
      assert.match(html, /<span id="conn" class="off">static: updates need JavaScript<\/span>/);

      // The routes' methods.
      assert.equal((await request(`${p.admin}/`, { method: 'POST', body: '' })).status, 405);
      assert.equal((await request(`${p.admin}/events`, { method: 'POST', body: '' })).status, 405);
      assert.equal((await request(`${p.admin}/index.html`)).status, 404);
      t.note(`page ${html.length} B, ${rows.length} lanes drawn by the server`);
    },
  },
  {
    name: 'GET /events: retry, then one /status snapshot a second as a data: line (the first at once), the lanes moving with traffic',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock);
      const key = 'sk-page-events-0001';
      assert.equal((await chat(p, key)).status, 200);
      const t0 = Date.now();
      const es = await openEvents(`${p.admin}/events`);
      t.defer(() => es.close());
      assert.equal(es.status, 200);
      assert.equal(es.headers['content-type'], 'text/event-stream; charset=utf-8');
      assert.equal(es.headers['cache-control'], 'no-store');
      const first = await es.next();
      assert.ok(first.at - t0 < 1000 * SLOW, `first snapshot after ${first.at - t0} ms`);
      assert.ok(es.raw().startsWith('retry: 5000\n\n'), JSON.stringify(es.raw().slice(0, 40)));
      const lane = (ev) => ev.json.lanes.find((l) => l.key === keyHash(key));
      assert.equal(lane(first).counters.dispatched, 1);
      assert.equal(first.json.events.clients, 1);
      assert.deepEqual(Object.keys(first.json).filter((k) => !['events', 'last_errors'].includes(k)),
        Object.keys((await request(`${p.admin}/status`)).json()).filter((k) => !['events', 'last_errors'].includes(k)),
        'a snapshot is /status');
      for (let i = 0; i < 4; i++) assert.equal((await chat(p, key)).status, 200);
      const second = await es.next();
      const third = await es.next();
      const gap = third.at - second.at;
      assert.ok(gap > 500 && gap < 2000 * SLOW, `snapshots ${gap} ms apart`);
      assert.equal(lane(third).counters.dispatched, 5);
      assert.equal(typeof lane(third).oldest_wait_ms, 'number');
      t.note(`snapshot ${JSON.stringify(third.json).length} B, ${gap} ms apart`);
    },
  },
  {
    name: 'admin.token: / and /events answer 401 without it (with a Basic challenge a browser answers), 200 with the bearer token or the token as the Basic password; Basic is refused for POST /reload',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { admin: { token: TOKEN } });
      for (const pathname of ['/', '/events', '/status']) {
        const none = await request(`${p.admin}${pathname}`);
        assert.equal(none.status, 401, pathname);
        assert.equal(none.json().error.code, 'unauthorized');
        assert.deepEqual(challenges(none), ['Bearer', 'Basic realm="pacerd admin", charset="UTF-8"'], pathname);
        assert.ok(!none.text().includes(TOKEN.slice(0, 8)));
        for (const wrong of [basic('admin', 'wrong'), basic('', TOKEN.slice(0, -1)), basic(TOKEN, ''), `Basic ${TOKEN}`, 'Basic', 'Basic =', 'Basic !!!!', `Bearer ${TOKEN}x`])
          assert.equal((await request(`${p.admin}${pathname}`, { headers: { authorization: wrong } })).status, 401, `${pathname} ${wrong}`);
      }
      const page = await request(`${p.admin}/`, { headers: { authorization: basic('anyone', TOKEN) } });
      assert.equal(page.status, 200);
      assert.match(page.text(), /<table id="lanes">/);
      assert.equal((await request(`${p.admin}/`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
      assert.equal((await request(`${p.admin}/status`, { headers: { authorization: basic('', TOKEN) } })).status, 200);
      assert.equal((await request(`${p.admin}/`, { headers: { authorization: `basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` } })).status, 200);
      for (const auth of [basic('', TOKEN), `Bearer ${TOKEN}`]) {
        const es = await openEvents(`${p.admin}/events`, { authorization: auth });
        assert.equal(es.status, 200, auth);
        assert.ok((await es.next()).json.lanes, auth);
        es.close();
      }
      // Credentials a browser remembers go with any site's form: Basic only reads.
      const reload = await request(`${p.admin}/reload`, { method: 'POST', body: '', headers: { authorization: basic('', TOKEN) } });
      assert.equal(reload.status, 401);
      assert.deepEqual(challenges(reload), ['Bearer']);
      assert.equal((await request(`${p.admin}/reload`, { method: 'POST', body: '', headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
    },
  },
  {
    name: 'escaping: a model and an agent name with markup appear in the page only as text (& < > " \' escaped), in the lanes and in the last errors',
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock, { plans: { default: { retry: { max_attempts: 1 } } } });
      const key = 'sk-page-xss-0001';
      const r = await chat(p, key, { model: XSS_MODEL, headers: { 'x-agent-id': XSS_AGENT, 'x-mock-status': '500' } });
      assert.equal(r.status, 500);
      const st = (await request(`${p.admin}/status`)).json();
      assert.equal(st.lanes.find((l) => l.key === keyHash(key)).model, XSS_MODEL);
      const err = st.last_errors.find((e) => e.event === 'request' && e.status === 500);
      assert.ok(err, JSON.stringify(st.last_errors));
      assert.equal(err.agent, XSS_AGENT);
      assert.equal(err.model, XSS_MODEL);

      const html = (await request(`${p.admin}/`)).text();
      const escModel = '&lt;img/src/onerror=alert(1)&gt;&amp;&#39;x';
      const escAgent = '&lt;script&gt;alert(&quot;agent&quot;)&lt;/script&gt; &amp; &#39;b&#39;';
      assert.ok(!html.includes('<img'), 'the model as markup');
      assert.ok(!html.includes(XSS_MODEL));
      assert.ok(!html.includes('<script>alert'), 'the agent as markup');
      assert.ok(!html.includes(XSS_AGENT));
      const row = laneRows(html).find((x) => x.key === `key ${keyHash(key)}`);
      assert.equal(row.model, escModel);
      const errors = html.match(/<table id="errors">[\s\S]*?<\/table>/)[0];
      assert.ok(errors.includes(`agent=${escAgent}`), errors);
      assert.ok(errors.includes(`model=${escModel}`), errors);
      assert.equal(html.match(/<script>/g).length, 1, 'one script: the page\'s own');
    },
  },
  {
    name: 'event streams are bounded: 16 at once, the 17th gets 503 too_many_clients; closed clients free their slots and sockets (fd count back to where it was)',
    timeout_ms: 30000,
    fn: async (t) => {
      const mock = await t.startMock();
      const p = await startPacerdWithAdmin(t, mock);
      assert.equal((await chat(p, 'sk-page-bound-0001')).status, 200);
      // Settled: the connections of the requests so far closed on pacerd's side too.
      let fd0 = -1;
      await waitFor(async () => { const n = fdCount(p.pid); const same = n === fd0; fd0 = n; await sleep(100); return same; },
        { timeout_ms: 5000 * SLOW, what: 'a steady fd count' });
      const streams = [];
      for (let i = 0; i < 16; i++) {
        const es = await openEvents(`${p.admin}/events`);
        assert.equal(es.status, 200);
        streams.push(es);
      }
      t.defer(() => streams.forEach((s) => s.close()));
      await Promise.all(streams.map((s) => s.next()));
      const fd16 = fdCount(p.pid);
      assert.equal(fd16, fd0 + 16, `fds ${fd0} -> ${fd16} with 16 streams`);
      const over = await request(`${p.admin}/events`);
      assert.equal(over.status, 503);
      assert.equal(over.json().error.code, 'too_many_clients');
      assert.equal(over.headers['retry-after'], '30');
      let st = (await request(`${p.admin}/status`)).json();
      assert.equal(st.events.clients, 16);
      assert.equal(st.events.refused, 1);

      for (const s of streams) s.close();
      await waitFor(() => fdCount(p.pid) <= fd0, { timeout_ms: 5000 * SLOW, what: `fds back to ${fd0} (now ${fdCount(p.pid)})` });
      st = (await request(`${p.admin}/status`)).json();
      assert.equal(st.events.clients, 0);
      assert.equal(st.events.served, 16);
      // Another client gets a slot again; a half-closed raw socket is noticed too.
      const sock = net.connect({ host: '127.0.0.1', port: Number(new URL(p.admin).port) });
      await new Promise((res) => sock.on('connect', res));
      sock.write('GET /events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
      let got = '';
      sock.on('data', (d) => { got += d; });
      await waitFor(() => got.includes('data: '), { timeout_ms: 3000 * SLOW, what: 'a snapshot on the raw socket' });
      sock.destroy();
      await waitFor(async () => (await request(`${p.admin}/status`)).json().events.clients === 0, { timeout_ms: 5000 * SLOW, what: 'the raw client gone' });
      await waitFor(() => fdCount(p.pid) <= fd0, { timeout_ms: 5000 * SLOW, what: `fds back to ${fd0}` });
      t.note(`fds ${fd0} -> ${fd16} with 16 streams -> ${fdCount(p.pid)} after`);
    },
  },
  {
    name: 'a real browser (headless Chromium): the token through the Basic prompt, lanes shown, numbers moving between snapshots, sparklines drawn, the open WebSocket and its turns, a screenshot; the markup of a model name shown as text, no dialog; without JavaScript the server\'s table',
    timeout_ms: 45000,
    fn: async (t) => {
      const bin = chromiumBin();
      if (bin === null) {
        t.note('skipped: no Chromium (/usr/bin/chromium; scripts/install-deps.sh installs it, or set CHROMIUM_BIN)');
        return;
      }
      const mock = await t.startMock();
      const paced = 'sk-page-browser-paced-0001', xss = 'sk-page-browser-xss-0002';
      const p = await startPacerdWithAdmin(t, mock, {
        admin: { token: TOKEN },
        plans: { paced: { max_requests_per_second: 8, burst: 1 }, default: { retry: { max_attempts: 1 } } },
        keys: [{ provider: 'openai', key_sha256: crypto.createHash('sha256').update(paced).digest('hex'), plan: 'paced' }],
      });
      const r = await chat(p, xss, { model: XSS_MODEL, headers: { 'x-agent-id': XSS_AGENT, 'x-mock-status': '500' } });
      assert.equal(r.status, 500);
      const headers = { authorization: `Bearer ${paced}`, 'content-type': 'application/json' };
      // 100 requests at the plan's 8/s: about 12 s of traffic, the browser's part well within.
      const load = runLoad({ base: p.url, n: 100, concurrency: 4, deadline_ms: 30000, makeRequest: () => ({ path: '/v1/chat/completions', headers, body: chatBody() }) });

      // A WebSocket open with two turns done, for the page's sockets.
      const ws = await openWs(p, { key: 'sk-page-browser-ws-0003' });
      await wsTurn(ws);
      await wsTurn(ws);

      const browser = await launchChromium(t, bin);
      const page = await browser.newPage({ credentials: { username: 'operator', password: TOKEN } });
      await page.goto(`${p.admin}/`);
      assert.ok(page.authChallenges >= 1, 'the browser was not asked for credentials');
      const laneSel = (key) => `document.querySelector('tr.lane[data-key="${keyHash(key)}"]')`;
      await waitFor(async () => (await page.eval(`document.getElementById('conn').textContent`)) === 'live' &&
        (await page.eval(`!!${laneSel(paced)}`)), { timeout_ms: 10000 * SLOW, interval_ms: 100, what: 'the page live with the paced lane' });
      const sent = async () => Number((await page.eval(`${laneSel(paced)}.querySelector('.ratetext').textContent`)).match(/(\d+) sent/)[1]);
      const s1 = await sent();
      const shown1 = await page.eval(`${laneSel(paced)}.querySelector('.ratetext').textContent`);
      await sleep(3000);
      const s2 = await sent();
      const shown2 = await page.eval(`${laneSel(paced)}.querySelector('.ratetext').textContent`);
      assert.ok(s2 > s1 + 5, `sent ${s1} -> ${s2}`);
      // About 8/s against the configured 8/s.
      const rate = Number(shown2.match(/^([\d.]+)\/s/)[1]);
      assert.match(shown2, /of 8\/s/);
      assert.ok(rate > 3 && rate < 14, shown2);
      const points = await page.eval(`${laneSel(paced)}.querySelector('svg.spark polyline').getAttribute('points').split(' ').length`);
      assert.ok(points >= 3, `sparkline of ${points} points`);
      assert.equal(await page.eval(`!!${laneSel(paced)}.querySelector('svg.spark line')`), true, 'the limit line');
      const lanes = await page.eval(`document.querySelectorAll('#lanes tr.lane').length`);
      assert.ok(lanes >= 2, `${lanes} lanes`);
      // The WebSockets beside the connections and tunnels: the one open, its turns.
      const wsFacts = JSON.parse(await page.eval(`JSON.stringify(Object.fromEntries([...document.querySelectorAll('#websockets dt')].map((d) => [d.textContent, d.nextElementSibling.textContent])))`));
      assert.equal(wsFacts['websockets open'], '1', JSON.stringify(wsFacts));
      assert.equal(wsFacts.turns, '2', JSON.stringify(wsFacts));
      assert.equal(wsFacts['turns in flight'], '0', JSON.stringify(wsFacts));

      // The model's markup is text in the DOM: no element made of it, no dialog.
      const modelText = await page.eval(`${laneSel(xss)}.querySelector('td.model').textContent`);
      assert.equal(modelText, XSS_MODEL);
      assert.equal(await page.eval(`document.querySelectorAll('img').length`), 0);
      const errText = await page.eval(`[...document.querySelectorAll('#errors td.detail')].map((e) => e.textContent).join('\\n')`);
      assert.ok(errText.includes(`agent=${XSS_AGENT}`), errText);
      assert.equal(await page.eval(`document.querySelectorAll('script').length`), 1);
      assert.deepEqual(page.dialogs, [], 'a dialog opened');
      assert.deepEqual(page.console.filter((l) => /exception|Refused|violat/i.test(l)), [], page.console.join('\n'));

      const shot = path.join(t.dir, 'page.png');
      const bytes = await page.screenshot(shot);
      assert.ok(bytes > 10000, `screenshot ${bytes} B`);

      // Without JavaScript: the server's table, the same lanes.
      const plain = await browser.newPage({ javascript: false, credentials: { username: '', password: TOKEN } });
      await plain.goto(`${p.admin}/`);
      // (DevTools' own evaluation runs where the page's scripts may not.)
      assert.equal(await plain.eval(`document.getElementById('conn').textContent`), 'static: updates need JavaScript', 'the page\'s script ran');
      const outerHTML = await plain.eval('document.documentElement.outerHTML');
      assert.ok(laneRows(outerHTML).some((x) => x.key === `key ${keyHash(paced)}`), 'the paced lane in the server table');
      assert.ok(laneRows(outerHTML).some((x) => x.model === '&lt;img/src/onerror=alert(1)&gt;&amp;\'x'), 'the model as text');
      assert.match(outerHTML, /<dl id="websockets"><dt>websockets open<\/dt><dd>1<\/dd>/);
      await plain.screenshot(path.join(t.dir, 'page-nojs.png'));

      // No credentials: the 401, no lanes.
      const anon = await browser.newPage({});
      await anon.goto(`${p.admin}/`).catch(() => {});
      const anonText = await anon.eval('document.body ? document.body.textContent : ""');
      assert.match(anonText, /"code":"unauthorized"/);
      assert.equal(anon.authChallenges, 1);

      ws.close(1000);
      await ws.closed;
      const sum = await load;
      assert.ok(sum.results.filter((x) => x.status === 200).length > 20, `${sum.results.length} requests of load`);
      t.note(`sent ${s1} -> ${s2} in 3 s ("${shown1}" -> "${shown2}"); sparkline ${points} points; screenshots ${shot} (${bytes} B) and page-nojs.png`);
    },
  },
];
