/**
 * What adding an extension takes, each shown by adding a throwaway one to a copy of the sources
 * and starting the copy's app. The day a second place becomes necessary, these fail:
 * - a paid operation is ONE declaration in an existing module's operations.ts: its HTTP route,
 *   OpenAPI entry with `x-payment-info`, 402 offers, MCP tool, A2A skill, API index entry, agent
 *   skills' price table and tenancy case must all follow;
 * - a platform is ONE folder and ONE entry in src/platforms.ts: its store domains, operation,
 *   settings (the webhook's secret), signed webhook, reconciliation job (run by the worker), product-form script in
 *   /widget-platforms.js and page in the dashboard (its forms included) must all follow, and the
 *   copy must still type-check;
 * - a notification channel is ONE folder and ONE entry in src/channels.ts: its sign-up fields in
 *   subscribeAlert (and OpenAPI), its switch in the store's settings, its choice on the storefront
 *   widget's form (in Chromium), its contact point, its sending when the product is back, its
 *   words on the shopper's page and its own stop link must all follow, and the copy must still
 *   type-check, server and browser code alike.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { browserSkipReason } from './fixtures/browser.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

const run = promisify(execFile);
const ROOT = path.join(import.meta.dirname, '..');

/** The start of every probe, run in a copy: the copy's app on a fresh SQLite file. */
const APP_START = `import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from './src/app.ts';
import { loadConfig } from './src/config.ts';
import { Database } from './src/core/db/database.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'restock-extension-'));
const config = loadConfig({ LOG_LEVEL: 'silent', BASE_URL: 'http://restock.test', ALLOWED_HOSTS: 'localhost', DATA_DIR: dir, DATABASE_URL: 'sqlite:' + path.join(dir, 'restock.db') });
const database = Database.open(config.database);
await database.migrate();
const app = await buildApp(config, database);
await app.ready();
`;

/** A copy of the sources beside the repository's (so its packages resolve), which a test then edits in one place. */
function copyOfSources(): string {
  const copy = mkdtempSync(path.join(ROOT, '.extension-check-'));
  cpSync(path.join(ROOT, 'src'), path.join(copy, 'src'), { recursive: true });
  return copy;
}

/**
 * A copy of the sources with a throwaway extension in its own folder (`files` by name) and ONE
 * line in its registry: `listed` adds the entry to the registry's list, `imported` is the import
 * put above it. Beside them, the probe to run and the copy's own tsconfig files.
 */
function copyWithExtension(folder: string, files: Record<string, string>, registry: { file: string; listed: (source: string) => string; imported: string }, probe: string): string {
  const copy = copyOfSources();
  mkdirSync(path.join(copy, 'src', folder));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(copy, 'src', folder, name), text);
  const file = path.join(copy, 'src', registry.file);
  const source = readFileSync(file, 'utf8');
  const listed = registry.listed(source);
  assert.notEqual(listed, source, `src/${registry.file} still has the list the test adds to`);
  writeFileSync(file, `${registry.imported}\n${listed}`);
  writeFileSync(path.join(copy, 'probe.ts'), probe);
  writeTypeCheckConfigs(copy, ['tsconfig.json', 'tsconfig.browser.json']);
  return copy;
}

/** The copy's own tsconfig files, checking its sources only (the tests and benchmarks stay the repository's). */
function writeTypeCheckConfigs(copy: string, configs: string[]): void {
  for (const config of configs) {
    writeFileSync(path.join(copy, config), readFileSync(path.join(ROOT, config), 'utf8').replace('"include": ["src", "test", "bench", "bin"]', '"include": ["src"]'));
  }
}

/** Fails with tsc's report when the copy does not type-check under each config. */
async function typeCheck(copy: string, configs: string[]): Promise<void> {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  for (const config of configs) {
    await run(process.execPath, [tsc, '--noEmit', '-p', path.join(copy, config)], { cwd: copy, timeout: 200_000 }).catch((err: { stdout?: string }) => {
      assert.fail(`${config} of the copy: ${err.stdout ?? err}`);
    });
  }
}

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
import { declaredOperations } from './src/operations.ts';
${APP_START}const get = async (url, headers = {}) => app.inject({ method: 'GET', url, headers });
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
    copy = copyOfSources();
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

