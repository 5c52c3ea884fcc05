// Longer than most files on purpose: one store's whole "revenue won back" loop (restock, mails,
// clicks, orders, refunds, figures, exports, dashboard, reminders, outgoing webhooks), step by
// step on shared state, as a merchant lives it.
/**
 * Revenue won back, end to end: a store installs the Shopify app, four shoppers wait for a
 * variant, a signed `products/update` brings stock and the alerts go out through a real SMTP
 * server. One shopper follows the mail's link (a redirect with UTM parameters, counted once,
 * mail scanners not counted), orders arrive as Shopify's signed webhooks (direct, assisted, too
 * late, refunded, delivered twice), and the figures agree everywhere: the performance API, the
 * CSV exports, the dashboard in Chromium and the store's own webhook endpoint. A day later the
 * reminders follow the shoppers who neither bought nor left, and skip the others with their
 * reason. On both databases.
 */
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { codeIn, expectStatus, registerAnonymousAgent, requestCode, submitCode } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type FakeProduct, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { deliverWebhook, installByTokenExchange, productUpdatePayload, shopifyTestApp } from './fixtures/shopify-app.ts';
import { orderCreatePayload, refundCreatePayload, type OrderInput } from './fixtures/shopify-orders.ts';
import { startSmtpSink, type SinkMessage, type SmtpSink } from './fixtures/smtp-sink.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { startWebhookReceiver, type WebhookReceiver } from './fixtures/webhook-receiver.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-revenue-loop', 'read_products,read_inventory,read_orders');

const BROWSER_AGENT = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15';
const SCANNER_AGENT = 'Mozilla/5.0 (compatible; Barracuda Sentinel)';
const DAY_MS = 86_400_000;
const WHY_ORDERED = 'no reminder: the shopper ordered it after the alert';
const WHY_UNSUBSCRIBED = 'no reminder: the shopper unsubscribed (or the subscription was cancelled) after the alert';
const WHY_SOLD_OUT = 'no reminder: sold out (or unpublished) again since the alert';

let counter = 0;
const newId = () => Number(`${Date.now() % 1_000_000}${String(++counter).padStart(4, '0')}`);

function fakeProduct(title: string): FakeProduct {
  const id = newId();
  return {
    id,
    title: `${title} ${id}`,
    handle: `${title.toLowerCase()}-${id}`,
    status: 'ACTIVE',
    publishedAt: '2024-01-01T00:00:00Z',
    variants: [{ id: newId(), title: 'Size 42', inventoryItemId: newId(), inventoryQuantity: 0, sellableOnlineQuantity: 0 }],
  };
}

const productGid = (product: FakeProduct) => `gid://shopify/Product/${product.id}`;
const variantGid = (product: FakeProduct) => `gid://shopify/ProductVariant/${product.variants[0]!.id}`;

/** RFC 4180 as the exports write it: quoted fields may hold commas, quotes (doubled) and line breaks. */
function parseCsv(text: string): Array<Record<string, string>> {
  const records: string[][] = [];
  const field = /("(?:[^"]|"")*"|[^",\r\n]*)(,|\r\n|$)/y;
  let record: string[] = [];
  while (field.lastIndex < text.length) {
    const [, value, end] = field.exec(text)!;
    record.push(value!.startsWith('"') ? value!.slice(1, -1).replaceAll('""', '"') : value!);
    if (end !== ',') {
      records.push(record);
      record = [];
    }
  }
  const [header, ...rows] = records;
  return rows.map((row) => Object.fromEntries(header!.map((name, i) => [name, row[i] ?? ''])));
}

/** The product button's link in an alert's plain text ("Shop now: <url>"). */
function productLinkIn(mail: SinkMessage): string {
  const link = /Shop now: (\S+)/.exec(mail.text)?.[1];
  assert.ok(link, `no product link in: ${mail.text}`);
  return link;
}

/** One character of the token's signature changed: a link as a careless forward or an attacker leaves it. */
function tampered(link: string): string {
  const at = link.lastIndexOf('.') + 3;
  const swapped = link[at] === 'A' ? 'B' : 'A';
  return `${link.slice(0, at)}${swapped}${link.slice(at + 1)}`;
}

