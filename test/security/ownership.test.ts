/**
 * Finding 3: when a store changes hands, by whichever path, the former owner keeps nothing: no
 * dashboard session, no sign-in link not yet used, no agent bound to the store. The paths are
 * the operator's `restock store create` (a real process) and a Shopify reinstall whose shop
 * e-mail is another person's (through the Shopify stand-in and the app's token exchange).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { MailOutboxRepository } from '../../src/core/mail/outbox-repository.ts';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { agentOf, expectStatus, get, uniqueDomain, uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { installByTokenExchange } from '../fixtures/shopify-app.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from '../fixtures/shopify-admin.ts';

failOnLeakedHandles();

const BIN = path.resolve(import.meta.dirname, '../../bin/restock.js');
const FORM = { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' };
const API_KEY = 'restock-ownership-test-app';
const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const SCOPES = 'read_products,read_inventory';

function restock(args: string[], databaseUrl: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' };
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: os.tmpdir(), env, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

function postForm(t: TestApp, url: string, fields: Record<string, string> = {}, cookie?: string): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url, headers: { ...FORM, ...(cookie ? { cookie } : {}) }, payload: new URLSearchParams(fields).toString() });
}

/** Asks for a sign-in link as the owner's browser would and reads it from the mail. */
async function mailedLink(t: TestApp, shop: string, owner: string): Promise<string> {
  assert.equal((await postForm(t, '/dashboard/sign-in', { shop })).statusCode, 200);
  const mail = await new MailOutboxRepository(t.database).latestFor(owner, 'dashboard-sign-in');
  assert.ok(mail, `${owner} got a sign-in mail`);
  return /http:\/\/restock\.test(\/dashboard\/sign-in\/[A-Za-z0-9_-]+)/.exec(mail.text)![1]!;
}

async function signIn(t: TestApp, shop: string, owner: string): Promise<string> {
  const used = await postForm(t, await mailedLink(t, shop, owner));
  assert.equal(used.statusCode, 303, used.body);
  const line = [used.headers['set-cookie'] ?? []].flat().find((cookie) => cookie.startsWith('restock_dashboard='))!;
  return line.split(';')[0]!;
}

/** What the former owner holds before the change: a session, a link not yet used, a bound agent. */
async function formerOwnersAccess(t: TestApp, shop: string, owner: string) {
  const cookie = await signIn(t, shop, owner);
  const unusedLink = await mailedLink(t, shop, owner);
  const agent = await agentOf(t.app, t.database, shop, owner);
  assert.equal((await t.app.inject({ method: 'GET', url: '/dashboard', headers: { cookie } })).statusCode, 200, 'signed in before');
  expectStatus(await get(t.app, `/api/v1/stores/${shop}`, agent.token), 200);
  return { cookie, unusedLink, agent };
}

async function assertAllEnded(t: TestApp, shop: string, held: Awaited<ReturnType<typeof formerOwnersAccess>>) {
  const page = await t.app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: held.cookie } });
  assert.equal(page.statusCode, 303, 'the former owner’s session ended');
  assert.equal(page.headers.location, '/dashboard/sign-in');
  assert.equal((await postForm(t, held.unusedLink)).statusCode, 410, 'the unused link no longer signs anyone in');
  assert.equal((await get(t.app, `/api/v1/stores/${shop}`, held.agent.token)).statusCode, 404, 'the former owner’s agent lost the store');
}

for (const dialect of testDialects()) {
  describe(`finding 3: ownership changes on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, {
        SHOPIFY_API_KEY: API_KEY,
        SHOPIFY_API_SECRET: API_SECRET,
        SHOPIFY_SCOPES: SCOPES,
        RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      });
    });
    after(async () => {
      await t.close();
      await shopify.close();
    });

    it('finding 3: `restock store create` with a new owner ends the former owner’s sessions, unused links and agents', async () => {
      const shop = uniqueDomain('handover');
      const former = uniqueEmail('former');
      const next = uniqueEmail('next');
      assert.equal((await restock(['store', 'create', shop, '--owner', former], t.testDatabase.url)).status, 0);
      const held = await formerOwnersAccess(t, shop, former);

      const changed = await restock(['store', 'create', shop, '--owner', next], t.testDatabase.url);
      assert.equal(changed.status, 0, changed.stderr);
      assert.match(changed.stdout, /1 agent\(s\) bound by a former owner are no longer bound to it\./);
      assert.match(changed.stdout, /2 dashboard session\(s\) and sign-in link\(s\) of the former owner ended\./);

      await assertAllEnded(t, shop, held);
      await signIn(t, shop, next);
    });

    it('finding 3: a Shopify reinstall by another owner ends the former owner’s sessions, unused links and agents', async () => {
      const shop = uniqueDomain('reinstall');
      const former = uniqueEmail('former');
      const next = uniqueEmail('next');
      await installByTokenExchange(t, shopify, shop, former);
      const held = await formerOwnersAccess(t, shop, former);

      await installByTokenExchange(t, shopify, shop, next);
      await assertAllEnded(t, shop, held);
      await signIn(t, shop, next);
    });

    it('finding 3: the same owner reinstalling keeps their sessions and agents', async () => {
      const shop = uniqueDomain('same-owner');
      const owner = uniqueEmail('owner');
      await installByTokenExchange(t, shopify, shop, owner);
      const held = await formerOwnersAccess(t, shop, owner);
      await installByTokenExchange(t, shopify, shop, owner);
      assert.equal((await t.app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: held.cookie } })).statusCode, 200);
      expectStatus(await get(t.app, `/api/v1/stores/${shop}`, held.agent.token), 200);
    });
  });
}
