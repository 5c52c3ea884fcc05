import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { Browser, Page, Request } from 'playwright-core';
import { startTestApp, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations, startPageServer } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const SHOP = 'widget-shop.myshopify.com';
const PRODUCT = 'gid://shopify/Product/1001';
const IN_STOCK = '2001';
const SOLD_OUT = '2002';
const variantGid = (id: string) => `gid://shopify/ProductVariant/${id}`;
const EN_SUCCESS = 'Thank you! We’ll e-mail you when it’s back in stock.';
const EN_INVALID = 'Please enter a valid e-mail address.';

/**
 * A theme at its worst: rules on `*` with !important, buttons hidden, large type. The widget must
 * look and work the same inside it. The page itself stays accessible (large red text on white has
 * enough contrast), so axe judges the widget and not the fixture.
 */
const HOST_CSS = `
  * { color: red !important; font-size: 40px; font-family: Georgia, serif; line-height: 2 }
  button { display: none }
  body { background: #fff }
  .note { margin: 7px; padding: 3px; font-weight: 700; letter-spacing: 1px }
  p, label, input, form, div { box-sizing: content-box; border: 0 solid red }
`;

type ScriptAttributes = Record<string, string>;

function productPage(options: { script?: ScriptAttributes | null; lang?: string; body?: string } = {}): string {
  const attributes = options.script === undefined ? { 'data-shop': SHOP, 'data-product': '1001', 'data-target': '#restock-slot' } : options.script;
  return `<!doctype html>
<html lang="${options.lang ?? 'en'}">
<head><meta charset="utf-8"><title>Blue mug</title><style>${HOST_CSS}</style></head>
<body>
  <main>
    <h1>Blue mug</h1>
    <form action="/cart/add" method="post">
      <label for="size">Size</label>
      <select id="size" name="id">
        <option value="${IN_STOCK}">Small</option>
        <option value="${SOLD_OUT}">Large</option>
      </select>
      <button type="submit">Add to cart</button>
    </form>
    <div id="restock-slot"></div>
    <p class="note" id="note">Free shipping over 50 €</p>
    ${options.body ?? ''}
  </main>
  ${attributes ? scriptTag(attributes) : ''}
</body>
</html>`;
}

let serviceUrl = '';
function scriptTag(attributes: ScriptAttributes): string {
  const attrs = Object.entries(attributes)
    .map(([name, value]) => ` ${name}='${value.replaceAll("'", '&#39;')}'`)
    .join('');
  return `<script src="${serviceUrl}/widget.js" defer${attrs}></script>`;
}