/** A throwaway platform's registry entry, light as the registry needs: its name, domains, operation, settings; its feature loaded when opened. */
const SPARROW_PLATFORM = `
import { z } from 'zod';
import { defineOperation } from '../core/operations.ts';
import type { Platform } from '../platform.ts';
import { storeInput } from '../stores/schemas.ts';

export const sparrowOperations = [
  defineOperation({
    id: 'getSparrowConnection',
    method: 'GET',
    path: '/api/v1/stores/:shop/sparrow',
    summary: "A Sparrow store's connection",
    tag: 'stores',
    scope: 'api:read',
    input: storeInput,
    output: z.object({ shop: z.string(), connected: z.boolean() }),
    errors: [404],
    tenancy: { refusal: 404 },
    example: { shop: 'corner.sparrowshop.test' },
    tool: { title: "A Sparrow store's connection" },
    run: async (_service: undefined, { shop }) => ({ shop, connected: true }),
  }),
];

export const sparrowPlatform = {
  name: 'sparrow',
  storeDomains: /\\.sparrowshop\\.test$/,
  operations: sparrowOperations,
  widgetForm: new URL('./widget-form.ts', import.meta.url),
  settings: {
    slice: { SPARROW_WEBHOOK_SECRET: z.string().min(8).default('sparrow-secret').describe("Sparrow: the secret its webhooks are signed with") },
    read: (values: { SPARROW_WEBHOOK_SECRET: string }) => ({ webhookSecret: values.SPARROW_WEBHOOK_SECRET }),
  },
  async open() {
    const { buildSparrow } = await import('./feature.ts');
    return { build: buildSparrow };
  },
} as const satisfies Platform;
`;

/** The throwaway platform's feature: everything a platform does, in the fewest lines that are honest. */
const SPARROW_FEATURE = `
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { reconcileJobs } from '../core/connectors/connector.ts';
import { csrfField, type DashboardPanel } from '../core/dashboard-panel.ts';
import { html } from '../core/html.ts';
import { rawBodyOf, takeRawBodies } from '../core/http/raw-body.ts';
import { bindOperations } from '../core/operations.ts';
import { Problem } from '../core/problems.ts';
import type { PlatformNeeds } from '../platform.ts';
import { sparrowOperations } from './platform.ts';

/** Its page in the dashboard, with one form. */
const sparrowPanel: DashboardPanel = {
  label: 'Sparrow',
  path: 'sparrow',
  actions: ['ping'],
  show: async (owner) => ({ page: html\`<h1>The nest of \${owner.shop}</h1><form method="post" action="/dashboard/sparrow/ping">\${csrfField(owner.csrfToken)}<button>Ping</button></form>\` }),
  post: async (_owner, action) => ({ next: '/dashboard/sparrow?did=' + action }),
};

export function buildSparrow(needs: PlatformNeeds) {
  const { webhookSecret } = needs.config.platforms.sparrow;
  const connector = {
    platform: 'sparrow',
    storesToReconcile: async () => ['corner.sparrowshop.test'],
    async reconcileStore(domain: string) {
      await needs.inventory.reportStock(domain, [{ productId: 'gid://sparrow/Product/1', variantId: null, available: 5 }], { kind: 'reconciliation', ref: 'sparrow', verified: true });
      return 1;
    },
  };
  const webhook = async (app: FastifyInstance) => {
    takeRawBodies(app, { bodyLimit: 65536, baseUrl: needs.config.baseUrl, sender: 'Sparrow' });
    app.post('/webhooks/sparrow', async (request, reply) => {
      const body = rawBodyOf(request);
      const given = Buffer.from(String(request.headers['x-sparrow-signature'] ?? ''), 'base64');
      const expected = createHmac('sha256', webhookSecret).update(body).digest();
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new Problem('invalid-webhook', 'The delivery is not signed with the shared secret.');
      const { shop, productId, available } = JSON.parse(body.toString('utf8'));
      await needs.inventory.reportStock(shop, [{ productId, variantId: null, available }], { kind: 'sparrow-webhook', ref: 'delivery', verified: true });
      return reply.code(200).send({ received: true });
    });
  };
  return {
    service: undefined,
    operations: bindOperations(sparrowOperations, undefined),
    routes: [webhook],
    jobs: reconcileJobs(connector, 60, needs.log),
    dashboardPanel: sparrowPanel,
  };
}

`;

