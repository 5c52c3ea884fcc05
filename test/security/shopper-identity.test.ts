/**
 * Who a shopper is. Nothing a stranger can type proves it: the storefront sign-up is public, so
 * a browser or phone it adds proves only itself. Such a channel gets alerts for what it signed
 * up for and its own way to stop, never a link that covers more (the shopper's page, the
 * e-mail's unsubscribe), and it never replaces or hides a channel someone confirmed. Over the
 * real app on loopback: the push service stand-in decrypts what a stranger's browser receives,
 * the Twilio stand-in carries the texts, the SMTP sink the mail.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { CONTACT_POINTS_PER_CHANNEL } from '../../src/alerts/contact-points.ts';
import { createStore, uniqueDomain, uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, testDialects, type TestApp } from '../fixtures/app.ts';
import { channelAppForSuite } from '../fixtures/channel-peers.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import type { BrowserSubscription, PushServiceStandIn } from '../fixtures/push-service.ts';
import type { SmtpSink } from '../fixtures/smtp-sink.ts';
import { before, describe, it } from '../fixtures/suites.ts';
import type { TwilioStandIn } from '../fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const BOUND = { timeout: 60_000 };
const TWILIO = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550006' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_identity_test', verified: false } as const;
const SMS_CONSENT = 'Text me once when it is back. Msg & data rates may apply. Reply STOP to end.';
const HTML = { accept: 'text/html' };
const SAME_ORIGIN = { ...HTML, 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' };
const PRODUCT = { id: 'gid://shopify/Product/3001', title: 'Green teapot', url: 'https://shop.example/products/green-teapot' };
/** Any of our links that covers more than one browser or phone. */
const WIDER_LINK = /\/(my|unsubscribe|confirm)\//;

let serial = 0;
const uniquePhone = () => `+1555${String(2_000_000 + ++serial).slice(1)}${Math.floor(Math.random() * 10)}`;