describe('revenue won back, from restock to reminder', () => {
  const browserSkip = browserSkipReason();
  let browser: Browser | undefined;
  before(async () => {
    if (!browserSkip) browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  for (const dialect of testDialects()) {
    describe(`on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
      let t: TestApp;
      let base: string;
      let shopify: ShopifyAdminStandIn;
      let sink: SmtpSink;
      let receiver: WebhookReceiver;

      before(async () => {
        shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
        sink = await startSmtpSink();
        receiver = await startWebhookReceiver();
        // Reconciliation off: every state comes from a webhook. Loopback stands for the internet
        // for the store's webhook endpoint (127.0.0.1/32, as the outgoing-webhooks tests allow it).
        ({ t, base } = await startListeningTestApp(dialect, { ...ENV, SMTP_URL: sink.url, RECONCILE_INTERVAL_MINUTES: '0', TENANT_OUTBOUND_ALLOW: '127.0.0.1/32' }));
      });
      after(async () => {
        await t?.close();
        await receiver?.close();
        await sink?.close();
        await shopify?.close();
      });

      const shop = `revenue-${dialect}-${newId()}.myshopify.com`;
      const owner = `owner@${shop}`;
      const boots = fakeProduct('Boots');
      const scarf = fakeProduct('Scarf');
      const shopper = { a: `ada-${dialect}@shoppers.test`, b: `ben-${dialect}@shoppers.test`, c: `cy-${dialect}@shoppers.test`, d: `dee-${dialect}@shoppers.test`, e: `eve-${dialect}@shoppers.test` };
      const waiting = [shopper.a, shopper.b, shopper.c, shopper.d];
      const hookPath = `/restock-events-${dialect}`;
      let agentToken: string;
      let hookSecret: string;
      const orders = { a: newId(), b: newId(), c: newId() };
      const lines = { a: newId(), aOther: newId(), b: newId(), c: newId() };
      let alertIdOf: Record<string, string>;

      const api = (method: 'GET' | 'PATCH' | 'POST', url: string, body?: unknown) =>
        t.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${agentToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        });

      /** Shopify's state changes, then it says so by `products/update`, and the worker runs. */
      async function productChanged(product: FakeProduct, quantity: number) {
        product.variants[0]!.inventoryQuantity = quantity;
        product.variants[0]!.sellableOnlineQuantity = quantity;
        shopify.setProduct(shop, product);
        const res = await deliverWebhook(t, API_SECRET, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString()) });
        assert.equal(res.statusCode, 200, res.body);
        await t.runWorker();
      }

      async function deliverOrderTopic(topic: string, payload: unknown, eventId?: string) {
        const res = await deliverWebhook(t, API_SECRET, { topic, shop, payload, ...(eventId ? { eventId } : {}) });
        assert.equal(res.statusCode, 200, res.body);
      }

      async function subscribe(product: FakeProduct, email: string) {
        const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', payload: { shop, productId: productGid(product), variantId: variantGid(product), email } });
        assert.equal(res.statusCode, 201, res.body);
      }

      async function clicksOn(alertId: string): Promise<number> {
        return (await t.database.db.selectFrom('alert_clicks').select('notification_id').where('notification_id', '=', alertId).execute()).length;
      }

      /** A request for one of our links, as a mail client's browser (or a scanner) makes it; redirects are not followed. */
      async function follow(link: string, init: { method?: 'GET' | 'HEAD'; agent?: string } = {}) {
        const { pathname, search } = new URL(link);
        const res = await t.app.inject({ method: init.method ?? 'GET', url: `${pathname}${search}`, headers: { 'user-agent': init.agent ?? BROWSER_AGENT } });
        return { status: res.statusCode, location: res.headers.location as string | undefined, cacheControl: res.headers['cache-control'] };
      }

      async function exported(kind: 'subscribers' | 'alerts' | 'orders') {
        const res = await api('GET', `/api/v1/stores/${shop}/exports/${kind}`);
        assert.equal(res.statusCode, 200, res.body);
        assert.match(res.headers['content-type'] as string, /^text\/csv/);
        return parseCsv(res.body);
      }

      /** The events the store's endpoint received, each verified as a consumer would (Standard Webhooks). */
      function verifiedEvents(): Array<{ type: string; data: Record<string, unknown> }> {
        return receiver.received
          .filter((hit) => hit.path === hookPath)
          .map((hit) => new Webhook(hookSecret).verify(hit.body, hit.headers) as { type: string; data: Record<string, unknown> });
      }

      const mailTo = (email: string, subject: RegExp) => sink.waitFor((m) => m.recipients.includes(email) && subject.test(m.subject));

      it('the store installs the app, binds an agent, sets its reminder delay and registers a webhook endpoint', async () => {
        await installByTokenExchange(t, shopify, shop, owner);
        const agent = await registerAnonymousAgent(t.app);
        expectStatus(await requestCode(t.app, agent.claimToken, owner, shop), 200);
        const claimMail = await sink.waitFor((m) => m.recipients.includes(owner));
        agentToken = expectStatus(await submitCode(t.app, agent.claimToken, codeIn(claimMail.text)), 200).credential;

        const store = expectStatus(await api('PATCH', `/api/v1/stores/${shop}`, { attributionWindowDays: 7, reminderDelayHours: 24 }), 200);
        assert.equal(store.settings.attributionWindowDays, 7);
        assert.equal(store.settings.reminderDelayHours, 24);

        const endpoint = expectStatus(await api('POST', `/api/v1/stores/${shop}/webhooks`, { url: receiver.url(hookPath) }), 201);
        hookSecret = endpoint.secret;
      });

      it('four shoppers wait for a variant; its restock mails each of them through SMTP', async () => {
        await productChanged(boots, 0);
        for (const email of waiting) await subscribe(boots, email);
        await productChanged(boots, 10);
        for (const email of waiting) await mailTo(email, new RegExp(boots.title));
        const rows = await t.database.db.selectFrom('notifications').select(['id', 'email', 'kind', 'status']).where('store_domain', '=', shop).where('kind', '=', 'alert').execute();
        assert.deepEqual(rows.map((row) => [row.email, row.status]).sort(), waiting.map((email) => [email, 'sent']).sort());
        alertIdOf = Object.fromEntries(rows.map((row) => [row.email, row.id]));
      });

      it("the mail's link lands on the product with UTM parameters and counts one click; scanners, repeats and HEAD do not", async () => {
        const linkOf = async (email: string) => productLinkIn(await mailTo(email, new RegExp(boots.title)));
        const linkA = await linkOf(shopper.a);
        assert.ok(linkA.startsWith(`${base}/r/${shop}/`), `ours, naming the store: ${linkA}`);

        // A mail scanner opens B's and D's links before anyone reads them: they land, uncounted.
        for (const email of [shopper.b, shopper.d]) {
          const scanned = await follow(await linkOf(email), { agent: SCANNER_AGENT });
          assert.equal(scanned.status, 302);
          assert.equal(new URL(scanned.location!).pathname, `/products/${boots.handle}`);
          const probed = await follow(await linkOf(email), { method: 'HEAD' });
          assert.equal(probed.status, 302);
          assert.equal(await clicksOn(alertIdOf[email]!), 0, `${email}: a scanner's GET and a HEAD are no click`);
        }

        const first = await follow(linkA);
        assert.equal(first.status, 302);
        assert.equal(first.cacheControl, 'no-store');
        const landing = new URL(first.location!);
        assert.equal(landing.origin, `https://${shop}`);
        assert.equal(landing.pathname, `/products/${boots.handle}`);
        assert.equal(landing.searchParams.get('utm_source'), 'restock');
        assert.equal(landing.searchParams.get('utm_medium'), 'email');
        assert.equal(landing.searchParams.get('utm_campaign'), 'back-in-stock');
        assert.equal(await clicksOn(alertIdOf[shopper.a]!), 1);

        const again = await follow(linkA);
        assert.equal(again.location, landing.href);
        assert.equal((await follow(linkA, { method: 'HEAD' })).status, 302);
        assert.equal(await clicksOn(alertIdOf[shopper.a]!), 1, 'a second GET and a HEAD add no click');

        const forged = await follow(tampered(linkA));
        assert.equal(forged.status, 302);
        assert.equal(forged.location, `https://${shop}/`, "a tampered link lands on the store's home page");
        assert.equal(await clicksOn(alertIdOf[shopper.a]!), 1);
        const token = linkA.slice(linkA.lastIndexOf('/') + 1);
        const elsewhere = await follow(`${base}/r/unknown-${newId()}.myshopify.com/${token}`);
        assert.equal(elsewhere.status, 302);
        assert.equal(elsewhere.location, `${base}/`, "an unknown store's link lands on the service's front page");

        // The variant the shopper waited for is the one selected on the product page (Shopify's ?variant=<numeric id>).
        assert.equal(landing.searchParams.get('variant'), String(boots.variants[0]!.id), `the waited-for variant selected: ${landing.href}`);
      });

      it('orders arrive as signed webhooks: direct after the click, assisted without, none past the window; a refund and redeliveries', async () => {
        const euro = (input: Omit<OrderInput, 'currency'>): OrderInput => ({ currency: 'EUR', ...input });
        const orderA = euro({
          id: orders.a,
          email: shopper.a,
          createdAt: new Date().toISOString(),
          presentmentCurrency: 'USD',
          lines: [
            { id: lines.a, productId: boots.id, variantId: boots.variants[0]!.id, quantity: 2, price: '24.95', presentmentPrice: '27.00', discount: '4.90', presentmentDiscount: '5.30' },
            // Bought with it, never alerted about: credited to nothing.
            { id: lines.aOther, productId: scarf.id, variantId: scarf.variants[0]!.id, quantity: 1, price: '10.00' },
          ],
        });
        const orderB = euro({ id: orders.b, email: shopper.b, createdAt: new Date().toISOString(), lines: [{ id: lines.b, productId: boots.id, variantId: boots.variants[0]!.id, quantity: 1, price: '24.95', discount: '2.00' }] });
        const orderC = euro({
          id: orders.c,
          email: shopper.c,
          createdAt: new Date(Date.now() + 8 * DAY_MS).toISOString(),
          lines: [{ id: lines.c, productId: boots.id, variantId: boots.variants[0]!.id, quantity: 1, price: '24.95' }],
        });
        const eventA = `ev-order-a-${newId()}`;
        await deliverOrderTopic('orders/create', orderCreatePayload(orderA), eventA);
        // Shopify retries a delivery it thinks failed with the same event id.
        await deliverOrderTopic('orders/create', orderCreatePayload(orderA), eventA);
        await deliverOrderTopic('orders/create', orderCreatePayload(orderB));
        await deliverOrderTopic('orders/create', orderCreatePayload(orderC));
        await t.runWorker();

        // One of the two boots comes back: 20.05 EUR of the 45.00, 21.70 USD of the 48.70 paid.
        const refund = { id: newId(), orderId: orders.a, createdAt: new Date().toISOString(), currency: 'EUR', presentmentCurrency: 'USD', lines: [{ lineItemId: lines.a, quantity: 1, subtotal: '20.05', presentmentSubtotal: '21.70' }] };
        await deliverOrderTopic('refunds/create', refundCreatePayload(refund));
        await t.runWorker();
        // The same order again under another event id (a second subscription, a replay): counted once, the refund kept.
        await deliverOrderTopic('orders/create', orderCreatePayload(orderA));
        await deliverOrderTopic('refunds/create', refundCreatePayload(refund));
        await t.runWorker();

        const attributed = await t.database.db.selectFrom('order_attributions').selectAll().where('store_domain', '=', shop).orderBy('order_id').execute();
        assert.deepEqual(
          attributed.map((row) => [row.order_id, row.line_id, row.notification_id, row.kind, Number(row.amount_minor), row.currency, Number(row.shop_amount_minor), row.shop_currency, Number(row.net_minor), Number(row.net_shop_minor)]),
          [
            [String(orders.a), String(lines.a), alertIdOf[shopper.a], 'direct', 4870, 'USD', 4500, 'EUR', 2700, 2495],
            [String(orders.b), String(lines.b), alertIdOf[shopper.b], 'assisted', 2295, 'EUR', 2295, 'EUR', 2295, 2295],
          ].sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
        );
      });

      it('the performance API shows sends, the click, both orders and the net revenue, overall and for the variant', async () => {
        const p = expectStatus(await api('GET', `/api/v1/stores/${shop}/performance`), 200);
        assert.equal(p.sent, 4);
        assert.equal(p.clicks, 1);
        assert.deepEqual(p.orders, { direct: 1, assisted: 1, total: 2 });
        assert.equal(p.conversionRate, 0.5);
        assert.equal(p.clickRate, 0.25);
        // A's 45.00 less 20.05 refunded, and B's 22.95, in the store's currency.
        assert.deepEqual(p.revenue, [{ currency: 'EUR', minor: 2495 + 2295 }]);
        assert.deepEqual(p.revenueByPresentmentCurrency, [
          { currency: 'EUR', minor: 2295 },
          { currency: 'USD', minor: 2700 },
        ]);
        assert.equal(p.reminders, 0);
        const row = p.products.find((product: { productId: string; variantId: string | null }) => product.productId === productGid(boots) && product.variantId === variantGid(boots));
        assert.deepEqual(row, { productId: productGid(boots), variantId: variantGid(boots), title: `${boots.title} — Size 42`, waiting: 0, sent: 4, clicked: 1, ordered: 2, revenue: [{ currency: 'EUR', minor: 4790 }] });
        assert.equal(p.products.length, 1, 'the scarf bought alongside was never alerted about');
        const today = p.byDay.at(-1);
        assert.deepEqual(today, { day: new Date().toISOString().slice(0, 10), sent: 4, clicks: 1, orders: 2, revenueMinor: 4790 });
      });

      it('the CSV exports list the attributed lines with net amounts, the ledger and the subscribers', async () => {
        const orderRows = await exported('orders');
        assert.deepEqual(
          orderRows.map((row) => [row.order_id, row.line_id, row.alert_id, row.attribution, row.amount_minor, row.currency, row.shop_amount_minor, row.shop_currency, row.net_minor, row.net_shop_minor]).sort(),
          [
            [String(orders.a), String(lines.a), alertIdOf[shopper.a], 'direct', '4870', 'USD', '4500', 'EUR', '2700', '2495'],
            [String(orders.b), String(lines.b), alertIdOf[shopper.b], 'assisted', '2295', 'EUR', '2295', 'EUR', '2295', '2295'],
          ].sort(),
        );

        const ledger = await exported('alerts');
        assert.deepEqual(
          ledger.filter((row) => row.kind === 'alert').map((row) => [row.email, row.status, row.alert_id]).sort(),
          waiting.map((email) => [email, 'sent', alertIdOf[email]]).sort(),
        );
        // Each alert queued its reminder, due a day after it was sent.
        const reminders = ledger.filter((row) => row.kind === 'reminder');
        assert.deepEqual(reminders.map((row) => [row.email, row.status]).sort(), waiting.map((email) => [email, 'queued']).sort());

        const subscribers = await exported('subscribers');
        assert.deepEqual(subscribers.map((row) => [row.email, row.product_id, row.variant_id, row.status, row.made_by]).sort(), waiting.map((email) => [email, productGid(boots), variantGid(boots), 'notified', 'storefront']).sort());
      });

      it('the dashboard shows the owner the same figures, and the alert audit its click and order', { skip: browserSkip }, async () => {
        const context = await browser!.newContext({ viewport: { width: 1100, height: 800 } });
        try {
          const page = await context.newPage();
          page.setDefaultTimeout(5000);
          await page.goto(`${base}/dashboard`);
          await page.getByLabel('Store domain').fill(shop);
          await page.getByRole('button', { name: /sign-in link/i }).click();
          await page.getByRole('heading', { name: 'Check your e-mail' }).waitFor();
          const mail = await mailTo(owner, /Sign in/);
          const link = /https?:\/\/\S+\/dashboard\/sign-in\/[A-Za-z0-9_-]+/.exec(mail.text)?.[0];
          assert.ok(link, `no sign-in link in: ${mail.text}`);
          await page.goto(link);
          await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
          await page.waitForURL(`${base}/dashboard`);

          const figure = (name: string) => page.locator(`[data-figure="${name}"]`).innerText();
          assert.equal(await figure('revenue'), '€47.90');
          assert.equal(await figure('orders'), '2');
          assert.equal(await figure('clicks'), '1');
          assert.equal(await figure('conversion-rate'), '50%');
          assert.equal(await figure('sent'), '4');

          await page.goto(`${base}/dashboard/alerts/${alertIdOf[shopper.a]}`);
          const click = await t.database.db.selectFrom('alert_clicks').select('clicked_at').where('notification_id', '=', alertIdOf[shopper.a]!).executeTakeFirstOrThrow();
          assert.equal(await figure('clicked-at'), `${click.clicked_at.slice(0, 10)} ${click.clicked_at.slice(11, 16)} UTC`);
          const ordered = await figure('ordered');
          assert.match(ordered, new RegExp(`order ${orders.a}, line ${lines.a} \\(direct\\): €24\\.95 of €45\\.00 after refunds`));
          assert.doesNotMatch(ordered, new RegExp(String(orders.b)));

          // Per product: the variant's row carries the same figures.
          await page.goto(`${base}/dashboard/performance`);
          const row = page.locator('tbody tr', { hasText: variantGid(boots) });
          assert.deepEqual(await row.locator('td.num').allInnerTexts(), ['0', '4', '1', '2', '€47.90']);
          // The dashboard's export is the API's, streamed to the signed-in owner.
          const download = await page.request.get(`${base}/dashboard/exports/orders`);
          assert.equal(download.status(), 200);
          assert.deepEqual(parseCsv(await download.text()).map((line) => [line.order_id, line.net_shop_minor]).sort(), [
            [String(orders.a), '2495'],
            [String(orders.b), '2295'],
          ]);
        } finally {
          await context.close();
        }
      });

      it('a day later, only the shopper who neither ordered nor left gets the reminder; the others are skipped with their reason', async () => {
        // C ordered past the window, then leaves by the one-click link of their alert (RFC 8058).
        const alertC = await mailTo(shopper.c, new RegExp(boots.title));
        const oneClick = /<([^>]+)>/.exec(alertC.headers['list-unsubscribe'] ?? '')?.[1];
        assert.ok(oneClick, `no List-Unsubscribe link: ${alertC.headers['list-unsubscribe']}`);
        const left = await t.app.inject({ method: 'POST', url: new URL(oneClick).pathname, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'List-Unsubscribe=One-Click' });
        assert.equal(left.statusCode, 200, left.body);

        // Another variant: E is alerted, then it sells out again before the reminder is due.
        await productChanged(scarf, 0);
        await subscribe(scarf, shopper.e);
        await productChanged(scarf, 3);
        await mailTo(shopper.e, new RegExp(scarf.title));
        await productChanged(scarf, 0);

        const usedBefore = expectStatus(await api('GET', `/api/v1/stores/${shop}`), 200).plan.used;
        await aDayPasses();
        await t.runWorker();

        const reminder = await mailTo(shopper.d, /^Still in stock: /);
        assert.equal(reminder.subject, `Still in stock: ${boots.title}`);
        const remindedTo = sink.messages.filter((m) => /^Still in stock: /.test(m.subject)).flatMap((m) => m.recipients);
        assert.deepEqual(remindedTo, [shopper.d], 'one reminder, to D only');

        // What the code decides for C: an order past the window is credited to nothing, yet it is a
        // purchase since the alert; C's reminder is skipped for leaving, the rule checked first.
        const sentC = await t.database.db.selectFrom('notifications').select('sent_at').where('id', '=', alertIdOf[shopper.c]!).executeTakeFirstOrThrow();
        const boughtSince = await t.app.restock.conversions.orderedSince(shop, [{ key: 'c', email: shopper.c, productId: productGid(boots), variantId: variantGid(boots), since: sentC.sent_at! }]);
        assert.deepEqual([...boughtSince], ['c']);

        const skipped = expectStatus(await api('GET', `/api/v1/stores/${shop}/notifications?status=skipped`), 200).items as Array<{ email: string; outcome: string }>;
        assert.deepEqual(
          skipped.map((row) => [row.email, row.outcome]).sort(),
          [
            [shopper.a, WHY_ORDERED],
            [shopper.b, WHY_ORDERED],
            // C's order (past the window, credited to nothing) also counts as bought; leaving is checked first.
            [shopper.c, WHY_UNSUBSCRIBED],
            [shopper.e, WHY_SOLD_OUT],
          ].sort(),
        );
        const reminderRows = await t.database.db.selectFrom('notifications').select(['email', 'status']).where('store_domain', '=', shop).where('kind', '=', 'reminder').execute();
        assert.deepEqual(reminderRows.map((row) => [row.email, row.status]).sort(), [
          [shopper.a, 'skipped'],
          [shopper.b, 'skipped'],
          [shopper.c, 'skipped'],
          [shopper.d, 'sent'],
          [shopper.e, 'skipped'],
        ]);

        assert.equal(expectStatus(await api('GET', `/api/v1/stores/${shop}`), 200).plan.used, usedBefore + 1, 'the reminder counts against the plan');
        const p = expectStatus(await api('GET', `/api/v1/stores/${shop}/performance`), 200);
        assert.equal(p.reminders, 1);
        const ledger = await exported('alerts');
        assert.deepEqual(
          ledger.filter((row) => row.kind === 'reminder').map((row) => [row.email, row.status, row.outcome?.startsWith('no reminder') ? row.outcome : '']).sort(),
          [
            [shopper.a, 'skipped', WHY_ORDERED],
            [shopper.b, 'skipped', WHY_ORDERED],
            [shopper.c, 'skipped', WHY_UNSUBSCRIBED],
            [shopper.d, 'sent', ''],
            [shopper.e, 'skipped', WHY_SOLD_OUT],
          ],
        );
      });

      it("the store's endpoint received each alert, the click and both attributed orders, signed per Standard Webhooks", async () => {
        await t.runWorker();
        const events = verifiedEvents();
        const ofBoots = (type: string, kind?: string) => events.filter((e) => e.type === type && e.data.productId === productGid(boots) && (kind === undefined || e.data.kind === kind));
        assert.deepEqual(ofBoots('alert.sent', 'alert').map((e) => e.data.email).sort(), [...waiting].sort());
        assert.deepEqual(ofBoots('alert.sent', 'reminder').map((e) => e.data.email), [shopper.d]);
        assert.deepEqual(ofBoots('alert.clicked').map((e) => e.data.alertId), [alertIdOf[shopper.a]]);
        const attributed = events.filter((e) => e.type === 'order.attributed');
        assert.deepEqual(attributed.map((e) => [e.data.orderId, e.data.kind]).sort(), [
          [String(orders.a), 'direct'],
          [String(orders.b), 'assisted'],
        ]);
        assert.deepEqual(ofBoots('subscription.created').length, 4);
      });

      it("Shopify's customers/redact erases the shopper's orders, and the figures no longer count them", async () => {
        await deliverOrderTopic('customers/redact', { shop_domain: shop, customer: { id: 1, email: shopper.a }, orders_to_redact: [orders.a] });
        await t.runWorker();
        const kept = await t.database.db.selectFrom('orders').select('order_id').where('store_domain', '=', shop).execute();
        assert.deepEqual(kept.map((row) => row.order_id).sort(), [String(orders.b), String(orders.c)].sort());
        const figures = (await api('GET', `/api/v1/stores/${shop}/performance`)).json();
        assert.deepEqual([figures.orders, figures.revenue], [{ direct: 0, assisted: 1, total: 1 }, [{ currency: 'EUR', minor: 2295 }]]);
      });

      /**
       * A day passes for the store's ledger: every time it recorded moves a day back, so the
       * reminders come due and the alerts they follow leave the frequency cap's window, as they
       * would have after a real day.
       */
      async function aDayPasses() {
        const rows = await t.database.db.selectFrom('notifications').select(['id', 'created_at', 'sent_at', 'next_attempt_at']).where('store_domain', '=', shop).execute();
        const dayBefore = (iso: string) => new Date(Date.parse(iso) - DAY_MS).toISOString();
        for (const row of rows) {
          await t.database.db
            .updateTable('notifications')
            .set({ created_at: dayBefore(row.created_at), sent_at: row.sent_at === null ? null : dayBefore(row.sent_at), next_attempt_at: dayBefore(row.next_attempt_at) })
            .where('id', '=', row.id)
            .execute();
        }
      }
    });
  }
});
