// Longer than most files on purpose: the shopper's page end to end (list, channels, cancel, export, erasure, refusals, language, Chromium with axe) on both databases.
/**
 * The shopper's page at `/my/{token}` over the real app: subscriptions made through the alerts
 * service, stock through the inventory service, alerts sent by the dispatch worker into the local
 * outbox, an order through conversions; the page read and driven by plain HTTP and, for its
 * accessibility and its forms as a browser posts them, by Chromium.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import axe from 'axe-core';
import type { LightMyRequestResponse } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import type { SubscriptionRow } from '../src/alerts/repository.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import { createStore, uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const SOURCE = { kind: 'inventory-api', ref: 'agt_shopper_page_test', verified: false } as const;
const HTML = { accept: 'text/html,application/xhtml+xml' };
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' };
const PHONE = '+15551234567';
const PUSH_ENDPOINT = 'https://fcm.googleapis.com/fcm/send/shopper-page-test';
const CONSENT = { method: 'storefront-form', text: 'Email me when this is back in stock. I can cancel any time.', page: 'https://shop.example/products/blue-mug' };
const SMS_CONSENT = { method: 'storefront-form', text: 'Text me once when it is back. Msg & data rates may apply. Reply STOP to end.', page: null };

interface Shop {
  domain: string;
  email: string;
  mug: SubscriptionRow;
  kettle: SubscriptionRow;
  /** Another shopper of the same store, waiting for the mug: never on this page, never touched by it. */
  neighbour: SubscriptionRow;
  /** The page's path (`/my/{token}`), from the link the alerts service puts in every message. */
  path: string;
  token: string;
}

const browserSkip = browserSkipReason();