/** The throwaway platform's product form, as a browser script. */
const SPARROW_FORM = `
import type { PlatformFormHost, PlatformFormMaker } from '../core/platform-form.ts';

(function () {
  const sparrow: PlatformFormMaker = (tools) => ({
    product: () => document.body.getAttribute('data-sparrow-product'),
    follow: () => tools.select(null),
  });
  const w = window as Window & { Restock?: PlatformFormHost };
  const R = (w.Restock = w.Restock || {});
  (R.platformForms = R.platformForms || {}).sparrowFormMarker = sparrow;
})();
`;

const PLATFORM_PROBE = `
import { createHmac } from 'node:crypto';
import { csrfOf, getPage, postForm, signIn } from '../test/fixtures/dashboard.ts';
${APP_START.replace('DATA_DIR: dir,', "DATA_DIR: dir, SPARROW_WEBHOOK_SECRET: 'feathers-and-seeds',")}const shop = 'corner.sparrowshop.test';
const store = await app.restock.stores.createStore(shop, 'owner@corner.test');
const openapi = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
const token = (await app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } })).json().credential;
const mcp = await app.inject({
  method: 'POST', url: '/mcp',
  headers: { authorization: 'Bearer ' + token, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
  payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
});
const message = mcp.body.trimStart().startsWith('{') ? mcp.body : mcp.body.split('\\n').find((line) => line.startsWith('data: ')).slice(6);
const tools = JSON.parse(message).result.tools.map((tool) => tool.name);
const deliver = (payload, secret) => app.inject({
  method: 'POST', url: '/webhooks/sparrow', payload,
  headers: { 'content-type': 'application/json', 'x-sparrow-signature': createHmac('sha256', secret).update(payload).digest('base64') },
});
const stockNow = async () => (await app.restock.inventory.stockOf(shop, 'gid://sparrow/Product/1', null)).available;
const forged = await deliver(JSON.stringify({ shop, productId: 'gid://sparrow/Product/1', available: 9 }), 'guessed');
const afterForged = await stockNow();
const signed = await deliver(JSON.stringify({ shop, productId: 'gid://sparrow/Product/1', available: 2 }), 'feathers-and-seeds');
const afterSigned = await stockNow();
await app.restock.worker.turn();
const afterReconcile = await stockNow();
const forms = (await app.inject({ method: 'GET', url: '/widget-platforms.js' })).body;
const owner = { app, database, config };
const cookie = await signIn(owner, shop, 'owner@corner.test');
const panel = await getPage(owner, '/dashboard/sparrow', cookie);
const pinged = await postForm(owner, '/dashboard/sparrow/ping', { csrf: csrfOf(panel.body) }, cookie);
console.log(JSON.stringify({
  panel: {
    status: panel.statusCode,
    shown: panel.body.includes('The nest of corner.sparrowshop.test'),
    listed: panel.body.includes('<a href="/dashboard/sparrow" aria-current="page">Sparrow</a>'),
    pinged: [pinged.statusCode, pinged.headers.location],
  },
  platform: store.platform,
  documented: Boolean(openapi.paths['/api/v1/stores/{shop}/sparrow']?.get),
  tool: tools.includes('get_sparrow_connection'),
  forged: [forged.statusCode, afterForged],
  signed: [signed.statusCode, afterSigned],
  reconciled: afterReconcile,
  form: forms.includes('sparrowFormMarker'),
}));
await app.close();
await database.close();
`;

