/**
 * A Vendure store end to end against a real Vendure server (test/fixtures/vendure.ts), set up as
 * docs/install-vendure.md says, on each of Restock's databases: connected in the dashboard with
 * an API key made by the guide's documents, the plugin installed from its packed file; a variant
 * at stock 0, a shopper signs up through the widget on a storefront page, the merchant restocks
 * in the Admin API, the alert arrives, its link lands on the product, the shopper orders through
 * the Shop API and the revenue shows in the dashboard and getPerformance; a forged delivery
 * changes nothing; a restock the plugin did not tell of is caught by reconciliation.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { agentOfMailed, call, createStore, uniqueEmail } from './fixtures/agents.ts';
import { eventually } from './fixtures/network.ts';
import { browserSkipReason, launchBrowser, startPageServer } from './fixtures/browser.ts';
import { csrfOf, getPage, postForm, SIGN_IN, sessionCookie } from './fixtures/dashboard.ts';
import { mailSystemSkipReason, startMailSystem, type MailSystem } from './fixtures/mail-system.ts';
import { startVendureShop, vendureSkipReason, type PluginSettings, type VendureShop } from './fixtures/vendure.ts';
import type { VendureService } from '../src/vendure/service.ts';

const skip = vendureSkipReason() ?? browserSkipReason() ?? mailSystemSkipReason();

/**
 * What `probe` finds once it finds something, polled with the project's `eventually`: the plugin
 * delivers in the background, after Vendure's transaction commits.
 */
async function found<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  let value: T | undefined;
  await eventually(async () => (value = await probe()) !== undefined, what, 20_000);
  return value as T;
}

