// SPDX-License-Identifier: Apache-2.0
// The harness and the mock upstream by themselves (no pacerd): when these fail,
// the failures of the other files say nothing about pacerd.
import https from 'node:https';
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { recHeader, request, sha256 } from '../lib.mjs';

export const tests = [
  {
    name: '/echo answers and records, /_mock/reset clears',
    fn: async ({ mock }) => {
      const r = await request(`${mock.url}/echo/a?b=1`, { method: 'POST', body: 'hi', headers: { 'content-type': 'text/plain', 'x-t': '1' } });
      assert.equal(r.status, 200);
      assert.equal(r.text(), 'hi');
      assert.equal(r.headers['x-mock-uri'], '/echo/a?b=1');
      const rec = await mock.onlyRequest();
      assert.equal(rec.method, 'POST');
      assert.equal(recHeader(rec, 'x-t'), '1');
      assert.equal(rec.body_sha256, sha256('hi'));
      await mock.reset();
      assert.deepEqual(await mock.requests(), []);
      assert.equal((await mock.stats()).requests, 0);
    },
  },
  {
    name: 'TLS port serves with the test CA (SAN localhost and 127.0.0.1)',
    fn: async ({ mock, certs }) => {
      const ca = fs.readFileSync(certs.ca);
      for (const host of ['localhost', '127.0.0.1']) {
        const body = await new Promise((resolve, reject) => {
          const req = https.get({ host: '127.0.0.1', servername: host === 'localhost' ? host : undefined, port: mock.https, path: '/v1/models', ca, agent: false,
            checkServerIdentity: (h, cert) => (cert.subjectaltname.includes(host === 'localhost' ? 'DNS:localhost' : 'IP Address:127.0.0.1') ? undefined : new Error(`no SAN for ${host}`)) }, (res) => {
            let d = '';
            res.on('data', (c) => { d += c; });
            res.on('end', () => resolve({ status: res.statusCode, d }));
          });
          req.setTimeout(5000, () => req.destroy(new Error('timeout')));
          req.on('error', reject);
        });
        assert.equal(body.status, 200);
        assert.match(body.d, /gpt-mock/);
      }
      assert.equal((await mock.requests()).length, 2);
    },
  },
];