describe('adding a platform', () => {
  let copy: string;
  before(() => {
    copy = copyWithExtension(
      'sparrow',
      { 'platform.ts': SPARROW_PLATFORM, 'feature.ts': SPARROW_FEATURE, 'widget-form.ts': SPARROW_FORM },
      {
        file: 'platforms.ts',
        listed: (source) => source.replace(/(const LISTED = \[[^\]]*)\]/, '$1, sparrowPlatform]'),
        imported: "import { sparrowPlatform } from './sparrow/platform.ts';",
      },
      PLATFORM_PROBE,
    );
  });
  after(() => rmSync(copy, { recursive: true, force: true }));

  it('takes one folder and one registry line: store domains, operation, signed webhook, reconciliation, product form and dashboard page follow', { timeout: 120_000 }, async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(copy, 'probe.ts')], { cwd: ROOT, timeout: 110_000 });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1)!);
    assert.equal(seen.platform, 'sparrow', "a store on the platform's domains is the platform's without naming it");
    assert.ok(seen.documented, 'its operation in /openapi.json');
    assert.ok(seen.tool, 'its operation as an MCP tool');
    assert.deepEqual(seen.forged, [401, 0], 'a forged delivery is refused and changes nothing');
    assert.deepEqual(seen.signed, [200, 2], 'a signed delivery reports the stock');
    assert.equal(seen.reconciled, 5, "the worker runs the platform's reconciliation");
    assert.ok(seen.form, 'its product form is served in /widget-platforms.js');
    assert.deepEqual(seen.panel, { status: 200, shown: true, listed: true, pinged: [303, '/dashboard/sparrow?did=ping'] }, 'its page in the dashboard, listed in the navigation, and its form');
  });

  it('still type-checks, server and browser code alike, with nothing else edited', { timeout: 240_000 }, () => typeCheck(copy, ['tsconfig.json', 'tsconfig.browser.json']));
});

/** A throwaway channel's folder: a pager reached by its number, signed up by agents and on the storefront's form. */
const PAGER_CHANNEL = `
import { z } from 'zod';
import type { ChannelNeeds } from '../channel.ts';
import type { ChannelDefinition } from '../core/channels.ts';
import { consentTextSchema } from '../core/consent.ts';

/** What the pager service was handed: the probe reads it. */
export const PAGED: Array<{ to: string; headline: string; clickUrl: string; stopUrl: string }> = [];

const pagerNumber = z.string().regex(/^[0-9]{4,10}$/, 'must be a pager number');
const words = (name: string, point: string) => ({ name, point: (number: string) => point + ' ' + number });

export const pagerChannel = {
  label: 'Pager',
  words: 'by pager',
  confirmation: 'none',
  optOut: 'link',
  quietHours: false,
  notSetUp: 'pagers are not set up on this service',
  contactPoint: { device: 'pager', startsAs: 'active', details: z.object({}).strict() },
  pages: { en: words('pages', 'Pager'), fr: words('bipeur', 'Bipeur'), de: words('Pager', 'Pager'), es: words('buscapersonas', 'Buscapersonas') },
  signUp: {
    storefront: () => ({ pager: pagerNumber.optional(), pagerConsentText: consentTextSchema.optional() }),
    storefrontRule: { holds: (body) => body.pager === undefined || body.pagerConsentText !== undefined, message: 'pagerConsentText is required with pager', path: ['pagerConsentText'] },
    agent: { pager: pagerNumber.optional().describe('Also page this number'), pagerConsentText: consentTextSchema.optional().describe('The words the shopper agreed to for pages') },
    agentRule: { holds: (body) => body.pager === undefined || body.pagerConsentText !== undefined, message: 'pagerConsentText is required with pager', path: ['pagerConsentText'] },
    contact(body, from) {
      const { pager, pagerConsentText } = body as { pager?: string; pagerConsentText?: string };
      if (!pager || !pagerConsentText) return undefined;
      return { address: pager, addressKey: pager, details: {}, consent: { method: from === 'agent' ? 'agent-api' : 'storefront-checkbox', text: pagerConsentText } };
    },
  },
  storefront: {
    setting: 'Offer pages on the storefront (default true)',
    inForce: 'Offer pages on the storefront',
    byDefault: true,
    dashboard: { label: 'Offer pages', hint: 'A pager number on the sign-up form.' },
    choice: new URL('./widget-choice.ts', import.meta.url),
  },
  settings: {
    slice: { PAGER_SIGNATURE: z.string().max(20).default('').describe('Pager: the words after every page') },
    read: (values: { PAGER_SIGNATURE: string }) => ({ signature: values.PAGER_SIGNATURE }),
  },
  async build(needs: ChannelNeeds) {
    const { signature } = needs.config.channels.pager;
    const sending = {
      refusal: () => undefined,
      async deliver(notification: { contact: { address: string }; headline: string; clickUrl: string; stop: { url: string } }) {
        PAGED.push({ to: notification.contact.address, headline: notification.headline + signature, clickUrl: notification.clickUrl, stopUrl: notification.stop.url });
        return {};
      },
    };
    return { service: undefined, channel: { name: 'pager', sending: { forStore: async () => sending }, offered: true } };
  },
} as const satisfies ChannelDefinition;
`;

