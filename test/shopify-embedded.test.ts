/**
 * The dashboard inside the Shopify admin, in a real browser (Debian's Chromium through
 * playwright-core) that blocks third-party cookies, as Shopify expects apps to survive: the admin
 * (a stand-in at https://admin.shopify.com) frames the app, App Bridge (a stand-in at its CDN
 * address, test/fixtures/app-bridge.ts) hands out session tokens signed like Shopify's, and every
 * request of the app's pages is authenticated by one of them, never by a cookie.
 *
 * On SQLite only: browsers are slow, and what these pages store is covered on both databases by
 * test/dashboard.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { Browser, BrowserContext, FrameLocator, Page, Request } from 'playwright-core';
import { routeShopifyAdmin, type ShopifyAdminInBrowser } from './fixtures/app-bridge.ts';
import { ALLOW_PUBLIC_TO_LOOPBACK, blockThirdPartyCookies, browserSkipReason, launchBrowser, seriousAccessibilityViolations, startCookieProbe } from './fixtures/browser.ts';
import { startListeningTestApp, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';

failOnLeakedHandles();

const API_KEY = 'restock-embedded-test-app';
const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const SCOPES = 'read_products,read_inventory';
const SHOP = 'linen-and-loom.myshopify.com';

const skip = browserSkipReason();

/** A page load or form post of the app's, as the browser sent it. */
interface AppRequest {
  method: string;
  url: URL;
  /** The `id_token` the form carried. */
  posted: string | undefined;
  cookie: string | undefined;
}

