/**
 * The dashboard's WooCommerce page, on each database, against the stand-in site: shown to a
 * WooCommerce store's owner only; keys pasted connect the store (the site then holds the
 * webhooks), keys the site refuses are shown beside the field and store nothing, the approval
 * button leads to the site's own approval page, disconnecting deletes the webhooks, and every form
 * needs the session's CSRF token.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, postsToApp, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { startWooCommerce, type WooCommerceStandIn } from './fixtures/woocommerce.ts';
import { assertHtml, csrfOf, getPage, postForm, signIn } from './fixtures/dashboard.ts';

failOnLeakedHandles();

// WooCommerce posts approved keys only to an https:// callback.
const BASE = 'https://restock.test';
const UNLIMITED = { SIGN_IN_LIMIT_PER_HOUR: '1000000', STOREFRONT_LIMIT_PER_HOUR: '1000000' };
const PAGE = '/dashboard/woocommerce';

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newEmail = (who: string) => `${who}-${unique()}@example.com`;
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** A store of the platform, its owner signed in. */
async function signedInStore(t: TestApp, platform: 'woocommerce' | 'shopify') {
  const shop = platform === 'woocommerce' ? `shop-${unique()}.example.com` : `dash-${unique()}.myshopify.com`;
  const owner = newEmail('owner');
  await t.app.restock.stores.createStore(shop, owner, platform);
  return { shop, cookie: await signIn(t, shop, owner) };
}