// The browser runs against SQLite only: a real browser is slow, and what the widget's calls store
// is covered on every dialect by the storefront and alerts tests. Here the page is under test.
describe('storefront widget in a browser', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let browser: Browser;
  let store: Awaited<ReturnType<typeof startPageServer>>;

  before(async () => {
    t = await startTestApp('sqlite', { STOREFRONT_LIMIT_PER_HOUR: '100000' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    serviceUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    await t.app.restock.stores.createStore(SHOP, 'owner@example.com');
    await t.app.restock.inventory.reportStock(
      SHOP,
      [
        { productId: PRODUCT, variantId: variantGid(IN_STOCK), available: 5 },
        { productId: PRODUCT, variantId: variantGid(SOLD_OUT), available: 0 },
      ],
      { kind: 'inventory-api', ref: 'widget-test', verified: true },
    );
    // Another origin than the service's (another port), as a store's pages are.
    store = await startPageServer({ '/product': productPage() });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await store?.close();
    await t?.close();
  });

  /** Opens a page of the store in a fresh context and fails the test if the page throws. */
  async function withPage(path: string, html: string | undefined, use: (page: Page, requests: Request[]) => Promise<void>) {
    if (html !== undefined) store.setPage(path.split('?')[0]!, html);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      const requests: Request[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('request', (request) => {
        if (request.url().startsWith(serviceUrl)) requests.push(request);
      });
      await page.goto(store.url + path);
      await use(page, requests);
      assert.deepEqual(errors, [], 'the page threw');
    } finally {
      await context.close();
    }
  }

  const widget = (page: Page) => page.locator('restock-widget').first();
  const form = (page: Page) => page.locator('restock-widget form').first();
  const emailInput = (page: Page) => page.locator('restock-widget input[type="email"]').first();
  const submit = (page: Page) => page.locator('restock-widget button[type="submit"]').first();
  const errorText = (page: Page) => page.locator('restock-widget #m').first();
  const statusRegion = (page: Page) => page.locator('restock-widget [role="status"]').first();

  /** Which element of the widget has the focus (by id or tag), or undefined when it has none. */
  const focusedInWidget = (page: Page) =>
    page.evaluate(() => {
      const active = document.querySelector('restock-widget')?.shadowRoot?.activeElement;
      return active ? active.id || active.localName : undefined;
    });

  async function hidden(page: Page) {
    await widget(page).waitFor({ state: 'hidden' });
    // Hidden means no layout space either, not an empty box.
    assert.equal(await widget(page).boundingBox(), null);
  }

  const subscribeRequests = (requests: Request[]) => requests.filter((r) => r.method() === 'POST' && r.url().endsWith('/storefront/v1/subscribe'));
  const subscriptionsOf = (email: string) => t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', email).execute();

  it('shows the form only while the selected variant is sold out, following the product form, the URL, the event and the API', async () => {
    store.setPage('/product', productPage());
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const loaded = page.waitForResponse((response) => response.url().includes('/storefront/v1/availability'));
      await page.goto(`${store.url}/product`);
      assert.equal((await loaded).status(), 200);
      await hidden(page);

      await page.selectOption('select[name="id"]', SOLD_OUT);
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await submit(page).textContent(), 'Notify me when available');
      await page.selectOption('select[name="id"]', IN_STOCK);
      await hidden(page);

      await page.evaluate((id) => (window as unknown as { Restock: { selectVariant(id: string): void } }).Restock.selectVariant(id), variantGid(SOLD_OUT));
      await form(page).waitFor({ state: 'visible' });
      await page.evaluate((id) => document.dispatchEvent(new CustomEvent('restock:variant-change', { detail: { variantId: id } })), Number(IN_STOCK));
      await hidden(page);

      // Back to an address with ?variant= of the sold-out one: popstate.
      await page.evaluate((ids) => {
        history.pushState(null, '', `?variant=${ids[0]}`);
        history.pushState(null, '', `?variant=${ids[1]}`);
        history.back();
      }, [SOLD_OUT, IN_STOCK]);
      await form(page).waitFor({ state: 'visible' });
    } finally {
      await context.close();
    }
  });

  it('takes the variant from ?variant= on load', async () => {
    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page) => {
      await form(page).waitFor({ state: 'visible' });
    });
    // The address wins over the variant the tag names, as it is what the shopper opened.
    const named = productPage({ script: { 'data-shop': SHOP, 'data-product': PRODUCT, 'data-variant': variantGid(IN_STOCK) } });
    await withPage(`/named?variant=${SOLD_OUT}`, named, async (page) => {
      await form(page).waitFor({ state: 'visible' });
    });
  });

  it('subscribes with the keyboard alone, announces it, and stores the subscription for the store and variant', async () => {
    const email = `keyboard.${Date.now()}@Example.COM`;
    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page, requests) => {
      await form(page).waitFor({ state: 'visible' });
      for (let i = 0; i < 10 && (await focusedInWidget(page)) !== 'e'; i++) await page.keyboard.press('Tab');
      assert.equal(await focusedInWidget(page), 'e', 'Tab reaches the e-mail field');
      await page.keyboard.type(email);
      await page.keyboard.press('Enter');

      await statusRegion(page).filter({ hasText: EN_SUCCESS }).waitFor();
      assert.equal(await form(page).isVisible(), false, 'the message replaces the form');
      assert.equal(await focusedInWidget(page), 's', 'focus moves to the message');

      const [request] = subscribeRequests(requests);
      assert.ok(request, 'the widget called subscribe');
      const { timeZone, ...body } = request.postDataJSON();
      assert.deepEqual(body, {
        shop: SHOP,
        productId: PRODUCT,
        variantId: variantGid(SOLD_OUT),
        email,
        locale: 'en',
        // The words beside the field, and the page: the record of the consent.
        consentText: 'Get an e-mail when it’s back in stock. Notify me when available',
        page: `${store.url}/product?variant=${SOLD_OUT}`,
      });
      assert.equal(timeZone, await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone), "the shopper's time zone, for SMS quiet hours");
      assert.equal((await request.response())?.status(), 201);
    });
    const rows = await subscriptionsOf(email.replace('Example.COM', 'example.com'));
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.store_domain, SHOP);
    assert.equal(rows[0]!.product_id, PRODUCT);
    assert.equal(rows[0]!.variant_id, variantGid(SOLD_OUT));
    assert.equal(rows[0]!.status, 'active');
  });

  it('refuses an invalid address inline without calling the service, and keeps what was typed across a variant change', async () => {
    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page, requests) => {
      await form(page).waitFor({ state: 'visible' });
      const before = (await t.counts()).subscriptions;
      await emailInput(page).fill('not-an-email');
      await emailInput(page).press('Enter');
      await errorText(page).filter({ hasText: EN_INVALID }).waitFor();
      assert.equal(await emailInput(page).getAttribute('aria-invalid'), 'true');
      assert.equal(await emailInput(page).getAttribute('aria-describedby'), 'm', 'the error describes the field');
      assert.equal(await focusedInWidget(page), 'e', 'focus back on the field');
      assert.equal(subscribeRequests(requests).length, 0);
      assert.equal((await t.counts()).subscriptions, before);

      await page.selectOption('select[name="id"]', IN_STOCK);
      await hidden(page);
      await page.selectOption('select[name="id"]', SOLD_OUT);
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await errorText(page).textContent(), '', 'a variant change clears the error');
      assert.equal(await emailInput(page).getAttribute('aria-invalid'), null);
      assert.equal(await emailInput(page).inputValue(), 'not-an-email', 'what was typed stays');
    });
  });

  it("shows the service's refusal of an address inline, in the widget's language", async () => {
    // One-letter top-level domain: the simple check in the page lets it through, the service does not.
    const email = 'shopper@example.c';
    const direct = await t.app.inject({
      method: 'POST',
      url: '/storefront/v1/subscribe',
      headers: { 'content-type': 'application/json' },
      payload: { shop: SHOP, productId: PRODUCT, variantId: variantGid(SOLD_OUT), email, locale: 'en' },
    });
    assert.equal(direct.statusCode, 400);
    assert.match(direct.json().errors[0].pointer, /\/email$/);
    const expected = 'Please enter a valid e-mail address.';

    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page, requests) => {
      await form(page).waitFor({ state: 'visible' });
      await emailInput(page).fill(email);
      await emailInput(page).press('Enter');
      await errorText(page).filter({ hasText: expected }).waitFor();
      assert.equal(await errorText(page).textContent(), expected);
      assert.equal(await emailInput(page).getAttribute('aria-invalid'), 'true');
      assert.equal(await focusedInWidget(page), 'e');
      assert.equal((await subscribeRequests(requests)[0]!.response())?.status(), 400);
      assert.equal(await submit(page).isEnabled(), true, 'the button is usable again');
    });
    assert.equal((await subscriptionsOf(email)).length, 0);
  });

  it('is busy while sending, and says so when the service is overwhelmed, failing or unreachable', async () => {
    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page) => {
      await form(page).waitFor({ state: 'visible' });
      let answer: (status: number | 'abort') => void = () => {};
      await page.route('**/storefront/v1/subscribe', async (route) => {
        const status = await new Promise<number | 'abort'>((resolve) => (answer = resolve));
        if (status === 'abort') return route.abort('failed');
        await route.fulfill({
          status,
          headers: { 'access-control-allow-origin': '*', 'retry-after': '30' },
          contentType: 'application/problem+json',
          body: JSON.stringify({ type: 'about:blank', status, title: 'Refused', detail: 'Refused by the stand-in.' }),
        });
      });
      const outcomes: Array<[number | 'abort', string]> = [
        [429, 'Too many attempts. Please try again in a moment.'],
        [503, 'Something went wrong. Please try again.'],
        ['abort', 'Something went wrong. Please try again.'],
      ];
      for (const [status, message] of outcomes) {
        await emailInput(page).fill(`busy.${status}@example.com`);
        await submit(page).click();
        await page.locator('restock-widget button[aria-busy="true"]').waitFor();
        assert.equal(await submit(page).isDisabled(), true);
        assert.equal(await submit(page).textContent(), 'Sending…');
        // The request is now held at the route: let it through with this answer.
        answer(status);
        await errorText(page).filter({ hasText: message }).waitFor();
        assert.equal(await submit(page).getAttribute('aria-busy'), null);
        assert.equal(await submit(page).isEnabled(), true);
        assert.equal(await submit(page).textContent(), 'Notify me when available');
        // Not the address's fault: the field is not marked invalid.
        assert.equal(await emailInput(page).getAttribute('aria-invalid'), null);
        await errorText(page).evaluate((el) => (el.textContent = ''));
      }
    });
  });

  it('speaks French with data-locale, German from <html lang>, and takes data-strings overrides', async () => {
    const sold = { 'data-shop': SHOP, 'data-product': '1001', 'data-variant': SOLD_OUT };
    await withPage('/fr', productPage({ script: { ...sold, 'data-locale': 'fr' } }), async (page, requests) => {
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await submit(page).textContent(), 'Me prévenir quand disponible');
      assert.equal(await page.locator('restock-widget label').textContent(), 'Adresse e-mail');
      assert.equal(await page.locator('restock-widget .r').getAttribute('lang'), 'fr');
      await emailInput(page).fill('client@example.fr');
      await emailInput(page).press('Enter');
      await statusRegion(page).filter({ hasText: 'Merci' }).waitFor();
      assert.equal(subscribeRequests(requests)[0]!.postDataJSON().locale, 'fr');
    });
    await withPage('/de', productPage({ lang: 'de-AT', script: sold }), async (page) => {
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await submit(page).textContent(), 'Benachrichtigen, wenn verfügbar');
    });
    await withPage('/fr-custom', productPage({ script: { ...sold, 'data-locale': 'fr', 'data-strings': '{"button":"Prévenez-moi"}' } }), async (page) => {
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await submit(page).textContent(), 'Prévenez-moi');
      assert.equal(await page.locator('restock-widget .t').textContent(), 'Épuisé', 'other strings stay built-in');
    });
    await withPage('/broken-strings', productPage({ script: { ...sold, 'data-locale': 'xx', 'data-strings': '{"button":' } }), async (page) => {
      await form(page).waitFor({ state: 'visible' });
      assert.equal(await submit(page).textContent(), 'Notify me when available', 'unknown locale and malformed overrides fall back to English');
    });
  });

  it("keeps the page's styles out of the widget and its own styles out of the page", async () => {
    const PROPERTIES = ['color', 'font-size', 'font-family', 'font-weight', 'line-height', 'display', 'margin-top', 'margin-left', 'padding-top', 'padding-left', 'letter-spacing', 'box-sizing', 'border-top-width', 'background-color'];
    const snapshot = (page: Page) =>
      page.evaluate((properties) => {
        const out: Record<string, Record<string, string>> = {};
        for (const selector of ['body', 'main', 'h1', 'form', 'label', 'select', 'button', '#restock-slot', '#note']) {
          const style = getComputedStyle(document.querySelector(selector)!);
          out[selector] = Object.fromEntries(properties.map((p) => [p, style.getPropertyValue(p)]));
        }
        return out;
      }, PROPERTIES);

    await withPage(`/plain?variant=${SOLD_OUT}`, productPage({ script: null }), async (page) => {
      const before = await snapshot(page);
      // Inserted the way a theme or tag manager might; the script still finds its own origin.
      await page.evaluate(
        ({ src, shop }) => {
          const script = document.createElement('script');
          script.src = src;
          Object.assign(script.dataset, { shop, product: '1001', target: '#restock-slot' });
          document.body.append(script);
        },
        { src: `${serviceUrl}/widget.js`, shop: SHOP },
      );
      await form(page).waitFor({ state: 'visible' });
      assert.deepEqual(await snapshot(page), before, "the page's computed styles are unchanged");

      const look = await submit(page).evaluate((button) => {
        const style = getComputedStyle(button);
        return { display: style.display, color: style.color, fontSize: style.fontSize, background: style.backgroundColor };
      });
      assert.deepEqual(look, { display: 'block', color: 'rgb(255, 255, 255)', fontSize: '15px', background: 'rgb(26, 26, 26)' });
      const text = await page.locator('restock-widget .t').evaluate((el) => ({ color: getComputedStyle(el).color, fontSize: getComputedStyle(el).fontSize }));
      assert.deepEqual(text, { color: 'rgb(26, 26, 26)', fontSize: '17px' });
      const box = await widget(page).boundingBox();
      assert.ok(box && box.height < 300, `the widget keeps its own compact size (${box?.height}px high)`);
      assert.equal(await submit(page).isVisible(), true);
    });
  });

  it('has no serious accessibility violations with the form shown, nor with an error on the field', async () => {
    await withPage(`/product?variant=${SOLD_OUT}`, productPage(), async (page) => {
      await form(page).waitFor({ state: 'visible' });
      assert.deepEqual(await seriousAccessibilityViolations(page), []);
      await emailInput(page).fill('nope');
      await emailInput(page).press('Enter');
      await errorText(page).filter({ hasText: EN_INVALID }).waitFor();
      assert.deepEqual(await seriousAccessibilityViolations(page, { include: 'restock-widget' }), []);
    });
  });

  it('mounts in every [data-restock-widget], each for its own product, and stays out of the way when it cannot work', async () => {
    const mounts = `
      <div data-restock-widget id="one" data-shop="${SHOP}" data-product="${PRODUCT}" data-variant="${variantGid(SOLD_OUT)}"></div>
      <div data-restock-widget id="unknown-product" data-shop="${SHOP}" data-product="3003"></div>
      <div data-restock-widget id="other-store" data-shop="not-a-customer.myshopify.com" data-product="1001" data-variant="${SOLD_OUT}"></div>
      <div data-restock-widget id="incomplete" data-shop="${SHOP}"></div>`;
    // The script twice, as a theme with two app blocks renders it: each mount must appear once.
    const html = productPage({ script: null, body: `${mounts}${scriptTag({})}${scriptTag({ 'data-shop': SHOP })}` });
    await withPage('/mounts', html, async (page) => {
      await page.locator('#one restock-widget form').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#one restock-widget').count(), 1);
      assert.equal(await page.locator('#unknown-product restock-widget').count(), 1);
      assert.equal(await page.locator('#other-store restock-widget').count(), 1);
      assert.equal(await page.locator('#incomplete restock-widget').count(), 0, 'no product, no widget');
      assert.equal(await page.locator('restock-widget').count(), 3, 'a script tag without a product adds nothing');
      assert.equal(await page.locator('#unknown-product restock-widget').isVisible(), false, 'nothing known of the product');
      assert.equal(await page.locator('#other-store restock-widget').isVisible(), false, 'not a customer');

      // The in-stock variant belongs to the first widget's product only: the others stay as they are.
      await page.selectOption('select[name="id"]', IN_STOCK);
      await page.locator('#one restock-widget').waitFor({ state: 'hidden' });
      await page.selectOption('select[name="id"]', SOLD_OUT);
      await page.locator('#one restock-widget form').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#unknown-product restock-widget').isVisible(), false);
    });
  });
});

// No browser needed: the budget holds wherever the tests run.
describe('storefront widget script', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp('sqlite');
  });
  after(() => t.close());

  // Gzipped, as it goes over the wire. The widget was 4096 until the consent record and the
  // loader of the channels script came in; the SMS and browser notification choices (four
  // languages) are a script of their own, downloaded only where the service offers them.
  const BUDGETS = { 'widget.js': 4608, 'widget-channels.js': 3072 };
  for (const [file, budget] of Object.entries(BUDGETS)) {
    it(`ships ${file} under its size budget`, async (test) => {
      const res = await t.app.inject({ method: 'GET', url: `/${file}`, headers: { 'accept-encoding': 'gzip' } });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/javascript/);
      assert.equal(res.headers['content-encoding'], 'gzip');
      const bytes = res.rawPayload.length;
      test.diagnostic(`${file}: ${bytes} bytes on the wire (gzip)`);
      assert.ok(bytes < budget, `${file} is ${bytes} bytes; the budget is ${budget}`);
    });
  }
});
