// Longer than most files on purpose: the channels feature's "done when" points end to end (three channels, STOP, a gone browser, quiet hours, double opt-in, the shopper's page against the dashboard) on both databases.
/**
 * SMS and web push beside e-mail, over the real app listening on loopback: shoppers sign up
 * through the storefront API; mail goes through SMTP to the sink; texts go through the official
 * `twilio` SDK to the Twilio stand-in, whose signed inbound webhook brings the shopper's YES and
 * STOP; pushes are encrypted by `web-push` and decrypted by the push service stand-in with the
 * browser's own keys. Time of day and the passing of days are the dispatch worker's clock
 * (`setClock`), never a sleep.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { WHY } from '../src/dispatch/rules.ts';
import { OPTED_OUT } from '../src/sms/channel.ts';
import { agentOfMailed, createStore, uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { dialectSkip, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { channelAppForSuite } from './fixtures/channel-peers.ts';
import type { BrowserSubscription, PushServiceStandIn } from './fixtures/push-service.ts';
import type { SinkMessage, SmtpSink } from './fixtures/smtp-sink.ts';
import { before, describe, it } from './fixtures/suites.ts';
import type { TwilioStandIn } from './fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;
/** Each test's bound: far above what it takes, so only a hang trips it. */
const BOUND = { timeout: 60_000 };

/** The service's own Twilio account, with one number. */
const TWILIO = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550006' };
const SOURCE = { kind: 'inventory-api', ref: 'agt_channels_test', verified: false } as const;
const SMS_CONSENT = 'Text me once when it is back. Msg & data rates may apply. Reply STOP to end.';
const HTML = { accept: 'text/html,application/xhtml+xml' };
const SAME_ORIGIN = { ...HTML, 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' };

/** The store's catalogue: each product sold out until a test restocks it. */
const PRODUCTS = {
  mug: { id: 'gid://shopify/Product/1001', title: 'Blue mug', url: 'https://shop.example/products/blue-mug' },
  kettle: { id: 'gid://shopify/Product/1002', title: 'Red kettle', url: 'https://shop.example/products/red-kettle' },
  lamp: { id: 'gid://shopify/Product/1003', title: 'Brass lamp', url: 'https://shop.example/products/brass-lamp' },
} as const;
type Product = keyof typeof PRODUCTS;

let serial = 0;
/** A phone of its own per test: a STOP or a YES never reaches another test's subscriptions. */
const uniquePhone = () => `+1555${String(1_000_000 + ++serial).slice(1)}${Math.floor(Math.random() * 10)}`;

/** The first link in a text that goes through our click redirect. */
const LINK = /(https?:\/\/\S+\/r\/\S+)/;

/**
 * `hour:minute` in Paris on the day `daysAhead` days from now (ms since the epoch). Paris is
 * UTC+1 in winter and UTC+2 in summer: the offset that gives that local time is the one.
 */
function parisTime(daysAhead: number, hour: number, minute: number): number {
  const day = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Paris', year: 'numeric', month: '2-digit', day: '2-digit' }).format(Date.now() + daysAhead * DAY_MS);
  const [year, month, date] = day.split('-').map(Number) as [number, number, number];
  const clock = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hourCycle: 'h23', hour: '2-digit', minute: '2-digit' });
  const wanted = `${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}`;
  for (const offset of [1, 2]) {
    const at = Date.UTC(year, month - 1, date, hour - offset, minute);
    if (clock.format(at) === wanted) return at;
  }
  throw new Error(`no ${wanted} in Paris on ${day}`);
}

