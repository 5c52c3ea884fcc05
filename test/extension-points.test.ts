/**
 * What adding an extension takes. A throwaway paid operation is added to a copy of the sources
 * in ONE place, a declaration in an existing module's operations.ts, and the copy's app is
 * started: its HTTP route, OpenAPI entry with `x-payment-info`, 402 offers, MCP tool, A2A skill,
 * API index entry, agent skills' price table and tenancy case must all follow. The day a second
 * place becomes necessary, this fails.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from './fixtures/suites.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..');

/** The one edit: a paid operation offered as a tool and a skill, appended to the alerts' declarations. */
const DECLARATION = `
  defineOperation({
    id: 'echoShop',
    method: 'POST',
    path: '/api/v1/echo',
    summary: 'Echo the store named',
    tag: 'alerts',
    scope: 'api:write',
    input: z.object({ shop: z.string() }),
    output: z.object({ shop: z.string() }),
    errors: [400],
    tenancy: { refusal: 403 },
    example: { shop: 'my-store.myshopify.com' },
    tool: { title: 'Echo the store named' },
    skill: true,
    paid: {
      price: { usdCents: 7, description: 'An echo (per-request fee)', mpp: perRequestCharges, x402: true },
      storeOf: (input) => input.shop,
      resultReference: () => null,
    },
    run: async (_alerts: SubscriptionService, input) => input,
  }),
];
`;

/** Run in the copy: starts its app on a fresh SQLite file and reports where the operation shows. */
const PROBE = `
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from './src/app.ts';
import { loadConfig } from './src/config.ts';
import { Database } from './src/core/db/database.ts';
import { declaredOperations } from './src/operations.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-extension-'));
const config = loadConfig({ LOG_LEVEL: 'silent', BASE_URL: 'http://restock.test', ALLOWED_HOSTS: 'localhost', DATA_DIR: dir, DATABASE_URL: 'sqlite:' + path.join(dir, 'restock.db') });
const database = Database.open(config.database);
await database.migrate();
const app = await buildApp(config, database);
await app.ready();
const get = async (url, headers = {}) => app.inject({ method: 'GET', url, headers });
const openapi = (await get('/openapi.json')).json();
const unpaid = await app.inject({ method: 'POST', url: '/api/v1/echo', payload: { shop: 'a.example.com' } });
const token = (await app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } })).json().credential;
const auth = { authorization: 'Bearer ' + token };
const served = await app.inject({ method: 'POST', url: '/api/v1/echo', headers: auth, payload: { shop: 'a.example.com' } });
const mcp = await app.inject({
  method: 'POST', url: '/mcp',
  headers: { ...auth, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
  payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
});
const message = mcp.body.trimStart().startsWith('{') ? mcp.body : mcp.body.split('\\n').find((line) => line.startsWith('data: ')).slice(6);
const tools = JSON.parse(message).result.tools.map((tool) => tool.name);
const card = (await get('/.well-known/agent-card.json')).json();
const index = (await get('/api', auth)).json();
const skill = (await get('/.well-known/agent-skills/pay-per-request/SKILL.md')).body;
const declared = declaredOperations.find((declaration) => declaration.id === 'echoShop');
console.log(JSON.stringify({
  paymentInfo: openapi.paths['/api/v1/echo']?.post?.['x-payment-info'] ?? null,
  unpaid: { status: unpaid.statusCode, accepts: unpaid.json().accepts?.length ?? 0 },
  served: { status: served.statusCode, body: served.json() },
  tools,
  skills: card.skills.map((s) => s.id),
  indexed: index.operations.some((o) => o.operationId === 'echoShop'),
  priceRow: skill.split('\\n').find((line) => line.includes('echoShop')) ?? null,
  tenancy: declared?.tenancy ?? null,
}));
await app.close();
await database.close();
`;

describe('adding a paid operation', () => {
  let copy: string;
  before(() => {
    copy = mkdtempSync(path.join(ROOT, '.extension-check-'));
    cpSync(path.join(ROOT, 'src'), path.join(copy, 'src'), { recursive: true });
    const file = path.join(copy, 'src', 'alerts', 'operations.ts');
    const source = readFileSync(file, 'utf8');
    assert.ok(source.trimEnd().endsWith('];'), 'the alerts declarations end the file');
    writeFileSync(file, source.trimEnd().slice(0, -2) + DECLARATION);
    writeFileSync(path.join(copy, 'probe.ts'), PROBE);
  });
  after(() => rmSync(copy, { recursive: true, force: true }));

  it('takes one declaration: route, OpenAPI payment info, 402 offers, MCP tool, A2A skill, index, price table and tenancy case follow', { timeout: 120_000 }, async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(copy, 'probe.ts')], { cwd: ROOT, timeout: 110_000 });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1)!);
    assert.ok(seen.paymentInfo, 'x-payment-info in /openapi.json');
    assert.deepEqual(seen.paymentInfo.offers.map((offer: { amount: string }) => offer.amount), ['7', '7'], 'the declared price in its MPP offers');
    assert.equal(seen.unpaid.status, 402, 'a call without a token is asked to pay');
    assert.deepEqual(seen.served, { status: 200, body: { shop: 'a.example.com' } }, 'the route serves a caller with a token');
    assert.ok(seen.tools.includes('echo_shop'), `an MCP tool: ${seen.tools}`);
    assert.ok(seen.skills.includes('echoShop'), `an A2A skill: ${seen.skills}`);
    assert.ok(seen.indexed, 'listed in the API index');
    assert.equal(seen.priceRow, '| echoShop | `POST http://restock.test/api/v1/echo` | USD 0.07 |', 'a row of the agent skills’ price table');
    assert.deepEqual(seen.tenancy, { refusal: 403 }, 'a case of the tenancy walk, which reads the declarations');
  });
});
