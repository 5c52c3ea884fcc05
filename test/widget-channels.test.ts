/**
 * The widget's channels beside e-mail, in Chromium: the phone field and its SMS consent box when
 * the service can text for the store, "notify me in this browser" with the real service worker
 * (through the app proxy on the store's origin, and on the service's own origin for the pasted
 * tag), a refused or failed push that still signs the shopper up by e-mail, and the answer's
 * `confirmBy` told to the shopper. Only `PushManager.prototype.subscribe` is stubbed: headless
 * Chromium cannot reach Google's push service, so the stub hands over a real subscription of the
 * push service stand-in, made with the VAPID key the widget passed. SQLite only, as the other
 * browser tests (docs/testing.md): what these calls store is covered on both databases by the
 * storefront, alerts, SMS and push tests.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { startListeningTestApp, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startPushService, type BrowserSubscription, type PushServiceStandIn } from './fixtures/push-service.ts';
import { STUB_SUBSCRIBE } from './fixtures/push-stub.ts';
import { PROXY_PREFIX, startStorefront } from './fixtures/shopify-app-proxy.ts';
import { after, before, describe, it } from './fixtures/suites.ts';

failOnLeakedHandles();

/** The store the app proxy stand-in signs for: SMS through the service's own Twilio account, push on. */
const SMS_SHOP = 'channels-shop.myshopify.com';
/** A store that turned SMS and push off: e-mail only. */
const EMAIL_SHOP = 'email-only.myshopify.com';
/** A store that asks every shopper to confirm by e-mail (doubleOptIn: always). */
const DOI_SHOP = 'double-opt-in.myshopify.com';
const PRODUCT = 'gid://shopify/Product/7001';
const SOLD_OUT = 'gid://shopify/ProductVariant/7101';
const SECRET = `shpss_${randomBytes(16).toString('hex')}`;
const TIME_ZONE = 'America/Chicago';

const EN = {
  success: 'Thank you! We’ll e-mail you when it’s back in stock.',
  phoneLabel: 'Mobile number (optional)',
  smsConsent: 'Text me when it’s back in stock. Msg & data rates may apply. Reply STOP to opt out.',
  smsNeeded: 'Tick the box to get a text, or leave the number empty.',
  phoneInvalid: 'Please enter a mobile number starting with + and the country code.',
  push: 'Also notify me in this browser',
  pushFailed: 'Notifications could not be turned on in this browser.',
  confirmEmail: 'Check your inbox to confirm.',
  confirmSms: 'Reply YES to the text we sent to confirm.',
};

/** What the stub of `pushManager.subscribe` does: hand over a stand-in subscription, or one the service must refuse. */
type PushStub = 'subscribe' | 'internal-endpoint';