describe('the dashboard inside the Shopify admin, with third-party cookies blocked', { skip }, () => {
  let shopify: ShopifyAdminStandIn;
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let admin: ShopifyAdminInBrowser;
  let app: FrameLocator;
  const appRequests: Promise<AppRequest>[] = [];
  const complaints: string[] = [];

  before(async () => {
    shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
    shopify.addShop(SHOP, { email: `owner@${SHOP}` });
    ({ t, base } = await startListeningTestApp('sqlite', {
      SHOPIFY_API_KEY: API_KEY,
      SHOPIFY_API_SECRET: API_SECRET,
      SHOPIFY_SCOPES: SCOPES,
      RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    }));
    browser = await launchBrowser({ args: [ALLOW_PUBLIC_TO_LOOPBACK] });
    context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    admin = await routeShopifyAdmin(context, { apiKey: API_KEY, applicationUrl: `${base}/shopify/install`, sessionToken: (shop) => shopify.sessionToken(shop) });
    // Shopify's page approving a charge, where App Bridge sends the admin's window.
    await context.route(/^https:\/\/[a-z0-9-]+\.myshopify\.com\//, (route) =>
      route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>Approve subscription</title><h1>Approve subscription</h1>' }),
    );
    page = await context.newPage();
    page.setDefaultTimeout(5000);
    await blockThirdPartyCookies(page);
    page.on('console', (message) => {
      if (message.type() === 'error' && message.text().startsWith('App Bridge')) complaints.push(message.text());
    });
    page.on('request', (request) => {
      if (request.isNavigationRequest() && request.url().startsWith(`${base}/`)) appRequests.push(appRequestOf(request));
    });
    app = page.frameLocator(admin.frameSelector);
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await shopify?.close();
  });

  async function appRequestOf(request: Request): Promise<AppRequest> {
    const headers = await request.allHeaders();
    return { method: request.method(), url: new URL(request.url()), posted: new URLSearchParams(request.postData() ?? '').get('id_token') ?? undefined, cookie: headers.cookie };
  }

  function openSection(name: string) {
    return app.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name, exact: true }).click();
  }

  function appFrame() {
    const frame = page.frames().find((candidate) => candidate.url().startsWith(`${base}/`));
    assert.ok(frame, `the admin frames the app: ${page.frames().map((candidate) => candidate.url()).join(', ')}`);
    return frame;
  }

  /** Puts a frame of `url` on the current page and waits for it to load. */
  function frameOnPage(url: string) {
    return page.evaluate(
      (src) =>
        new Promise<void>((resolve) => {
          const frame = Object.assign(document.createElement('iframe'), { src });
          frame.addEventListener('load', () => resolve(), { once: true });
          document.body.replaceChildren(frame);
        }),
      url,
    );
  }

  it('blocks third-party cookies: one set inside a frame of the admin does not come back, one set first-party does', async () => {
    const probe = await startCookieProbe();
    try {
      // A page of admin.shopify.com frames the probe on 127.0.0.1, as the admin frames the app.
      await page.goto('https://admin.shopify.com/store/probe/apps/no-such-app');
      await frameOnPage(`${probe.url}/set`);
      await frameOnPage(`${probe.url}/framed`);
      assert.deepEqual(probe.cookiesSentTo('/framed'), [''], 'the cookie set inside the frame is not sent back to it');

      await page.goto(`${probe.url}/set`);
      await page.goto(`${probe.url}/first-party`);
      assert.match(probe.cookiesSentTo('/first-party')[0] ?? '', /restock_probe=/, 'the same cookie set first-party comes back');
    } finally {
      await context.clearCookies();
      await probe.close();
    }
  });

  it('the merchant opens Restock in the admin: it installs, and the overview shows in the frame, App Bridge loaded first', async () => {
    await page.goto(admin.appPage(SHOP));
    await app.getByRole('heading', { level: 1, name: SHOP }).waitFor();
    assert.equal((await t.database.db.selectFrom('stores').select(['status', 'platform']).where('domain', '=', SHOP).executeTakeFirstOrThrow()).platform, 'shopify');

    const head = await appFrame().evaluate(() => ({
      apiKey: document.querySelector('meta[name="shopify-api-key"]')?.getAttribute('content'),
      scripts: [...document.head.querySelectorAll('script')].map((script) => ({ src: script.src, async: script.async, defer: script.defer, type: script.type })),
    }));
    assert.equal(head.apiKey, API_KEY);
    assert.deepEqual(head.scripts[0], { src: 'https://cdn.shopify.com/shopifycloud/app-bridge.js', async: false, defer: false, type: '' }, 'App Bridge is the first script, loaded as Shopify requires');
    assert.deepEqual(complaints, [], 'App Bridge started without complaint');
    assert.deepEqual(await seriousAccessibilityViolations(appFrame()), [], 'the overview inside the admin is accessible');
  });

  it('the merchant moves between pages and saves the settings inside the frame, each request with a fresh session token and no cookie', async () => {
    const issuedBefore = admin.tokensIssued();
    const requestsBefore = appRequests.length;
    await openSection('Demand');
    await app.getByRole('heading', { level: 1, name: 'Demand' }).waitFor();
    await openSection('Alerts');
    await app.getByRole('heading', { level: 1, name: 'Alerts' }).waitFor();
    await openSection('Settings');
    await app.getByLabel('Sender name').fill('Linen & Loom');
    await app.getByRole('button', { name: 'Save settings' }).click();
    await app.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    const row = await t.database.db.selectFrom('stores').select('settings').where('domain', '=', SHOP).executeTakeFirstOrThrow();
    assert.equal(JSON.parse(row.settings).senderName, 'Linen & Loom');
    await openSection('Overview');
    await app.getByRole('heading', { level: 1, name: SHOP }).waitFor();

    const requests = await Promise.all(appRequests.slice(requestsBefore));
    assert.deepEqual(requests.filter((request) => request.cookie !== undefined), [], 'no request of the app carries a cookie');
    const tokens = requests.map((request) => (request.method === 'POST' ? request.posted : request.url.searchParams.get('id_token'))).filter((token) => token != null);
    assert.equal(new Set(tokens).size, tokens.length, 'every token was used once: each request got a fresh one');
    for (const request of requests.filter((candidate) => candidate.url.pathname !== '/dashboard/session-token')) {
      const token = request.method === 'POST' ? request.posted : request.url.searchParams.get('id_token');
      const redirectedHere = request.url.pathname === '/dashboard/settings' && request.url.searchParams.get('saved') === '1' && !token;
      assert.ok(token || redirectedHere, `${request.method} ${request.url.pathname}${request.url.search} carries a session token`);
    }
    assert.ok(admin.tokensIssued() - issuedBefore >= 5, 'three links, a form and the page after it each asked App Bridge for a token');
    assert.deepEqual(await context.cookies(base), [], 'the app set no cookie');
    assert.deepEqual(complaints, []);
  });

  it("fetch from the app's pages carries the session token as Authorization: Bearer", async () => {
    const answer = await appFrame().evaluate(async () => {
      const response = await fetch('/dashboard/demand');
      return { status: response.status, text: await response.text() };
    });
    assert.equal(answer.status, 200);
    assert.match(answer.text, /<h1>Demand<\/h1>/);
  });

  it('a forged session token shows nothing; an expired one is swapped for a fresh one before anything shows', async () => {
    const host = Buffer.from(`admin.shopify.com/store/${SHOP.replace('.myshopify.com', '')}`).toString('base64url');
    const pageWith = (idToken: string) => `${base}/dashboard?${new URLSearchParams({ embedded: '1', shop: SHOP, host, id_token: idToken })}`;
    const genuine = await shopify.sessionToken(SHOP);
    const [header, , signature] = genuine.split('.');
    const claims = JSON.parse(Buffer.from(genuine.split('.')[1]!, 'base64url').toString());
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, sub: '1' })).toString('base64url')}.${signature}`;

    const refused = await appFrame().goto(pageWith(forged));
    assert.equal(refused?.status(), 401);
    const shown = await appFrame().locator('body').innerText();
    assert.doesNotMatch(shown, new RegExp(SHOP.replace(/\./g, '\\.')), 'nothing of the store shows');
    assert.match(shown, /session token was refused/);

    const now = Math.floor(Date.now() / 1000);
    const expired = await shopify.sessionToken(SHOP, { exp: now - 120, iat: now - 180, nbf: now - 180 });
    const answer = await context.request.get(pageWith(expired), { maxRedirects: 0 });
    assert.equal(answer.status(), 303, 'an expired token gets no page');
    assert.match(answer.headers().location ?? '', /^\/dashboard\/session-token\?/);
    const bearer = await context.request.get(`${base}/dashboard`, { headers: { authorization: `Bearer ${expired}` } });
    assert.equal(bearer.status(), 401, 'nor does a fetch with one');

    await appFrame().goto(pageWith(expired));
    await app.getByRole('heading', { level: 1, name: SHOP }).waitFor();
    const reloaded = new URL(appFrame().url());
    assert.notEqual(reloaded.searchParams.get('id_token'), expired, 'the page shows with a fresh token from App Bridge');
  });

  it('choosing a plan leaves the frame for Shopify\'s approval page, in the admin\'s window', async () => {
    await openSection('Plan');
    await app.getByRole('button', { name: 'Choose the Starter plan' }).click();
    await page.waitForURL(/^https:\/\/linen-and-loom\.myshopify\.com\/admin\/charges\//);
    await page.getByRole('heading', { name: 'Approve subscription' }).waitFor();
    assert.deepEqual(complaints, []);
  });
});
