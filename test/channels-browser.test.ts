/**
 * The channels feature's first "done when" point, in Chromium, on both databases: one shopper
 * subscribes by e-mail, SMS and push on one product page; a restock reaches the SMTP sink, the
 * Twilio stand-in (with a link through our redirect) and the push stand-in (payload decrypted).
 *
 * The product page is served on the store's own origin by the app proxy stand-in, so the real
 * widget registers the real service worker there. Only `PushManager.prototype.subscribe` is
 * stubbed (headless Chromium cannot reach Google's push service): it hands over a real
 * subscription of the push stand-in, made with the VAPID key the widget passed, so the worker's
 * push is encrypted by `web-push` and decrypted by the stand-in with the browser's own keys. The
 * shopper's YES comes back through the Twilio stand-in's signed inbound webhook. No sleeps: every
 * wait is on something observable (a status message, a mail, a worker run that has returned).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { createStore, uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { browserSkipReason, launchBrowser } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startChannelPeers, type ChannelPeers } from './fixtures/channel-peers.ts';
import type { BrowserSubscription, PushServiceStandIn } from './fixtures/push-service.ts';
import { STUB_SUBSCRIBE } from './fixtures/push-stub.ts';
import { PROXY_PREFIX, startStorefront } from './fixtures/shopify-app-proxy.ts';
import type { SinkMessage, SmtpSink } from './fixtures/smtp-sink.ts';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { TwilioStandIn } from './fixtures/twilio-stand-in.ts';

failOnLeakedHandles();

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** Far above what the test takes: only a hang trips it. */
const BOUND = { timeout: 90_000 };
/** The service's own Twilio account, with one number. */
const TWILIO = { accountSid: `AC${hex(16)}`, authToken: hex(16), from: '+15005550006' };
const SECRET = `shpss_${hex(16)}`;
const SOURCE = { kind: 'inventory-api', ref: 'channels browser test', verified: false } as const;
const PRODUCT = { id: 'gid://shopify/Product/8001', title: 'Blue mug', path: '/products/blue-mug' };
const TIME_ZONE = 'Europe/Paris';
/** A French mobile, as the shopper types it. */
const TYPED_PHONE = '+33 6 12 34 56 78';
const PHONE = '+33612345678';

const EN = {
  success: 'Thank you! We’ll e-mail you when it’s back in stock.',
  confirmSms: 'Reply YES to the text we sent to confirm.',
  push: 'Also notify me in this browser',
};

/** The first link in a text that goes through our click redirect. */
const LINK = /(https?:\/\/\S+\/r\/\S+)/;

const browserSkip = browserSkipReason();

