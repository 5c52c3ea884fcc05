/**
 * A unit held for the first in line (docs/dispatch.md, "Reserved units"): a Shopify store that
 * holds units gets a restock of 2 with 5 shoppers waiting. The first batch is one shopper per
 * unit, each alert says "reserved for you until …" and links, through our click redirect, the
 * invoice of a draft order whose unit Shopify holds. One shopper checks out in Chromium and the
 * order is credited to the alert as direct; the other hold expires unclaimed, is released at
 * Shopify and the next shoppers are told. With the setting off nothing of this happens. On both
 * databases.
 */
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { codeIn, expectStatus, registerAnonymousAgent, requestCode, submitCode } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { ALLOW_PUBLIC_TO_LOOPBACK, browserSkipReason, launchBrowser } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startShopifyAdmin, type FakeProduct, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { deliverWebhook, installByTokenExchange, productUpdatePayload, shopifyTestApp } from './fixtures/shopify-app.ts';
import { startSmtpSink, type SinkMessage, type SmtpSink } from './fixtures/smtp-sink.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const { apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES, env: ENV } = shopifyTestApp('restock-unit-holds', 'read_products,read_inventory,read_orders,write_draft_orders');
const HOLD_MINUTES = 30;

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
    variants: [{ id: newId(), title: 'One size', inventoryItemId: newId(), inventoryQuantity: 0, sellableOnlineQuantity: 0, price: '40.00' }],
  };
}

const productGid = (product: FakeProduct) => `gid://shopify/Product/${product.id}`;
const variantGid = (product: FakeProduct) => `gid://shopify/ProductVariant/${product.variants[0]!.id}`;

/** The button's link in an alert's plain text ("<cta>: <url>"). */
function linkIn(mail: SinkMessage, cta: RegExp): string {
  const link = new RegExp(`${cta.source}: (\\S+)`).exec(mail.text)?.[1];
  assert.ok(link, `no link after ${cta} in: ${mail.text}`);
  return link;
}