describe("the shopper's page", () => {
  let browser: Browser | undefined;
  before(async () => {
    if (!browserSkip) browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  for (const dialect of testDialects()) {
    describe(`the shopper's page on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
      let t: TestApp;
      let base: string;
      before(async () => {
        ({ t, base } = await startListeningTestApp(dialect));
      });
      after(async () => {
        await t.close();
      });

      /** A store with a mug (variant, with a product page) and a kettle, both sold out; one address waiting for both. */
      async function shop(options: { locale?: string; contacts?: boolean } = {}): Promise<Shop> {
        const domain = uniqueDomain('shopper');
        await createStore(t.database, domain, uniqueEmail('owner'));
        await t.app.restock.inventory.reportStock(
          domain,
          [
            { productId: 'mug', variantId: 'mug-large', available: 0, productTitle: 'Blue mug', variantTitle: 'Large', productUrl: 'https://shop.example/products/blue-mug' },
            { productId: 'kettle', variantId: null, available: 0, productTitle: 'Red kettle', productUrl: 'javascript:alert(1)' },
          ],
          SOURCE,
        );
        const email = uniqueEmail('shopper');
        const alerts = t.app.restock.alerts;
        const contacts = options.contacts === false
          ? []
          : [
              { channel: 'sms' as const, address: PHONE, addressKey: PHONE, details: {}, consent: SMS_CONSENT, timeZone: 'Europe/Paris' },
              {
                channel: 'push' as const,
                address: PUSH_ENDPOINT,
                addressKey: createHash('sha256').update(PUSH_ENDPOINT).digest('hex'),
                details: { p256dh: 'BPk-test-key', auth: 'test-auth' },
                consent: { method: 'browser-permission', text: 'Notify me in this browser', page: null },
                timeZone: null,
              },
            ];
        const mug = await alerts.subscribeShopper({ shop: domain, productId: 'mug', variantId: 'mug-large', email, consent: CONSENT, contacts, locale: options.locale ?? null });
        const kettle = await alerts.subscribeShopper({ shop: domain, productId: 'kettle', email, consent: CONSENT, locale: options.locale ?? null });
        const neighbour = await alerts.subscribeShopper({ shop: domain, productId: 'mug', variantId: 'mug-large', email: uniqueEmail('neighbour'), consent: CONSENT });
        const path = new URL(alerts.shopperPageUrl(kettle.id)).pathname;
        return { domain, email, mug, kettle, neighbour, path, token: path.slice('/my/'.length) };
      }

      const subscription = (id: string) => t.database.db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
      const contactPoints = (id: string) => t.database.db.selectFrom('contact_points').selectAll().where('subscription_id', '=', id).execute();
      const open = (path: string, headers: Record<string, string> = HTML) => t.app.inject({ method: 'GET', url: path, headers });
      const postForm = (url: string, fields: Record<string, string> = {}, headers: Record<string, string> = SAME_ORIGIN) =>
        t.app.inject({ method: 'POST', url, headers: { ...HTML, ...headers }, payload: new URLSearchParams(fields).toString() });

      function assertCapabilityHeaders(res: LightMyRequestResponse, what: string) {
        assert.equal(res.headers['cache-control'], 'no-store', `${what}: never cached`);
        assert.equal(res.headers['referrer-policy'], 'no-referrer', `${what}: the link is not handed on as a referrer`);
        assert.equal(res.headers['x-robots-tag'], 'noindex', `${what}: not indexed`);
      }

      it('lists everything the address waits for at the store, with status, channels and consent', async () => {
        const s = await shop();
        const res = await open(s.path);
        assert.equal(res.statusCode, 200, res.body);
        assertCapabilityHeaders(res, 'the page');
        assert.match(res.body, /<html lang="en">/, 'English by default');
        assert.match(res.body, /<a href="https:\/\/shop\.example\/products\/blue-mug">Blue mug — Large<\/a>/, 'the mug, linked to its product page');
        assert.match(res.body, /<h3>Red kettle<\/h3>/, 'the kettle, whose javascript: URL never becomes a link');
        assert.ok(!res.body.includes('javascript:'), 'no javascript: URL anywhere on the page');
        assert.equal(res.body.match(/Waiting for the restock/g)?.length, 2, 'both alerts waiting');
        assert.ok(res.body.includes('+1•••••4567'), 'the phone masked');
        assert.ok(!res.body.includes(PHONE), 'the full phone number is never shown');
        assert.ok(res.body.includes('waiting for your YES'), 'the SMS number waits for its YES');
        assert.ok(res.body.includes('a browser (through fcm.googleapis.com)'), 'the browser named by its push service');
        assert.ok(res.body.includes(`“${CONSENT.text}”`), 'the words shown when the shopper subscribed');
        assert.ok(res.body.includes('Given on the store’s product page'), 'how consent was given');
        assert.ok(res.body.includes(`“${SMS_CONSENT.text.replace('&', '&#38;')}”`), 'the SMS consent words');
        assert.ok(res.body.includes(s.email), 'the address');
        assert.ok(!res.body.includes(s.neighbour.email), 'no other shopper of the store');
        assert.ok(res.body.includes(`name="subscription" value="${s.mug.id}"`) && res.body.includes(`name="subscription" value="${s.kettle.id}"`), 'a form per alert');
        assert.ok(res.body.includes(`action="/my/${s.token}/cancel"`), 'forms post to the token’s own URL');
        assert.ok(!/<script/i.test(res.body), 'no scripts');
      });

      it('GET changes nothing, whatever it opens (mail scanners open every link)', async () => {
        const s = await shop();
        const before = await t.tableDigests();
        for (const path of [s.path, `${s.path}/data.json`, `${s.path}/erase`]) {
          assert.equal((await open(path)).statusCode, 200, `${path} opens`);
          assert.equal((await t.app.inject({ method: 'HEAD', url: path })).statusCode, 200, `HEAD ${path}`);
        }
        assert.deepEqual(await t.tableDigests(), before, 'no row changed');
      });

      it('answers every link that opens nothing with the same 404, and acts on none of them', async () => {
        const s = await shop();
        const alerts = t.app.restock.alerts;
        const tampered = `${s.token.slice(0, -1)}${s.token.endsWith('A') ? 'B' : 'A'}`;
        const otherPurpose = alerts.unsubscribeToken(s.kettle.id);
        const unknownSubscription = new URL(alerts.shopperPageUrl('sub_nobodyhere')).pathname.slice(4);
        const before = await t.tableDigests();
        const details = new Set<string>();
        for (const token of ['nope', tampered, otherPurpose, unknownSubscription, `${s.token}%20`, 'x'.repeat(300)]) {
          const page = await open(`/my/${token}`);
          assert.equal(page.statusCode, 404, `GET /my/${token.slice(0, 20)}…`);
          assertCapabilityHeaders(page, 'the 404 page');
          const problem = await open(`/my/${token}/data.json`, { accept: 'application/json' });
          assert.equal(problem.statusCode, 404, 'data.json');
          assert.equal(problem.json().type, 'http://127.0.0.1:' + new URL(base).port + '/problems/not-found', 'an RFC 9457 problem');
          details.add(problem.json().detail);
          for (const action of ['cancel', 'erase']) assert.equal((await postForm(`/my/${token}/${action}`)).statusCode, 404, `POST ${action}`);
          // A bad body with a forged token is still the 404: the body is read only for a genuine link.
          assert.equal((await postForm(`/my/${token}/channel`, { channel: 'fax', on: '2' })).statusCode, 404, 'POST channel with a bad body');
        }
        assert.equal(details.size, 1, 'one and the same answer for every failure');
        assert.deepEqual(await t.tableDigests(), before, 'nothing changed');
      });

      it('refuses a form posted from another site, and changes nothing', async () => {
        const s = await shop();
        const before = await t.tableDigests();
        for (const headers of <Array<Record<string, string>>>[
          { 'sec-fetch-site': 'cross-site' },
          { 'sec-fetch-site': 'same-site' },
          { origin: 'https://evil.example' },
        ]) {
          for (const action of ['cancel', 'erase']) {
            const res = await postForm(`${s.path}/${action}`, {}, { 'content-type': 'application/x-www-form-urlencoded', ...headers });
            assert.equal(res.statusCode, 403, `${action} from ${JSON.stringify(headers)}`);
          }
          const res = await postForm(`${s.path}/channel`, { channel: 'email', on: '0' }, { 'content-type': 'application/x-www-form-urlencoded', ...headers });
          assert.equal(res.statusCode, 403, `channel from ${JSON.stringify(headers)}`);
        }
        assert.deepEqual(await t.tableDigests(), before, 'nothing changed');
        const ours = await postForm(`${s.path}/cancel`, { subscription: s.kettle.id }, { 'content-type': 'application/x-www-form-urlencoded', origin: base });
        assert.equal(ours.statusCode, 303, 'a post from the page’s own origin is taken');
      });

      it('turns a channel off and on for one alert, and off for all', async () => {
        const s = await shop();
        const off = await postForm(`${s.path}/channel`, { channel: 'email', on: '0', subscription: s.mug.id });
        assert.equal(off.statusCode, 303, off.body);
        assert.equal(off.headers.location, s.path, 'back to the page (PRG)');
        assertCapabilityHeaders(off, 'the redirect');
        assert.equal((await subscription(s.mug.id))?.email_muted, 1, 'mug e-mail muted');
        assert.equal((await subscription(s.kettle.id))?.email_muted, 0, 'kettle e-mail untouched');
        assert.equal((await subscription(s.mug.id))?.status, 'active', 'muting e-mail keeps the alert');
        assert.ok((await open(s.path)).body.includes('Turn e-mail on<span class="visually-hidden"> for Blue mug — Large</span>'), 'the page offers to turn it back on');

        assert.equal((await postForm(`${s.path}/channel`, { channel: 'email', on: '1', subscription: s.mug.id })).statusCode, 303, 'on again');
        assert.equal((await subscription(s.mug.id))?.email_muted, 0, 'mug e-mail on again');

        assert.equal((await postForm(`${s.path}/channel`, { channel: 'sms', on: '0' })).statusCode, 303, 'SMS off for all');
        assert.deepEqual((await contactPoints(s.mug.id)).map((point) => [point.channel, point.status]).sort(), [['push', 'active'], ['sms', 'stopped']], 'the phone stopped, the browser not');
        assert.ok((await open(s.path)).body.includes('Turn text messages on'), 'the page offers SMS back');

        assert.equal((await postForm(`${s.path}/channel`, { channel: 'email', on: '0' })).statusCode, 303, 'e-mail off for all');
        assert.equal((await subscription(s.kettle.id))?.email_muted, 1, 'kettle muted');
        assert.equal((await subscription(s.neighbour.id))?.email_muted, 0, 'the neighbour is not');

        const bad = await postForm(`${s.path}/channel`, { channel: 'fax', on: 'yes' });
        assert.equal(bad.statusCode, 400, 'a bad body on a genuine link is a validation problem');
        const json = await t.app.inject({ method: 'POST', url: `${s.path}/channel`, headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' }, payload: 'channel=fax&on=yes' });
        assert.equal(json.headers['content-type'], 'application/problem+json; charset=utf-8', 'problem+json for a program');
        assert.deepEqual(json.json().errors.map((error: { pointer: string }) => error.pointer).sort(), ['/body/channel', '/body/on'], 'one pointer per field');
        const foreign = await postForm(`${s.path}/cancel`, { subscription: s.neighbour.id });
        assert.equal(foreign.statusCode, 404, 'another address’s subscription is not on this page');
        assert.equal((await subscription(s.neighbour.id))?.status, 'active', 'and stays as it was');
      });

      it('cancels one alert, then all', async () => {
        const s = await shop();
        const one = await postForm(`${s.path}/cancel`, { subscription: s.mug.id });
        assert.equal(one.statusCode, 303, one.body);
        assert.equal((await subscription(s.mug.id))?.status, 'unsubscribed', 'the mug cancelled');
        assert.equal((await subscription(s.kettle.id))?.status, 'active', 'the kettle still waits');
        const page = (await open(s.path)).body;
        assert.ok(page.includes('Cancelled by you') && page.includes('Waiting for the restock'), 'the page says which is which');
        assert.ok(!page.includes(`value="${s.mug.id}"`), 'a cancelled alert has no forms left');

        assert.equal((await postForm(`${s.path}/cancel`)).statusCode, 303, 'cancel all');
        assert.equal((await subscription(s.kettle.id))?.status, 'unsubscribed', 'the kettle cancelled');
        assert.equal((await subscription(s.neighbour.id))?.status, 'active', 'the neighbour still waits');
        const after = (await open(s.path)).body;
        assert.equal(after.match(/Cancelled by you/g)?.length, 2, 'both cancelled');
        assert.ok(!after.includes('Cancel all alerts'), 'nothing left to cancel');
      });

      it('speaks the shopper’s language, else the store’s, else the browser’s', async () => {
        const french = await shop({ locale: 'fr' });
        const fr = await open(french.path, { ...HTML, 'accept-language': 'de' });
        assert.match(fr.body, /<html lang="fr">/, 'the subscription’s language wins');
        assert.ok(fr.body.includes('Vos alertes chez') && fr.body.includes('En attente du réassort'), 'in French');

        const store = await shop();
        await t.app.restock.stores.updateSettings(store.domain, { locale: 'de' });
        const de = await open(store.path, { ...HTML, 'accept-language': 'es' });
        assert.match(de.body, /<html lang="de">/, 'the store’s chosen language next');
        assert.ok(de.body.includes('Ihre Benachrichtigungen bei'), 'in German');

        const plain = await shop();
        const es = await open(plain.path, { ...HTML, 'accept-language': 'it;q=0.9, es;q=0.8, fr;q=0' });
        assert.match(es.body, /<html lang="es">/, 'the browser’s first language we speak');
        assert.ok(es.body.includes('Tus alertas en'), 'in Spanish');
        const erase = await open(`${plain.path}/erase`, { ...HTML, 'accept-language': 'es' });
        assert.ok(erase.body.includes('¿Borrar tus datos?'), 'the confirmation step too');
      });

      it('exports the address’s data as JSON: subscriptions, consent, channels and the alerts sent', async () => {
        const s = await shop();
        await restockKettle(s.domain);
        const res = await open(`${s.path}/data.json`, {});
        assert.equal(res.statusCode, 200, res.body);
        assertCapabilityHeaders(res, 'the export');
        assert.match(String(res.headers['content-disposition']), /^attachment; filename="restock-data-shopper-[a-z0-9-]+\.myshopify\.com\.json"$/, 'a download');
        assert.match(String(res.headers['content-type']), /^application\/json/, 'JSON');
        const data = res.json();
        assert.equal(data.email, s.email, 'whose data');
        assert.equal(data.store, s.domain, 'at which store');
        const byProduct = Object.fromEntries(data.subscriptions.map((entry: { productId: string }) => [entry.productId, entry]));
        assert.deepEqual(Object.keys(byProduct).sort(), ['kettle', 'mug'], 'both subscriptions, nobody else’s');
        assert.deepEqual(byProduct.mug.consent, { method: CONSENT.method, text: CONSENT.text, page: CONSENT.page, givenAt: s.mug.created_at, confirmedAt: null }, 'the e-mail consent record');
        assert.equal(byProduct.kettle.status, 'notified', 'the kettle was alerted');
        const sms = byProduct.mug.contactPoints.find((point: { channel: string }) => point.channel === 'sms');
        assert.equal(sms.address, PHONE, 'the full number is the shopper’s own data');
        assert.equal(sms.consent.text, SMS_CONSENT.text, 'the SMS consent words');
        const push = byProduct.mug.contactPoints.find((point: { channel: string }) => point.channel === 'push');
        assert.equal(push.address, PUSH_ENDPOINT, 'the browser’s endpoint');
        assert.ok(!JSON.stringify(data).includes('test-auth'), 'push keys are not exported');
        assert.equal(data.alertsSent.length, 1, 'the alert the ledger sent');
        assert.equal(data.alertsSent[0].productId, 'kettle', 'for the kettle');
      });

      it('erases after a confirmation step, in alerts, dispatch and conversions; the link is dead afterwards', async () => {
        const s = await shop();
        await restockKettle(s.domain);
        await t.app.restock.conversions.recordOrder({
          storeDomain: s.domain,
          orderId: `order-${s.kettle.id}`,
          email: s.email,
          placedAt: new Date().toISOString(),
          source: 'api',
          lines: [{ lineId: 'l1', productId: 'kettle', variantId: null, quantity: 1, amount: { minor: 2500, currency: 'EUR' }, shopAmount: { minor: 2500, currency: 'EUR' } }],
        });
        const key = s.email.toLowerCase();
        const held = async () => ({
          subscriptions: (await t.database.db.selectFrom('subscriptions').select('id').where('store_domain', '=', s.domain).where('email_key', '=', key).execute()).length,
          contactPoints: (await contactPoints(s.mug.id)).length,
          notifications: (await t.database.db.selectFrom('notifications').select('id').where('store_domain', '=', s.domain).where('email_key', '=', key).execute()).length,
          orders: (await t.database.db.selectFrom('orders').select('order_id').where('store_domain', '=', s.domain).where('email_key', '=', key).execute()).length,
        });
        const was = await held();
        assert.ok(was.subscriptions === 2 && was.contactPoints === 2 && was.notifications >= 1 && was.orders === 1, `rows to erase in every feature: ${JSON.stringify(was)}`);

        const confirm = await open(`${s.path}/erase`);
        assert.equal(confirm.statusCode, 200, confirm.body);
        assert.ok(confirm.body.includes('Erase your data?') && confirm.body.includes(`<form method="post" action="/my/${s.token}/erase">`), 'a confirmation step with its button');
        assert.deepEqual(await held(), was, 'the confirmation page erased nothing');

        const done = await postForm(`${s.path}/erase`);
        assert.equal(done.statusCode, 200, done.body);
        assertCapabilityHeaders(done, 'the erased page');
        assert.ok(done.body.includes('Your data is erased'), 'says it is done');
        assert.deepEqual(await held(), { subscriptions: 0, contactPoints: 0, notifications: 0, orders: 0 }, 'nothing of the address is left');
        assert.equal((await subscription(s.neighbour.id))?.status, 'active', 'the neighbour is untouched');

        for (const path of [s.path, `${s.path}/data.json`, `${s.path}/erase`]) assert.equal((await open(path)).statusCode, 404, `${path} is dead`);
        assert.equal((await postForm(`${s.path}/erase`)).statusCode, 404, 'erasing again finds nothing');
        assert.equal((await postForm(`${s.path}/cancel`)).statusCode, 404, 'nor anything to cancel');
      });

      describe('in Chromium', { skip: browserSkip }, () => {
        it('has no accessibility violations, and its forms work as a browser posts them', async () => {
          const s = await shop();
          const page = await browser!.newPage();
          try {
            await page.goto(`${base}${s.path}`);
            assert.deepEqual(await axeViolations(page), [], 'the page: no axe violations of any impact');
            await page.getByRole('button', { name: 'Cancel this alert for Blue mug — Large' }).click();
            await page.waitForURL(`${base}${s.path}`);
            assert.equal((await subscription(s.mug.id))?.status, 'unsubscribed', 'the browser’s post (Sec-Fetch-Site: same-origin) was taken');
            assert.ok(await page.getByText('Cancelled by you').isVisible(), 'the page shows it');
            assert.deepEqual(await axeViolations(page), [], 'the page after a change');

            await page.getByRole('link', { name: 'Erase my data' }).click();
            assert.deepEqual(await axeViolations(page), [], 'the confirmation step');
            await page.getByRole('button', { name: 'Erase my data now' }).click();
            await page.getByRole('heading', { name: 'Your data is erased' }).waitFor();
            assert.deepEqual(await axeViolations(page), [], 'the erased page');
            assert.equal(await subscription(s.kettle.id), undefined, 'erased');
          } finally {
            await page.close();
          }
        });
      });

      /** Stock for the kettle, and the worker's alert to whoever waits (into the local outbox). */
      async function restockKettle(domain: string) {
        await t.app.restock.inventory.reportStock(domain, [{ productId: 'kettle', variantId: null, available: 5 }], SOURCE);
        await t.runWorker();
      }
    });
  }
});

/** Every axe violation, whatever its impact: the page is small enough to have none. */
async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: axe.source });
  const violations = await page.evaluate(async () => {
    const runner = (window as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: Array<{ id: string; help: string; nodes: Array<{ target: unknown }> }> }> } }).axe;
    return (await runner.run(document, { resultTypes: ['violations'] })).violations;
  });
  return violations.map((violation) => `${violation.id}: ${violation.help} (${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')})`);
}