describe('one shopper, three channels, in Chromium', { skip: browserSkip }, () => {
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  for (const dialect of testDialects()) {
    describe(`e-mail, SMS and push from one product page on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
      let peers: ChannelPeers | undefined;
      let sink: SmtpSink;
      let twilio: TwilioStandIn;
      let pushService: PushServiceStandIn;
      let t: TestApp;
      let base: string;
      let store: Awaited<ReturnType<typeof startStorefront>>;
      let context: BrowserContext | undefined;
      const domain = uniqueDomain('browser-channels');

      before(async () => {
        peers = await startChannelPeers(TWILIO);
        ({ sink, twilio, pushService } = peers);
        ({ t, base } = await startListeningTestApp(dialect, {
          ...peers.env,
          SHOPIFY_API_KEY: 'restock-channels-browser',
          SHOPIFY_API_SECRET: SECRET,
          RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        }));
        store = await startStorefront({ shop: domain, secret: SECRET, proxyUrl: `${base}/shopify/proxy`, assets: {} });
        await createStore(t.database, domain, uniqueEmail('owner'));
        // No quiet hours: the real time of day must not hold the text back.
        await t.app.restock.stores.updateSettings(domain, { smsQuietHours: { start: 0, end: 0 } });
        await t.app.restock.inventory.reportStock(
          domain,
          [{ productId: PRODUCT.id, variantId: null, available: 0, productTitle: PRODUCT.title, productUrl: `${store.url}${PRODUCT.path}` }],
          SOURCE,
        );
        store.setPage(
          PRODUCT.path,
          `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${PRODUCT.title}</title></head>
<body><main><h1>${PRODUCT.title}</h1><script src="${base}/widget.js" defer data-shop="${domain}" data-product="${PRODUCT.id}" data-proxy="${PROXY_PREFIX}"></script></main></body></html>`,
        );
      });

      after(async () => {
        await context?.close();
        // Delivery reports still on their way to the app are answered before it closes.
        await twilio?.settled();
        await store?.close();
        await t?.close();
        await peers?.close();
      });

      const linkIn = (mail: SinkMessage, label: string) => {
        const found = new RegExp(`${label}: (\\S+)`).exec(mail.text)?.[1];
        assert.ok(found, `"${label}" link in: ${mail.text}`);
        return found;
      };

      /** Follows one of our links in the page, as the shopper's browser would, and says where it landed. */
      async function follow(page: Page, link: string, what: string): Promise<URL> {
        assert.ok(link.startsWith(`${base}/r/${domain}/`), `${what} goes through our click redirect: ${link}`);
        await page.goto(link);
        const landed = new URL(page.url());
        assert.equal(`${landed.origin}${landed.pathname}`, `${store.url}${PRODUCT.path}`, `${what} lands on the product page`);
        await page.getByRole('heading', { level: 1, name: PRODUCT.title }).waitFor();
        return landed;
      }

      it('one shopper subscribes by e-mail, SMS and push on the product page; a restock reaches the mail sink, Twilio and the push service', BOUND, async () => {
        const email = uniqueEmail('three-channels');
        const subscribed: BrowserSubscription[] = [];
        context = await browser.newContext({ timezoneId: TIME_ZONE });
        await context.grantPermissions(['notifications'], { origin: store.url });
        await context.exposeFunction('restockTestSubscribe', (key: string) => {
          const subscription = pushService.newSubscription(key);
          subscribed.push(subscription);
          return subscription;
        });
        await context.addInitScript(STUB_SUBSCRIBE);
        const page = await context.newPage();
        const errors: string[] = [];
        const requests: Request[] = [];
        page.on('pageerror', (error) => errors.push(error.message));
        page.on('request', (request) => requests.push(request));

        // --- the sign-up, in the widget ---------------------------------------------------
        await page.goto(`${store.url}${PRODUCT.path}`);
        const widget = page.locator('restock-widget');
        await widget.locator('form').waitFor({ state: 'visible' });
        await widget.locator('#w').waitFor({ state: 'visible' });
        assert.equal(await page.getByLabel(EN.push).count(), 1, 'the push box is offered, labelled');
        await widget.locator('#e').fill(email);
        await widget.locator('#p').fill(TYPED_PHONE);
        await widget.locator('#c').check();
        await widget.locator('#w').check();
        // Submitted with the keyboard, from the phone field.
        await widget.locator('#p').press('Enter');
        const status = widget.locator('[role="status"]');
        await status.filter({ hasText: EN.confirmSms }).waitFor();
        assert.equal(await status.textContent(), `${EN.success} ${EN.confirmSms}`, 'signed up; the shopper is told to reply YES, and push did not fail');

        const posted = requests.filter((r) => r.method() === 'POST' && /\/subscriptions(\?|$)/.test(r.url()));
        assert.equal(posted.length, 1, `one sign-up, through the app proxy: ${posted.map((r) => r.url()).join(', ')}`);
        assert.equal(subscribed.length, 1, 'pushManager.subscribe handed over one subscription');
        const pushSubscription = subscribed[0]!;
        const body = posted[0]!.postDataJSON();
        assert.deepEqual([body.email, body.phone, body.smsConsent, body.timeZone], [email, PHONE, true, TIME_ZONE], 'the address, the number in E.164, the consent and the browser’s zone');
        assert.deepEqual(body.push, pushSubscription, 'the browser’s subscription is sent');

        const sub = await t.database.db.selectFrom('subscriptions').selectAll().where('store_domain', '=', domain).where('email', '=', email).executeTakeFirst();
        assert.ok(sub, 'the subscription is stored');
        assert.equal(sub.status, 'active', 'the e-mail needs no confirmation at this store');
        const contactPoints = () => t.database.db.selectFrom('contact_points').selectAll().where('subscription_id', '=', sub.id).orderBy('channel').execute();
        assert.deepEqual(
          (await contactPoints()).map((p) => [p.channel, p.address, p.status, p.time_zone]),
          [['push', pushSubscription.endpoint, 'active', TIME_ZONE], ['sms', PHONE, 'pending', TIME_ZONE]],
          'the browser is on; the phone waits for its YES',
        );

        // --- the YES, from the phone ------------------------------------------------------
        await t.runWorker();
        const asked = twilio.messages.filter((m) => m.to === PHONE);
        assert.equal(asked.length, 1, `one "reply YES" text before any alert: ${JSON.stringify(asked.map((m) => m.body))}`);
        assert.ok(asked[0]!.body.includes('YES') && !LINK.test(asked[0]!.body), `the question asks for YES and carries no alert link: ${asked[0]!.body}`);
        const answer = await twilio.textFrom(PHONE, TWILIO.from, 'YES', `${base}/sms/twilio/inbound`);
        assert.equal(answer.status, 200, answer.body);
        assert.deepEqual((await contactPoints()).map((p) => [p.channel, p.status]), [['push', 'active'], ['sms', 'active']], 'the YES made the phone active');

        // --- the restock ------------------------------------------------------------------
        await t.app.restock.inventory.reportStock(domain, [{ productId: PRODUCT.id, variantId: null, available: 5 }], SOURCE);
        await t.runWorker();

        const mail = await sink.waitFor((m) => m.recipients.includes(email) && m.subject === `${PRODUCT.title} is back in stock`);
        const mailed = await follow(page, linkIn(mail, 'Shop now'), 'the mail’s button');
        assert.equal(mailed.searchParams.get('utm_medium'), 'email', 'a visit from the mail');

        const texts = twilio.messages.filter((m) => m.to === PHONE && LINK.test(m.body));
        assert.equal(texts.length, 1, `exactly one alert text: ${JSON.stringify(texts.map((m) => m.body))}`);
        assert.equal(texts[0]!.from, TWILIO.from, 'from the service’s number');
        assert.ok(texts[0]!.body.includes(PRODUCT.title), `the text names the product: ${texts[0]!.body}`);
        const texted = await follow(page, LINK.exec(texts[0]!.body)![1]!, 'the text’s link');
        assert.equal(texted.searchParams.get('utm_medium'), 'sms', 'a visit from the text');

        const pushes = pushService.messages.filter((m) => m.endpoint === pushSubscription.endpoint);
        assert.equal(pushes.length, 1, 'exactly one push to the browser');
        assert.deepEqual(pushService.undecryptable, [], 'every push decrypted with the browser’s keys');
        const payload = JSON.parse(pushes[0]!.plaintext) as { title: string; url: string; stop?: { url: string; label: string } };
        assert.ok(payload.title.includes(PRODUCT.title), `the decrypted notification names the product: ${payload.title}`);
        assert.ok(payload.stop?.url.startsWith(`${base}/stop/`), `its second button stops this browser's alerts: ${JSON.stringify(payload.stop)}`);
        assert.ok(!pushes[0]!.plaintext.includes('/my/') && !pushes[0]!.plaintext.includes('/unsubscribe/'), 'and nothing in it opens the shopper’s page or the e-mail’s unsubscribe');
        const pushed = await follow(page, payload.url, 'the notification');
        assert.equal(pushed.searchParams.get('utm_medium'), 'push', 'a visit from the notification');

        const ledger = await t.database.db.selectFrom('notifications').selectAll().where('subscription_id', '=', sub.id).where('kind', '=', 'alert').orderBy('channel').execute();
        assert.deepEqual(ledger.map((row) => [row.channel, row.status]), [['email', 'sent'], ['push', 'sent'], ['sms', 'sent']], 'the ledger: one alert per channel, each sent');

        // --- the shopper's page, from the mail --------------------------------------------
        const manage = linkIn(mail, 'Manage your alerts');
        assert.ok(manage.startsWith(`${base}/my/`), `the mail's manage link is our shopper's page: ${manage}`);
        await page.goto(manage);
        const item = page.locator('li', { has: page.getByRole('heading', { level: 3, name: PRODUCT.title }) });
        await item.waitFor();
        assert.equal(await item.count(), 1, 'the page lists the product once');
        const channels = (await item.locator('dd > ul > li').allTextContents()).map((text) => text.split('\n')[0]!);
        // The phone and the browser are listed in the order the database returns them: compared as a set.
        assert.deepEqual(
          channels.sort(),
          [`E-mail (${email}): on`, 'Text message +33•••••5678: on', `Browser notification, a browser (through ${new URL(pushSubscription.endpoint).host}): on`].sort(),
          'the product with all three channels, each on',
        );
        assert.deepEqual(errors, [], 'no page threw');
      });
    });
  }
});