/** The pager's choice on the storefront widget's form, in the channel's own folder. */
const PAGER_CHOICE = `
import type { ChannelChoiceHost, ChannelChoiceMaker } from '../core/channel-choice.ts';

(function () {
  const STRINGS = { en: { number: 'Pager number', consent: 'Page me once when it is back.', done: 'We will page you.' } };
  const pager: ChannelChoiceMaker = (options) => {
    const s = options.words(STRINGS);
    const element = document.createElement('div');
    element.innerHTML = '<input id="pager" aria-label="' + s.number + '">';
    const field = element.querySelector('input')!;
    return {
      element,
      check: () => (field.value && !/^[0-9]{4,10}$/.test(field.value) ? [s.number, field] : undefined),
      add: (body) => {
        if (field.value) Object.assign(body, { pager: field.value, pagerConsentText: s.consent });
        return undefined;
      },
      refused: (at) => (at('pager') ? [s.number, field] : undefined),
      done: () => (field.value ? s.done : ''),
    };
  };
  const w = window as Window & { Restock?: ChannelChoiceHost };
  const R = (w.Restock = w.Restock || {});
  (R.channelChoices = R.channelChoices || {}).pager = pager;
})();
`;

const CHANNEL_PROBE = `
import { PAGED } from './src/pager/channel.ts';
import { launchBrowser, startPageServer } from '../test/fixtures/browser.ts';
import { SETTINGS } from './src/config.ts';
${APP_START.replace("DATA_DIR: dir,", "DATA_DIR: dir, PAGER_SIGNATURE: ' (pager)',")}const shop = 'pager-shop.myshopify.com';
const productId = 'gid://shopify/Product/7';
const variantId = 'gid://shopify/ProductVariant/70';
await app.restock.stores.createStore(shop, 'owner@pager-shop.example.com');
const source = { kind: 'inventory-api', ref: 'probe', verified: true };
await app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 0, productTitle: 'Brass pager clip' }, { productId, variantId, available: 0 }], source);
const settings = (await app.restock.stores.settingsOf(shop)).pager ?? null;
const served = (await app.inject({ method: 'GET', url: '/widget-channels.js' })).body;

// A shopper on the store's product page (another origin), the widget loaded from the service.
let form = null;
if (process.env.PROBE_BROWSER === '1') {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = 'http://localhost:' + app.server.address().port;
  const store = await startPageServer({ '/products/clip': '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Clip</title></head><body><script src="' + base + '/widget.js" data-shop="' + shop + '" data-product="' + productId + '" data-variant="' + variantId + '" defer></script></body></html>' });
  const browser = await launchBrowser();
  try {
    const tab = await browser.newPage();
    await tab.goto(store.url + '/products/clip');
    await tab.locator('restock-widget #pager').fill('5557654', { timeout: 15000 });
    await tab.locator('restock-widget #e').fill('browser@example.com');
    await tab.locator('restock-widget button[type="submit"]').click();
    const status = tab.locator('restock-widget [role="status"]');
    await status.filter({ hasText: 'We will page you.' }).waitFor({ timeout: 15000 });
    const point = await database.db.selectFrom('contact_points').select(['channel', 'consent_method', 'consent_text']).where('address', '=', '5557654').executeTakeFirst();
    form = { status: await status.textContent(), point };
  } finally {
    await browser.close();
    await store.close();
  }
}
const token = (await app.inject({ method: 'POST', url: '/api/agent/register', payload: { type: 'anonymous' } })).json().credential;
const subscribe = (body) => app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', headers: { authorization: 'Bearer ' + token }, payload: body });
const refused = await subscribe({ shop, productId, email: 'nowords@example.com', pager: '5551234' });
const signed = await subscribe({ shop, productId, email: 'shopper@example.com', pager: '5551234', pagerConsentText: 'Page me once when it is back in stock.' });
const openapi = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
const body = openapi.paths['/api/v1/alerts/subscribe'].post.requestBody.content['application/json'].schema;
const offered = (await app.inject({ method: 'GET', url: '/storefront/v1/availability?' + new URLSearchParams({ shop, productId }) })).json().channels;
await app.restock.inventory.reportStock(shop, [{ productId, variantId: null, available: 5 }, { productId, variantId, available: 5 }], source);
for (let turn = 0; turn < 5 && PAGED.length === 0; turn++) await app.restock.worker.turn();
const page = await app.inject({ method: 'GET', url: new URL(app.restock.alerts.shopperPageUrl(signed.json().subscriptionId)).pathname, headers: { accept: 'text/html' } });
const agents = PAGED.find((entry) => entry.to === '5551234');
const stop = agents ? await app.inject({ method: 'POST', url: new URL(agents.stopUrl).pathname, headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://restock.test' }, payload: '' }) : undefined;
const point = await database.db.selectFrom('contact_points').select(['channel', 'status', 'consent_text']).where('address', '=', '5551234').executeTakeFirst();
console.log(JSON.stringify({
  refused: [refused.statusCode, refused.json().errors?.map((error) => error.pointer)],
  signed: signed.statusCode,
  documented: Boolean(body.properties?.pager ?? body.allOf?.some((part) => part.properties?.pager)),
  paged: PAGED.map((entry) => ({ to: entry.to, headline: entry.headline, redirect: entry.clickUrl.startsWith('http://restock.test/') })).sort((a, b) => a.to.localeCompare(b.to)),
  listed: page.body.includes('Pager 5551234'),
  offered,
  settings,
  setting: SETTINGS.find((setting) => setting.name === 'PAGER_SIGNATURE') ?? null,
  choiceServed: served.includes('Page me once when it is back.'),
  form,
  stopped: stop?.statusCode ?? null,
  point,
}));
await app.close();
await database.close();
`;