describe('the widget’s SMS and browser notification choices', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let pushService: PushServiceStandIn;
  let store: Awaited<ReturnType<typeof startStorefront>>;
  /** The applicationServerKey each stubbed subscribe was given (base64url), and what it handed back. */
  const subscribed: Array<{ key: string; subscription: BrowserSubscription }> = [];

  before(async () => {
    pushService = await startPushService();
    ({ t, base } = await startListeningTestApp('sqlite', {
      STOREFRONT_LIMIT_PER_HOUR: '100000',
      // The push service stand-in is on loopback: the operator's allow-list lets plain http to it through.
      TENANT_OUTBOUND_ALLOW: '127.0.0.1/32',
      // The service's own Twilio account: every store may offer SMS unless it turned it off.
      // Nothing is texted here (no worker runs); the API origin is a closed port all the same.
      TWILIO_ACCOUNT_SID: `AC${randomBytes(16).toString('hex')}`,
      TWILIO_AUTH_TOKEN: randomBytes(16).toString('hex'),
      TWILIO_FROM: '+15555550100',
      TWILIO_API_URL: 'http://127.0.0.1:9',
      SHOPIFY_API_KEY: 'restock-widget-channels',
      SHOPIFY_API_SECRET: SECRET,
      RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    }));
    for (const shop of [SMS_SHOP, EMAIL_SHOP, DOI_SHOP]) {
      await t.app.restock.stores.createStore(shop, `owner@${shop}`);
      await t.app.restock.inventory.reportStock(shop, [{ productId: PRODUCT, variantId: SOLD_OUT, available: 0 }], {
        kind: 'inventory-api',
        ref: 'widget channels test',
        verified: true,
      });
    }
    await t.app.restock.stores.updateSettings(EMAIL_SHOP, { sms: false, push: false });
    await t.app.restock.stores.updateSettings(DOI_SHOP, { doubleOptIn: 'always' });
    store = await startStorefront({ shop: SMS_SHOP, secret: SECRET, proxyUrl: `${base}/shopify/proxy`, assets: {} });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await store?.close();
    await t?.close();
    await pushService?.close();
  });

  function productPage(script: Record<string, string>): string {
    const attrs = Object.entries({ 'data-product': PRODUCT, 'data-variant': SOLD_OUT, ...script })
      .map(([name, value]) => ` ${name}='${value.replaceAll("'", '&#39;')}'`)
      .join('');
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Wool socks</title></head>
<body><main><h1>Wool socks</h1><script src="${base}/widget.js" defer${attrs}></script></main></body></html>`;
  }

  /**
   * Opens `url` in a fresh context (the shopper's time zone set, notifications granted or not) and
   * fails the test if the page throws; `pushManager.subscribe` is the stub.
   */
  async function visit(
    url: string,
    options: { grant?: boolean; stub?: PushStub; html?: string },
    use: (page: Page, requests: Request[], context: BrowserContext) => Promise<void>,
  ): Promise<void> {
    const context = await browser.newContext({ timezoneId: TIME_ZONE });
    try {
      if (options.grant) await context.grantPermissions(['notifications'], { origin: new URL(url).origin });
      await context.exposeFunction('restockTestSubscribe', (key: string) => {
        const subscription = pushService.newSubscription(key);
        subscribed.push({ key, subscription });
        return options.stub === 'internal-endpoint' ? { ...subscription, endpoint: 'https://10.0.0.7/wpush/v2/internal' } : subscription;
      });
      // Chrome's own checks, then a subscription of the stand-in instead of Google's push service.
      // A string, not a function: tsx would wrap a function's inner functions in its own helper,
      // which the page does not have.
      await context.addInitScript(STUB_SUBSCRIBE);
      // A page of the service's own origin, which serves none: only the navigation is fulfilled here.
      if (options.html !== undefined) await context.route(url, (route) => route.fulfill({ contentType: 'text/html; charset=utf-8', body: options.html! }));
      const page = await context.newPage();
      const errors: string[] = [];
      const requests: Request[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('request', (request) => requests.push(request));
      await page.goto(url);
      await use(page, requests, context);
      assert.deepEqual(errors, [], 'the page threw');
    } finally {
      await context.close();
    }
  }

  const form = (page: Page) => page.locator('restock-widget form');
  const email = (page: Page) => page.locator('restock-widget #e');
  const phone = (page: Page) => page.locator('restock-widget #p');
  const smsBox = (page: Page) => page.locator('restock-widget #c');
  const pushBox = (page: Page) => page.locator('restock-widget #w');
  const submit = (page: Page) => page.locator('restock-widget button[type="submit"]');
  const errorText = (page: Page) => page.locator('restock-widget #m');
  const statusText = (page: Page) => page.locator('restock-widget [role="status"]');
  const subscribeRequests = (requests: Request[]) => requests.filter((r) => r.method() === 'POST' && /\/(subscribe|subscriptions)(\?|$)/.test(r.url()));

  /** The form shown and the channels the service answered (the widget has offered them by the time it is visible). */
  async function shown(page: Page): Promise<void> {
    await form(page).waitFor({ state: 'visible' });
  }

  const contactPoints = (address: string) =>
    t.database.db
      .selectFrom('contact_points')
      .innerJoin('subscriptions', 'subscriptions.id', 'contact_points.subscription_id')
      .selectAll('contact_points')
      .where('subscriptions.email', '=', address)
      .execute();
  const subscriptionsOf = (address: string) => t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', address).execute();

  it('offers the phone field and an unticked SMS box only when the service can text for the store', async () => {
    store.setPage('/products/email-only', productPage({ 'data-shop': EMAIL_SHOP }));
    await visit(`${store.url}/products/email-only`, {}, async (page) => {
      const availability = page.waitForResponse((response) => response.url().includes('/storefront/v1/availability'));
      await shown(page);
      assert.deepEqual((await (await availability).json()).channels, { sms: false, push: false }, 'the e-mail-only store offers nothing else');
      assert.equal(await phone(page).count(), 0, 'no phone field without channels.sms');
      assert.equal(await smsBox(page).count(), 0, 'no SMS box without channels.sms');
      assert.equal(await pushBox(page).count(), 0, 'no push box without channels.push');
    });

    store.setPage('/products/sms', productPage({ 'data-shop': SMS_SHOP }));
    await visit(`${store.url}/products/sms`, {}, async (page) => {
      const availability = page.waitForResponse((response) => response.url().includes('/storefront/v1/availability'));
      await shown(page);
      assert.deepEqual((await (await availability).json()).channels, { sms: true, push: true }, 'the service offers SMS and push for this store');
      await phone(page).waitFor({ state: 'visible' });
      assert.equal(await phone(page).getAttribute('type'), 'tel');
      assert.equal(await phone(page).getAttribute('autocomplete'), 'tel');
      assert.equal(await page.getByLabel(EN.phoneLabel).count(), 1, 'the phone field is labelled');
      assert.equal(await smsBox(page).isChecked(), false, 'the SMS consent box starts unticked');
      assert.equal(await page.getByLabel(EN.smsConsent).count(), 1, 'the consent words label the box');
      assert.equal(await page.getByText(EN.smsConsent).isVisible(), true, 'the consent words are visible');
      // The pasted tag on a store's own origin cannot register the service's worker: no push offer.
      assert.equal(await pushBox(page).count(), 0, 'no push box where a service worker cannot be registered');
      assert.deepEqual(await seriousAccessibilityViolations(page), [], 'no serious accessibility violation with the SMS choice shown');
    });
  });

  it('refuses a phone without the ticked box (or a malformed one) inline, then sends the number, the consent and its words', async () => {
    const address = `sms.${Date.now()}@example.com`;
    store.setPage('/products/sms', productPage({ 'data-shop': SMS_SHOP }));
    await visit(`${store.url}/products/sms`, {}, async (page, requests) => {
      await shown(page);
      await email(page).fill(address);
      await phone(page).fill('+1 (555) 555-0199');
      await submit(page).click();
      await errorText(page).filter({ hasText: EN.smsNeeded }).waitFor();
      assert.equal(await smsBox(page).getAttribute('aria-invalid'), 'true', 'the box is marked');
      assert.equal(await smsBox(page).getAttribute('aria-describedby'), 'm', 'the error describes the box');
      assert.equal(await email(page).getAttribute('aria-invalid'), null, 'the e-mail field is not at fault');
      assert.equal(subscribeRequests(requests).length, 0, 'nothing was sent');

      await smsBox(page).check();
      await phone(page).fill('12345');
      await submit(page).click();
      await errorText(page).filter({ hasText: EN.phoneInvalid }).waitFor();
      assert.equal(await phone(page).getAttribute('aria-invalid'), 'true', 'the phone field is marked');
      assert.equal(await smsBox(page).getAttribute('aria-invalid'), null, 'the box no longer is');
      assert.match((await phone(page).getAttribute('aria-describedby')) ?? '', /\bm\b/, 'the error describes the phone field');
      assert.deepEqual(await seriousAccessibilityViolations(page, { include: 'restock-widget' }), [], 'no serious accessibility violation with the phone error shown');
      assert.equal(subscribeRequests(requests).length, 0, 'still nothing sent');

      await phone(page).fill('+1 (555) 555-0199');
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.confirmSms }).waitFor();
      assert.equal(await statusText(page).textContent(), `${EN.success} ${EN.confirmSms}`, 'the shopper is told to reply YES');
      const [request] = subscribeRequests(requests);
      assert.ok(request, 'the widget called subscribe');
      const body = request.postDataJSON();
      assert.equal(body.phone, '+15555550199', 'the number, normalised to E.164');
      assert.equal(body.smsConsent, true);
      assert.equal(body.smsConsentText, EN.smsConsent, 'the words shown beside the box');
      assert.equal(body.timeZone, TIME_ZONE, 'the browser’s time zone');
      assert.equal(body.page, `${store.url}/products/sms`, 'the page signed up on');
      assert.equal(body.consentText, 'Get an e-mail when it’s back in stock. Notify me when available', 'the words shown beside the e-mail field');
      assert.equal(body.push, undefined, 'no push without the box');
      assert.deepEqual((await (await request.response())?.json())?.confirmBy, ['sms']);
    });
    const points = await contactPoints(address);
    assert.equal(points.length, 1, 'one contact point beside the e-mail');
    assert.equal(points[0]!.channel, 'sms');
    assert.equal(points[0]!.address, '+15555550199');
    assert.equal(points[0]!.consent_method, 'storefront-checkbox');
    assert.equal(points[0]!.consent_text, EN.smsConsent, 'the consent kept is the wording shown');
    assert.equal(points[0]!.consent_page, `${store.url}/products/sms`);
    assert.equal(points[0]!.time_zone, TIME_ZONE);
    assert.equal(points[0]!.status, 'pending', 'waiting for the YES');
  });

  it('speaks the SMS choice in French, German and Spanish, and sends the merchant’s own consent words when overridden', async () => {
    const labels = { fr: 'Numéro de mobile (facultatif)', de: 'Handynummer (optional)', es: 'Número de móvil (opcional)' };
    for (const [locale, label] of Object.entries(labels)) {
      store.setPage(`/products/${locale}`, productPage({ 'data-shop': SMS_SHOP, 'data-locale': locale }));
      await visit(`${store.url}/products/${locale}`, {}, async (page) => {
        await shown(page);
        await phone(page).waitFor({ state: 'visible' });
        assert.equal(await page.locator('restock-widget label[for="p"]').textContent(), label, `the phone label in ${locale}`);
        assert.match((await page.locator('restock-widget #c + span').textContent()) ?? '', /STOP/, `the ${locale} consent says how to opt out`);
      });
    }

    const words = 'Yes, text me about this product when it is back. Reply STOP to stop.';
    const address = `override.${Date.now()}@example.com`;
    store.setPage('/products/override', productPage({ 'data-shop': SMS_SHOP, 'data-strings': JSON.stringify({ smsConsent: words }) }));
    await visit(`${store.url}/products/override`, {}, async (page, requests) => {
      await shown(page);
      assert.equal(await page.getByLabel(words).count(), 1, 'the override is what the box shows');
      await email(page).fill(address);
      await phone(page).fill('+44 7700 900123');
      await smsBox(page).check();
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.confirmSms }).waitFor();
      assert.equal(subscribeRequests(requests)[0]!.postDataJSON().smsConsentText, words, 'what was shown is what is sent');
    });
    assert.equal((await contactPoints(address))[0]?.consent_text, words, 'and what is kept');
  });

  it('turns on notifications in this browser through the app proxy, with the real service worker on the store’s origin', async () => {
    const address = `push.proxy.${Date.now()}@example.com`;
    const publicKey = (await t.app.inject({ method: 'GET', url: '/push/v1/key' })).json().publicKey as string;
    const before = subscribed.length;
    const forwarded = store.forwarded.length;
    store.setPage('/products/socks', productPage({ 'data-shop': SMS_SHOP, 'data-proxy': PROXY_PREFIX }));
    await visit(`${store.url}/products/socks`, { grant: true }, async (page, requests) => {
      await shown(page);
      await pushBox(page).waitFor({ state: 'visible' });
      assert.equal(await pushBox(page).isChecked(), false, 'the push box starts unticked');
      assert.equal(await page.getByLabel(EN.push).count(), 1, 'the push box is labelled');
      assert.deepEqual(await seriousAccessibilityViolations(page), [], 'no serious accessibility violation with both choices shown');
      await email(page).fill(address);
      await pushBox(page).check();
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.success }).waitFor();
      assert.equal(await statusText(page).textContent(), EN.success, 'no confirmation needed, and no push failure');

      const registration = await page.evaluate(async () => {
        const found = await navigator.serviceWorker.getRegistration('/apps/restock/push/');
        return found && { scope: found.scope, script: found.active?.scriptURL };
      });
      assert.deepEqual(registration, { scope: `${store.url}/apps/restock/push/`, script: `${store.url}/apps/restock/push/sw.js` }, 'the worker is registered on the store’s origin, scoped under /push/');
      assert.equal(subscribed.length, before + 1, 'pushManager.subscribe was called once');
      assert.equal(subscribed.at(-1)!.key, publicKey, 'with the service’s VAPID key');
      const body = subscribeRequests(requests)[0]!.postDataJSON();
      assert.deepEqual(body.push, subscribed.at(-1)!.subscription, 'the subscription’s toJSON() is sent');
      assert.equal(body.shop, undefined, 'through the proxy the store is the one Shopify signs');
    });
    assert.deepEqual(
      // The worker and the key are asked for together.
      store.forwarded.slice(forwarded).map((line) => line.split('?')[0]).sort(),
      [`GET ${base}/shopify/proxy/availability`, `GET ${base}/shopify/proxy/push/sw.js`, `GET ${base}/shopify/proxy/push/v1/key`, `POST ${base}/shopify/proxy/subscriptions`],
      'the worker, the key and the calls all came through the app proxy',
    );
    const points = await contactPoints(address);
    assert.equal(points.length, 1, 'one contact point beside the e-mail');
    const subscription = subscribed.at(-1)!.subscription;
    assert.deepEqual(
      [points[0]!.channel, points[0]!.address, JSON.parse(points[0]!.details).p256dh, JSON.parse(points[0]!.details).auth, points[0]!.consent_method, points[0]!.time_zone],
      ['push', subscription.endpoint, subscription.keys.p256dh, subscription.keys.auth, 'browser-permission', TIME_ZONE],
      'the browser’s subscription is stored',
    );
  });

  it('registers the worker at /push/sw.js for the pasted tag on the service’s own origin', async () => {
    const address = `push.own.${Date.now()}@example.com`;
    const url = `${base}/demo/wool-socks`;
    await visit(url, { grant: true, html: productPage({ 'data-shop': SMS_SHOP }) }, async (page, requests) => {
      await shown(page);
      await pushBox(page).waitFor({ state: 'visible' });
      await email(page).fill(address);
      await pushBox(page).check();
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.success }).waitFor();
      const registration = await page.evaluate(async () => {
        const found = await navigator.serviceWorker.getRegistration('/push/');
        return found && { scope: found.scope, script: found.active?.scriptURL };
      });
      assert.deepEqual(registration, { scope: `${base}/push/`, script: `${base}/push/sw.js` }, 'the worker is registered on the service’s origin, scoped under /push/');
      assert.ok(subscribeRequests(requests)[0]?.postDataJSON().push?.endpoint?.startsWith(pushService.origin), 'the stand-in’s subscription was sent');
    });
    const points = await contactPoints(address);
    assert.deepEqual(points.map((point) => [point.channel, point.address.startsWith(pushService.origin)]), [['push', true]], 'the push contact point is stored');
  });

  it('still signs up by e-mail and SMS when notifications are refused, and says push could not be turned on', async () => {
    const address = `push.denied.${Date.now()}@example.com`;
    const before = subscribed.length;
    store.setPage('/products/socks', productPage({ 'data-shop': SMS_SHOP, 'data-proxy': PROXY_PREFIX }));
    await visit(`${store.url}/products/socks`, { grant: false }, async (page, requests) => {
      await shown(page);
      await email(page).fill(address);
      await phone(page).fill('+15555550142');
      await smsBox(page).check();
      await pushBox(page).check();
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.pushFailed }).waitFor();
      assert.equal(await statusText(page).textContent(), `${EN.success} ${EN.confirmSms} ${EN.pushFailed}`, 'signed up, with the YES to send and push off');
      assert.equal(await page.evaluate(() => Notification.permission), 'denied', 'the browser refused notifications');
      assert.equal(await page.evaluate(async () => (await navigator.serviceWorker.getRegistrations()).length), 0, 'no worker registered without permission');
      assert.equal(subscribeRequests(requests)[0]!.postDataJSON().push, undefined, 'no push subscription sent');

      // Blocked for the site now: the box that can only fail is no longer offered.
      await page.reload();
      await shown(page);
      await phone(page).waitFor({ state: 'visible' });
      assert.equal(await pushBox(page).count(), 0, 'no push box once notifications are blocked');
    });
    assert.equal(subscribed.length, before, 'pushManager.subscribe was never reached');
    assert.equal((await subscriptionsOf(address)).length, 1, 'the e-mail subscription is stored');
    assert.deepEqual((await contactPoints(address)).map((point) => point.channel), ['sms'], 'and the SMS number, without push');
  });

  it('sends the sign-up again without the subscription when the service refuses the browser’s push endpoint', async () => {
    const address = `push.refused.${Date.now()}@example.com`;
    store.setPage('/products/socks', productPage({ 'data-shop': SMS_SHOP, 'data-proxy': PROXY_PREFIX }));
    await visit(`${store.url}/products/socks`, { grant: true, stub: 'internal-endpoint' }, async (page, requests) => {
      await shown(page);
      await email(page).fill(address);
      await pushBox(page).check();
      await submit(page).click();
      await statusText(page).filter({ hasText: EN.pushFailed }).waitFor();
      assert.equal(await statusText(page).textContent(), `${EN.success} ${EN.pushFailed}`);
      const [first, second] = subscribeRequests(requests);
      assert.equal((await first!.response())?.status(), 400, 'the internal endpoint is refused');
      assert.ok(second, 'the sign-up was sent again');
      assert.equal(second.postDataJSON().push, undefined, 'without the push subscription');
      assert.equal((await second.response())?.status(), 201);
    });
    assert.equal((await subscriptionsOf(address)).length, 1, 'the e-mail subscription is stored');
    assert.deepEqual(await contactPoints(address), [], 'and nothing else');
  });

  it('tells the shopper what is left to confirm: the e-mail link at a double opt-in store, the YES for a phone', async () => {
    const cases: Array<{ shop: string; phone?: string; expected: string; confirmBy: string[] }> = [
      { shop: SMS_SHOP, expected: EN.success, confirmBy: [] },
      { shop: DOI_SHOP, expected: `${EN.success} ${EN.confirmEmail}`, confirmBy: ['email'] },
      { shop: DOI_SHOP, phone: '+15555550177', expected: `${EN.success} ${EN.confirmEmail} ${EN.confirmSms}`, confirmBy: ['email', 'sms'] },
    ];
    for (const [i, { shop, phone: number, expected, confirmBy }] of cases.entries()) {
      store.setPage(`/products/confirm-${i}`, productPage({ 'data-shop': shop }));
      await visit(`${store.url}/products/confirm-${i}`, {}, async (page, requests) => {
        await shown(page);
        await email(page).fill(`confirm.${i}.${Date.now()}@example.com`);
        if (number) {
          await phone(page).fill(number);
          await smsBox(page).check();
        }
        await submit(page).click();
        await statusText(page).filter({ hasText: EN.success }).waitFor();
        assert.equal(await statusText(page).textContent(), expected, `${shop}${number ? ' with a phone' : ''}`);
        assert.deepEqual((await (await subscribeRequests(requests)[0]!.response())?.json())?.confirmBy, confirmBy, 'what the service answered');
      });
    }
  });

  it('loads the channels script once per page, from beside the widget, and keeps the e-mail form when it cannot be had', async () => {
    // Two mounts and a tag of its own, and the script twice (as a theme with two app blocks renders it).
    const page = (script: string, more = '') => {
      const attrs = `data-shop="${SMS_SHOP}" data-product="${PRODUCT}" data-variant="${SOLD_OUT}"${more}`;
      return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Wool socks</title></head>
<body><main><h1>Wool socks</h1><div data-restock-widget ${attrs}></div><div data-restock-widget ${attrs}></div>
<script src="${script}" defer></script><script src="${script}" defer ${attrs}></script></main></body></html>`;
    };
    store.setPage('/products/several', page(`${base}/widget.js`));
    await visit(`${store.url}/products/several`, {}, async (page, requests) => {
      await page.locator('restock-widget #p').nth(2).waitFor({ state: 'visible' });
      assert.equal(await page.locator('restock-widget').count(), 3);
      assert.equal(await page.locator('restock-widget #p').count(), 3, 'each form offers the phone');
      assert.deepEqual(
        requests.filter((request) => /-channels\.js/.test(request.url())).map((request) => request.url()),
        [`${base}/widget-channels.js`],
        'one download for the page, beside the widget',
      );
    });

    // Shopify's CDN (another origin), the widget calling through the app proxy: restock-widget.js
    // finds restock-channels.js beside it, the version query kept.
    const cdn = `${store.url.replace('127.0.0.1', 'localhost')}/cdn/assets`;
    const served = { 'restock-widget.js': await (await fetch(`${base}/widget.js`)).text(), 'restock-channels.js': await (await fetch(`${base}/widget-channels.js`)).text() };
    store.setPage('/products/cdn', page(`${cdn}/restock-widget.js?v=1700000000`, ` data-proxy="${PROXY_PREFIX}"`));
    const context = await browser.newContext();
    try {
      await context.route(`${cdn}/*`, (route) => {
        const name = new URL(route.request().url()).pathname.split('/').pop() as keyof typeof served;
        return served[name] ? route.fulfill({ contentType: 'text/javascript', body: served[name] }) : route.fulfill({ status: 404 });
      });
      const tab = await context.newPage();
      const loaded: string[] = [];
      tab.on('request', (request) => loaded.push(request.url()));
      await tab.goto(`${store.url}/products/cdn`);
      await tab.locator('restock-widget #p').nth(2).waitFor({ state: 'visible' });
      assert.deepEqual(loaded.filter((url) => /-channels\.js/.test(url)), [`${cdn}/restock-channels.js?v=1700000000`]);
    } finally {
      await context.close();
    }

    // Unreachable: the forms show as they are, e-mail only, and sign the shopper up.
    const address = `no.channels.${Date.now()}@example.com`;
    await visit(`${store.url}/products/several`, {}, async (page, requests) => {
      await page.context().route(`${base}/widget-channels.js`, (route) => route.abort('failed'));
      await page.reload();
      await page.locator('restock-widget form').nth(2).waitFor({ state: 'visible' });
      assert.equal(await page.locator('restock-widget #p').count(), 0, 'no phone field without the channels script');
      await page.locator('restock-widget #e').first().fill(address);
      await page.locator('restock-widget button[type="submit"]').first().click();
      await page.locator('restock-widget [role="status"]').first().filter({ hasText: EN.success }).waitFor();
      assert.equal(await page.locator('restock-widget [role="status"]').first().textContent(), EN.success);
      const body = subscribeRequests(requests).at(-1)!.postDataJSON();
      assert.equal(body.phone, undefined);
      assert.equal(body.email, address);
    });
    assert.equal((await subscriptionsOf(address)).length, 1, 'the e-mail subscription is stored');
  });
});