describe('a unit held for the first in line', () => {
  const browserSkip = browserSkipReason();
  let browser: Browser | undefined;
  let shopify: ShopifyAdminStandIn;
  before(async () => {
    shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
    // Chromium reaches the stand-in's shops the way Node does: *.myshopify.com on its loopback port, its certificate self-signed.
    if (!browserSkip) browser = await launchBrowser({ args: [`--host-resolver-rules=MAP *.myshopify.com 127.0.0.1:${shopify.port}`, '--ignore-certificate-errors', ALLOW_PUBLIC_TO_LOOPBACK] });
  });
  after(async () => {
    await browser?.close();
    await shopify?.close();
  });

  for (const dialect of testDialects()) {
    describe(`on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
      let t: TestApp;
      let sink: SmtpSink;
      let agentToken: string;

      before(async () => {
        sink = await startSmtpSink();
        ({ t } = await startListeningTestApp(dialect, { ...ENV, SMTP_URL: sink.url, RECONCILE_INTERVAL_MINUTES: '0' }));
      });
      after(async () => {
        await t?.close();
        await sink?.close();
      });

      const shop = `holds-${dialect}-${newId()}.myshopify.com`;
      const owner = `owner@${shop}`;
      const plain = fakeProduct('Lamp');
      const held = fakeProduct('Kettle');
      const shoppersOf = (product: FakeProduct) => [1, 2, 3, 4, 5].map((n) => `s${n}-${product.id}-${dialect}@shoppers.test`);

      const api = (method: 'GET' | 'PATCH' | 'POST', url: string, body?: unknown) =>
        t.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${agentToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        });

      async function productChanged(product: FakeProduct, quantity: number) {
        product.variants[0]!.inventoryQuantity = quantity;
        product.variants[0]!.sellableOnlineQuantity = quantity;
        shopify.setProduct(shop, product);
        const res = await deliverWebhook(t, API_SECRET, { topic: 'products/update', shop, payload: productUpdatePayload(product, new Date().toISOString()) });
        assert.equal(res.statusCode, 200, res.body);
        await t.runWorker();
      }

      async function waitFor(product: FakeProduct) {
        await productChanged(product, 0);
        for (const email of shoppersOf(product)) {
          const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', payload: { shop, productId: productGid(product), variantId: variantGid(product), email } });
          assert.equal(res.statusCode, 201, res.body);
        }
      }

      const alertsOf = (product: FakeProduct) =>
        t.database.db.selectFrom('notifications').select(['id', 'email', 'status', 'batch']).where('store_domain', '=', shop).where('product_id', '=', productGid(product)).where('kind', '=', 'alert').orderBy('position').execute();
      const holdsOf = (product: FakeProduct) => t.database.db.selectFrom('unit_holds').selectAll().where('product_id', '=', productGid(product)).orderBy('created_at').orderBy('id').execute();
      const mailTo = (email: string, product: FakeProduct) => sink.waitFor((m) => m.recipients.includes(email) && m.subject.includes(product.title));
      const draftsOf = (product: FakeProduct) => shopify.draftOrders(shop).filter((draft) => draft.lines.some((line) => line.variantId === product.variants[0]!.id));

      it('the store installs the app and binds an agent', async () => {
        await installByTokenExchange(t, shopify, shop, owner);
        shopify.deliverOrdersTo(async (orderShop, payload) => {
          const res = await deliverWebhook(t, API_SECRET, { topic: 'orders/create', shop: orderShop, payload });
          assert.equal(res.statusCode, 200, res.body);
        });
        const agent = await registerAnonymousAgent(t.app);
        expectStatus(await requestCode(t.app, agent.claimToken, owner, shop), 200);
        const claimMail = await sink.waitFor((m) => m.recipients.includes(owner));
        agentToken = expectStatus(await submitCode(t.app, agent.claimToken, codeIn(claimMail.text)), 200).credential;
      });

      it("with the setting off, a restock of 2 for 5 waiting is today's batch: stock × multiplier, no unit held", async () => {
        const store = expectStatus(await api('GET', `/api/v1/stores/${shop}`), 200);
        assert.equal(store.settings.reserveUnitsMinutes, 0);
        await waitFor(plain);
        await productChanged(plain, 2);
        const alerts = await alertsOf(plain);
        assert.deepEqual(alerts.map((row) => row.status), ['sent', 'sent', 'sent', 'sent']);
        for (const email of shoppersOf(plain).slice(0, 4)) {
          const mail = await mailTo(email, plain);
          assert.doesNotMatch(mail.text, /reserved/i);
          assert.ok(linkIn(mail, /Shop now/));
        }
        assert.deepEqual(await holdsOf(plain), []);
        assert.deepEqual(draftsOf(plain), []);
      });

      let alertIds: string[] = [];
      it('with the setting on, the first batch is one shopper per unit, each alert saying the unit is reserved until …, each unit held at Shopify', async () => {
        const store = expectStatus(await api('PATCH', `/api/v1/stores/${shop}`, { reserveUnitsMinutes: HOLD_MINUTES }), 200);
        assert.equal(store.settings.reserveUnitsMinutes, HOLD_MINUTES);
        await waitFor(held);
        const before = Date.now();
        await productChanged(held, 2);

        const alerts = await alertsOf(held);
        assert.deepEqual(alerts.map((row) => [row.email, row.status]), shoppersOf(held).slice(0, 2).map((email) => [email, 'sent']));
        alertIds = alerts.map((row) => row.id);

        const holds = await holdsOf(held);
        assert.deepEqual(holds.map((hold) => [hold.notification_id, hold.status]).sort(), alertIds.map((id) => [id, 'held']).sort());
        const drafts = draftsOf(held);
        assert.equal(drafts.length, 2, 'two draft orders hold the two units');
        for (const draft of drafts) {
          assert.equal(draft.status, 'OPEN');
          assert.ok(draft.reserving);
          const until = Date.parse(draft.reserveInventoryUntil!);
          assert.ok(until >= before + (HOLD_MINUTES - 1) * 60_000 && until <= Date.now() + HOLD_MINUTES * 60_000, `held about ${HOLD_MINUTES} minutes: ${draft.reserveInventoryUntil}`);
          assert.deepEqual(draft.customAttributes, [{ key: 'restock_alert', value: holds.find((hold) => hold.hold_ref === draft.id)!.notification_id }]);
        }
        assert.equal(shopify.draftOrders(shop).length, 2);
        // Shopify took the held units from what is available to sell.
        assert.equal(stockAtShopify(held), 0);

        for (const email of shoppersOf(held).slice(0, 2)) {
          const mail = await mailTo(email, held);
          assert.match(mail.text, /One is reserved for you until \w+ \d+ at \d\d:\d\d UTC\. After that it goes to the next shopper in line\./);
          assert.match(mail.html ?? "", /reserved for you until/);
          const link = linkIn(mail, /Check out your reserved item/);
          assert.ok(link.startsWith(`${new URL(link).origin}/r/${shop}/`), `our click redirect: ${link}`);
        }
      });

      /** What Shopify reports available for the product's variant now. */
      function stockAtShopify(product: FakeProduct): number {
        return shopify.variantQuantity(shop, product.variants[0]!.id);
      }

      it('the first shopper follows the link in Chromium, checks out the held unit, and the order is credited to the alert as direct', { skip: browserSkip }, async () => {
        const [first] = shoppersOf(held);
        const link = linkIn(await mailTo(first!, held), /Check out your reserved item/);
        const page = await browser!.newPage();
        try {
          await page.goto(link);
          assert.match(new URL(page.url()).pathname, /^\/\d+\/invoices\/[0-9a-f]+$/, `landed on the draft order's invoice: ${page.url()}`);
          assert.match(await page.textContent('#items') ?? '', new RegExp(held.title));
          // Shopify's order times have whole seconds: the shopper pays a moment after the click, as people do.
          await page.waitForTimeout(1100);
          await Promise.all([page.waitForLoadState('load'), page.click('#pay')]);
          await page.waitForSelector('#order');
        } finally {
          await page.close();
        }
        await t.runWorker();
        const clicks = await t.database.db.selectFrom('alert_clicks').select('notification_id').where('notification_id', '=', alertIds[0]!).execute();
        assert.equal(clicks.length, 1, 'the click was counted');
        const attributed = await t.database.db.selectFrom('order_attributions').select(['notification_id', 'kind']).where('store_domain', '=', shop).where('product_id', '=', productGid(held)).execute();
        assert.deepEqual(attributed, [{ notification_id: alertIds[0], kind: 'direct' }]);
        const completed = shopify.draftOrders(shop).find((draft) => draft.customAttributes[0]?.value === alertIds[0]);
        assert.equal(completed?.status, 'COMPLETED');
      });

      it('the other hold expires unclaimed: released at Shopify, and the next shoppers are alerted', async () => {
        const past = new Date(Date.now() - 60_000).toISOString();
        await t.database.db.updateTable('unit_holds').set({ expires_at: past }).where('notification_id', 'in', alertIds).execute();
        await t.runWorker();

        const holds = await holdsOf(held);
        const second = holds.find((hold) => hold.notification_id === alertIds[1])!;
        assert.equal(second.status, 'released');
        assert.ok(!shopify.draftOrders(shop).some((draft) => draft.id === second.hold_ref), 'its draft order was deleted');
        // A unit bought through its hold is not released: the shopper's order keeps it.
        const first = holds.find((hold) => hold.notification_id === alertIds[0])!;
        assert.equal(first.status, browserSkip ? 'released' : 'claimed');
        assert.equal(stockAtShopify(held), browserSkip ? 2 : 1, 'the released unit is on sale again at Shopify');

        const third = shoppersOf(held)[2]!;
        const next = await mailTo(third, held);
        assert.doesNotMatch(next.text, /reserved/i, 'only the first batch holds units');
        const alerts = await alertsOf(held);
        assert.ok(alerts.some((row) => row.email === third && row.status === 'sent' && row.batch === 2), 'the next shopper was alerted in the next batch');
      });

      it('a hold Shopify refuses (fewer units there than reported) leaves that alert an ordinary one, recorded as failed', async () => {
        const short = fakeProduct('Teapot');
        await waitFor(short);
        // Shopify has 1 to sell while the store's agent reports 2 (a sale in between): the second draft order cannot reserve a unit.
        short.variants[0]!.inventoryQuantity = 1;
        short.variants[0]!.sellableOnlineQuantity = 1;
        shopify.setProduct(shop, short);
        expectStatus(await api('POST', `/api/v1/stores/${shop}/inventory`, { items: [{ productId: productGid(short), variantId: variantGid(short), available: 2, productTitle: short.title }] }), 200);
        await t.runWorker();

        const holds = await holdsOf(short);
        assert.deepEqual(holds.map((hold) => hold.status).sort(), ['failed', 'held']);
        assert.match(holds.find((hold) => hold.status === 'failed')!.outcome ?? '', /Shopify refused the draft order: Not enough inventory available to reserve/);
        assert.equal(draftsOf(short).length, 1);
        const mails = await Promise.all(shoppersOf(short).slice(0, 2).map((email) => mailTo(email, short)));
        assert.deepEqual(mails.map((mail) => /reserved for you/.test(mail.text)).sort(), [false, true]);
      });

      it("the stand-in refuses what Shopify refuses: a reservation ending in the past, a variant it cannot cover, deleting a completed draft order", async () => {
        const token = shopify.accessToken(shop)!;
        const graphql = async (query: string, variables: Record<string, unknown>) => {
          const res = await fetch(`https://${shop}/admin/api/2026-07/graphql.json`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-shopify-access-token': token }, body: JSON.stringify({ query, variables }) });
          return ((await res.json()) as { data: Record<string, { userErrors: Array<{ message: string }> }> }).data;
        };
        const create = `mutation($input: DraftOrderInput!) { draftOrderCreate(input: $input) { draftOrder { id } userErrors { field message } } }`;
        const line = { variantId: variantGid(held), quantity: 1 };
        const past = await graphql(create, { input: { lineItems: [line], reserveInventoryUntil: new Date(Date.now() - 1000).toISOString() } });
        assert.deepEqual(past.draftOrderCreate!.userErrors.map((error) => error.message), ['Reserve inventory until must be in the future']);
        const tooMany = await graphql(create, { input: { lineItems: [{ ...line, quantity: 99 }], reserveInventoryUntil: new Date(Date.now() + 60_000).toISOString() } });
        assert.match(tooMany.draftOrderCreate!.userErrors[0]!.message, /Not enough inventory available to reserve/);
        const completed = shopify.draftOrders(shop).find((draft) => draft.status === 'COMPLETED');
        if (completed) {
          const refused = await graphql(`mutation($input: DraftOrderDeleteInput!) { draftOrderDelete(input: $input) { deletedId userErrors { message } } }`, { input: { id: completed.id } });
          assert.equal(refused.draftOrderDelete!.userErrors.length, 1);
        }
      });
    });
  }
});