for (const dialect of testDialects()) {
  describe(`channels beside e-mail on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    const suite = channelAppForSuite(dialect, TWILIO);
    let sink: SmtpSink;
    let twilio: TwilioStandIn;
    let pushService: PushServiceStandIn;
    let t: TestApp;
    let base: string;
    /** Where Twilio posts texts sent to the service's number. */
    let inbound: string;
    /** The VAPID key browsers subscribe with. */
    let applicationServerKey: string;

    before(() => {
      ({ sink, twilio, pushService, t, base, applicationServerKey } = suite());
      inbound = `${base}/sms/twilio/inbound`;
    });

    // --- helpers ---------------------------------------------------------------------------

    /** A store with every product sold out; no quiet hours unless the test sets them (the real time of day must not decide). */
    async function shop(settings: Record<string, unknown> = {}): Promise<{ domain: string; owner: string }> {
      const domain = uniqueDomain('channels');
      const owner = uniqueEmail('owner');
      await createStore(t.database, domain, owner);
      await t.app.restock.stores.updateSettings(domain, { smsQuietHours: { start: 0, end: 0 }, ...settings });
      await t.app.restock.inventory.reportStock(
        domain,
        Object.values(PRODUCTS).map((product) => ({ productId: product.id, variantId: null, available: 0, productTitle: product.title, productUrl: product.url })),
        SOURCE,
      );
      return { domain, owner };
    }

    /** The storefront widget's sign-up, as a product page posts it. */
    function subscribe(body: Record<string, unknown>): Promise<LightMyRequestResponse> {
      return t.app.inject({
        method: 'POST',
        url: '/storefront/v1/subscribe',
        headers: { 'content-type': 'application/json', origin: 'https://shop.example' },
        payload: JSON.stringify(body),
      });
    }

    /** Stock for a product, and the worker's run that follows. */
    async function restock(domain: string, productId: Product, available = 5): Promise<void> {
      await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCTS[productId].id, variantId: null, available }], SOURCE);
      await t.runWorker();
    }

    const subscriptionOf = async (domain: string, email: string, productId: Product) => {
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', domain).where('email', '=', email).where('product_id', '=', PRODUCTS[productId].id).executeTakeFirst();
      assert.ok(row, `a subscription of ${email} for ${productId}`);
      return row;
    };
    const statusOf = async (id: string) => (await t.database.db.selectFrom('subscriptions').select('status').where('id', '=', id).executeTakeFirst())?.status;
    const contactPoints = (subscriptionId: string) =>
      t.database.db.selectFrom('contact_points').selectAll().where('subscription_id', '=', subscriptionId).orderBy('channel').execute();
    /** The ledger's rows for a subscription, by channel. */
    const ledger = (subscriptionId: string) =>
      t.database.db.selectFrom('notifications').selectAll().where('subscription_id', '=', subscriptionId).where('kind', '=', 'alert').orderBy('channel').execute();
    const channelsAndStatuses = async (subscriptionId: string) => (await ledger(subscriptionId)).map((row) => [row.channel, row.status]);

    const textsTo = (phone: string) => twilio.messages.filter((message) => message.to === phone);
    /** Alert texts (they carry our link); the double opt-in question does not. */
    const alertTextsTo = (phone: string) => textsTo(phone).filter((message) => LINK.test(message.body));
    const pushesTo = (browser: BrowserSubscription) => pushService.messages.filter((message) => message.endpoint === browser.endpoint);
    const mailsTo = (email: string) => sink.messages.filter((message) => message.recipients.includes(email));
    const alertMail = (email: string, productId: Product) => sink.waitFor((m) => m.recipients.includes(email) && m.subject === `${PRODUCTS[productId].title} is back in stock`);

    /** Where a link of ours leads, followed as a shopper's browser would. */
    async function follow(link: string): Promise<URL> {
      assert.ok(link.startsWith(`${base}/`), `a link to our own origin: ${link}`);
      const { pathname, search } = new URL(link);
      const res = await t.app.inject({ method: 'GET', url: `${pathname}${search}`, headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0' } });
      assert.equal(res.statusCode, 302, `${link}: ${res.body}`);
      return new URL(res.headers.location as string);
    }

    /** The product page a redirect landed on, without the UTM parameters. */
    const page = (url: URL) => `${url.origin}${url.pathname}`;

    /**
     * SMS is always double opt-in: the worker texts the question, which must reach the phone
     * before the shopper's YES comes back through Twilio's signed webhook.
     */
    async function answerYes(phone: string, questions = 1): Promise<void> {
      await t.runWorker();
      const asked = textsTo(phone);
      assert.equal(asked.length, questions, `${questions} "reply YES" text(s) reached the phone before any YES: ${JSON.stringify(asked.map((m) => m.body))}`);
      for (const question of asked) {
        assert.ok(question.body.includes('YES') && !LINK.test(question.body), `the question asks for YES and carries no alert link: ${question.body}`);
        assert.equal(question.from, TWILIO.from, "from the service's number");
      }
      const answer = await twilio.textFrom(phone, TWILIO.from, 'YES', inbound);
      assert.equal(answer.status, 200, answer.body);
      assert.match(answer.body, /you're subscribed/, 'the YES is acknowledged in TwiML');
    }

    const linkIn = (mail: SinkMessage, label: string) => {
      const found = new RegExp(`${label}: (\\S+)`).exec(mail.text)?.[1];
      assert.ok(found, `"${label}" link in: ${mail.text}`);
      return found;
    };

    // --- 1. one shopper, three channels ---------------------------------------------------

    it("an agent's subscribeAlert adds the phone with the consent words it gave, pending until the YES; a phone without them is refused and nothing is stored", BOUND, async () => {
      const { domain, owner } = await shop();
      const agent = await agentOfMailed(t.app, sink, domain, owner);
      const subscribeAlert = (body: Record<string, unknown>) =>
        t.app.inject({ method: 'POST', url: '/api/v1/alerts/subscribe', headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
      const phone = uniquePhone();
      const refused = await subscribeAlert({ shop: domain, productId: PRODUCTS.mug.id, email: uniqueEmail('no-words'), phone });
      assert.equal(refused.statusCode, 400, refused.body);
      assert.deepEqual(refused.json().errors.map((error: { pointer: string }) => error.pointer), ['/body/smsConsentText'], 'the missing words are named');
      assert.equal((await t.database.db.selectFrom('contact_points').select('id').where('address_key', '=', phone).execute()).length, 0, 'no phone stored');

      const email = uniqueEmail('agent-shopper');
      const res = await subscribeAlert({ shop: domain, productId: PRODUCTS.mug.id, email, phone, smsConsentText: SMS_CONSENT });
      assert.equal(res.statusCode, 200, res.body);
      const points = await t.database.db.selectFrom('contact_points').selectAll().where('subscription_id', '=', res.json().subscriptionId).execute();
      assert.deepEqual(
        points.map((point) => [point.channel, point.address, point.status, point.consent_method, point.consent_text]),
        [['sms', phone, 'pending', 'agent-api', SMS_CONSENT]],
        'the phone waits for its own YES, with the words the agent said the shopper agreed to',
      );
    });

    it('a shopper signs up by e-mail, SMS and push; after the YES a restock reaches all three, each link through our redirect', BOUND, async () => {
      const { domain } = await shop();
      const email = uniqueEmail('three');
      const phone = uniquePhone();
      const browser = pushService.newSubscription(applicationServerKey);
      const res = await subscribe({ shop: domain, productId: PRODUCTS.mug.id, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT, push: browser, timeZone: 'Europe/Paris' });
      assert.equal(res.statusCode, 201, res.body);
      assert.deepEqual(res.json(), { status: 'subscribed', confirmBy: ['sms'] }, 'only the phone waits for a confirmation');
      const sub = await subscriptionOf(domain, email, 'mug');
      assert.equal(sub.status, 'active', 'e-mail needs no confirmation at this store');
      assert.deepEqual((await contactPoints(sub.id)).map((p) => [p.channel, p.status, p.time_zone]), [['push', 'active', 'Europe/Paris'], ['sms', 'pending', 'Europe/Paris']]);

      await answerYes(phone);
      assert.deepEqual((await contactPoints(sub.id)).map((p) => [p.channel, p.status]), [['push', 'active'], ['sms', 'active']], 'the YES made the phone active');

      await restock(domain, 'mug');
      const mail = await alertMail(email, 'mug');
      const shopNow = linkIn(mail, 'Shop now');
      assert.ok(shopNow.startsWith(`${base}/r/${domain}/`), `the mail's button goes through our redirect: ${shopNow}`);
      assert.equal(page(await follow(shopNow)), PRODUCTS.mug.url, 'and lands on the product');

      const texts = alertTextsTo(phone);
      assert.equal(texts.length, 1, 'one alert text');
      assert.ok(texts[0]!.body.includes(PRODUCTS.mug.title), `the text names the product: ${texts[0]!.body}`);
      const textLink = LINK.exec(texts[0]!.body)![1]!;
      assert.ok(textLink.startsWith(`${base}/r/${domain}/`), `the text's link is our click redirect: ${textLink}`);
      const landed = await follow(textLink);
      assert.equal(page(landed), PRODUCTS.mug.url, 'the text link lands on the product');
      assert.equal(landed.searchParams.get('utm_source'), 'restock', 'with the store’s UTM parameters');
      assert.equal(landed.searchParams.get('utm_medium'), 'sms', 'the default medium names the channel the visit came from');

      const pushes = pushesTo(browser);
      assert.equal(pushes.length, 1, 'one push message');
      assert.deepEqual(pushService.undecryptable, [], 'every push decrypted with the browser’s keys');
      const payload = JSON.parse(pushes[0]!.plaintext) as { title: string; url: string; tag: string; stop: { url: string; label: string } };
      assert.equal(payload.stop.label, 'Stop alerts in this browser', "the notification's second button");
      assert.ok(payload.stop.url.startsWith(`${base}/stop/`), `opens this browser's stop page: ${payload.stop.url}`);
      assert.equal((await t.app.inject({ method: 'GET', url: new URL(payload.stop.url).pathname, headers: { accept: 'text/html' } })).statusCode, 200, 'the stop page opens');
      assert.ok(payload.title.includes(PRODUCTS.mug.title), `the decrypted notification names the product: ${payload.title}`);
      assert.ok(payload.url.startsWith(`${base}/r/${domain}/`), `and links through our redirect: ${payload.url}`);
      const opened = await follow(payload.url);
      assert.equal(page(opened), PRODUCTS.mug.url, 'the notification opens the product');
      assert.equal(opened.searchParams.get('utm_medium'), 'push', 'a push visit is not counted as e-mail');

      assert.deepEqual(await channelsAndStatuses(sub.id), [['email', 'sent'], ['push', 'sent'], ['sms', 'sent']], 'the ledger: one alert per channel, each sent');
      const smsRow = (await ledger(sub.id)).find((row) => row.channel === 'sms');
      assert.ok(smsRow, 'an SMS row in the ledger');
      assert.equal(smsRow.provider_ref, texts[0]!.sid, "the ledger knows the text by Twilio's Message SID");
      await twilio.settled();
      const reported = (await ledger(sub.id)).find((row) => row.channel === 'sms')!;
      assert.deepEqual([reported.delivery_status, reported.outcome], ['delivered', 'delivered to the phone'], "Twilio's delivery report is recorded, even when it came before the send was settled");
      assert.equal(await statusOf(sub.id), 'notified');

      // What each channel did, as the performance report and the dashboard show it.
      await t.app.restock.conversions.recordOrder({
        storeDomain: domain,
        orderId: `order-${sub.id}`,
        email,
        placedAt: new Date().toISOString(),
        source: 'api',
        lines: [{ lineId: 'l1', productId: PRODUCTS.mug.id, variantId: null, quantity: 1, amount: { minor: 2500, currency: 'EUR' }, shopAmount: { minor: 2500, currency: 'EUR' } }],
      });
      const owner = { agentId: 'test', scopes: new Set<string>(), storeDomain: domain, rateLimitPerMinute: 0, tokenId: 'test' };
      const { byChannel } = await t.app.restock.conversions.performance(owner, domain);
      assert.deepEqual(
        byChannel.map((row) => [row.channel, row.sent, row.clicks]),
        [['email', 1, 1], ['sms', 1, 1], ['push', 1, 1]],
        'one alert and one click per channel',
      );
      assert.equal(byChannel.reduce((sum, row) => sum + row.orders, 0), 1, 'the order is credited to one channel');
      assert.equal(byChannel.reduce((sum, row) => sum + row.revenueMinor, 0), 2500, 'with its revenue');
    });

    // --- 2. STOP --------------------------------------------------------------------------

    it('after STOP from the phone the next restock texts nothing, the e-mail still goes, and the ledger says why', BOUND, async () => {
      // Two alerts to one address within minutes: no frequency cap to hold the second back.
      const { domain } = await shop({ frequencyCapMinutes: 0 });
      const email = uniqueEmail('stop');
      const phone = uniquePhone();
      for (const productId of ['mug', 'kettle'] as const) {
        const res = await subscribe({ shop: domain, productId: PRODUCTS[productId].id, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT, timeZone: 'Europe/Paris' });
        assert.equal(res.statusCode, 201, res.body);
      }
      await answerYes(phone, 2);
      const mug = await subscriptionOf(domain, email, 'mug');
      const kettle = await subscriptionOf(domain, email, 'kettle');
      for (const sub of [mug, kettle]) assert.deepEqual((await contactPoints(sub.id)).map((p) => p.status), ['active'], `one YES confirms the number for ${sub.product_id}`);

      await restock(domain, 'mug');
      assert.equal(alertTextsTo(phone).length, 1, 'texts reach the phone before the STOP');

      const stop = await twilio.textFrom(phone, TWILIO.from, 'STOP', inbound);
      assert.equal(stop.status, 200, stop.body);
      await restock(domain, 'kettle');
      await alertMail(email, 'kettle');
      assert.equal(alertTextsTo(phone).length, 1, 'no text after the STOP');
      assert.ok(!alertTextsTo(phone).some((m) => m.body.includes(PRODUCTS.kettle.title)), 'no kettle alert was handed to Twilio');
      const rows = await ledger(kettle.id);
      assert.deepEqual(rows.map((row) => [row.channel, row.status]), [['email', 'sent'], ['sms', 'skipped']]);
      assert.equal(rows.find((row) => row.channel === 'sms')?.outcome, OPTED_OUT, 'the SMS row says why it was not sent');
    });

    // --- 3. a browser gone ----------------------------------------------------------------

    it('a push endpoint answering 410 removes the browser; the e-mail still goes', BOUND, async () => {
      const { domain } = await shop();
      const email = uniqueEmail('gone');
      const browser = pushService.newSubscription(applicationServerKey);
      const res = await subscribe({ shop: domain, productId: PRODUCTS.mug.id, email, push: browser });
      assert.equal(res.statusCode, 201, res.body);
      assert.deepEqual(res.json().confirmBy, [], 'a browser’s permission is its consent');
      // The same browser also waits for the kettle, which is not restocked.
      assert.equal((await subscribe({ shop: domain, productId: PRODUCTS.kettle.id, email, push: browser })).statusCode, 201);
      const sub = await subscriptionOf(domain, email, 'mug');
      const kettle = await subscriptionOf(domain, email, 'kettle');
      pushService.gone(browser.endpoint);

      await restock(domain, 'mug');
      await alertMail(email, 'mug');
      assert.ok(pushService.answers.some((answer) => answer.endpoint === browser.endpoint && answer.status === 410), 'the push service answered 410');
      assert.equal(pushesTo(browser).length, 0, 'nothing reached the browser');
      const rows = await ledger(sub.id);
      assert.deepEqual(rows.map((row) => [row.channel, row.status]), [['email', 'sent'], ['push', 'failed']]);
      assert.match(rows[1]!.outcome ?? '', /gone \(410\)/, 'the ledger says the subscription is gone');
      const [point] = await contactPoints(sub.id);
      assert.equal(point?.status, 'removed', 'the browser is never pushed to again');
      assert.match(point?.status_reason ?? '', /410/, 'with the reason');
      assert.deepEqual((await contactPoints(kettle.id)).map((p) => p.status), ['removed'], 'and not for the kettle either: the browser’s subscription is gone for every alert');
    });

    // --- 4. quiet hours -------------------------------------------------------------------

    it("defers a text due in the shopper's quiet hours (their time zone, not the store's) and sends it in the morning", BOUND, async () => {
      // The store is in New York, where 23:00 in Paris is the afternoon: only the shopper's zone makes it night.
      const { domain } = await shop({ smsQuietHours: { start: 21, end: 9 }, timeZone: 'America/New_York' });
      const email = uniqueEmail('night');
      const phone = uniquePhone();
      const res = await subscribe({ shop: domain, productId: PRODUCTS.mug.id, email, phone, smsConsent: true, smsConsentText: SMS_CONSENT, timeZone: 'Europe/Paris' });
      assert.equal(res.statusCode, 201, res.body);
      await answerYes(phone);
      const sub = await subscriptionOf(domain, email, 'mug');

      // A night in the coming days without a change of offset in it (a DST night would be 9 or 11 h long).
      let day = 2;
      while (parisTime(day + 1, 9, 0) - parisTime(day, 23, 0) !== 10 * HOUR_MS && day < 10) day++;
      const night = parisTime(day, 23, 0);
      const nine = parisTime(day + 1, 9, 0);
      const worker = t.app.restock.worker;
      try {
        worker.setClock(() => night);
        await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCTS.mug.id, variantId: null, available: 5 }], SOURCE);
        await t.runWorker();
        await alertMail(email, 'mug');
        assert.equal(alertTextsTo(phone).length, 0, 'no text at 23:00 in Paris');
        const deferred = (await ledger(sub.id)).find((row) => row.channel === 'sms');
        assert.ok(deferred, 'the text is in the ledger, not dropped');
        const until = new Date(nine).toISOString();
        assert.deepEqual([deferred.status, deferred.next_attempt_at, deferred.outcome], ['queued', until, WHY.quietHours(until)], 'deferred to 09:00 in Paris, not dropped');

        worker.setClock(() => nine - 60_000);
        await t.runWorker();
        assert.equal(alertTextsTo(phone).length, 0, 'still nothing at 08:59');

        worker.setClock(() => nine + 5 * 60_000);
        await t.runWorker();
        const texts = alertTextsTo(phone);
        assert.equal(texts.length, 1, 'the text goes at 09:05');
        assert.ok(texts[0]!.body.includes(PRODUCTS.mug.title), texts[0]!.body);
        const sent = (await ledger(sub.id)).find((row) => row.channel === 'sms');
        assert.ok(sent, 'the text is still in the ledger');
        assert.deepEqual([sent.status, sent.sent_at], ['sent', new Date(nine + 5 * 60_000).toISOString()], 'recorded as sent at 09:05');
        assert.deepEqual(await channelsAndStatuses(sub.id), [['email', 'sent'], ['sms', 'sent']], 'one alert per channel, none twice');
      } finally {
        worker.setClock(undefined);
      }
    });

    // --- 5. double opt-in -----------------------------------------------------------------

    it('double opt-in: pending until the link is confirmed (GET shows a button, POST confirms), expired when not, alerted only once confirmed', BOUND, async () => {
      const { domain } = await shop({ doubleOptIn: 'always' });
      const late = uniqueEmail('never-confirms');
      const keen = uniqueEmail('confirms');
      const viaAgent = uniqueEmail('agent-made');
      for (const email of [late, keen]) {
        const res = await subscribe({ shop: domain, productId: PRODUCTS.mug.id, email });
        assert.equal(res.statusCode, 201, res.body);
        assert.deepEqual(res.json(), { status: 'subscribed', confirmBy: ['email'] }, 'the form says to click the e-mailed link');
      }
      const agent = await t.post('/api/v1/alerts/subscribe', { shop: domain, productId: PRODUCTS.mug.id, email: viaAgent });
      assert.equal(agent.statusCode, 200, agent.body);
      assert.equal(agent.json().status, 'pending', "an agent's subscription at a double opt-in store is pending, as documented");
      const ids = { late: (await subscriptionOf(domain, late, 'mug')).id, keen: (await subscriptionOf(domain, keen, 'mug')).id, viaAgent: agent.json().subscriptionId as string };
      for (const [who, id] of Object.entries(ids)) assert.equal(await statusOf(id), 'pending', `${who}: pending`);

      await t.runWorker();
      const confirmLink = async (email: string) => {
        const mail = await sink.waitFor((m) => m.recipients.includes(email) && /^Confirm your back-in-stock alert/.test(m.subject));
        const link = new RegExp(`${base}/confirm/\\S+`).exec(mail.text)?.[0];
        assert.ok(link, `a /confirm/ link in: ${mail.text}`);
        return new URL(link).pathname;
      };
      const links = { late: await confirmLink(late), keen: await confirmLink(keen), viaAgent: await confirmLink(viaAgent) };

      await restock(domain, 'mug');
      for (const [who, id] of Object.entries(ids)) {
        assert.deepEqual(await ledger(id), [], `${who}: a pending subscription is not alerted`);
        assert.equal(await statusOf(id), 'pending', `${who}: still pending after the restock`);
      }
      for (const email of [late, keen, viaAgent]) assert.equal(mailsTo(email).length, 1, `${email}: the confirmation request only`);

      const shown = await t.app.inject({ method: 'GET', url: links.keen, headers: HTML });
      assert.equal(shown.statusCode, 200, shown.body);
      assert.ok(shown.body.includes('<form method="post"><button type="submit">Yes, alert me</button></form>'), `GET shows the button: ${shown.body}`);
      assert.equal(await statusOf(ids.keen), 'pending', 'GET changes nothing (mail scanners open links)');
      for (const who of ['keen', 'viaAgent'] as const) {
        const confirmed = await t.app.inject({ method: 'POST', url: links[who], headers: SAME_ORIGIN, payload: '' });
        assert.equal(confirmed.statusCode, 200, confirmed.body);
        assert.ok(confirmed.body.includes('Your alert is confirmed'), `${who}: ${confirmed.body}`);
        assert.equal(await statusOf(ids[who]), 'active', `${who}: active once confirmed`);
      }

      // The expiry passes on the worker's clock; its job expires what is still pending.
      const worker = t.app.restock.worker;
      try {
        worker.setClock(() => Date.now() + (t.config.doubleOptInExpiryHours + 1) * HOUR_MS);
        await t.runWorker();
      } finally {
        worker.setClock(undefined);
      }
      assert.equal(await statusOf(ids.late), 'expired', 'left unconfirmed past the expiry');
      const tooLate = await t.app.inject({ method: 'POST', url: links.late, headers: SAME_ORIGIN, payload: '' });
      assert.ok(tooLate.body.includes('This request has expired'), `the link no longer confirms: ${tooLate.body}`);
      assert.equal(await statusOf(ids.late), 'expired', 'and stays expired');

      await restock(domain, 'mug', 0);
      await restock(domain, 'mug');
      await alertMail(keen, 'mug');
      await alertMail(viaAgent, 'mug');
      for (const who of ['keen', 'viaAgent'] as const) assert.deepEqual(await channelsAndStatuses(ids[who]), [['email', 'sent']], `${who}: alerted once confirmed`);
      assert.deepEqual(await ledger(ids.late), [], 'the expired one is never alerted');
      assert.equal(mailsTo(late).length, 1, 'the expired shopper got the confirmation request and nothing else');
    });

    // --- 6. the shopper's page and the dashboard ------------------------------------------

    it("from the alert mail's link the shopper cancels one alert, then all, exports and erases; the dashboard's counts follow each step", BOUND, async () => {
      const { domain, owner } = await shop();
      const email = uniqueEmail('page');
      const neighbour = uniqueEmail('neighbour');
      for (const productId of ['mug', 'kettle', 'lamp'] as const) assert.equal((await subscribe({ shop: domain, productId: PRODUCTS[productId].id, email })).statusCode, 201);
      assert.equal((await subscribe({ shop: domain, productId: PRODUCTS.kettle.id, email: neighbour })).statusCode, 201);
      await restock(domain, 'mug');
      const manage = new URL(linkIn(await alertMail(email, 'mug'), 'Manage your alerts'));
      assert.equal(manage.origin, base, `the manage link is ours: ${manage.href}`);
      const path = manage.pathname;
      const ids = { mug: (await subscriptionOf(domain, email, 'mug')).id, kettle: (await subscriptionOf(domain, email, 'kettle')).id, lamp: (await subscriptionOf(domain, email, 'lamp')).id };

      const cookie = await signIn(domain, owner);
      /** What the dashboard shows: the overview's tiles and the demand page's waiting shoppers per product. */
      async function dashboard() {
        const overview = await t.app.inject({ method: 'GET', url: '/dashboard', headers: { ...HTML, cookie } });
        assert.equal(overview.statusCode, 200, overview.body);
        const tile = (label: string) => {
          const found = new RegExp(`<span class="value">(\\d+)</span>${label}<`).exec(overview.body);
          assert.ok(found, `the "${label}" tile: ${overview.body}`);
          return Number(found[1]);
        };
        const demandPage = await t.app.inject({ method: 'GET', url: '/dashboard/demand', headers: { ...HTML, cookie } });
        assert.equal(demandPage.statusCode, 200, demandPage.body);
        const demand: Record<string, number> = {};
        for (const [, title, waiting] of demandPage.body.matchAll(/<tr><td>([^<]+)<\/td><td>[^<]*<\/td>\s*<td class="num">(\d+)<\/td>/g)) demand[title!] = Number(waiting);
        return { waiting: tile('Waiting subscribers'), unsubscribed: tile('Unsubscribed'), demand };
      }
      const postForm = (url: string, fields: Record<string, string> = {}) => t.app.inject({ method: 'POST', url, headers: SAME_ORIGIN, payload: new URLSearchParams(fields).toString() });

      assert.deepEqual(await dashboard(), { waiting: 3, unsubscribed: 0, demand: { 'Red kettle': 2, 'Brass lamp': 1 } }, 'before: the kettle and the lamp wait; the mug was alerted');
      const opened = await t.app.inject({ method: 'GET', url: path, headers: HTML });
      assert.equal(opened.statusCode, 200, opened.body);
      for (const id of Object.values(ids)) assert.ok(opened.body.includes(`value="${id}"`), `the page lists ${id}`);

      const one = await postForm(`${path}/cancel`, { subscription: ids.kettle });
      assert.equal(one.statusCode, 303, one.body);
      assert.deepEqual(await dashboard(), { waiting: 2, unsubscribed: 1, demand: { 'Red kettle': 1, 'Brass lamp': 1 } }, 'one alert cancelled: the kettle has the neighbour left');

      const all = await postForm(`${path}/cancel`);
      assert.equal(all.statusCode, 303, all.body);
      for (const [product, id] of Object.entries(ids)) assert.equal(await statusOf(id), 'unsubscribed', `${product}: cancelled`);
      assert.deepEqual(await dashboard(), { waiting: 1, unsubscribed: 3, demand: { 'Red kettle': 1 } }, 'all cancelled: only the neighbour waits');

      const exported = await t.app.inject({ method: 'GET', url: `${path}/data.json` });
      assert.equal(exported.statusCode, 200, exported.body);
      assert.match(String(exported.headers['content-disposition']), /^attachment; /, 'a download');
      const data = exported.json();
      assert.equal(data.email, email);
      assert.deepEqual(data.subscriptions.map((s: { productId: string; status: string }) => [s.productId, s.status]).sort(), [[PRODUCTS.mug.id, 'unsubscribed'], [PRODUCTS.kettle.id, 'unsubscribed'], [PRODUCTS.lamp.id, 'unsubscribed']]);
      assert.deepEqual(data.alertsSent.map((a: { productId: string }) => a.productId), [PRODUCTS.mug.id], 'the one alert sent');
      assert.deepEqual(await dashboard(), { waiting: 1, unsubscribed: 3, demand: { 'Red kettle': 1 } }, 'an export changes nothing');

      const confirmErase = await t.app.inject({ method: 'GET', url: `${path}/erase`, headers: HTML });
      assert.equal(confirmErase.statusCode, 200, confirmErase.body);
      const erased = await postForm(`${path}/erase`);
      assert.equal(erased.statusCode, 200, erased.body);
      assert.ok(erased.body.includes('Your data is erased'), erased.body);
      for (const id of Object.values(ids)) assert.equal(await statusOf(id), undefined, `${id} erased`);
      assert.deepEqual(await dashboard(), { waiting: 1, unsubscribed: 0, demand: { 'Red kettle': 1 } }, 'erased: the shopper is gone from the counts, the neighbour still waits');
      assert.equal((await t.app.inject({ method: 'GET', url: path, headers: HTML })).statusCode, 404, 'the manage link is dead');
    });

    /** Signs in to the dashboard as the store's owner, by the link mailed to them; returns the session cookie. */
    async function signIn(domain: string, owner: string): Promise<string> {
      const asked = await t.app.inject({ method: 'POST', url: '/dashboard/sign-in', headers: { ...HTML, 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ shop: domain }).toString() });
      assert.equal(asked.statusCode, 200, asked.body);
      const mail = await sink.waitFor((m) => m.recipients.includes(owner) && m.text.includes('/dashboard/sign-in/'));
      const link = new RegExp(`${base}(/dashboard/sign-in/[A-Za-z0-9_-]+)`).exec(mail.text)?.[1];
      assert.ok(link, `a sign-in link in: ${mail.text}`);
      const used = await t.app.inject({ method: 'POST', url: link, headers: { ...HTML, 'content-type': 'application/x-www-form-urlencoded' }, payload: '' });
      assert.equal(used.statusCode, 303, used.body);
      const cookie = [used.headers['set-cookie'] ?? []].flat().find((line) => line.startsWith('restock_dashboard='))?.split(';')[0];
      assert.ok(cookie, 'a session cookie');
      return cookie;
    }
  });
}