/** A local address nothing listens on: a site that cannot be reached. */
async function closedAddress(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

for (const dialect of testDialects()) {
  describe(`the dashboard's WooCommerce page on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let site: WooCommerceStandIn;

    before(async () => {
      t = await startTestApp(dialect, { ...UNLIMITED, BASE_URL: BASE, RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), RECONCILE_INTERVAL_MINUTES: '0' });
      // What the site sends to the service's address (webhook pings, approved keys) arrives as a request to the app.
      site = await startWooCommerce(postsToApp(t));
    });
    after(async () => {
      await site?.close();
      await t?.close();
    });

    /** Pastes keys in the form, as the owner would after loading the page. */
    async function paste(cookie: string, fields: Record<string, string>) {
      const csrf = csrfOf((await getPage(t, PAGE, cookie)).body);
      return postForm(t, PAGE, { csrf, ...fields }, cookie);
    }

    const webhooksFor = (shop: string) => [...site.webhooks.values()].filter((webhook) => webhook.delivery_url === `${BASE}/webhooks/woocommerce/${shop}`);

    it("shows a WooCommerce store's owner the page and its navigation entry: never connected, the form and how to make keys", async () => {
      const { cookie } = await signedInStore(t, 'woocommerce');
      const overview = await getPage(t, '/dashboard', cookie);
      assertHtml(overview, 200);
      assert.match(overview.body, /<a href="\/dashboard\/woocommerce">WooCommerce<\/a>/);
      const res = await getPage(t, PAGE, cookie);
      assertHtml(res, 200);
      assert.match(res.body, /<a href="\/dashboard\/woocommerce" aria-current="page">WooCommerce<\/a>/);
      assert.match(res.body, /data-woocommerce-state="never"/);
      assert.match(res.body, /WooCommerce &gt; Settings &gt; Advanced &gt; REST API<\/strong> and choose <strong>Add key/);
      assert.match(res.body, /Read\/Write/);
      assert.match(res.body, /<label for="woo-siteUrl">Site address<\/label>/);
      assert.match(res.body, /<label for="woo-consumerKey">Consumer key<\/label>/);
      assert.match(res.body, /<input id="woo-consumerSecret" name="consumerSecret" type="password" value="" autocomplete="off"/);
      assert.match(res.body, /<button class="quiet" type="submit" formaction="\/dashboard\/woocommerce\/authorize">Approve on my site instead<\/button>/);
      assert.doesNotMatch(res.body, /Disconnect<\/button>/, 'nothing to disconnect');
      // The page reads its own query: what it does not know is the owner's 400, not a 500.
      assertHtml(await getPage(t, `${PAGE}?done=exploded`, cookie), 400);
    });

    it('a Shopify store has no such page: 404 for the page and its forms, no navigation entry, nothing changed', async () => {
      const { cookie } = await signedInStore(t, 'shopify');
      const overview = await getPage(t, '/dashboard', cookie);
      assertHtml(overview, 200);
      assert.doesNotMatch(overview.body, /\/dashboard\/woocommerce/);
      const csrf = csrfOf(overview.body);
      assertHtml(await getPage(t, PAGE, cookie), 404);
      const before = await t.tableDigests();
      const requests = site.requests.length;
      for (const [url, fields] of [
        [PAGE, { siteUrl: site.url, ...site.makeKeys() }],
        [`${PAGE}/authorize`, { siteUrl: site.url }],
        [`${PAGE}/disconnect`, {}],
      ] as const) {
        assertHtml(await postForm(t, url, { csrf, ...fields }, cookie), 404);
      }
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal(site.requests.length, requests, 'the site was never called');
    });

    it('pasting keys the site accepts connects the store: the webhooks are made on the site, and the page says connected', async () => {
      const { shop, cookie } = await signedInStore(t, 'woocommerce');
      const keys = site.makeKeys();
      const res = await paste(cookie, { siteUrl: site.url, ...keys });
      assert.equal(res.statusCode, 303, res.body);
      assert.equal(res.headers.location, `${PAGE}?done=connected`);
      const made = webhooksFor(shop);
      assert.deepEqual(made.map((webhook) => webhook.topic).sort(), ['product.created', 'product.restored', 'product.updated']);
      for (const webhook of made) assert.equal(webhook.failures, 0, 'the ping was answered');

      const shown = await getPage(t, res.headers.location, cookie);
      assertHtml(shown, 200);
      assert.match(shown.body, /role="status" class="status-sent">Connected/);
      assert.match(shown.body, /data-woocommerce-state="connected"[^>]*>Connected</);
      assert.match(shown.body, new RegExp(`<dt>Site</dt><dd>${escaped(site.url)}/?</dd>`));
      assert.match(shown.body, /<dt>Connected<\/dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC<\/dd>/);
      assert.match(shown.body, /<dt>Last reconciled<\/dt><dd>not yet<\/dd>/);
      assert.match(shown.body, /Disconnect<\/button>/);
      assert.equal(shown.body.includes(keys.consumerSecret), false, 'the secret is never shown back');
      assert.equal(shown.body.includes(keys.consumerKey), false, 'nor the key');
    });

    it('keys the site refuses, malformed keys and a plain-http site are shown beside their field with 400; nothing is stored', async () => {
      const { shop, cookie } = await signedInStore(t, 'woocommerce');
      const secret = `cs_${'1'.repeat(40)}`;
      const cases: Array<[string, Record<string, string>, RegExp]> = [
        ['consumerKey', { siteUrl: site.url, consumerKey: `ck_${'0'.repeat(40)}`, consumerSecret: secret }, /was refused by the site \(woocommerce_rest_cannot_view\)/],
        ['consumerKey', { siteUrl: site.url, ...site.makeKeys('read') }, /was refused by the site \(woocommerce_rest_authentication_error\): the keys need read\/write access/],
        ['consumerKey', { siteUrl: site.url, consumerKey: 'ck_short', consumerSecret: secret }, /must be a WooCommerce consumer key/],
        ['consumerSecret', { siteUrl: site.url, consumerKey: `ck_${'0'.repeat(40)}` }, /must be a WooCommerce consumer secret/],
        ['siteUrl', { siteUrl: 'http://shop.example.com', consumerKey: `ck_${'0'.repeat(40)}`, consumerSecret: secret }, /must be an https:\/\/ address/],
      ];
      const csrf = csrfOf((await getPage(t, PAGE, cookie)).body);
      const before = await t.tableDigests();
      for (const [field, fields, message] of cases) {
        const res = await postForm(t, PAGE, { csrf, ...fields }, cookie);
        assertHtml(res, 400);
        const what = `${field} ${JSON.stringify(fields)}`;
        assert.match(res.body, new RegExp(`id="woo-${field}"[^>]* aria-invalid="true"`), what);
        const error = new RegExp(`<p class="error" id="woo-${field}-error">([^<]*)</p>`).exec(res.body);
        assert.ok(error, what);
        assert.match(error[1]!, message, what);
        assert.match(res.body, /role="alert" class="error">Nothing was connected/);
        // What was typed comes back, except the secret.
        assert.match(res.body, new RegExp(`name="siteUrl" type="url" value="${escaped(fields.siteUrl!)}"`), what);
        assert.match(res.body, new RegExp(`name="consumerKey" type="text" value="${escaped(fields.consumerKey!)}"`), what);
        assert.match(res.body, /name="consumerSecret" type="password" value=""/, what);
        assert.equal(res.body.includes(fields.consumerSecret ?? secret), false, what);
        assert.ok(csrfOf(res.body), 'the form can be sent again');
      }
      assert.deepEqual(await t.tableDigests(), before);
      assert.deepEqual(webhooksFor(shop), []);
    });

    it('a site that cannot be reached is said above the form with 502, never a 500; nothing is stored', async () => {
      const { cookie } = await signedInStore(t, 'woocommerce');
      const unreachable = await closedAddress();
      const csrf = csrfOf((await getPage(t, PAGE, cookie)).body);
      const before = await t.tableDigests();
      const res = await postForm(t, PAGE, { csrf, siteUrl: unreachable, ...site.makeKeys() }, cookie);
      assertHtml(res, 502);
      assert.match(res.body, new RegExp(`<p class="error">The WooCommerce site at ${escaped(unreachable)}/?: the site could not be reached[^<]*Nothing was stored\\.</p>`));
      assert.match(res.body, new RegExp(`name="siteUrl" type="url" value="${escaped(unreachable)}"`));
      assert.deepEqual(await t.tableDigests(), before);
    });

    it("the approval button answers 303 to the site's /wc-auth/v1/authorize; approving there connects the store", async () => {
      const { shop, cookie } = await signedInStore(t, 'woocommerce');
      const csrf = csrfOf((await getPage(t, PAGE, cookie)).body);
      const before = await t.tableDigests();
      const res = await postForm(t, `${PAGE}/authorize`, { csrf, siteUrl: site.url }, cookie);
      assert.equal(res.statusCode, 303, res.body);
      const approval = new URL(res.headers.location!);
      assert.equal(`${approval.origin}${approval.pathname}`, `${site.url}/wc-auth/v1/authorize`);
      assert.equal(approval.searchParams.get('scope'), 'read_write');
      assert.equal(approval.searchParams.get('callback_url'), `${BASE}/woocommerce/keys`);
      assert.deepEqual(await t.tableDigests(), before, 'nothing is stored before the site posts the keys');

      const approved = await site.approve(approval.href);
      assert.equal(approved.status, 302, approved.body);
      assert.equal(webhooksFor(shop).length, 3);
      const shown = await getPage(t, PAGE, cookie);
      assert.match(shown.body, /data-woocommerce-state="connected"/);

      // A site address the service refuses is shown beside the field, and leads nowhere.
      const refused = await postForm(t, `${PAGE}/authorize`, { csrf, siteUrl: 'http://shop.example.com' }, cookie);
      assertHtml(refused, 400);
      assert.match(refused.body, /<p class="error" id="woo-siteUrl-error">must be an https:\/\/ address/);
    });

    it('disconnecting deletes the webhooks on the site; the page then says disconnected, and why', async () => {
      const { shop, cookie } = await signedInStore(t, 'woocommerce');
      assert.equal((await paste(cookie, { siteUrl: site.url, ...site.makeKeys() })).statusCode, 303);
      assert.equal(webhooksFor(shop).length, 3);
      const page = await getPage(t, PAGE, cookie);
      const res = await postForm(t, `${PAGE}/disconnect`, { csrf: csrfOf(page.body) }, cookie);
      assert.equal(res.statusCode, 303, res.body);
      assert.equal(res.headers.location, `${PAGE}?done=disconnected`);
      assert.deepEqual(webhooksFor(shop), []);
      const shown = await getPage(t, res.headers.location, cookie);
      assertHtml(shown, 200);
      assert.match(shown.body, /data-woocommerce-state="disconnected"[^>]*>Disconnected</);
      assert.match(shown.body, /<dt>Disconnected<\/dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC: disconnected by the store<\/dd>/);
      assert.doesNotMatch(shown.body, /Disconnect<\/button>/);
      const row = await t.database.db.selectFrom('stores').select('status').where('domain', '=', shop).executeTakeFirstOrThrow();
      assert.equal(row.status, 'uninstalled');
    });

    it('refuses every form posted without, or with a wrong, CSRF token with 403, as the other forms; nothing changes here or on the site', async () => {
      const { shop, cookie } = await signedInStore(t, 'woocommerce');
      assert.equal((await paste(cookie, { siteUrl: site.url, ...site.makeKeys() })).statusCode, 303);
      const other = await signedInStore(t, 'woocommerce');
      const foreignCsrf = csrfOf((await getPage(t, PAGE, other.cookie)).body);
      const webhooks = webhooksFor(shop).map((webhook) => webhook.id);
      const before = await t.tableDigests();
      const requests = site.requests.length;
      const forms: Array<[string, Record<string, string>]> = [
        [PAGE, { siteUrl: site.url, ...site.makeKeys() }],
        [`${PAGE}/authorize`, { siteUrl: site.url }],
        [`${PAGE}/disconnect`, {}],
      ];
      const tokens = [['no token', undefined], ['a wrong token', 'x'.repeat(43)], ["another session's token", foreignCsrf], ['an empty token', '']] as const;
      for (const [url, fields] of forms) {
        for (const [what, csrf] of tokens) {
          const res = await postForm(t, url, csrf === undefined ? fields : { ...fields, csrf }, cookie);
          assertHtml(res, 403);
          assert.match(res.body, /came from another site/, `${url} with ${what}`);
        }
      }
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal(site.requests.length, requests, 'the site was never called');
      assert.deepEqual(webhooksFor(shop).map((webhook) => webhook.id), webhooks);
      // Without a session, a form leads to signing in.
      const anonymous = await postForm(t, PAGE, { siteUrl: site.url, ...site.makeKeys() });
      assert.equal(anonymous.statusCode, 303);
      assert.equal(anonymous.headers.location, '/dashboard/sign-in');
    });
  });
}