describe('adding a notification channel', () => {
  let copy: string;
  before(() => {
    copy = copyWithExtension(
      'pager',
      { 'channel.ts': PAGER_CHANNEL, 'widget-choice.ts': PAGER_CHOICE },
      {
        file: 'channels.ts',
        listed: (source) => source.replace(/(export const CHANNELS = \{[^}]*)\}/, '$1, pager: pagerChannel }'),
        imported: "import { pagerChannel } from './pager/channel.ts';",
      },
      CHANNEL_PROBE,
    );
  });
  after(() => rmSync(copy, { recursive: true, force: true }));

  it("takes one folder and one registry line: its sign-up, storefront choice, contact point, sending, page words and stop link follow", { timeout: 120_000 }, async () => {
    const browser = browserSkipReason() === undefined;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(copy, 'probe.ts')], { cwd: ROOT, timeout: 110_000, env: { ...process.env, PROBE_BROWSER: browser ? '1' : '0' } });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1)!);
    assert.deepEqual(seen.refused, [400, ['/body/pagerConsentText']], "its rule between its fields refuses a number without the shopper's words");
    assert.equal(seen.signed, 200, 'subscribeAlert takes its fields');
    assert.ok(seen.documented, 'its fields in /openapi.json');
    const paged = { headline: 'Brass pager clip is back in stock (pager)', redirect: true };
    assert.deepEqual(
      seen.paged,
      browser ? [{ to: '5551234', ...paged }, { to: '5557654', ...paged }] : [{ to: '5551234', ...paged }],
      'the restock reaches each pager once, through its sending, with the product and our redirect',
    );
    assert.ok(seen.listed, "the shopper's page lists it in its own words");
    assert.deepEqual(seen.offered, { sms: false, push: true, pager: true }, 'the widget is told to offer it');
    assert.equal(seen.settings, true, "the store's settings have its switch, in force by its default");
    assert.ok(seen.choiceServed, 'its choice is served in /widget-channels.js');
    assert.deepEqual(seen.setting, { name: 'PAGER_SIGNATURE', default: '', description: 'Pager: the words after every page' }, "its setting is in the settings catalogue (.env.example's and the README's), and its feature reads it");
    if (browser) {
      assert.deepEqual(
        seen.form,
        {
          status: 'Thank you! We’ll e-mail you when it’s back in stock. We will page you.',
          point: { channel: 'pager', consent_method: 'storefront-checkbox', consent_text: 'Page me once when it is back.' },
        },
        "the widget's form offers its choice in Chromium and signs the pager up with its words",
      );
    }
    assert.deepEqual(seen.point, { channel: 'pager', status: 'stopped', consent_text: 'Page me once when it is back in stock.' }, 'its own stop link stops it; the consent words are kept');
  });

  it('still type-checks, server and browser code alike, with nothing else edited', { timeout: 240_000 }, () => typeCheck(copy, ['tsconfig.json', 'tsconfig.browser.json']));
});
