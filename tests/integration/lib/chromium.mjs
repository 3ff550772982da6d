// SPDX-License-Identifier: Apache-2.0
// A real browser for the status page test (cases/page.mjs): Debian's headless
// Chromium driven through the DevTools protocol over --remote-debugging-pipe
// (fd 3 carries commands to it, fd 4 its answers and events, each message JSON
// ended by a NUL byte), so no npm package and no WebSocket are needed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The Chromium binary: $CHROMIUM_BIN, else Debian's; null when there is none. */
export function chromiumBin() {
  const candidates = [process.env.CHROMIUM_BIN, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
  return candidates.find((p) => { try { fs.accessSync(p, fs.constants.X_OK); return true; } catch { return false; } }) ?? null;
}

class Browser {
  constructor(child) {
    this.child = child;
    this.seq = 0;
    this.pending = new Map();
    this.listeners = [];
    this.stderr = '';
    this.exited = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => { if (this.stderr.length < 1e6) this.stderr += d; });
    let buf = Buffer.alloc(0);
    child.stdio[4].on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (let i = buf.indexOf(0); i >= 0; i = buf.indexOf(0)) {
        const msg = JSON.parse(buf.subarray(0, i).toString('utf8'));
        buf = buf.subarray(i + 1);
        if (msg.id !== undefined && this.pending.has(msg.id)) {
          const { resolve, reject, method } = this.pending.get(msg.id);
          this.pending.delete(msg.id);
          if (msg.error) reject(new Error(`${method}: ${msg.error.message}`));
          else resolve(msg.result);
        } else if (msg.method) {
          for (const l of this.listeners) l(msg);
        }
      }
    });
    child.stdio[3].on('error', () => {});
  }

  /** One command; resolves with its result (sessionId: a page's session). */
  send(method, params = {}, sessionId = undefined, timeout_ms = 15000) {
    const id = ++this.seq;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer from Chromium within ${timeout_ms} ms\n${this.stderr.slice(-1000)}`));
      }, timeout_ms);
      this.pending.set(id, {
        method,
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      this.child.stdio[3].write(`${JSON.stringify(msg)}\0`);
    });
  }

  /** fn(msg) for every event ({method, params, sessionId}). */
  on(fn) { this.listeners.push(fn); }

  /**
   * A new tab in a browser context of its own (no cookies or remembered HTTP
   * credentials shared with the other tabs), with its session: Page and Runtime
   * enabled, dialogs recorded and dismissed.
   */
  async newPage({ javascript = true, credentials } = {}) {
    const { browserContextId } = await this.send('Target.createBrowserContext', { disposeOnDetach: true });
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank', browserContextId });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    if (!javascript) await page.send('Emulation.setScriptExecutionDisabled', { value: true });
    // A 401's challenge answered as a user answers the browser's prompt: with
    // the credentials, or Cancel (then the 401's own body is shown).
    page.credentials = credentials;
    await page.send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: '*' }] });
    return page;
  }

  /** Browser.close, then SIGKILL of its process group if it lingers. */
  async close() {
    try { await this.send('Browser.close', {}, undefined, 5000); } catch { /* going anyway */ }
    let t;
    const r = await Promise.race([this.exited, new Promise((res) => { t = setTimeout(() => res(null), 5000); })]);
    clearTimeout(t);
    if (r === null) {
      try { process.kill(-this.child.pid, 'SIGKILL'); } catch { /* gone */ }
      await this.exited;
    }
  }
}

class Page {
  constructor(browser, sessionId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.dialogs = [];
    this.console = [];
    this.authChallenges = 0;
    browser.on((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Page.javascriptDialogOpening') {
        this.dialogs.push(m.params);
        this.send('Page.handleJavaScriptDialog', { accept: false }).catch(() => {});
      } else if (m.method === 'Runtime.consoleAPICalled') {
        this.console.push(m.params.args.map((a) => a.value ?? a.description).join(' '));
      } else if (m.method === 'Runtime.exceptionThrown') {
        this.console.push(`exception: ${m.params.exceptionDetails.exception?.description ?? m.params.exceptionDetails.text}`);
      } else if (m.method === 'Fetch.requestPaused') {
        this.send('Fetch.continueRequest', { requestId: m.params.requestId }).catch(() => {});
      } else if (m.method === 'Fetch.authRequired') {
        this.authChallenges++;
        const response = this.credentials
          ? { response: 'ProvideCredentials', username: this.credentials.username, password: this.credentials.password }
          : { response: 'CancelAuth' };
        this.send('Fetch.continueWithAuth', { requestId: m.params.requestId, authChallengeResponse: response }).catch(() => {});
      }
    });
  }

  send(method, params = {}) { return this.browser.send(method, params, this.sessionId); }

  /** Navigates and waits for the load event. */
  async goto(url, timeout_ms = 15000) {
    const loaded = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${url}: not loaded within ${timeout_ms} ms`)), timeout_ms);
      this.browser.on((m) => {
        if (m.sessionId === this.sessionId && m.method === 'Page.loadEventFired') { clearTimeout(timer); resolve(); }
      });
    });
    const r = await this.send('Page.navigate', { url });
    if (r.errorText) throw new Error(`${url}: ${r.errorText}`);
    await loaded;
  }

  /** The value of a JavaScript expression in the page (awaited when a promise). */
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  }

  /** A PNG of the page into file; its size in bytes. */
  async screenshot(file) {
    const { data } = await this.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    const png = Buffer.from(data, 'base64');
    fs.writeFileSync(file, png);
    return png.length;
  }
}

/**
 * Starts headless Chromium with a profile in dir (its process group is killed at
 * the end of the test: t.defer). Resolves with a Browser.
 */
export async function launchChromium(t, bin) {
  const profile = path.join(t.dir, 'chromium-profile');
  fs.mkdirSync(profile, { recursive: true });
  const child = spawn(bin, [
    '--headless', '--remote-debugging-pipe', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--no-default-browser-check', '--disable-extensions', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--mute-audio', '--window-size=1400,900',
    `--user-data-dir=${profile}`, 'about:blank',
  ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true });
  const b = new Browser(child);
  t.defer(() => b.close());
  await b.send('Browser.getVersion');
  return b;
}
