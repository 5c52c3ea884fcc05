import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { LightMyRequestResponse } from 'fastify';
import { MailOutboxRepository } from '../src/core/mail/outbox-repository.ts';
import { ownerCaller } from '../src/dashboard/service.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { installByTokenExchange } from './fixtures/shopify-app.ts';
import { assertHtml, BROWSER, COOKIE, csrfOf, FORM, getPage, postForm, requestLink, sessionCookie, signIn, SIGN_IN } from './fixtures/dashboard.ts';
import { startShopifyAdmin, type ShopifyAdminStandIn } from './fixtures/shopify-admin.ts';
import { startTwilioStandIn, type TwilioStandIn } from './fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

// Every request of a file comes from the same address; the limits get a test of their own.
const UNLIMITED = { SIGN_IN_LIMIT_PER_HOUR: '1000000', STOREFRONT_LIMIT_PER_HOUR: '1000000' };
// Sealing a store's SMTP URL needs a key.
const ENCRYPTION = { RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
/** A store's own Twilio account, which Twilio (the stand-in) must vouch for before it is saved. */
const STORE_TWILIO = { accountSid: `AC${'1'.repeat(32)}`, authToken: 'f'.repeat(32), from: '+15551230000' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_dashboard_test', verified: false } as const;

const SIGNED_IN_PAGES = [
  '/dashboard',
  '/dashboard/demand',
  '/dashboard/alerts',
  '/dashboard/alerts?status=sent',
  '/dashboard/alerts/ntf_00000000000000000000000000',
  '/dashboard/audience',
  '/dashboard/plan',
  '/dashboard/settings',
  '/dashboard/outbox',
  '/dashboard/outbox/mail_00000000000000000000000000',
];

let counter = 0;
const unique = () => `${Date.now() % 1_000_000}${++counter}`;
const newShop = () => `dash-${unique()}.myshopify.com`;
const newEmail = (who = 'shopper') => `${who}-${unique()}@example.com`;
const productGid = () => `gid://shopify/Product/${unique()}`;
const variantGid = () => `gid://shopify/ProductVariant/${unique()}`;
const hashOf = (secret: string) => createHash('sha256').update(secret).digest('base64url');

function assertToSignIn(res: LightMyRequestResponse, what: string) {
  assert.equal(res.statusCode, 303, `${what}: ${res.statusCode} ${res.body.slice(0, 200)}`);
  assert.equal(res.headers.location, SIGN_IN, what);
}

function assertProblem(res: LightMyRequestResponse, status: number, slug: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.headers['content-type'] as string, /^application\/problem\+json/);
  assert.equal(res.json().type, `http://restock.test/problems/${slug}`);
}

async function createStore(t: TestApp, shop = newShop(), owner = newEmail('owner')) {
  await t.app.restock.stores.createStore(shop, owner);
  return { shop, owner };
}

async function signedInStore(t: TestApp) {
  const store = await createStore(t);
  return { ...store, cookie: await signIn(t, store.shop, store.owner) };
}

async function subscribeShopper(t: TestApp, shop: string, productId: string, variantId: string | null, email: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: '/storefront/v1/subscribe',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ shop, productId, variantId, email }),
  });
  assert.equal(res.statusCode, 201, res.body);
}

async function subscriptionId(t: TestApp, shop: string, email: string): Promise<string> {
  const row = await t.database.db.selectFrom('subscriptions').select('id').where('store_domain', '=', shop).where('email', '=', email).executeTakeFirstOrThrow();
  return row.id;
}

/** Reports the variant in stock (a restock, when it was not sellable) and lets dispatch send. */
async function restock(t: TestApp, shop: string, productId: string, variantId: string, available: number) {
  await t.app.restock.inventory.reportStock(shop, [{ productId, variantId, available, productTitle: 'Blue mug', variantTitle: 'Large' }], SOURCE);
  await t.runWorker();
}

/** A store with two shoppers alerted about a restocked variant; what the tests of other stores must never see. */
async function storeWithAlerts(t: TestApp) {
  const { shop, owner } = await createStore(t);
  const productId = productGid();
  const variantId = variantGid();
  const emails = [newEmail('first'), newEmail('second')];
  for (const email of emails) await subscribeShopper(t, shop, productId, variantId, email);
  await restock(t, shop, productId, variantId, 5);
  const notifications = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', shop).execute();
  assert.deepEqual(notifications.map((n) => n.status), ['sent', 'sent']);
  const mails = await t.database.db.selectFrom('mail_outbox').selectAll().where('store_domain', '=', shop).where('purpose', '=', 'restock-alert').execute();
  return { shop, owner, productId, variantId, emails, notifications, mails };
}

