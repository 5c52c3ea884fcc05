/**
 * The dashboard's Klaviyo page, on each database, in Chromium against the Klaviyo stand-in
 * (test/fixtures/klaviyo.ts): the owner signs in by the mailed link, finds the page in the
 * navigation, pastes a key Klaviyo refuses (said beside the field, nothing stored) and then one it
 * takes; the page says connected, with the key's last four characters only; a shopper's sign-up
 * reaches Klaviyo and the page counts it delivered; the owner disconnects and nothing more is
 * sent. Another store's owner, a visitor without a session and a form posted from another site
 * can neither see nor change the connection. What Klaviyo did not take is shown with what to do,
 * and a server that cannot seal keys says so in words.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { call, expectStatus, registerAnonymousAgent, storeWithAgent, uniqueEmail, type StoreAgent } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations, startPageServer } from './fixtures/browser.ts';
import { assertHtml, csrfOf, getPage, postForm, signIn } from './fixtures/dashboard.ts';
import { startKlaviyo, type KlaviyoEvent, type KlaviyoStandIn } from './fixtures/klaviyo.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

const PAGE = '/dashboard/klaviyo';
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const METRICS = ['Restock Subscribed', 'Restock Alert Sent', 'Restock Alert Clicked', 'Restock Order Attributed'];
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe("the dashboard's Klaviyo page", () => {
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
      let klaviyo: KlaviyoStandIn;
      let serial = 0;

      before(async () => {
        klaviyo = await startKlaviyo();
        ({ t, base } = await startListeningTestApp(dialect, { RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY, KLAVIYO_API_URL: klaviyo.url }));
      });
      after(async () => {
        await t?.close();
        await klaviyo?.close();
      });

      /** A browser of its own, closed after `use`: one person's cookies, never another's. */
      async function inBrowser(use: (page: Page, context: BrowserContext) => Promise<void>) {
        const context = await browser!.newContext();
        try {
          const page = await context.newPage();
          page.setDefaultTimeout(10_000);
          await use(page, context);
        } finally {
          await context.close();
        }
      }

      /** The owner signs in as people do: the store's domain on the sign-in page, then the link mailed to them. */
      async function ownerSignsIn(page: Page, store: StoreAgent) {
        await page.goto(`${base}/dashboard`);
        await page.getByLabel('Store domain').fill(store.domain);
        await page.getByRole('button', { name: /sign-in link/i }).click();
        await page.getByRole('heading', { name: 'Check your e-mail' }).waitFor();
        const mail = await new MailOutboxRepository(t.database).latestFor(store.owner, 'dashboard-sign-in');
        const link = new RegExp(`${escaped(base)}/dashboard/sign-in/[A-Za-z0-9_-]+`).exec(mail?.text ?? '')?.[0];
        assert.ok(link, `no sign-in link in: ${mail?.text}`);
        await page.goto(link);
        await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
        await page.waitForURL(`${base}/dashboard`);
      }

      /** The page's form posted by its button; the answer's status. */
      async function submit(page: Page, button: string, path: string): Promise<number> {
        const [answer] = await Promise.all([
          page.waitForResponse((response) => response.request().method() === 'POST' && new URL(response.url()).pathname === path),
          page.getByRole('button', { name: button, exact: true }).click(),
        ]);
        await page.waitForLoadState();
        return answer.status();
      }

      const stateOn = (page: Page) => page.locator('[data-klaviyo-state]').getAttribute('data-klaviyo-state');
      /** The Klaviyo tables' digests: what signing in writes elsewhere (sessions, mail) does not count here. */
      const klaviyoTables = async () => {
        const { klaviyo_connections: connections, klaviyo_events: events } = await t.tableDigests();
        return { connections, events };
      };
      const connectionOf = (store: StoreAgent) => t.database.db.selectFrom('klaviyo_connections').selectAll().where('store_domain', '=', store.domain).executeTakeFirst();

      /** A product the store reports sold out, then a shopper subscribed to it by an agent (as test/klaviyo.test.ts does). */
      async function subscribed(store: StoreAgent, email = uniqueEmail('shopper')) {
        const productId = `gid://shopify/Product/${700 + ++serial}`;
        const variantId = `gid://shopify/ProductVariant/${900 + serial}`;
        expectStatus(await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items: [{ productId, variantId, available: 0, productTitle: 'Blue mug' }] } }), 200);
        const agent = await registerAnonymousAgent(t.app);
        const answer = expectStatus(await call(t.app, 'POST', '/api/v1/alerts/subscribe', { token: agent.token, body: { productId, variantId, email, shop: store.domain } }), 200);
        return { subscriptionId: answer.subscriptionId as string, email };
      }

      /** Runs the worker until `count` events of `email` reached Klaviyo. */
      async function eventsOf(email: string, count: number): Promise<KlaviyoEvent[]> {
        for (let round = 0; round < 20; round++) {
          await t.runWorker();
          const got = klaviyo.events.filter((event) => event.email === email);
          if (got.length >= count) return got;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        assert.fail(`${count} Klaviyo events of ${email} did not arrive`);
      }

      /** A store connected through the API by its own agent, and its owner's cookie session. */
      async function connectedStore(name: string, scopes?: string[]) {
        const store = await storeWithAgent(t.app, t.database, name);
        const key = klaviyo.addKey(scopes);
        expectStatus(await call(t.app, 'PUT', `/api/v1/stores/${store.domain}/klaviyo`, { token: store.token, body: { privateApiKey: key.key } }), 200);
        return { store, key, cookie: await signIn(t, store.domain, store.owner) };
      }

      it("the owner connects Klaviyo from the page, a shopper's sign-up reaches Klaviyo, and the owner disconnects", { skip: browserSkip }, async () => {
        const store = await storeWithAgent(t.app, t.database, 'klaviyo-page');
        await inBrowser(async (page) => {
          await ownerSignsIn(page, store);
          await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Klaviyo' }).click();
          await page.waitForURL(`${base}${PAGE}`);
          assert.equal(await page.locator('nav a[aria-current="page"]').innerText(), 'Klaviyo');
          assert.equal(await stateOn(page), 'never');
          assert.equal(await page.getByRole('button', { name: 'Disconnect Klaviyo' }).count(), 0, 'nothing to disconnect');
          const sent = page.getByRole('table', { name: 'The Klaviyo metrics Restock sends' });
          assert.deepEqual(await sent.locator('tbody td:first-child').allInnerTexts(), METRICS);
          const consent = await page.getByRole('heading', { name: 'Consent' }).locator('xpath=following-sibling::ul[1]').innerText();
          assert.match(consent, /passed only as it was given/);
          assert.match(consent, /marketingConsent: false/);
          assert.match(consent, /Double opt-in is respected/);

          // Refused keys: said beside the field, the key never shown back, nothing stored.
          const before = await t.tableDigests();
          const refused = 'pk_notakeyklaviyoknows000000';
          for (const [typed, words] of [
            [refused, /^The key was refused by Klaviyo \(401 not_authenticated\); nothing was stored$/],
            [klaviyo.addKey(['events:write']).key, /^The key lacks the scope accounts:read/],
            ['pub_AbC123', /^The key must be a Klaviyo private API key \(it starts with pk_\)/],
          ] as const) {
            await page.getByLabel('Private API key').fill(typed);
            assert.equal(await submit(page, 'Connect', PAGE), 400, typed);
            assert.match(await page.locator('#klaviyo-key-error').innerText(), words);
            assert.equal(await page.getByLabel('Private API key').getAttribute('aria-invalid'), 'true');
            assert.equal(await page.getByRole('alert').innerText(), 'Nothing was connected.');
            assert.equal(await page.getByLabel('Private API key').inputValue(), '', 'the key is not typed back');
            assert.ok(!(await page.content()).includes(typed), 'nor shown anywhere');
            assert.equal(await stateOn(page), 'never');
          }
          assert.deepEqual(await t.tableDigests(), before, 'nothing stored');

          const key = klaviyo.addKey();
          await page.getByLabel('Private API key').fill(key.key);
          assert.equal(await submit(page, 'Connect', PAGE), 303);
          assert.equal(page.url(), `${base}${PAGE}?done=connected`);
          assert.match(await page.getByRole('status').innerText(), /^Connected: /);
          assert.equal(await stateOn(page), 'connected');
          assert.equal(await page.locator('[data-klaviyo-key]').innerText(), `ending in ${key.key.slice(-4)}`);
          assert.match(await page.locator('dl').first().innerText(), new RegExp(`Klaviyo account\\s+${key.accountId}`));
          assert.ok(!(await page.content()).includes(key.key), 'the key is never shown');
          assert.deepEqual(await seriousAccessibilityViolations(page), []);
          const row = await connectionOf(store);
          assert.equal(row?.status, 'connected');
          assert.ok(row?.key_sealed && !row.key_sealed.includes(key.key), 'kept sealed');
          assert.ok(klaviyo.calls.some((c) => c.path === '/api/accounts' && c.key === key.key), 'the key was checked with Klaviyo');

          const shopper = await subscribed(store);
          const [signedUp] = await eventsOf(shopper.email, 1);
          assert.equal(signedUp!.metric, 'Restock Subscribed');
          assert.equal(signedUp!.key, key.key, 'with the key pasted on the page');
          assert.equal(signedUp!.properties.subscriptionId, shopper.subscriptionId);
          assert.equal(signedUp!.properties.marketingConsent, false);
          await page.reload();
          assert.equal(await page.locator('[data-klaviyo-events="delivered"]').innerText(), '1');
          assert.equal(await page.locator('[data-klaviyo-events="pending"]').innerText(), '0');
          assert.equal(await page.locator('[data-klaviyo-trouble]').count(), 0, 'nothing went wrong');

          assert.equal(await submit(page, 'Disconnect Klaviyo', `${PAGE}/disconnect`), 303);
          assert.equal(page.url(), `${base}${PAGE}?done=disconnected`);
          assert.match(await page.getByRole('status').innerText(), /^Disconnected: /);
          assert.equal(await stateOn(page), 'disconnected');
          assert.equal(await page.locator('[data-klaviyo-key]').count(), 0, 'no key is in use');
          assert.match(await page.locator('dl').first().innerText(), /Disconnected\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC: disconnected by the store/);
          assert.equal(await page.getByRole('button', { name: 'Disconnect Klaviyo' }).count(), 0);
          assert.equal((await connectionOf(store))?.key_sealed, null, 'the key is forgotten');
          const later = await subscribed(store);
          await t.runWorker();
          assert.equal(klaviyo.events.filter((event) => event.email === later.email).length, 0, 'nothing is sent once disconnected');
        });
      });

      it("another store's owner, a visitor without a session and a form from another site can neither see nor change the connection", { skip: browserSkip }, async () => {
        const { store, key } = await connectedStore('klaviyo-owned');
        const other = await storeWithAgent(t.app, t.database, 'klaviyo-other');
        const before = await klaviyoTables();

        await inBrowser(async (page) => {
          await ownerSignsIn(page, other);
          await page.goto(`${base}${PAGE}`);
          // Their own store's page: never connected, nothing of the first store's account.
          assert.equal(await stateOn(page), 'never');
          const content = await page.content();
          for (const secret of [key.key, key.key.slice(-4), key.accountId, store.domain]) assert.ok(!content.includes(secret), `${secret} is not shown`);
          // Their session acts on their own store only: a disconnect has nothing to end there.
          const csrf = await page.locator('input[name="csrf"]').first().inputValue();
          const disconnect = await page.request.post(`${base}${PAGE}/disconnect`, { form: { csrf }, maxRedirects: 0 });
          assert.equal(disconnect.status(), 303);
          assert.equal(disconnect.headers().location, PAGE);
          // The first owner's token is not theirs: refused as a form from another site.
          const first = await signIn(t, store.domain, store.owner);
          const foreign = await page.request.post(`${base}${PAGE}/disconnect`, { form: { csrf: csrfOf((await getPage(t, PAGE, first)).body) }, maxRedirects: 0 });
          assert.equal(foreign.status(), 403);
          assert.match(await foreign.text(), /came from another site/);
        });
        assert.deepEqual(await klaviyoTables(), before, 'the first store is still connected with its key');

        await inBrowser(async (page) => {
          await page.goto(`${base}${PAGE}`);
          assert.equal(new URL(page.url()).pathname, '/dashboard/sign-in', 'without a session the page asks to sign in');
          const anonymous = await page.request.post(`${base}${PAGE}/disconnect`, { form: {}, maxRedirects: 0 });
          assert.equal(anonymous.status(), 303);
          assert.equal(anonymous.headers().location, '/dashboard/sign-in');
        });

        // The owner's own browser, led to another site whose form posts to the page: the session's
        // cookie goes along (loopback ports are one site), but the browser names the page's origin,
        // which the service refuses before the form's token is even read.
        const site = await startPageServer();
        try {
          site.setPage('/win', `<!doctype html><title>Win</title><form method="post" action="${base}${PAGE}/disconnect"><input type="hidden" name="csrf" value="${'x'.repeat(43)}"></form><script>document.forms[0].submit()</script>`);
          await inBrowser(async (page) => {
            await ownerSignsIn(page, store);
            const [answer] = await Promise.all([page.waitForResponse((response) => new URL(response.url()).pathname === `${PAGE}/disconnect`), page.goto(`${site.url}/win`)]);
            assert.equal(answer.status(), 403);
            await page.waitForLoadState();
            assert.match(await page.locator('main').innerText(), /Requests from other sites’ pages are not taken here/);
            await page.goto(`${base}${PAGE}`);
            assert.equal(await stateOn(page), 'connected');
          });
        } finally {
          await site.close();
        }
        assert.deepEqual(await klaviyoTables(), before);
      });

      it('refuses every form without, or with a wrong, CSRF token with 403, as the other forms; nothing changes and Klaviyo is never asked', async () => {
        const { cookie } = await connectedStore('klaviyo-csrf');
        const other = await storeWithAgent(t.app, t.database, 'klaviyo-csrf-other');
        const foreignCsrf = csrfOf((await getPage(t, PAGE, await signIn(t, other.domain, other.owner))).body);
        const before = await t.tableDigests();
        const calls = klaviyo.calls.length;
        const forms: Array<[string, Record<string, string>]> = [
          [PAGE, { privateApiKey: klaviyo.addKey().key }],
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
        assert.equal(klaviyo.calls.length, calls, 'Klaviyo was never asked');
        // The page reads its own query: what it does not know is the owner's 400, not a 500.
        assertHtml(await getPage(t, `${PAGE}?done=exploded`, cookie), 400);
      });

      it('shows what Klaviyo did not take, with what to do: a key without events:write given up, a rate limit tried again; a new key starts afresh', async () => {
        const revoked = await connectedStore('klaviyo-given-up', ['accounts:read']);
        const shopper = await subscribed(revoked.store);
        await t.runWorker();
        let shown = await getPage(t, PAGE, revoked.cookie);
        assertHtml(shown, 200);
        assert.match(shown.body, /data-klaviyo-events="failed">1</);
        const trouble = /<p data-klaviyo-trouble class="error">([^<]*)<\/p>/.exec(shown.body)?.[1];
        assert.ok(trouble, shown.body);
        assert.match(trouble, /^Last problem: a Restock Subscribed event of \d{4}-\d\d-\d\d \d\d:\d\d UTC was not taken: Klaviyo answered 403 \(permission_denied\)\. Restock gave up on it\. Klaviyo refused the key: check in Klaviyo that it still exists and has Events: Full Access/);
        assert.ok(!shown.body.includes(shopper.email), "the shopper's address is not on the page");

        // Connecting again with a key that may create events: the former key's refusal is not shown.
        const csrf = csrfOf(shown.body);
        assert.equal((await postForm(t, PAGE, { csrf, privateApiKey: klaviyo.addKey().key }, revoked.cookie)).statusCode, 303);
        shown = await getPage(t, PAGE, revoked.cookie);
        assert.doesNotMatch(shown.body, /data-klaviyo-trouble/);

        const throttled = await connectedStore('klaviyo-throttled');
        klaviyo.failNext(1, 429);
        await subscribed(throttled.store);
        await t.runWorker();
        shown = await getPage(t, PAGE, throttled.cookie);
        assert.match(shown.body, /data-klaviyo-events="pending">1</);
        assert.match(shown.body, /<p data-klaviyo-trouble>Last problem: a Restock Subscribed event of [^<]+ was not taken: Klaviyo answered 429 \(throttled\)\. Restock tries again at \d{4}-\d\d-\d\d \d\d:\d\d UTC\. Klaviyo was busy or could not be reached/);
      });

      it('says in words, above the form, when Klaviyo cannot be reached (502) or the server cannot seal keys (501); nothing is stored', async () => {
        const closed = await startPageServer();
        const unreachable = closed.url;
        await closed.close();
        for (const [env, status, words] of [
          [{ RESTOCK_ENCRYPTION_KEY: ENCRYPTION_KEY, KLAVIYO_API_URL: unreachable }, 502, /^Klaviyo could not check the key \([^)]+\)\. Nothing was stored; try again\.$/],
          [{ KLAVIYO_API_URL: klaviyo.url }, 501, /^This Restock server cannot keep API keys yet: its operator has not set the encryption key they are sealed with\. Nothing was stored\.$/],
        ] as const) {
          const own = await startTestApp(dialect, env);
          try {
            const store = await storeWithAgent(own.app, own.database, 'klaviyo-unkept');
            const cookie = await signIn(own, store.domain, store.owner);
            const csrf = csrfOf((await getPage(own, PAGE, cookie)).body);
            const before = await own.tableDigests();
            const calls = klaviyo.calls.length;
            const res = await postForm(own, PAGE, { csrf, privateApiKey: klaviyo.addKey().key }, cookie);
            assertHtml(res, status);
            assert.match(res.body, /<a href="\/dashboard\/klaviyo" aria-current="page">Klaviyo<\/a>/, 'the dashboard page, not an error page');
            assert.match(res.body, /role="alert" class="error">Nothing was connected\./);
            const said = /<p class="error">([^<]*)<\/p>/.exec(res.body)?.[1];
            assert.match(said ?? '', words);
            assert.ok(csrfOf(res.body), 'the form can be sent again');
            assert.deepEqual(await own.tableDigests(), before);
            assert.equal(klaviyo.calls.length, calls, 'Klaviyo never heard of the key');
          } finally {
            await own.close();
          }
        }
      });
    });
  }
});