for (const dialect of testDialects()) {
  describe(`who a shopper is, on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const suite = channelAppForSuite(dialect, TWILIO);
    let sink: SmtpSink;
    let twilio: TwilioStandIn;
    let pushService: PushServiceStandIn;
    let t: TestApp;
    let base: string;
    let applicationServerKey: string;
    before(() => {
      ({ sink, twilio, pushService, t, base, applicationServerKey } = suite());
    });

    async function shop(settings: Record<string, unknown> = {}): Promise<string> {
      const domain = uniqueDomain('identity');
      await createStore(t.database, domain, uniqueEmail('owner'));
      await t.app.restock.stores.updateSettings(domain, { smsQuietHours: { start: 0, end: 0 }, ...settings });
      await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCT.id, variantId: null, available: 0, productTitle: PRODUCT.title, productUrl: PRODUCT.url }], SOURCE);
      return domain;
    }

    function signUp(body: Record<string, unknown>): Promise<LightMyRequestResponse> {
      return t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ productId: PRODUCT.id, ...body }) });
    }

    async function restock(domain: string): Promise<void> {
      await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCT.id, variantId: null, available: 5 }], SOURCE);
      await t.runWorker();
    }

    const subscriptionOf = async (domain: string, email: string) => {
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', domain).where('email', '=', email).executeTakeFirstOrThrow();
      return row;
    };
    const contactPoints = (subscriptionId: string) =>
      t.database.db.selectFrom('contact_points').selectAll().where('subscription_id', '=', subscriptionId).orderBy('channel').orderBy('created_at').orderBy('id').execute();
    const pushesTo = (browser: BrowserSubscription) => pushService.messages.filter((message) => message.endpoint === browser.endpoint);
    const alertTextsTo = (phone: string) => twilio.messages.filter((message) => message.to === phone && message.body.includes('/r/'));

    async function answerYes(phone: string): Promise<void> {
      await t.runWorker();
      const answer = await twilio.textFrom(phone, TWILIO.from, 'YES', `${base}/sms/twilio/inbound`);
      assert.equal(answer.status, 200, answer.body);
    }

    for (const doubleOptIn of ['never', 'always'] as const) {
      it(`finding 1: a stranger's browser on a shopper's alert gets the product and its own stop link, never the shopper's page (double opt-in ${doubleOptIn})`, BOUND, async () => {
        const domain = await shop({ doubleOptIn });
        const victim = uniqueEmail('victim');
        const victimBrowser = pushService.newSubscription(applicationServerKey);
        assert.equal((await signUp({ shop: domain, email: victim, push: victimBrowser })).statusCode, 201);
        const sub = await subscriptionOf(domain, victim);
        if (doubleOptIn === 'always') {
          await t.runWorker();
          const mail = await sink.waitFor((m) => m.recipients.includes(victim) && /^Confirm your back-in-stock alert/.test(m.subject));
          const confirm = new URL(new RegExp(`${base}/confirm/\\S+`).exec(mail.text)![0]).pathname;
          assert.equal((await t.app.inject({ method: 'POST', url: confirm, headers: SAME_ORIGIN, payload: '' })).statusCode, 200);
        }
        assert.equal((await subscriptionOf(domain, victim)).status, 'active', 'the shopper’s alert waits');

        // The attacker types the shopper's address, with a browser whose keys the attacker holds.
        const attacker = pushService.newSubscription(applicationServerKey);
        const res = await signUp({ shop: domain, email: victim, push: attacker });
        assert.equal(res.statusCode, 201, res.body);

        await restock(domain);
        const received = pushesTo(attacker);
        assert.equal(received.length, 1, 'the stranger’s browser gets the alert it signed up for');
        assert.deepEqual(pushService.undecryptable, [], 'decrypted with the stranger’s own keys');
        const plaintext = received[0]!.plaintext;
        assert.doesNotMatch(plaintext, WIDER_LINK, `no link in the push covers more than that browser: ${plaintext}`);
        assert.ok(!plaintext.includes(victim), 'nor the shopper’s address');
        const payload = JSON.parse(plaintext) as { url: string; stop: { url: string; label: string } };
        assert.ok(payload.url.startsWith(`${base}/r/${domain}/`), 'the product, through our redirect');
        assert.ok(payload.stop.url.startsWith(`${base}/stop/`), `its own stop link: ${payload.stop.url}`);
        assert.equal(pushesTo(victimBrowser).length, 1, 'the shopper’s own browser is alerted too');

        // The stop link stops that browser and nothing else.
        const stopPath = new URL(payload.stop.url).pathname;
        const asked = await t.app.inject({ method: 'GET', url: stopPath, headers: HTML });
        assert.equal(asked.statusCode, 200, asked.body);
        assert.ok(!asked.body.includes(victim), 'the stop page does not name the shopper');
        assert.equal((await t.app.inject({ method: 'POST', url: stopPath, headers: SAME_ORIGIN, payload: '' })).statusCode, 200);
        const points = await contactPoints(sub.id);
        assert.deepEqual(
          points.map((point) => [point.address, point.status]),
          [
            [victimBrowser.endpoint, 'active'],
            [attacker.endpoint, 'stopped'],
          ],
          'only the stranger’s browser stopped',
        );
        assert.equal((await subscriptionOf(domain, victim)).status, 'notified', 'the shopper’s alert itself is untouched');
        const forged = await t.app.inject({ method: 'GET', url: `${stopPath.slice(0, -2)}xx`, headers: HTML });
        assert.equal(forged.statusCode, 404, 'a forged stop link is no link');

        // The shopper's page still reaches the shopper, by e-mail.
        const mail = await sink.waitFor((m) => m.recipients.includes(victim) && m.subject === `${PRODUCT.title} is back in stock`);
        assert.match(mail.text, new RegExp(`${base}/my/\\S+`), 'the alert e-mail links the shopper’s page');
      });
    }

    it('class: nothing sent to a phone or browser carries a link wider than that phone or browser (questions, alerts, reminders)', BOUND, async () => {
      const domain = await shop({ reminderDelayHours: 1 });
      const email = uniqueEmail('class');
      const phone = uniquePhone();
      const browser = pushService.newSubscription(applicationServerKey);
      assert.equal((await signUp({ shop: domain, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT, push: browser })).statusCode, 201);
      await answerYes(phone);
      await restock(domain);
      const worker = t.app.restock.worker;
      try {
        worker.setClock(() => Date.now() + 2 * 3600_000);
        await t.runWorker();
      } finally {
        worker.setClock(undefined);
      }
      const texts = twilio.messages.filter((message) => message.to === phone);
      const pushes = pushesTo(browser);
      assert.ok(texts.length >= 3, `the question, the alert and the reminder reached the phone: ${JSON.stringify(texts.map((m) => m.body))}`);
      assert.equal(pushes.length, 2, 'the alert and the reminder reached the browser');
      for (const body of [...texts.map((m) => m.body), ...pushes.map((m) => m.plaintext)]) {
        assert.doesNotMatch(body, WIDER_LINK, `no wider capability in: ${body}`);
        assert.ok(!body.includes(email), `nor the shopper’s address: ${body}`);
      }
    });

    it('finding 2: a stranger’s sign-up never replaces a shopper’s confirmed phone; both are kept and the shopper’s still gets the text', BOUND, async () => {
      const domain = await shop();
      const victim = uniqueEmail('victim');
      const victimPhone = uniquePhone();
      assert.equal((await signUp({ shop: domain, email: victim, phone: victimPhone, smsConsent: true, smsConsentText: SMS_CONSENT })).statusCode, 201);
      await answerYes(victimPhone);
      const sub = await subscriptionOf(domain, victim);
      assert.deepEqual((await contactPoints(sub.id)).map((point) => [point.address, point.status]), [[victimPhone, 'active']]);

      const attackerPhone = uniquePhone();
      const res = await signUp({ shop: domain, email: victim, phone: attackerPhone, smsConsent: true, smsConsentText: SMS_CONSENT });
      assert.equal(res.statusCode, 201, res.body);
      const points = await contactPoints(sub.id);
      assert.deepEqual(
        points.map((point) => [point.address, point.status]),
        [
          [victimPhone, 'active'],
          [attackerPhone, 'pending'],
        ],
        'the confirmed number stays, with its consent; the stranger’s waits for its own YES',
      );
      assert.equal(points[0]!.consent_text, SMS_CONSENT);

      // Signing the confirmed number up again changes nothing about it.
      await signUp({ shop: domain, email: victim, phone: victimPhone, smsConsent: true, smsConsentText: 'other words' });
      assert.equal((await contactPoints(sub.id))[0]!.status, 'active', 'the same number again stays confirmed');
      assert.equal((await contactPoints(sub.id))[0]!.consent_text, SMS_CONSENT, 'with the consent it was confirmed with');

      await restock(domain);
      assert.equal(alertTextsTo(victimPhone).length, 1, 'the shopper’s phone is texted the alert');
      assert.equal(alertTextsTo(attackerPhone).length, 0, 'the unconfirmed number gets no alert');
    });

    it('finding 2: a phone turned off and signed up again starts again, waiting for its own YES', BOUND, async () => {
      const domain = await shop();
      const email = uniqueEmail('again');
      const phone = uniquePhone();
      const body = { shop: domain, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT };
      assert.equal((await signUp(body)).statusCode, 201);
      await answerYes(phone);
      const sub = await subscriptionOf(domain, email);
      await t.database.db.updateTable('contact_points').set({ status: 'stopped' }).where('subscription_id', '=', sub.id).execute();
      const again = await signUp(body);
      assert.deepEqual(again.json(), { status: 'subscribed', confirmBy: ['sms'] });
      assert.deepEqual((await contactPoints(sub.id)).map((point) => [point.address, point.status]), [[phone, 'pending']], 'the same number, pending its YES again');
    });

    it('finding 2: a stranger’s browser is added beside the shopper’s, never in its place', BOUND, async () => {
      const domain = await shop();
      const victim = uniqueEmail('victim');
      const victimBrowser = pushService.newSubscription(applicationServerKey);
      assert.equal((await signUp({ shop: domain, email: victim, push: victimBrowser })).statusCode, 201);
      const attacker = pushService.newSubscription(applicationServerKey);
      assert.equal((await signUp({ shop: domain, email: victim, push: attacker })).statusCode, 201);
      // The same endpoint with keys the stranger holds changes nothing either.
      const hijack = pushService.newSubscription(applicationServerKey);
      assert.equal((await signUp({ shop: domain, email: victim, push: { endpoint: victimBrowser.endpoint, keys: hijack.keys } })).statusCode, 201);

      const sub = await subscriptionOf(domain, victim);
      const points = await contactPoints(sub.id);
      assert.equal(points.length, 2, 'two browsers');
      assert.equal(JSON.parse(points.find((point) => point.address === victimBrowser.endpoint)!.details).p256dh, victimBrowser.keys.p256dh, 'the shopper’s browser keeps its keys');

      await restock(domain);
      assert.equal(pushesTo(victimBrowser).length, 1, 'the shopper’s browser gets its alert');
      assert.deepEqual(pushService.undecryptable, [], 'encrypted for the shopper’s own keys');
      assert.equal(pushesTo(attacker).length, 1, 'and the stranger’s its own');
    });

    it(`finding 2: one alert gathers at most ${CONTACT_POINTS_PER_CHANNEL} phones; one more is refused with a problem and nothing changes`, BOUND, async () => {
      const domain = await shop();
      const email = uniqueEmail('many');
      for (let i = 0; i < CONTACT_POINTS_PER_CHANNEL; i++) {
        assert.equal((await signUp({ shop: domain, email, phone: uniquePhone(), smsConsent: true, smsConsentText: SMS_CONSENT })).statusCode, 201);
      }
      const sub = await subscriptionOf(domain, email);
      const before = await contactPoints(sub.id);
      const refused = await signUp({ shop: domain, email, phone: uniquePhone(), smsConsent: true, smsConsentText: SMS_CONSENT });
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.headers['content-type'], 'application/problem+json; charset=utf-8');
      assert.equal(refused.json().type, `${base}/problems/too-many-contact-points`);
      assert.equal(refused.json().limit, CONTACT_POINTS_PER_CHANNEL);
      assert.deepEqual(await contactPoints(sub.id), before, 'nothing changed');
    });

    it('suspicion: storefront sign-ups are first-party and typed by anyone — confirmed; a store requiring double opt-in alerts only addresses that proved themselves', BOUND, async () => {
      const domain = await shop({ doubleOptIn: 'always' });
      const junk = Array.from({ length: 5 }, () => uniqueEmail('junk'));
      for (const email of junk) assert.equal((await signUp({ shop: domain, email })).statusCode, 201);
      const rows = await Promise.all(junk.map((email) => subscriptionOf(domain, email)));
      assert.ok(
        rows.every((row) => row.third_party === 0),
        'the widget’s sign-ups are the store’s own: nothing a stranger types can tell them from a shopper’s',
      );
      const shopper = uniqueEmail('shopper');
      assert.equal((await signUp({ shop: domain, email: shopper })).statusCode, 201);
      await t.runWorker();
      const mail = await sink.waitFor((m) => m.recipients.includes(shopper) && /^Confirm your back-in-stock alert/.test(m.subject));
      const confirm = new URL(new RegExp(`${base}/confirm/\\S+`).exec(mail.text)![0]).pathname;
      assert.equal((await t.app.inject({ method: 'POST', url: confirm, headers: SAME_ORIGIN, payload: '' })).statusCode, 200);

      await restock(domain);
      const alerted = await t.database.db.selectFrom('notifications').select('email').where('store_domain', '=', domain).where('kind', '=', 'alert').execute();
      assert.deepEqual(
        alerted.map((row) => row.email),
        [shopper],
        'only the confirmed shopper is alerted; the junk never took a place in the batch or the allowance',
      );
    });
  });
}