for (const dialect of testDialects()) {
  describe(`merchant dashboard on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let twilio: TwilioStandIn;
    before(async () => {
      twilio = await startTwilioStandIn([{ accountSid: STORE_TWILIO.accountSid, authToken: STORE_TWILIO.authToken, numbers: [STORE_TWILIO.from] }]);
      t = await startTestApp(dialect, { ...UNLIMITED, ...ENCRYPTION, TWILIO_API_URL: twilio.url });
    });
    after(async () => {
      await t?.close();
      await twilio?.close();
    });

    describe('signing in by e-mail', () => {
      it('mails a one-time link to the owner; GET only shows the store, POST opens a session', async () => {
        const { shop, owner } = await createStore(t);
        const form = await getPage(t, SIGN_IN);
        assertHtml(form, 200);
        assert.match(form.body, /<form method="post" action="\/dashboard\/sign-in"/);

        const before = await t.counts();
        const link = await requestLink(t, shop, owner);
        const mail = (await new MailOutboxRepository(t.database).latestFor(owner, 'dashboard-sign-in'))!;
        assert.equal(mail.to, owner);
        assert.equal(mail.storeDomain, shop);
        assert.match(mail.subject, new RegExp(shop.replace(/\./g, '\\.')));
        const after = await t.counts();
        assert.equal(after.dashboard_sign_in_links, before.dashboard_sign_in_links + 1);
        assert.equal(after.mail_outbox, before.mail_outbox + 1);
        const token = link.split('/').pop()!;
        const stored = await t.database.db.selectFrom('dashboard_sign_in_links').selectAll().where('shop', '=', shop).execute();
        assert.deepEqual(stored.map((row) => row.token_hash), [hashOf(token)], 'only the hash of the link is kept');

        // Mail scanners open links: looking must not use it up.
        for (let i = 0; i < 2; i++) {
          const shown = await getPage(t, link);
          assertHtml(shown, 200);
          assert.match(shown.body, new RegExp(`Sign in to ${shop.replace(/\./g, '\\.')}`));
          assert.match(shown.body, new RegExp(`<form method="post" action="${link}">`));
          assert.equal(shown.headers['referrer-policy'], 'no-referrer');
          assert.equal(shown.headers['cache-control'], 'no-store');
          assert.equal(shown.headers['set-cookie'], undefined);
        }
        assert.equal((await t.counts()).dashboard_sessions, before.dashboard_sessions);

        const used = await postForm(t, link, {});
        assert.equal(used.statusCode, 303);
        assert.equal(used.headers.location, '/dashboard');
        const [session, device] = [used.headers['set-cookie'] ?? []].flat();
        assert.match(session!, new RegExp(`^${COOKIE}=[A-Za-z0-9_-]{43}; Path=/dashboard; Max-Age=\\d+; HttpOnly; SameSite=Lax$`));
        assert.match(device!, /^restock_device=[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{43}; Path=\/dashboard; Max-Age=31536000; HttpOnly; SameSite=Lax$/);
        const cookie = sessionCookie(used)!;
        const sessions = await t.database.db.selectFrom('dashboard_sessions').selectAll().where('shop', '=', shop).execute();
        assert.equal(sessions.length, 1);
        assert.equal(sessions[0]!.via, 'email');
        assert.equal(sessions[0]!.id_hash, hashOf(cookie.slice(COOKIE.length + 1)), 'only the hash of the cookie is kept');

        const dashboard = await getPage(t, '/dashboard', cookie);
        assertHtml(dashboard, 200);
        assert.match(dashboard.body, new RegExp(`<h1>${shop.replace(/\./g, '\\.')}</h1>`));
        assert.match(dashboard.body, new RegExp(`Sign out of ${shop.replace(/\./g, '\\.')}`));
        assert.equal(dashboard.headers['content-security-policy'], "frame-ancestors 'none'");
        assert.equal(dashboard.headers['cache-control'], 'no-store');
      });

      it('a used link answers 410 to GET and POST and opens no second session', async () => {
        const { shop, owner } = await createStore(t);
        const link = await requestLink(t, shop, owner);
        assert.equal((await postForm(t, link, {})).statusCode, 303);
        const before = await t.tableDigests();
        for (const res of [await postForm(t, link, {}), await getPage(t, link)]) {
          assertHtml(res, 410);
          assert.match(res.body, /This sign-in link no longer works/);
          assert.equal(sessionCookie(res), undefined);
        }
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('an expired link answers 410 and opens no session', async () => {
        const { shop, owner } = await createStore(t);
        const link = await requestLink(t, shop, owner);
        const token = link.split('/').pop()!;
        const expired = new Date(Date.now() - 1000).toISOString();
        await t.database.db.updateTable('dashboard_sign_in_links').set({ expires_at: expired }).where('token_hash', '=', hashOf(token)).execute();
        const before = await t.tableDigests();
        for (const res of [await getPage(t, link), await postForm(t, link, {})]) {
          assertHtml(res, 410);
          assert.match(res.body, /Ask for a new one/);
        }
        assert.deepEqual(await t.tableDigests(), before);
        const row = await t.database.db.selectFrom('dashboard_sign_in_links').selectAll().where('token_hash', '=', hashOf(token)).executeTakeFirstOrThrow();
        assert.equal(row.used_at, null);
      });

      it('a link that was never issued answers 410', async () => {
        const res = await postForm(t, `${SIGN_IN}/${randomBytes(32).toString('base64url')}`, {});
        assertHtml(res, 410);
        assert.equal(sessionCookie(res), undefined);
      });

      it('answers an unknown store exactly as a known one, and mails no one', async () => {
        const { shop } = await createStore(t);
        const unknown = newShop();
        const known = await postForm(t, SIGN_IN, { shop });
        const before = await t.tableDigests();
        const stranger = await postForm(t, SIGN_IN, { shop: unknown });
        assert.deepEqual(await t.tableDigests(), before, 'no link, no mail');
        assert.equal(stranger.statusCode, known.statusCode);
        assert.equal(stranger.headers['content-type'], known.headers['content-type']);
        assert.equal(stranger.body.replaceAll(unknown, 'SHOP'), known.body.replaceAll(shop, 'SHOP'));
        assert.match(known.body, /a sign-in link is on its way/);
      });

      it('refuses an invalid domain with a 400 page naming the error, and stores and sends nothing', async () => {
        const before = await t.tableDigests();
        for (const typed of ['evil_example.com', 'my store.myshopify.com', '<script>.myshopify.com', '']) {
          const res = await postForm(t, SIGN_IN, { shop: typed });
          assertHtml(res, 400);
          assert.match(res.body, /aria-invalid="true"/);
          assert.match(res.body, /<p class="error" id="shop-error">/);
          assert.match(res.body, typed ? /The store domain must be a store domain/ : /Enter your store’s domain/);
          assert.doesNotMatch(res.body, /<script>/, 'what was typed comes back escaped');
        }
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('two tabs posting the same link at once sign in once', async () => {
        const { shop, owner } = await createStore(t);
        const link = await requestLink(t, shop, owner);
        const before = await t.counts();
        const answers = await Promise.all([postForm(t, link, {}), postForm(t, link, {})]);
        assert.deepEqual(answers.map((res) => res.statusCode).sort(), [303, 410]);
        assert.equal(answers.filter((res) => sessionCookie(res)).length, 1);
        assert.equal((await t.counts()).dashboard_sessions, before.dashboard_sessions + 1);
      });
    });

    describe('sessions', () => {
      const posts: Array<[string, Record<string, string>]> = [
        ['/dashboard/suppressions', { email: 'someone@example.com' }],
        ['/dashboard/suppressions/remove', { email: 'someone@example.com' }],
        ['/dashboard/settings', { minStock: '4' }],
        ['/dashboard/plan/checkout', { plan: 'growth' }],
      ];

      async function assertEverySignedInPageRefuses(cookie: string | undefined, what: string) {
        for (const url of SIGNED_IN_PAGES) assertToSignIn(await getPage(t, url, cookie), `${what} GET ${url}`);
        for (const [url, fields] of posts) assertToSignIn(await postForm(t, url, { ...fields, csrf: 'x'.repeat(43) }, cookie), `${what} POST ${url}`);
      }

      it('sends a visitor without a session, or with a forged cookie, to sign in from every signed-in page', async () => {
        const before = await t.tableDigests();
        await assertEverySignedInPageRefuses(undefined, 'no cookie');
        await assertEverySignedInPageRefuses(`${COOKIE}=${randomBytes(32).toString('base64url')}`, 'forged cookie');
        await assertEverySignedInPageRefuses(`${COOKIE}=`, 'empty cookie');
        await assertEverySignedInPageRefuses(`other=1`, 'another cookie');
        assert.deepEqual(await t.tableDigests(), before);
      });

      it('signing out ends the session on the server: the old cookie no longer opens any page', async () => {
        const { shop, cookie } = await signedInStore(t);
        const overview = await getPage(t, '/dashboard', cookie);
        assertHtml(overview, 200);
        const out = await postForm(t, '/dashboard/sign-out', { csrf: csrfOf(overview.body) }, cookie);
        assertToSignIn(out, 'sign-out');
        assert.match(String(out.headers['set-cookie']), new RegExp(`^${COOKIE}=; Path=/dashboard; Max-Age=0;`));
        const row = await t.database.db.selectFrom('dashboard_sessions').selectAll().where('shop', '=', shop).executeTakeFirstOrThrow();
        assert.ok(row.ended_at, 'ended on the server, not only in the browser');
        await assertEverySignedInPageRefuses(cookie, 'signed-out session');
      });

      it('a session past its expiry opens nothing', async () => {
        const { shop, cookie } = await signedInStore(t);
        await t.database.db.updateTable('dashboard_sessions').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('shop', '=', shop).execute();
        assertToSignIn(await getPage(t, '/dashboard', cookie), 'expired session');
      });

      it('refuses a form posted without or with a wrong CSRF token with 403, and changes nothing', async () => {
        const { shop, cookie } = await signedInStore(t);
        const other = await signedInStore(t);
        const foreignCsrf = csrfOf((await getPage(t, '/dashboard', other.cookie)).body);
        const kept = newEmail('kept');
        await t.app.restock.dispatch.suppress(shop, kept, 'manual', null);
        const forms: Array<[string, Record<string, string>]> = [
          ['/dashboard/suppressions', { email: newEmail('new') }],
          ['/dashboard/suppressions/remove', { email: kept }],
          ['/dashboard/settings', { minStock: '4', senderName: 'Forged' }],
          ['/dashboard/plan/checkout', { plan: 'growth' }],
        ];
        const before = await t.tableDigests();
        const settings = (await t.app.restock.stores.getStore(shop)).settings;
        for (const [url, fields] of forms) {
          const tokens = [['no token', undefined], ['a wrong token', 'x'.repeat(43)], ["another session's token", foreignCsrf], ['an empty token', '']] as const;
          // The checkout form without a token (an empty field is no field) has a test of its own below.
          for (const [what, csrf] of tokens.filter(([, csrf]) => !(url === '/dashboard/plan/checkout' && !csrf))) {
            const res = await postForm(t, url, csrf === undefined ? fields : { ...fields, csrf }, cookie);
            assert.equal(res.statusCode, 403, `${url} with ${what}: ${res.statusCode} ${res.body.slice(0, 300)}`);
            assert.match(res.headers['content-type'] as string, /^text\/html/);
            assert.match(res.body, /came from another site/);
          }
        }
        assert.deepEqual(await t.tableDigests(), before);
        assert.deepEqual((await t.app.restock.stores.getStore(shop)).settings, settings);
        assert.deepEqual((await t.app.restock.dispatch.listSuppressions(shop)).map((row) => row.email), [kept]);

        // Sign-out with a wrong token clears the cookie in that browser but cannot end the session.
        const out = await postForm(t, '/dashboard/sign-out', { csrf: foreignCsrf }, cookie);
        assertToSignIn(out, 'sign-out with a wrong token');
        assertHtml(await getPage(t, '/dashboard', cookie), 200);
      });

      it('answers the checkout form as every other form: 303 to sign in without a session, 403 without its CSRF token', async () => {
        const { cookie } = await signedInStore(t);
        const before = await t.tableDigests();
        const answers = {
          'no session, no fields': (await postForm(t, '/dashboard/plan/checkout', {})).statusCode,
          'no CSRF field': (await postForm(t, '/dashboard/plan/checkout', { plan: 'growth' }, cookie)).statusCode,
          'an empty CSRF field': (await postForm(t, '/dashboard/plan/checkout', { plan: 'growth', csrf: '' }, cookie)).statusCode,
        };
        assert.deepEqual(await t.tableDigests(), before);
        assert.deepEqual(answers, { 'no session, no fields': 303, 'no CSRF field': 403, 'an empty CSRF field': 403 });
      });
    });

    describe('one store per session', () => {
      it("a store's owner never sees another store's shoppers, alerts or mail", async () => {
        const other = await storeWithAlerts(t);
        await t.app.restock.dispatch.suppress(other.shop, other.emails[0]!, 'manual', null);
        await t.app.inject({ method: 'POST', url: new URL(t.app.restock.alerts.unsubscribeUrl(await subscriptionId(t, other.shop, other.emails[1]!))).pathname });
        const { shop, cookie } = await signedInStore(t);

        for (const url of ['/dashboard', '/dashboard/demand', '/dashboard/alerts', '/dashboard/alerts?status=sent', '/dashboard/audience', '/dashboard/outbox']) {
          const res = await getPage(t, url, cookie);
          assertHtml(res, 200);
          for (const secret of [...other.emails, other.shop, other.productId, other.owner]) {
            assert.ok(!res.body.includes(secret), `${url} shows ${secret} of another store`);
          }
        }
        for (const notification of other.notifications) {
          const audit = await getPage(t, `/dashboard/alerts/${notification.id}`, cookie);
          assertHtml(audit, 404);
          assert.ok(!audit.body.includes(notification.email));
        }
        for (const mail of other.mails) {
          const read = await getPage(t, `/dashboard/outbox/${mail.id}`, cookie);
          assertHtml(read, 404);
          assert.ok(!read.body.includes(mail.recipient));
        }

        // The other store's owner does see them, so the refusals above are not for want of data.
        const theirs = await signIn(t, other.shop, other.owner);
        assertHtml(await getPage(t, `/dashboard/alerts/${other.notifications[0]!.id}`, theirs), 200);
        assertHtml(await getPage(t, `/dashboard/outbox/${other.mails[0]!.id}`, theirs), 200);

        // Nor can a form reach another store's suppressions.
        const csrf = csrfOf((await getPage(t, '/dashboard/audience', cookie)).body);
        const removed = await postForm(t, '/dashboard/suppressions/remove', { csrf, email: other.emails[0]! }, cookie);
        assert.equal(removed.statusCode, 303);
        assert.deepEqual((await t.app.restock.dispatch.listSuppressions(other.shop)).map((row) => row.email), [other.emails[0]]);
        assert.deepEqual(await t.app.restock.dispatch.listSuppressions(shop), []);
      });
    });

    describe('the storefront form', () => {
      it('a new store is shown how to install the widget, with its own domain in the tag; settings keep the instructions', async () => {
        const { shop, cookie } = await signedInStore(t);
        const tag = `&#60;script src=&#34;http://restock.test/widget.js&#34; defer data-shop=&#34;${shop}&#34;`;
        const overview = await getPage(t, '/dashboard', cookie);
        assertHtml(overview, 200);
        assert.ok(overview.body.includes(tag), overview.body);
        assert.match(overview.body, /Back-in-stock alert<\/strong> block/);
        const settings = await getPage(t, '/dashboard/settings', cookie);
        assert.ok(settings.body.includes(tag));

        // Once shoppers sign up, the overview is about them instead.
        await subscribeShopper(t, shop, productGid(), null, newEmail('first'));
        assert.ok(!(await getPage(t, '/dashboard', cookie)).body.includes(tag));
      });
    });

    describe('demand, alerts and their audit', () => {
      it('shows waiting shoppers per product, the alerts a restock sent, why each was sent, and who unsubscribed', async () => {
        const { shop, cookie } = await signedInStore(t);
        const mug = { productId: productGid(), variantId: variantGid() };
        const bowl = { productId: productGid(), variantId: variantGid() };
        const mugShoppers = [newEmail('mug-a'), newEmail('mug-b')];
        const bowlShopper = newEmail('bowl');
        for (const email of mugShoppers) await subscribeShopper(t, shop, mug.productId, mug.variantId, email);
        await subscribeShopper(t, shop, bowl.productId, null, bowlShopper);
        // Sold out, with its title: demand names it before any restock.
        await t.app.restock.inventory.reportStock(shop, [{ ...mug, available: 0, productTitle: 'Blue mug', variantTitle: 'Large' }], SOURCE);

        const demand = await getPage(t, '/dashboard/demand', cookie);
        assertHtml(demand, 200);
        const mugRow = /<tr><td>Blue mug<\/td><td>Large<\/td>\s*<td class="num">(\d+)<\/td>.*?<td class="num">([^<]*)<\/td><\/tr>/s.exec(demand.body);
        assert.ok(mugRow, demand.body);
        assert.deepEqual([mugRow[1], mugRow[2]], ['2', '0'], 'two waiting, none in stock');
        assert.match(demand.body, new RegExp(`<tr><td>${bowl.productId}</td><td>Any variant</td>\\s*<td class="num">1</td>`));
        assert.ok(demand.body.indexOf('Blue mug') < demand.body.indexOf(bowl.productId), 'most wanted first');
        const overviewBefore = (await getPage(t, '/dashboard', cookie)).body;
        assert.match(overviewBefore, /<span class="value">3<\/span>Waiting subscribers/);
        assert.match(overviewBefore, /<span class="value">0<\/span>Alerts sent/);

        await restock(t, shop, mug.productId, mug.variantId, 5);

        const overview = await getPage(t, '/dashboard', cookie);
        assertHtml(overview, 200);
        assert.match(overview.body, /<span class="value">1<\/span>Waiting subscribers/);
        assert.match(overview.body, /<span class="value">2<\/span>Alerts sent/);
        assert.match(overview.body, /<span class="value">0<\/span>Alerts pending/);
        // The chart's numbers, counted per UTC day in SQL on either database.
        const today = new Date().toISOString().slice(0, 10);
        assert.match(overview.body, new RegExp(`Alerts sent: 2 in 30 days, most on ${today} \\(2\\)`));
        assert.match(overview.body, new RegExp(`<title>${today}: 2</title>`));
        assert.match(overview.body, /<h2>Recent restocks<\/h2>/);
        for (const email of mugShoppers) assert.ok(overview.body.includes(email), `the latest alerts show ${email}`);
        const afterDemand = (await getPage(t, '/dashboard/demand', cookie)).body;
        assert.doesNotMatch(afterDemand, /Blue mug/, 'alerted shoppers are no longer waiting');
        assert.match(afterDemand, new RegExp(`<td>${bowl.productId}</td>`));

        const alerts = await getPage(t, '/dashboard/alerts', cookie);
        assertHtml(alerts, 200);
        const links = [...alerts.body.matchAll(/<a href="\/dashboard\/alerts\/(ntf_[0-9a-z]+)">([^<]+)<\/a>/g)];
        assert.deepEqual(links.map((m) => m[2]).sort(), [...mugShoppers].sort());
        assert.equal((alerts.body.match(/<td class="status-sent">sent<\/td>/g) ?? []).length, 2);
        assert.equal([...(await getPage(t, '/dashboard/alerts?status=sent', cookie)).body.matchAll(/href="\/dashboard\/alerts\/ntf_/g)].length, 2);
        const failed = await getPage(t, '/dashboard/alerts?status=failed', cookie);
        assert.match(failed.body, /No alerts with status failed/);
        assert.equal((await getPage(t, '/dashboard/alerts?status=bogus', cookie)).statusCode, 400);

        const [, id, email] = links.find((m) => m[2] === mugShoppers[0])!;
        const audit = await getPage(t, `/dashboard/alerts/${id}`, cookie);
        assertHtml(audit, 200);
        assert.match(audit.body, new RegExp(`<h1>Alert to ${email}</h1>`));
        assert.match(audit.body, new RegExp(`${mug.variantId} came back in stock at ${shop.replace(/\./g, '\\.')} \\(detected [^)]+ from inventory-api ${SOURCE.ref}\\)`));
        // Two sign-ups in the same millisecond have no order between them but their random ids'.
        assert.match(audit.body, /subscriber #[12] in signup order/);
        assert.match(audit.body, /<dt>Source<\/dt><dd>inventory-api<\/dd>/);
        assert.match(audit.body, /<dt>In stock when detected<\/dt><dd>5<\/dd>/);
        assert.match(audit.body, /<dt>Made by<\/dt><dd>the storefront widget<\/dd>/);
        assert.match(audit.body, /<dd class="status-sent">sent<\/dd>/);
        assertHtml(await getPage(t, '/dashboard/alerts/ntf_00000000000000000000000000', cookie), 404);
        assert.equal((await getPage(t, '/dashboard/alerts/..%2F..%2Fetc', cookie)).statusCode, 400);

        const audienceBefore = await getPage(t, '/dashboard/audience', cookie);
        assert.match(audienceBefore.body, /No one has unsubscribed/);
        const unsubscribe = new URL(t.app.restock.alerts.unsubscribeUrl(await subscriptionId(t, shop, bowlShopper))).pathname;
        assert.equal((await t.app.inject({ method: 'POST', url: unsubscribe })).statusCode, 200);
        const audience = await getPage(t, '/dashboard/audience', cookie);
        assertHtml(audience, 200);
        assert.match(audience.body, new RegExp(`<tr><td>${bowlShopper}</td><td>${bowl.productId}</td>`));
        assert.match((await getPage(t, '/dashboard', cookie)).body, /<span class="value">1<\/span>Unsubscribed/);
      });
    });

    describe('the outbox', () => {
      it('lists the store’s mail and shows each text; another store’s message is 404', async () => {
        const { shop, owner, cookie } = await signedInStore(t);
        const productId = productGid();
        const variantId = variantGid();
        const shopper = newEmail('outbox');
        await subscribeShopper(t, shop, productId, variantId, shopper);
        await restock(t, shop, productId, variantId, 1);
        const alert = (await new MailOutboxRepository(t.database).latestFor(shopper, 'restock-alert'))!;
        assert.ok(alert);

        const list = await getPage(t, '/dashboard/outbox', cookie);
        assertHtml(list, 200);
        assert.match(list.body, /<a href="\/dashboard\/outbox" aria-current="page">Outbox<\/a>/, 'the section shows in embedded mail mode');
        assert.match(list.body, new RegExp(`<a href="/dashboard/outbox/${alert.id}">[^<]+</a></td><td>${shopper}</td><td>restock-alert</td>`));
        assert.doesNotMatch(list.body, new RegExp(`<td>${owner}</td><td>dashboard-sign-in</td>`), 'a sign-in link is a credential: never listed (docs/security.md)');

        const read = await getPage(t, `/dashboard/outbox/${alert.id}`, cookie);
        assertHtml(read, 200);
        assert.ok(read.body.includes(`<pre>${alert.text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)}</pre>`), 'the whole text, escaped');
        assert.ok(read.body.includes(new URL(t.app.restock.alerts.unsubscribeUrl(await subscriptionId(t, shop, shopper))).pathname));

        const other = await storeWithAlerts(t);
        assertHtml(await getPage(t, `/dashboard/outbox/${other.mails[0]!.id}`, cookie), 404);
        assertHtml(await getPage(t, '/dashboard/outbox/mail_00000000000000000000000000', cookie), 404);
      });
    });

    describe('settings', () => {
      it('saves a valid form and reads it back', async () => {
        const { shop, cookie } = await signedInStore(t);
        const page = await getPage(t, '/dashboard/settings', cookie);
        assertHtml(page, 200);
        const saved = await postForm(
          t,
          '/dashboard/settings',
          { csrf: csrfOf(page.body), batchMultiplier: '2.5', batchIntervalSeconds: '120', minStock: '3', frequencyCapMinutes: '30', locale: 'fr', senderName: 'Blue Mug & Co', smtpUrl: '' },
          cookie,
        );
        assert.equal(saved.statusCode, 303, saved.body);
        assert.equal(saved.headers.location, '/dashboard/settings?saved=1');
        const store = await t.app.restock.stores.getStore(shop);
        assert.deepEqual(
          { ...store.settings, template: undefined },
          {
            batchMultiplier: 2.5,
            batchIntervalSeconds: 120,
            minStock: 3,
            frequencyCapMinutes: 30,
            locale: 'fr',
            senderName: 'Blue Mug & Co',
            template: undefined,
            utm: { source: 'restock', medium: 'email', campaign: 'back-in-stock' },
            attributionWindowDays: 7,
            reminderDelayHours: null,
            reserveUnitsMinutes: 0,
            waitlistThreshold: null,
            weeklyDigest: false,
            doubleOptIn: 'auto',
            country: null,
            smsQuietHours: { start: 21, end: 9 },
            timeZone: 'UTC',
            sms: null,
            push: true,
          },
        );
        assert.equal(store.ownSmtp, false, 'an empty SMTP field keeps the current sender');
        const shown = await getPage(t, '/dashboard/settings?saved=1', cookie);
        assert.match(shown.body, /<p role="status" class="status-sent">Saved.<\/p>/);
        assert.match(shown.body, /name="minStock" type="number" value="3"/);
        assert.match(shown.body, /name="senderName" type="text" value="Blue Mug &#38; Co"/);
        assert.match(shown.body, /<option value="fr" selected>fr<\/option>/);
      });

      it('keeps an SMTP URL sealed, never shows it, and can stop using it', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/settings', cookie)).body);
        const url = 'smtps://mailer:hunter2-secret@smtp.example.com:465';
        assert.equal((await postForm(t, '/dashboard/settings', { csrf, smtpUrl: url }, cookie)).statusCode, 303);
        assert.equal((await t.app.restock.stores.getStore(shop)).ownSmtp, true);
        const page = await getPage(t, '/dashboard/settings', cookie);
        assert.ok(!page.body.includes('hunter2-secret'), 'the credentials never come back');
        assert.match(page.body, /name="clearSmtp"/);
        assert.equal((await postForm(t, '/dashboard/settings', { csrf, clearSmtp: 'on' }, cookie)).statusCode, 303);
        assert.equal((await t.app.restock.stores.getStore(shop)).ownSmtp, false);
      });

      it('sets double opt-in, the channels offered and quiet hours; keeps a Twilio account sealed and marks a bad one', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/settings', cookie)).body);
        const token = STORE_TWILIO.authToken;
        const account = { twilioAccountSid: STORE_TWILIO.accountSid, twilioAuthToken: token, twilioFrom: STORE_TWILIO.from };
        const fields = { csrf, doubleOptIn: 'always', country: 'de', sms: 'on', push: 'off', quietStart: '22', quietEnd: '8', timeZone: 'Europe/Berlin', ...account };
        const saved = await postForm(t, '/dashboard/settings', fields, cookie);
        assert.equal(saved.statusCode, 303, saved.body);
        const store = await t.app.restock.stores.getStore(shop);
        assert.deepEqual(
          [store.settings.doubleOptIn, store.settings.country, store.settings.sms, store.settings.push, store.settings.smsQuietHours, store.settings.timeZone, store.ownSmsSender],
          ['always', 'DE', true, false, { start: 22, end: 8 }, 'Europe/Berlin', true],
        );
        const page = await getPage(t, '/dashboard/settings', cookie);
        assert.ok(!page.body.includes(token), 'the auth token never comes back');
        assert.match(page.body, /<option value="always" selected>/);
        assert.match(page.body, /name="clearSmsSender"/);

        const before = await t.tableDigests();
        const refused = await postForm(t, '/dashboard/settings', { ...fields, twilioAuthToken: 'not-a-token', quietStart: '25', timeZone: 'Mars/Olympus' }, cookie);
        assertHtml(refused, 400);
        for (const field of ['twilioAuthToken', 'quietStart', 'timeZone']) {
          assert.match(refused.body, new RegExp(`id="f-${field}"[^>]*aria-invalid="true"`), `${field} is marked`);
        }
        assert.deepEqual(await t.tableDigests(), before, 'nothing saved');

        // Well-formed, but not a number of the account: Twilio's refusal marks the field it is about.
        const notOurs = await postForm(t, '/dashboard/settings', { ...fields, twilioFrom: '+15005550199' }, cookie);
        assertHtml(notOurs, 400);
        assert.match(notOurs.body, /id="f-twilioFrom"[^>]*aria-invalid="true"/, 'the sender Twilio does not vouch for is marked');
        assert.deepEqual(await t.tableDigests(), before, 'nothing saved');

        assert.equal((await postForm(t, '/dashboard/settings', { csrf, clearSmsSender: 'on' }, cookie)).statusCode, 303);
        const cleared = await t.app.restock.stores.getStore(shop);
        assert.deepEqual([cleared.ownSmsSender, cleared.settings.doubleOptIn, cleared.settings.smsQuietHours], [false, 'auto', { start: 21, end: 9 }], 'cleared, and empty fields back to their defaults');
      });

      it('refuses invalid values with a 400 page marking each field, and saves nothing', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/settings', cookie)).body);
        assert.equal((await postForm(t, '/dashboard/settings', { csrf, minStock: '2', senderName: 'Before' }, cookie)).statusCode, 303);
        const before = await t.app.restock.stores.getStore(shop);
        const counts = await t.tableDigests();

        const res = await postForm(t, '/dashboard/settings', { csrf, batchMultiplier: '1000', minStock: '0', senderName: 'Evil <b>', frequencyCapMinutes: '15' }, cookie);
        assertHtml(res, 400);
        assert.match(res.body, /Nothing was saved: 3 fields need attention/);
        for (const field of ['batchMultiplier', 'minStock', 'senderName']) {
          assert.match(res.body, new RegExp(`id="f-${field}"[^>]*aria-describedby="h-${field} e-${field}" aria-invalid="true"`), field);
          assert.match(res.body, new RegExp(`<p class="error" id="e-${field}">`), field);
        }
        assert.doesNotMatch(res.body, /id="f-frequencyCapMinutes"[^>]*aria-invalid/, 'a valid field is not marked');
        assert.doesNotMatch(res.body, /<b>/);
        assert.deepEqual(await t.app.restock.stores.getStore(shop), before);
        assert.deepEqual(await t.tableDigests(), counts);

        const alone: Array<Record<string, string>> = [{ minStock: 'many' }, { batchIntervalSeconds: '1.5' }, { locale: 'xx' }, { frequencyCapMinutes: '-1' }, { senderName: 'x'.repeat(101) }];
        for (const fields of alone) {
          const refused = await postForm(t, '/dashboard/settings', { csrf, ...fields }, cookie);
          assertHtml(refused, 400);
          assert.match(refused.body, /Nothing was saved/, JSON.stringify(fields));
          assert.deepEqual(await t.app.restock.stores.getStore(shop), before, JSON.stringify(fields));
        }
      });

      it('saves nothing when only the SMTP URL is invalid', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/settings', cookie)).body);
        const before = await t.app.restock.stores.getStore(shop);
        const res = await postForm(t, '/dashboard/settings', { csrf, minStock: '7', smtpUrl: 'http://not-smtp.example.com' }, cookie);
        assertHtml(res, 400);
        assert.match(res.body, /Nothing was saved/);
        assert.match(res.body, /id="f-smtpUrl"[^>]*aria-invalid="true"/);
        assert.deepEqual((await t.app.restock.stores.getStore(shop)).settings, before.settings, 'the page says nothing was saved, so nothing may be');
      });

      it('a field left empty returns to the default, as its hint says', async () => {
        const { shop, cookie } = await signedInStore(t);
        const page = (await getPage(t, '/dashboard/settings', cookie)).body;
        assert.match(page, /Leave empty for the default/);
        const csrf = csrfOf(page);
        const defaults = (await t.app.restock.stores.getStore(shop)).settings;
        assert.equal((await postForm(t, '/dashboard/settings', { csrf, minStock: '9', senderName: 'Shop' }, cookie)).statusCode, 303);
        // A browser posts every field of the form, the cleared ones empty.
        const cleared = await postForm(t, '/dashboard/settings', { csrf, batchMultiplier: '', batchIntervalSeconds: '', minStock: '', frequencyCapMinutes: '', locale: 'en', senderName: '', smtpUrl: '' }, cookie);
        assert.equal(cleared.statusCode, 303, cleared.body);
        const after = (await t.app.restock.stores.getStore(shop)).settings;
        assert.equal(after.minStock, defaults.minStock);
        assert.equal(after.senderName, undefined);
      });
    });

    describe('webhooks', () => {
      it('adds an endpoint from the form, shows its secret once, refuses internal addresses, lists its deliveries and deletes it', async () => {
        const { shop, cookie } = await signedInStore(t);
        const caller = ownerCaller(shop);
        const csrf = csrfOf((await getPage(t, '/dashboard/webhooks', cookie)).body);

        // The test app lets stores reach 127.0.0.1 (its SMTP sink); the rest of loopback stays refused.
        for (const url of ['http://127.0.0.2:8080/hook', 'http://10.1.2.3/hook', 'http://169.254.169.254/latest', 'ftp://hooks.example.com/x']) {
          const before = await t.tableDigests();
          const refused = await postForm(t, '/dashboard/webhooks', { csrf, url, 'type:alert.sent': 'on' }, cookie);
          assertHtml(refused, 400);
          assert.match(refused.body, /id="url-error" class="error"/, url);
          assert.deepEqual(await t.tableDigests(), before, `${url} changes nothing`);
        }

        const added = await postForm(t, '/dashboard/webhooks', { csrf, url: 'https://hooks.example.com/restock', 'type:alert.sent': 'on', 'type:order.attributed': 'on' }, cookie);
        assertHtml(added, 201);
        const secret = /<code data-webhook-secret>(whsec_[A-Za-z0-9+/=]+)<\/code>/.exec(added.body)?.[1];
        assert.ok(secret, 'the signing secret is shown on the answer to the form');
        const [endpoint] = await t.app.restock.events.listEndpoints(caller, shop);
        assert.deepEqual([endpoint?.url, endpoint?.eventTypes], ['https://hooks.example.com/restock', ['alert.sent', 'order.attributed']]);
        const listed = await getPage(t, '/dashboard/webhooks', cookie);
        assertHtml(listed, 200);
        assert.ok(listed.body.includes('https://hooks.example.com/restock'), 'the endpoint is listed');
        assert.ok(!listed.body.includes(secret), 'the secret is never shown again');

        await t.app.restock.events.announce({ storeDomain: shop, type: 'alert.sent', id: 'evt_dashboard_log', occurredAt: new Date().toISOString(), data: {} });
        await t.app.restock.events.announce({ storeDomain: shop, type: 'alert.clicked', id: 'evt_not_taken', occurredAt: new Date().toISOString(), data: {} });
        const log = await getPage(t, `/dashboard/webhooks/${endpoint!.endpointId}`, cookie);
        assertHtml(log, 200);
        assert.match(log.body, /alert\.sent<br><span class="muted">evt_dashboard_log<\/span><\/td><td class="status-pending">pending/);
        assert.ok(!log.body.includes('evt_not_taken'), 'an event type the endpoint does not take is not delivered to it');

        const { shop: other, cookie: otherCookie } = await signedInStore(t);
        assert.notEqual(other, shop);
        assert.equal((await getPage(t, `/dashboard/webhooks/${endpoint!.endpointId}`, otherCookie)).statusCode, 404, "another store's owner cannot read the log");

        const deleted = await postForm(t, `/dashboard/webhooks/${endpoint!.endpointId}/delete`, { csrf }, cookie);
        assert.equal(deleted.statusCode, 303, deleted.body);
        assert.deepEqual(await t.app.restock.events.listEndpoints(caller, shop), []);
      });
    });

    describe('suppressions', () => {
      it('an address added in the form is listed, skipped by dispatch, and mailed again once removed', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/audience', cookie)).body);
        const shopper = `Blocked.${unique()}@Example.COM`;
        const stored = shopper.replace('Example.COM', 'example.com');

        const added = await postForm(t, '/dashboard/suppressions', { csrf, email: ` ${shopper} ` }, cookie);
        assert.equal(added.statusCode, 303, added.body);
        assert.equal(added.headers.location, '/dashboard/audience');
        const listed = await t.app.restock.dispatch.listSuppressions(shop);
        assert.deepEqual(listed.map((row) => [row.email, row.reason]), [[stored, 'manual']]);
        const audience = await getPage(t, '/dashboard/audience', cookie);
        assert.match(audience.body, new RegExp(`<tr><td>${stored}</td><td>manual`));
        assert.match(audience.body, new RegExp(`aria-label="Mail ${stored} again"`));
        assert.match((await getPage(t, '/dashboard', cookie)).body, /<span class="value">1<\/span>Suppressed addresses/);
        assert.equal((await postForm(t, '/dashboard/suppressions', { csrf, email: shopper }, cookie)).statusCode, 303, 'adding it again is harmless');
        assert.equal((await t.app.restock.dispatch.listSuppressions(shop)).length, 1);

        const productId = productGid();
        const variantId = variantGid();
        const allowed = newEmail('allowed');
        await subscribeShopper(t, shop, productId, variantId, stored);
        await subscribeShopper(t, shop, productId, variantId, allowed);
        await restock(t, shop, productId, variantId, 4);
        const ledger = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', shop).where('product_id', '=', productId).execute();
        const byEmail = Object.fromEntries(ledger.map((row) => [row.email, row]));
        assert.equal(byEmail[stored]?.status, 'skipped');
        assert.match(byEmail[stored]?.outcome ?? '', /suppressed/);
        assert.equal(byEmail[allowed]?.status, 'sent');
        assert.equal(await new MailOutboxRepository(t.database).latestFor(stored, 'restock-alert'), undefined);

        const removed = await postForm(t, '/dashboard/suppressions/remove', { csrf, email: stored }, cookie);
        assert.equal(removed.statusCode, 303);
        assert.deepEqual(await t.app.restock.dispatch.listSuppressions(shop), []);
        assert.match((await getPage(t, '/dashboard/audience', cookie)).body, /No address is suppressed/);
      });

      it('refuses an invalid address with a 400 page marking the field, and stores nothing', async () => {
        const { shop, cookie } = await signedInStore(t);
        const csrf = csrfOf((await getPage(t, '/dashboard/audience', cookie)).body);
        const before = await t.tableDigests();
        for (const email of ['not-an-email', 'a@', '<img src=x>@example.com', '']) {
          const res = await postForm(t, '/dashboard/suppressions', { csrf, email }, cookie);
          assertHtml(res, 400);
          assert.match(res.body, /id="suppress-email"[^>]*aria-invalid="true" aria-describedby="suppress-error"/);
          assert.match(res.body, /<p id="suppress-error" class="error">must be a valid e-mail address<\/p>/);
          assert.doesNotMatch(res.body, /<img/);
        }
        assert.deepEqual(await t.tableDigests(), before);
        assert.deepEqual(await t.app.restock.dispatch.listSuppressions(shop), []);
      });
    });

    describe('plan', () => {
      it('shows the plans and sends the owner to a checkout of the one chosen', async () => {
        const { shop, cookie } = await signedInStore(t);
        const page = await getPage(t, '/dashboard/plan', cookie);
        assertHtml(page, 200);
        assert.match(page.body, /aria-label="Choose the Growth plan"/);
        assert.match(page.body, /aria-label="Choose the Starter plan"/);
        assert.match(page.body, /<dt>Plan<\/dt><dd>free<\/dd>/);

        const before = await t.counts();
        const res = await postForm(t, '/dashboard/plan/checkout', { csrf: csrfOf(page.body), plan: 'growth' }, cookie);
        assert.equal(res.statusCode, 303, res.body);
        const location = new URL(res.headers.location as string);
        assert.equal(location.origin, 'http://restock.test');
        assert.match(location.pathname, /^\/checkout\/[A-Za-z0-9_]+$/);
        assert.equal((await t.counts()).checkout_sessions, before.checkout_sessions + 1);

        const checkout = await getPage(t, location.pathname);
        assertHtml(checkout, 200);
        assert.match(checkout.body, /<dt>Plan<\/dt><dd>Growth/);
        assert.match(checkout.body, new RegExp(`<dt>Store</dt><dd>${shop.replace(/\./g, '\\.')}</dd>`));

        const unknownPlan = await postForm(t, '/dashboard/plan/checkout', { csrf: csrfOf(page.body), plan: 'platinum' }, cookie);
        assert.equal(unknownPlan.statusCode, 400);
        assert.equal((await t.counts()).checkout_sessions, before.checkout_sessions + 1);
      });
    });
  });

  describe(`dashboard sign-in rate limit on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, { SIGN_IN_LIMIT_PER_HOUR: '2' });
    });
    after(() => t.close());

    it('refuses the third link asked for within the hour with 429 and Retry-After, and mails nothing', async () => {
      const { shop, owner } = await createStore(t);
      for (let i = 0; i < 2; i++) assertHtml(await postForm(t, SIGN_IN, { shop }), 200);
      const before = await t.tableDigests();
      const third = await postForm(t, SIGN_IN, { shop });
      assert.equal(third.statusCode, 429, third.body);
      assert.ok(Number(third.headers['retry-after']) > 0, String(third.headers['retry-after']));
      assert.deepEqual(await t.tableDigests(), before);
      assert.equal((await new MailOutboxRepository(t.database).listFor(owner)).length, 2);
      assertHtml(await getPage(t, SIGN_IN), 200);
    });
  });

  describe(`dashboard sign-in mails per store on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t.close());

    it('mails one owner at most five links an hour, whoever asks; the page answers the same', async () => {
      const { shop, owner } = await createStore(t);
      const pages = [];
      for (let i = 0; i < 8; i++) pages.push(await postForm(t, SIGN_IN, { shop }));
      for (const res of pages) assertHtml(res, 200);
      assert.equal(new Set(pages.map((res) => res.body)).size, 1, 'the same page every time');
      assert.equal((await new MailOutboxRepository(t.database).listFor(owner)).length, 5);
    });
  });

  describe(`dashboard from the Shopify admin on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const API_KEY = 'restock-dashboard-test-app';
    const API_SECRET = `shpss_${randomBytes(16).toString('hex')}`;
    const SCOPES = 'read_products,read_inventory';
    let t: TestApp;
    let shopify: ShopifyAdminStandIn;
    before(async () => {
      shopify = await startShopifyAdmin({ apiKey: API_KEY, apiSecret: API_SECRET, scopes: SCOPES });
      t = await startTestApp(dialect, {
        ...UNLIMITED,
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

    const framedBy = (shop: string) => `frame-ancestors https://${shop} https://admin.shopify.com`;
    const APP_BRIDGE = `<meta name="shopify-api-key" content="${API_KEY}">\n<script src="https://cdn.shopify.com/shopifycloud/app-bridge.js"></script>`;
    const hostOf = (shop: string) => Buffer.from(`admin.shopify.com/store/${shop.replace('.myshopify.com', '')}`).toString('base64url');
    /** A page's address as the admin opens it: Shopify's parameters, and the session token when given. */
    const inAdmin = (path: string, shop: string, token?: string) => {
      const url = new URL(path, 'http://restock.test');
      url.searchParams.set('embedded', '1');
      url.searchParams.set('shop', shop);
      url.searchParams.set('host', hostOf(shop));
      if (token) url.searchParams.set('id_token', token);
      return `${url.pathname}${url.search}`;
    };
    const PAGES = ['/dashboard', '/dashboard/demand', '/dashboard/alerts', '/dashboard/audience', '/dashboard/plan', '/dashboard/settings', '/dashboard/outbox'];

    it('a session token of an installed store opens every page: framed by its admin only, App Bridge first, no cookie, no sign-out', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const before = await t.tableDigests();
      for (const path of PAGES) {
        const res = await getPage(t, inAdmin(path, shop, await shopify.sessionToken(shop)));
        assertHtml(res, 200);
        assert.equal(res.headers['content-security-policy'], framedBy(shop), path);
        assert.equal(res.headers['set-cookie'], undefined, `${path} sets no cookie`);
        const head = res.body.slice(0, res.body.indexOf('</head>'));
        assert.ok(head.includes(APP_BRIDGE), `${path} loads App Bridge with the app's key`);
        assert.equal(res.body.indexOf('<script'), res.body.indexOf('<script src="https://cdn.shopify.com/shopifycloud/app-bridge.js">'), `${path}: App Bridge is the first script`);
        assert.match(head, /<script src="\/dashboard\/admin-frame\.js" defer><\/script>/);
        assert.doesNotMatch(res.body, /Sign out|name="csrf"/, `${path}: the admin is the sign-in`);
      }
      assert.match((await getPage(t, inAdmin('/dashboard', shop, await shopify.sessionToken(shop)))).body, new RegExp(`<h1>${shop.replace(/\./g, '\\.')}</h1>`));
      const fetched = await t.app.inject({ method: 'GET', url: '/dashboard/settings', headers: { ...BROWSER, authorization: `Bearer ${await shopify.sessionToken(shop)}` } });
      assertHtml(fetched, 200);
      assert.deepEqual(await t.tableDigests(), before, 'no session is stored');
      assert.match((await getPage(t, SIGN_IN)).body, /Open Restock from your Shopify admin/);
    });

    it('an installed store signing in by e-mail may also be framed by its admin', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop, `owner@${shop}`);
      const cookie = await signIn(t, shop, `owner@${shop}`);
      const res = await getPage(t, '/dashboard', cookie);
      assert.equal(res.headers['content-security-policy'], framedBy(shop));
      assert.doesNotMatch(res.body, /<script/, 'outside the admin the pages run no script');
    });

    it('the app URL in the admin installs, then leads into the dashboard with Shopify\'s parameters and the same token', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      shopify.addShop(shop, { email: `embedded@${shop}` });
      const token = await shopify.sessionToken(shop);
      const query = new URLSearchParams({ embedded: '1', host: hostOf(shop), id_token: token, shop, timestamp: String(Math.floor(Date.now() / 1000)) });
      const opened = await t.app.inject({ method: 'GET', url: `/shopify/install?${query}`, headers: BROWSER });
      assert.equal(opened.statusCode, 303, opened.body);
      assert.equal(opened.headers.location, inAdmin('/dashboard', shop, token));
      const res = await getPage(t, opened.headers.location as string);
      assertHtml(res, 200);
      assert.equal(res.headers['set-cookie'], undefined);
    });

    it('the app URL opened without a token for a connected store shows a page that loads App Bridge and leads into the dashboard in the admin', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const fields = { embedded: '1', host: hostOf(shop), shop, timestamp: String(Math.floor(Date.now() / 1000)) };
      const message = new URLSearchParams(Object.entries(fields).sort(([a], [b]) => a.localeCompare(b))).toString();
      const res = await getPage(t, `/shopify/install?${message}&hmac=${createHmac('sha256', API_SECRET).update(message).digest('hex')}`);
      assertHtml(res, 200);
      assert.match(res.body, /Restock is connected/);
      assert.ok(res.body.includes(APP_BRIDGE), 'every page inside the admin loads App Bridge');
      assert.ok(res.body.includes(`href="${inAdmin('/dashboard', shop).replace(/&/g, '&#38;')}"`), res.body);
      assert.equal(res.headers['content-security-policy'], framedBy(shop));
    });

    it('refuses a token for another store than the one the admin names with 401, showing neither', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      const other = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      await installByTokenExchange(t, shopify, other);
      const before = await t.tableDigests();
      const res = await getPage(t, inAdmin('/dashboard', shop, await shopify.sessionToken(other)));
      assert.equal(res.statusCode, 401, `${res.statusCode} ${res.headers.location ?? res.body}`);
      assert.doesNotMatch(res.body, /<h1>dash-|Waiting subscribers/);
      assert.equal(res.headers['set-cookie'], undefined);
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('refuses a token signed by another app, with a foreign issuer, expired, or garbage with 401, changing nothing', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      const other = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const now = Math.floor(Date.now() / 1000);
      const cases: Array<[string, string]> = [
        ['a token whose issuer is another store', await shopify.sessionToken(shop, { iss: `https://${other}/admin` })],
        ['a token for another app', await shopify.sessionToken(shop, { aud: 'someone-elses-app' })],
        ['an expired token', await shopify.sessionToken(shop, { exp: now - 120, iat: now - 180, nbf: now - 180 })],
        ['garbage', 'not-a-jwt'],
      ];
      const before = await t.tableDigests();
      for (const [what, token] of cases) {
        const res = await t.app.inject({ method: 'GET', url: `/dashboard?${new URLSearchParams({ id_token: token, shop })}`, headers: { accept: 'application/json' } });
        assertProblem(res, 401, 'invalid-token');
        const posted = await t.app.inject({ method: 'POST', url: inAdmin('/dashboard/settings', shop), headers: FORM, payload: new URLSearchParams({ id_token: token, senderName: 'Forged' }).toString() });
        assert.equal(posted.statusCode, 401, `${what}: ${posted.statusCode} ${posted.body}`);
      }
      assert.deepEqual(await t.tableDigests(), before);
    });

    it('inside the admin a page load without a token, or with an expired one, goes to the bounce page, which loads App Bridge and leads back', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const now = Math.floor(Date.now() / 1000);
      const expired = await shopify.sessionToken(shop, { exp: now - 120, iat: now - 180, nbf: now - 180 });
      const back = `http://restock.test${inAdmin('/dashboard/alerts?status=sent', shop)}`;
      for (const url of [inAdmin('/dashboard/alerts?status=sent', shop), inAdmin('/dashboard/alerts?status=sent', shop, expired)]) {
        const res = await getPage(t, url);
        assert.equal(res.statusCode, 303, res.body);
        const bounce = new URL(res.headers.location as string, 'http://restock.test');
        assert.equal(bounce.pathname, '/dashboard/session-token');
        assert.equal(bounce.searchParams.get('shopify-reload'), back, 'back to the same page, without the old token');
        assert.equal(bounce.searchParams.get('shop'), shop);

        const page = await getPage(t, `${bounce.pathname}${bounce.search}`);
        assertHtml(page, 200);
        assert.ok(page.body.includes(APP_BRIDGE));
        assert.equal(page.headers['content-security-policy'], framedBy(shop));
        assert.doesNotMatch(page.body, /Waiting subscribers|<nav/, 'the bounce page shows nothing of the store');
      }
      const elsewhere = await getPage(t, `/dashboard/session-token?${new URLSearchParams({ shop, 'shopify-reload': 'https://evil.example/dashboard' })}`);
      assert.equal(elsewhere.statusCode, 400, 'App Bridge is never sent to another site');
      const fetched = await t.app.inject({ method: 'GET', url: '/dashboard', headers: { accept: 'application/json', authorization: `Bearer ${expired}` } });
      assertProblem(fetched, 401, 'invalid-token');
    });

    it('a form posted inside the admin is proven by its session token instead of a CSRF token, and the next page stays in the admin', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const before = await t.tableDigests();
      const withoutToken = await t.app.inject({ method: 'POST', url: inAdmin('/dashboard/settings', shop), headers: { ...FORM, ...BROWSER }, payload: 'senderName=Nobody' });
      assert.equal(withoutToken.statusCode, 401, withoutToken.body);
      assert.deepEqual(await t.tableDigests(), before, 'nothing saved without a token');

      const saved = await t.app.inject({
        method: 'POST',
        url: inAdmin('/dashboard/settings', shop),
        headers: { ...FORM, ...BROWSER },
        payload: new URLSearchParams({ senderName: 'From the admin', id_token: await shopify.sessionToken(shop) }).toString(),
      });
      assert.equal(saved.statusCode, 303, saved.body);
      assert.equal(saved.headers.location, inAdmin('/dashboard/settings?saved=1', shop));
      assert.equal((await t.app.restock.stores.findStore(shop))?.settings.includes('From the admin'), true);

      const fetched = await t.app.inject({
        method: 'POST',
        url: '/dashboard/suppressions',
        headers: { ...FORM, ...BROWSER, authorization: `Bearer ${await shopify.sessionToken(shop)}` },
        payload: 'email=blocked%40example.com',
      });
      assert.equal(fetched.statusCode, 303, fetched.body);
    });

    it('choosing a plan inside the admin leads out of the frame to Shopify\'s page approving the charge', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      await installByTokenExchange(t, shopify, shop);
      const res = await t.app.inject({
        method: 'POST',
        url: inAdmin('/dashboard/plan/checkout', shop),
        headers: { ...FORM, ...BROWSER },
        payload: new URLSearchParams({ plan: 'starter', id_token: await shopify.sessionToken(shop) }).toString(),
      });
      assertHtml(res, 200);
      const leave = /<a class="button" href="([^"]+)" target="_top" data-leave-admin-frame>/.exec(res.body);
      assert.ok(leave, res.body);
      assert.match(leave[1]!.replace(/&amp;/g, '&'), new RegExp(`^https://${shop.replace(/\./g, '\\.')}/admin/charges/`));
      assert.ok(res.body.includes(APP_BRIDGE));
    });

    it('a store that has not installed the app gets a 404 problem and nothing is stored', async () => {
      const shop = `dash-${unique()}.myshopify.com`;
      shopify.addShop(shop, { email: `owner@${shop}` });
      const before = await t.tableDigests();
      const res = await t.app.inject({ method: 'GET', url: `/dashboard?${new URLSearchParams({ id_token: await shopify.sessionToken(shop), shop })}`, headers: { accept: 'application/json' } });
      assertProblem(res, 404, 'not-found');
      assert.equal(sessionCookie(res), undefined);
      assert.deepEqual(await t.tableDigests(), before);
    });
  });

  describe(`dashboard without the Shopify app on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, UNLIMITED);
    });
    after(() => t.close());

    it('answers a session token, or the bounce page, with 501 not-configured, and the sign-in page does not offer the admin', async () => {
      for (const url of ['/dashboard?id_token=abc&shop=x.myshopify.com', '/dashboard/session-token?shop=x.myshopify.com&shopify-reload=http%3A%2F%2Frestock.test%2Fdashboard']) {
        const res = await t.app.inject({ method: 'GET', url, headers: { accept: 'application/json' } });
        assert.equal(res.statusCode, 501, res.body);
        assert.equal(res.json().type, 'http://restock.test/problems/not-configured');
      }
      assert.doesNotMatch((await getPage(t, SIGN_IN)).body, /Shopify admin/);
    });
  });
}