for (const dialect of testDialects()) {
  describe(`A Vendure store on ${dialect}`, { skip: dialectSkip(dialect) ?? skip }, () => {
    let t: TestApp;
    let base: string;
    let mail: MailSystem;
    let shop: VendureShop;
    let storefront: Awaited<ReturnType<typeof startPageServer>>;
    const domain = `vendure-${randomBytes(3).toString('hex')}.example.com`;
    const owner = uniqueEmail('vendure-owner');
    let settings: PluginSettings;

    before(async () => {
      mail = await startMailSystem();
      ({ t, base } = await startListeningTestApp(dialect, { SMTP_URL: mail.smtpUrl, RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), RECONCILE_INTERVAL_MINUTES: '0' }));
      storefront = await startPageServer();
      shop = await startVendureShop();
    });
    after(async () => {
      await shop?.stop();
      await storefront?.close();
      await t?.close();
    });

    /** The owner signs in by the link mailed to them, as read from the mail sink. */
    async function signIn(): Promise<string> {
      const links = signInLinks.size;
      assert.equal((await postForm(t, SIGN_IN, { shop: domain })).statusCode, 200);
      let link: RegExpExecArray | null = null;
      await mail.waitForMessage({
        to: owner,
        where: (m) => {
          link = /\/dashboard\/sign-in\/[A-Za-z0-9_-]+/.exec(m.text ?? '');
          return link !== null && !signInLinks.has(link[0]) && signInLinks.size === links;
        },
      });
      assert.ok(link);
      signInLinks.add(link[0]);
      const used = await postForm(t, link[0], {});
      assert.equal(used.statusCode, 303, used.body);
      return sessionCookie(used)!;
    }

    /**
     * The tables once the plugin's own deliveries have stopped arriving: Vendure may tell of one
     * change twice (a variant made, then its stock), and the second delivery rewrites the row's
     * `updated_at` after the first one was already seen. Quiet means unchanged over a second.
     */
    async function settledDigests(): Promise<Record<string, string>> {
      let last = await t.tableDigests();
      await eventually(async () => {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const now = await t.tableDigests();
        const quiet = JSON.stringify(now) === JSON.stringify(last);
        last = now;
        return quiet;
      }, "the plugin's deliveries settled", 20_000);
      return last;
    }

    const signInLinks = new Set<string>();
    const vendure = () => t.app.restock.platforms.vendure!.service as VendureService;

    async function variantAt(stock: number, name: string): Promise<{ productId: string; variantId: string; slug: string }> {
      const slug = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(2).toString('hex')}`;
      const product = await shop.admin(`mutation ($slug: String!, $name: String!) { createProduct(input: { translations: [{ languageCode: en, name: $name, slug: $slug, description: "" }] }) { id } }`, { slug, name });
      const productId = product.createProduct.id as string;
      const variants = await shop.admin(
        `mutation ($productId: ID!, $sku: String!, $stock: Int!, $name: String!) { createProductVariants(input: [{ productId: $productId, sku: $sku, price: 4500, stockOnHand: $stock, trackInventory: TRUE, translations: [{ languageCode: en, name: $name }] }]) { id } }`,
        { productId, sku: slug, stock, name },
      );
      return { productId, variantId: variants.createProductVariants[0].id as string, slug };
    }

    const setStock = (variantId: string, stock: number) => shop.admin(`mutation ($id: ID!, $stock: Int!) { updateProductVariants(input: [{ id: $id, stockOnHand: $stock }]) { id } }`, { id: variantId, stock });

    const stockOf = (variantId: string) =>
      t.database.db.selectFrom('inventory_variants').select(['available', 'product_url']).where('store_domain', '=', domain).where('variant_id', '=', `gid://vendure/ProductVariant/${variantId}`).executeTakeFirst();

    it('connects in the dashboard with the API key the guide makes, and the plugin starts with the settings it shows', async () => {
      await createStore(t.database, domain, owner, 'vendure');
      const apiKey = await shop.createRestockApiKey();
      await shop.seedCheckout();
      const cookie = await signIn();
      const page = await getPage(t, '/dashboard/vendure', cookie);
      assert.equal(page.statusCode, 200, page.body);
      const made = await postForm(t, '/dashboard/vendure', { csrf: csrfOf(page.body), adminApiUrl: shop.adminApiUrl, apiKey, productUrl: `${storefront.url}/products/{slug}` }, cookie);
      assert.equal(made.statusCode, 200, made.body);
      const shown = /<pre data-vendure-settings>([\s\S]*?)<\/pre>/.exec(made.body);
      assert.ok(shown, made.body);
      settings = Object.fromEntries(shown[1]!.split('\n').map((line) => line.split(/=(.*)/s).slice(0, 2))) as unknown as PluginSettings;
      assert.equal(settings.RESTOCK_URL, base);
      assert.equal(settings.RESTOCK_STORE, domain);
      assert.match(settings.RESTOCK_SIGNING_SECRET, /^whsec_/);
      await shop.restart({ plugin: settings });
      assert.match(shop.log(), new RegExp(`Telling Restock at ${base.replace(/[.:/]/g, '\\$&')} of ${domain.replace(/\./g, '\\.')}'s stock and orders`));
    });

    it('a variant made at stock 0 is read back as sold out; a shopper signs up on the storefront page; a restock in Vendure alerts them; their click lands on the product; their order counts', async () => {
      const boots = await variantAt(0, 'Crème Boots');
      // No stock movement for a variant made at 0: the variant's own event, read back.
      const known = await found('the new variant read back', async () => (await stockOf(boots.variantId)) ?? undefined);
      assert.equal(known.available, 0);
      assert.equal(known.product_url, `${storefront.url}/products/${boots.slug}`);

      const shopper = uniqueEmail('vendure-shopper');
      storefront.setPage(
        `/products/${boots.slug}`,
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Boots</title></head><body><h1>Crème Boots</h1><script src="${base}/widget.js" defer data-shop="${domain}" data-platform="vendure" data-product="gid://vendure/Product/${boots.productId}" data-variant="gid://vendure/ProductVariant/${boots.variantId}"></script></body></html>`,
      );
      const browser = await launchBrowser();
      try {
        const tab = await browser.newPage();
        await tab.goto(`${storefront.url}/products/${boots.slug}`);
        await tab.locator('restock-widget input[type="email"]').fill(shopper, { timeout: 15_000 });
        await tab.locator('restock-widget button[type="submit"]').click();
        await tab.locator('restock-widget [role="status"]').filter({ hasText: /./ }).waitFor({ timeout: 15_000 });
      } finally {
        await browser.close();
      }
      const waiting = await t.database.db.selectFrom('subscriptions').select(['id', 'status']).where('store_domain', '=', domain).where('email', '=', shopper).executeTakeFirst();
      assert.equal(waiting?.status, 'active');

      // The merchant restocks in Vendure; the plugin tells of a change, and Restock reads 5 back.
      await setStock(boots.variantId, 5);
      await found('the restock read back', async () => ((await stockOf(boots.variantId))?.available === 5 ? true : undefined));
      await t.runWorker();
      // Through Postfix, read back from Dovecot over IMAP.
      const alert = await mail.waitForMessage(shopper);
      assert.match(alert.subject, /Crème Boots/);
      assert.ok(alert.header('list-unsubscribe-post'), 'one-click unsubscribe is offered');

      const link = /Shop now: (\S+)/.exec(alert.text ?? '');
      assert.ok(link, alert.text);
      const click = await fetch(link[1]!, { redirect: 'manual', headers: { accept: 'text/html', 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0' } });
      assert.equal(click.status, 302);
      assert.ok(click.headers.get('location')!.startsWith(`${storefront.url}/products/${boots.slug}`), click.headers.get('location')!);

      // The shopper orders through the Shop API, as the storefront would.
      const cart = shop.shopper();
      await cart(`mutation ($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 2) { ... on Order { id } ... on ErrorResult { message } } }`, { id: boots.variantId });
      await cart(`mutation ($email: String!) { setCustomerForOrder(input: { emailAddress: $email, firstName: "Ada", lastName: "Shopper" }) { ... on Order { id } ... on ErrorResult { message } } }`, { email: shopper });
      await cart(`mutation { setOrderShippingAddress(input: { streetLine1: "1 rue de la Paix", city: "Paris", postalCode: "75002", countryCode: "FR" }) { ... on Order { id } ... on ErrorResult { message } } }`);
      const methods = await cart(`query { eligibleShippingMethods { id } }`);
      await cart(`mutation ($ids: [ID!]!) { setOrderShippingMethod(shippingMethodId: $ids) { ... on Order { id } ... on ErrorResult { message } } }`, { ids: [methods.eligibleShippingMethods[0].id] });
      await cart(`mutation { transitionOrderToState(state: "ArrangingPayment") { ... on Order { id } ... on OrderStateTransitionError { message transitionError } } }`);
      const paid = await cart(`mutation { addPaymentToOrder(input: { method: "card", metadata: {} }) { ... on Order { id code state totalWithTax lines { id proratedLinePriceWithTax } payments { id } } ... on ErrorResult { message } } }`);
      assert.equal(paid.addPaymentToOrder.state, 'PaymentSettled', JSON.stringify(paid));
      const lineTotal = paid.addPaymentToOrder.lines[0].proratedLinePriceWithTax as number;
      // The order holds two of the five (allocated): Vendure sells three more, and so Restock reads.
      await found('the allocation read back', async () => ((await stockOf(boots.variantId))?.available === 3 ? true : undefined));

      // The owner's inbox also holds their dashboard sign-in links: the claim code is the other mail.
      const agent = await agentOfMailed(t.app, { waitFor: (match) => mail.waitForMessage({ to: owner, where: (m) => !(m.text ?? '').includes('/dashboard/sign-in/') && match({ recipients: [owner], text: m.text ?? '' }) }).then((m) => ({ text: m.text ?? '' })) }, domain, owner);
      const performance: { orders: { direct: number }; revenue: unknown } = await found('the order counted', async () => {
        const res = await call(t.app, 'GET', `/api/v1/stores/${domain}/performance`, { token: agent.token });
        assert.equal(res.statusCode, 200, res.body);
        return res.json().orders.total === 1 ? res.json() : undefined;
      });
      assert.equal(performance.orders.direct, 1, 'the shopper clicked before ordering');
      assert.deepEqual(performance.revenue, [{ minor: lineTotal, currency: 'USD' }]);
      const cookie = await signIn();
      const dashboard = await getPage(t, '/dashboard', cookie);
      assert.equal(dashboard.statusCode, 200);
      const shownTotal = (lineTotal / 100).toFixed(2);
      assert.ok(dashboard.body.includes(shownTotal), `the dashboard shows ${shownTotal} won back`);

      // The merchant refunds one of the two pairs: the plugin tells of the settled refund, and half goes back.
      const order = paid.addPaymentToOrder;
      const refunded = await shop.admin(
        `mutation ($line: ID!, $payment: ID!) { refundOrder(input: { lines: [{ orderLineId: $line, quantity: 1 }], shipping: 0, adjustment: 0, paymentId: $payment, reason: "one pair back" }) { ... on Refund { id state } ... on ErrorResult { message } } }`,
        { line: order.lines[0].id, payment: order.payments[0].id },
      );
      // The test's payment method refunds by hand, as a bank transfer would: the merchant marks it settled.
      const settled = await shop.admin(`mutation ($id: ID!) { settleRefund(input: { id: $id, transactionId: "bank-1" }) { ... on Refund { state } ... on ErrorResult { message } } }`, { id: refunded.refundOrder.id });
      assert.equal(settled.settleRefund.state, 'Settled', JSON.stringify(settled));
      await found('the refund counted', async () => {
        const res = await call(t.app, 'GET', `/api/v1/stores/${domain}/performance`, { token: agent.token });
        return res.json().revenue[0]?.minor === lineTotal / 2 ? true : undefined;
      });
      // Cancelled, the order keeps its credit and its revenue is 0.
      const cancelled = await shop.admin(`mutation ($id: ID!) { cancelOrder(input: { orderId: $id, reason: "changed mind", cancelShipping: true }) { ... on Order { state } ... on ErrorResult { message } } }`, { id: order.id });
      assert.equal(cancelled.cancelOrder.state, 'Cancelled', JSON.stringify(cancelled));
      await found('the cancellation counted', async () => {
        const res = await call(t.app, 'GET', `/api/v1/stores/${domain}/performance`, { token: agent.token });
        const figures = res.json();
        return figures.orders.total === 1 && (figures.revenue[0]?.minor ?? 0) === 0 ? true : undefined;
      }).catch(async (err) => {
        const res = await call(t.app, 'GET', `/api/v1/stores/${domain}/performance`, { token: agent.token });
        const orders = await t.database.db.selectFrom("orders").selectAll().execute();
        throw new Error(`${JSON.stringify(orders)} ${(err as Error).message}: ${JSON.stringify(res.json().revenue)} ${JSON.stringify(res.json().orders)}\n${shop.log().split('\n').filter((line) => /Restock/.test(line)).join('\n')}`);
      });
    });

    it("reads each variant as Vendure itself sells it: tracking, thresholds (its own, the shop's, a negative one) and disabled variants", async () => {
      const cases = [
        { name: 'Tracked with stock', input: { stockOnHand: 3, trackInventory: 'TRUE' } },
        { name: 'At its own threshold', input: { stockOnHand: 2, trackInventory: 'TRUE', useGlobalOutOfStockThreshold: false, outOfStockThreshold: 2 } },
        { name: 'Sold on backorder', input: { stockOnHand: 0, trackInventory: 'TRUE', useGlobalOutOfStockThreshold: false, outOfStockThreshold: -5 } },
        { name: 'Not tracked', input: { stockOnHand: 0, trackInventory: 'FALSE' } },
        { name: 'Tracked as the shop says', input: { stockOnHand: 0, trackInventory: 'INHERIT' } },
        { name: 'Disabled', input: { stockOnHand: 5, trackInventory: 'TRUE', enabled: false } },
      ];
      for (const { name, input } of cases) {
        const slug = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(2).toString('hex')}`;
        const product = await shop.admin(`mutation ($slug: String!, $name: String!) { createProduct(input: { translations: [{ languageCode: en, name: $name, slug: $slug, description: "" }] }) { id } }`, { slug, name });
        const made = await shop.admin(`mutation ($input: [CreateProductVariantInput!]!) { createProductVariants(input: $input) { id } }`, {
          input: [{ productId: product.createProduct.id, sku: slug, price: 1000, translations: [{ languageCode: 'en', name }], ...input }],
        });
        const variantId = made.createProductVariants[0].id as string;
        const read = await found(`${name} read back`, () =>
          t.database.db.selectFrom('inventory_variants').select(['available', 'published', 'purchasable_without_stock']).where('store_domain', '=', domain).where('variant_id', '=', `gid://vendure/ProductVariant/${variantId}`).executeTakeFirst(),
        );
        const soldOutForRestock = read.published === 0 || (read.purchasable_without_stock === 0 && read.available === 0);
        // Vendure's own word: can a shopper put one in a cart now?
        const cart = shop.shopper();
        const added = await cart(`mutation ($id: ID!) { addItemToOrder(productVariantId: $id, quantity: 1) { __typename ... on ErrorResult { errorCode } } }`, { id: variantId }).catch((err: Error) => ({ addItemToOrder: { __typename: 'Refused', errorCode: err.message } }));
        const soldOutForVendure = added.addItemToOrder.__typename !== 'Order';
        assert.equal(soldOutForRestock, soldOutForVendure, `${name}: Restock read ${JSON.stringify(read)}, Vendure answered ${JSON.stringify(added)}`);
      }
    });

    it('a forged delivery changes nothing', async () => {
      const before = await settledDigests();
      const body = JSON.stringify({ type: 'variants.changed', variantIds: ['1'] });
      const forged = await fetch(`${base}/webhooks/vendure/${domain}`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': `v1,${randomBytes(32).toString('base64')}` },
      });
      assert.equal(forged.status, 401);
      assert.match(forged.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.deepEqual(await t.tableDigests(), before);

      // Signed with the store's own secret, but ten minutes old: a replay, refused as well.
      const { Webhook } = await import('standardwebhooks');
      const then = new Date(Date.now() - 10 * 60_000);
      const stale = await fetch(`${base}/webhooks/vendure/${domain}`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'webhook-id': 'msg_replayed', 'webhook-timestamp': String(Math.floor(then.getTime() / 1000)), 'webhook-signature': new Webhook(settings.RESTOCK_SIGNING_SECRET).sign('msg_replayed', then, body) },
      });
      assert.equal(stale.status, 401);
      assert.match((await stale.json()).detail, /webhook-timestamp/);
    });

    it('a restock made while the plugin is stopped is caught by reconciliation', async () => {
      const scarf = await variantAt(0, 'Scarf');
      await found('the new variant read back', async () => (await stockOf(scarf.variantId)) ?? undefined);
      const shopper = uniqueEmail('vendure-late');
      const signed = await t.post('/api/v1/alerts/subscribe', { shop: domain, productId: `gid://vendure/Product/${scarf.productId}`, variantId: `gid://vendure/ProductVariant/${scarf.variantId}`, email: shopper });
      assert.equal(signed.statusCode, 200, signed.body);
      await shop.restart({});
      await setStock(scarf.variantId, 3);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal((await stockOf(scarf.variantId))?.available, 0, 'nothing told Restock');
      assert.ok((await vendure().reconcileStore(domain)) >= 1);
      assert.equal((await stockOf(scarf.variantId))?.available, 3);
      await t.runWorker();
      await mail.waitForMessage(shopper);
    });

    it('the guide’s uninstall command ends the connection; the plugin’s later deliveries are refused', async () => {
      const ran = await shop.run('npx', ['--no-install', 'restock-vendure-disconnect'], { ...settings });
      assert.equal(ran.status, 0, ran.output);
      const row = await t.database.db.selectFrom('store_connections').select(['status', 'disconnect_reason', 'credentials_sealed']).where('store_domain', '=', domain).executeTakeFirstOrThrow();
      assert.equal(row.status, 'disconnected');
      assert.match(row.disconnect_reason ?? '', /uninstalled/);
      assert.equal(row.credentials_sealed, null, 'the API key is forgotten');
      const again = await shop.run('npx', ['--no-install', 'restock-vendure-disconnect'], { ...settings });
      assert.notEqual(again.status, 0, 'a second uninstall is refused: the store is no longer connected');
      assert.match(again.output, /404/);
    });
  });
}
