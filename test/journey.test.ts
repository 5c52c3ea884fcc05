/**
 * The product as people meet it, in a real browser (Debian's Chromium through playwright-core):
 * a shopper subscribes through the widget on a store's product page, a restock sends the alert
 * through a real SMTP server, its unsubscribe link works; the store's owner signs in with the
 * link mailed to them and sees the subscriber and the sent alert. Every page people see is
 * checked with axe-core. With RESTOCK_SCREENSHOTS=<dir> (`npm run screenshots`), the pages are
 * also saved as the screenshots in docs/.
 *
 * On SQLite only: browsers are slow, and storage is covered on both databases elsewhere.
 *
 * The journey's API calls go through Stoplight Prism (`prism proxy --errors`), which checks each
 * request and answer against the service's own /openapi.json: the widget's availability and
 * subscribe calls from the browser (routed there by Playwright), and the calls the test makes
 * itself. In scope is exactly what the document describes (method and path); pages, assets,
 * form posts and the mail's links are not in it, so they go to the service directly.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations, startPageServer } from './fixtures/browser.ts';
import { startListeningTestApp, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { prismSkipReason, startPrismProxy, type PrismProxy } from './fixtures/prism.ts';
import { startSmtpSink, type SmtpSink } from './fixtures/smtp-sink.ts';

failOnLeakedHandles();

const SHOP = 'linen-and-loom.myshopify.com';
const OWNER = 'owner@linen-and-loom.test';
const SHIRT = 'gid://shopify/Product/7001';
const SMALL = 'gid://shopify/ProductVariant/8001';
const LARGE = 'gid://shopify/ProductVariant/8002';
const SHOPPER = 'ada@shoppers.test';
const screenshots = process.env.RESTOCK_SCREENSHOTS;

const skip = browserSkipReason();
const prismSkip = skip ?? prismSkipReason();

describe('shopper and merchant journey in a browser', { skip }, () => {
  let t: TestApp;
  let sink: SmtpSink;
  let store: Awaited<ReturnType<typeof startPageServer>>;
  let browser: Browser;
  let base: string;
  let prism: PrismProxy | undefined;

  before(async () => {
    sink = await startSmtpSink();
    ({ t, base } = await startListeningTestApp('sqlite', { SMTP_URL: sink.url }));
    if (!prismSkip) prism = await startPrismProxy((await t.app.inject({ method: 'GET', url: '/openapi.json' })).json(), base);
    await t.app.restock.stores.createStore(SHOP, OWNER);
    // One alert per unit in stock, batches a second apart: the worker runs only when a test says,
    // so a restock mails its first batch, and the next one once a test runs the worker again.
    await t.app.restock.stores.updateSettings(SHOP, { senderName: 'Linen & Loom', batchMultiplier: 1, batchIntervalSeconds: 1 });
    await reportStock([
      { variantId: SMALL, variantTitle: 'Small', available: 0 },
      { variantId: LARGE, variantTitle: 'Large', available: 4 },
    ]);
    store = await startPageServer({ '/products/linen-shirt': productPage(base) });
    browser = await launchBrowser();
    if (screenshots) mkdirSync(screenshots, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    await store?.close();
    await prism?.close();
    await t?.close();
    await sink?.close();
  });
  /**
   * A step of the journey, checked for what Prism found during it. Its finding is reported over
   * the step's own failure, since it is the cause: a widget given Prism's problem instead of the
   * answer then fails to show.
   */
  function checked(step: () => Promise<void>): () => Promise<void> {
    return async () => {
      try {
        await step();
      } finally {
        assert.deepEqual(prism?.takeViolations() ?? [], [], 'Prism found the API and its document at odds');
      }
    };
  }

  /** One of the journey's own API calls: through Prism when it runs. */
  function api(pathAndQuery: string, init?: RequestInit): Promise<Response> {
    return prism ? prism.fetch(pathAndQuery, init) : fetch(`${base}${pathAndQuery}`, init);
  }

  function reportStock(variants: Array<{ variantId: string; variantTitle: string; available: number }>) {
    const reports = variants.map((variant) => ({
      productId: SHIRT,
      productTitle: 'Linen shirt',
      productUrl: `https://${SHOP}/products/linen-shirt`,
      ...variant,
    }));
    return t.app.restock.inventory.reportStock(SHOP, reports, { kind: 'inventory-api', ref: 'journey test', verified: false });
  }

  async function freshPage(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const proxy = prism;
    if (proxy) {
      await context.route(
        (url) => url.origin === base,
        async (route) => {
          const request = route.request();
          const url = new URL(request.url());
          if (!proxy.describes(request.method(), url.pathname)) return route.continue();
          const response = await route.fetch({ url: `${proxy.url}${url.pathname}${url.search}` });
          proxy.check(request.method(), `${url.pathname}${url.search}`, response.status(), response.headers(), await response.text());
          await route.fulfill({ response });
        },
      );
    }
    const page = await context.newPage();
    page.setDefaultTimeout(5000);
    return { context, page };
  }

  /** A section of the dashboard, through its navigation. */
  async function statusOf(subscriptionId: string): Promise<string> {
    return (await t.database.db.selectFrom('subscriptions').select('status').where('id', '=', subscriptionId).executeTakeFirstOrThrow()).status;
  }

  /** Waits until the time the store's open restocks recorded for their next batch has come. */
  async function untilNextBatchDue() {
    const open = await t.database.db.selectFrom('restocks').select('next_batch_at').where('store_domain', '=', SHOP).where('status', '!=', 'done').execute();
    const due = Math.max(0, ...open.map((row) => Date.parse(row.next_batch_at)));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now() + 1)));
  }

  function openSection(page: Page, name: string) {
    return page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name, exact: true }).click();
  }

  async function shoot(page: Page, name: string) {
    if (screenshots) await page.screenshot({ path: path.join(screenshots, `${name}.png`), fullPage: true });
  }

  async function expectAccessible(page: Page, what: string) {
    assert.deepEqual(await seriousAccessibilityViolations(page), [], `${what}: serious accessibility violations`);
  }

  const shopperContext: { page?: Page; context?: BrowserContext } = {};
  const ownerContext: { page?: Page; context?: BrowserContext } = {};
  after(async () => {
    await shopperContext.context?.close();
    await ownerContext.context?.close();
  });

  it('the shopper subscribes through the widget on a sold-out variant, with the keyboard only', checked(async () => {
    const { context, page } = await freshPage();
    Object.assign(shopperContext, { context, page });
    await page.goto(`${store.url}/products/linen-shirt?variant=8001`);
    const email = page.locator('#restock-slot input[type="email"]');
    await email.waitFor({ state: 'visible' });
    await expectAccessible(page, 'product page with the widget');
    await shoot(page, 'widget');

    // From the variant picker, Tab reaches the widget's field; Enter sends the form.
    await page.locator('select[name="id"]').focus();
    for (let i = 0; i < 5 && !(await email.evaluate((el) => el.getRootNode() instanceof ShadowRoot && (el.getRootNode() as ShadowRoot).activeElement === el)); i++) {
      await page.keyboard.press('Tab');
    }
    await page.keyboard.type(SHOPPER);
    await page.keyboard.press('Enter');
    await page.locator('#restock-slot [role="status"]').filter({ hasText: /back in stock/i }).waitFor();
    await shoot(page, 'widget-subscribed');

    const rows = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', SHOPPER).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.store_domain, SHOP);
    assert.equal(rows[0]!.variant_id, SMALL);
    assert.equal(rows[0]!.status, 'active');
  }));

  it('the owner signs in with the link mailed to them and sees the waiting subscriber', checked(async () => {
    // A few more shoppers, so the demand table and chart have something to compare.
    for (const i of [0, 1, 2]) {
      const res = await api('/storefront/v1/subscribe', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ shop: SHOP, productId: SHIRT, variantId: SMALL, email: `shopper${i}@shoppers.test` }),
      });
      assert.equal(res.status, 201);
    }

    const { context, page } = await freshPage();
    Object.assign(ownerContext, { context, page });
    await page.goto(`${base}/dashboard`);
    assert.equal(new URL(page.url()).pathname, '/dashboard/sign-in', 'without a session the dashboard asks to sign in');
    await expectAccessible(page, 'sign-in page');
    await page.getByLabel('Store domain').fill(SHOP);
    await page.getByRole('button', { name: /sign-in link/i }).click();
    await page.getByRole('heading', { name: 'Check your e-mail' }).waitFor();

    const mail = await sink.waitFor((m) => m.recipients.includes(OWNER) && /Sign in/.test(m.subject));
    const link = /https?:\/\/\S+\/dashboard\/sign-in\/[A-Za-z0-9_-]+/.exec(mail.text)?.[0];
    assert.ok(link, `no sign-in link in: ${mail.text}`);
    await page.goto(link);
    await expectAccessible(page, 'sign-in confirmation');
    await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
    await page.waitForURL(`${base}/dashboard`);
    await page.getByRole('heading', { name: SHOP }).waitFor();

    await openSection(page, 'Demand');
    const smallRow = page.locator('tr', { hasText: 'Small' });
    assert.match(await smallRow.innerText(), /Linen shirt\s+Small\s+4/, 'four shoppers wait for the small shirt');
    await expectAccessible(page, 'demand page');
  }));

  it('a restock mails the shopper through SMTP, and the owner sees the sent alert and why', checked(async () => {
    await reportStock([{ variantId: SMALL, variantTitle: 'Small', available: 2 }]);
    await t.runWorker();
    const alert = await sink.waitFor((m) => m.recipients.includes(SHOPPER));
    assert.match(alert.subject, /Linen shirt/);
    assert.match(alert.headers['list-unsubscribe-post'] ?? '', /List-Unsubscribe=One-Click/);

    const page = ownerContext.page!;
    await openSection(page, 'Alerts');
    const row = page.locator('tr', { hasText: SHOPPER });
    assert.match(await row.innerText(), /sent/);
    await expectAccessible(page, 'alerts page');
    await shoot(page, 'dashboard-alerts');

    await row.getByRole('link', { name: SHOPPER }).click();
    await page.getByRole('heading', { name: `Alert to ${SHOPPER}` }).waitFor();
    const audit = await page.locator('main').innerText();
    assert.match(audit, /Why it was sent/);
    assert.match(audit, /inventory-api/, 'the restock source');
    assert.match(audit, /the storefront widget/, 'who made the subscription');
    await expectAccessible(page, 'alert audit page');
    await shoot(page, 'dashboard-audit');

    await openSection(page, 'Overview');
    // The store's totals are the first tiles; the revenue section's 30-day figures follow.
    const tiles = await page.locator('.tiles').first().innerText();
    assert.match(tiles, /2\s*Alerts sent/, `the first two of four shoppers (stock 2): ${tiles}`);
    assert.match(tiles, /2\s*Waiting subscribers/, 'two still wait');
    await expectAccessible(page, 'overview');
    await shoot(page, 'dashboard');

    for (const [name, label] of [
      ['Plan', 'Plan and quota'],
      ['Settings', 'Settings'],
      ['Unsubscribes', 'Unsubscribes and suppressions'],
    ] as const) {
      await openSection(page, name);
      await page.getByRole('heading', { name: label, level: 1 }).waitFor();
      await expectAccessible(page, `${name} page`);
    }
  }));

  it('the unsubscribe link in the alert works in the browser', checked(async () => {
    const alert = sink.messages.find((m) => m.recipients.includes(SHOPPER))!;
    const link = /https?:\/\/\S+\/unsubscribe\/[A-Za-z0-9_.-]+/.exec(alert.text)?.[0];
    assert.ok(link, `no unsubscribe link in: ${alert.text}`);
    const page = shopperContext.page!;
    await page.goto(link);
    // The shopper already had the one alert owed: the link confirms that no other will come.
    await page.getByRole('heading', { name: 'You are unsubscribed' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Unsubscribe' }).count(), 0);
    assert.match(await page.locator('main').innerText(), new RegExp(SHOPPER));
    await expectAccessible(page, 'unsubscribed page');
  }));

  it('a waiting shopper who unsubscribes shows up in the dashboard, and is not mailed', checked(async () => {
    const waiting = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'shopper2@shoppers.test').executeTakeFirstOrThrow();
    assert.equal(waiting.status, 'active');
    const page = shopperContext.page!;
    await page.goto(t.app.restock.alerts.unsubscribeUrl(waiting.id));
    // Opening the link only asks (mail scanners open links too); the button decides.
    await page.getByRole('heading', { name: 'Stop this alert?' }).waitFor();
    assert.equal(await statusOf(waiting.id), 'active', 'looking at the page changed nothing');
    await expectAccessible(page, 'unsubscribe page');
    await shoot(page, 'unsubscribe');
    await page.getByRole('button', { name: 'Unsubscribe' }).click();
    await page.getByRole('heading', { name: 'You are unsubscribed' }).waitFor();
    assert.equal(await statusOf(waiting.id), 'unsubscribed');

    const owner = ownerContext.page!;
    await openSection(owner, 'Unsubscribes');
    assert.match(await owner.locator('main').innerText(), /shopper2@shoppers\.test/);

    // The restock's next batch mails the shopper still waiting, not the one who left.
    const stillWaiting = (m: { recipients: string[] }) => m.recipients.includes('shopper1@shoppers.test');
    await untilNextBatchDue();
    await t.runWorker();
    await sink.waitFor(stillWaiting);
    assert.equal(sink.messages.filter((m) => m.recipients.includes('shopper2@shoppers.test')).length, 0, 'the unsubscribed shopper is not mailed');
  }));

  it('the front door and the API reference are accessible pages', checked(async () => {
    const page = ownerContext.page!;
    for (const [path, heading] of [
      ['/', 'Restock'],
      ['/docs', 'API reference'],
    ] as const) {
      await page.goto(`${base}${path}`);
      await page.getByRole('heading', { level: 1, name: new RegExp(heading) }).waitFor();
      await expectAccessible(page, `${path}`);
    }
    await shoot(page, 'api-reference');
  }));

  it('the agent claim and local checkout pages are accessible and look like the rest', checked(async () => {
    const registered = await api('/api/agent/register', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"type":"anonymous"}' });
    const { claim_url: claimUrl } = (await registered.json()) as { claim_url: string };
    const page = ownerContext.page!;
    await page.goto(claimUrl);
    await page.getByRole('heading', { name: 'Claim your agent' }).waitFor();
    await expectAccessible(page, 'claim page');
    await shoot(page, 'claim');

    await page.goto(`${base}/dashboard/plan`);
    await page.getByRole('button', { name: 'Choose the Growth plan' }).click();
    await page.getByRole('heading', { name: 'Confirm your plan' }).waitFor();
    await expectAccessible(page, 'checkout page');
    await shoot(page, 'checkout');
    await page.getByRole('button', { name: 'Complete test purchase' }).click();
    await page.getByRole('heading', { name: 'Your plan is active' }).waitFor();
    await page.goto(`${base}/dashboard/plan`);
    assert.match(await page.locator('main').innerText(), /Growth[\s\S]*Current plan/);
  }));

  it("sent the journey's API calls through Prism, which found them all as the document says", { skip: prismSkip }, checked(async () => {
    // The widget's availability revalidated with its ETag, as a browser's cache or a CDN does:
    // routing turns the browser's cache off, so the test asks itself. The 304 is in the document.
    const availability = `/storefront/v1/availability?${new URLSearchParams({ shop: SHOP, productId: SHIRT })}`;
    const fresh = await api(availability);
    assert.equal(fresh.status, 200);
    assert.equal((await api(availability, { headers: { 'if-none-match': fresh.headers.get('etag')! } })).status, 304);

    const operations = new Set(prism!.seen.map((exchange) => exchange.replace(/ → \d+$/, '')));
    for (const expected of ['GET /storefront/v1/availability', 'POST /storefront/v1/subscribe', 'POST /api/agent/register']) {
      assert.ok(operations.has(expected), `${expected} did not go through Prism: ${[...operations].join(', ')}`);
    }
  }));
});

/** The merchant's product page: a Shopify-like variant picker and the one tag the merchant pastes. */
function productPage(base: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Linen shirt · Linen &amp; Loom</title>
<style>
  body { font: 17px Georgia, serif; max-width: 40rem; margin: 2rem auto; color: #222; }
  button { background: #222; color: #fff; border: 0; padding: .6rem 1.2rem; }
</style></head>
<body>
<main>
<h1>Linen shirt</h1>
<p>Washed linen, relaxed fit.</p>
<form action="/cart/add" method="post">
  <label for="variant">Size</label>
  <select id="variant" name="id">
    <option value="8001">Small (sold out)</option>
    <option value="8002">Large</option>
  </select>
  <button type="submit">Add to cart</button>
</form>
<div id="restock-slot"></div>
<script src="${base}/widget.js" defer data-shop="${SHOP}" data-product="7001" data-target="#restock-slot"></script>
</main>
</body>
</html>`;
}
