/**
 * The Shopify theme app block (shopify/extensions/restock-notify): rendered with a Liquid engine
 * as a theme would render it, then loaded on a product page in Debian's Chromium, where it must
 * behave like the pasted script tag. On SQLite only, as the other browser tests.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Liquid } from 'liquidjs';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations, startPageServer } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

const BLOCK = readFileSync(new URL('../shopify/extensions/restock-notify/blocks/notify-me.liquid', import.meta.url), 'utf8');
const SCHEMA = /{% schema %}([\s\S]*){% endschema %}/;
const SHOP = 'theme-block.myshopify.com';

describe('the theme app block', () => {
  it('declares a product-template block whose settings name the service and the button', () => {
    const schema = JSON.parse(SCHEMA.exec(BLOCK)![1]!);
    assert.equal(schema.target, 'section');
    assert.deepEqual(schema.enabled_on, { templates: ['product'] });
    assert.deepEqual(
      schema.settings.map((setting: { id: string }) => setting.id),
      ['service_url', 'button_label'],
    );
  });

  describe('in a browser', { skip: browserSkipReason() }, () => {
    let t: TestApp;
    let store: Awaited<ReturnType<typeof startPageServer>>;
    let browser: Browser;
    let base: string;

    before(async () => {
      t = await startTestApp('sqlite');
      base = await t.app.listen({ port: 0, host: '127.0.0.1' });
      await t.app.restock.stores.createStore(SHOP, `owner@${SHOP}`);
      await t.app.restock.inventory.reportStock(
        SHOP,
        [
          { productId: 'gid://shopify/Product/41', variantId: 'gid://shopify/ProductVariant/51', available: 0 },
          { productId: 'gid://shopify/Product/41', variantId: 'gid://shopify/ProductVariant/52', available: 3 },
        ],
        { kind: 'inventory-api', ref: 'theme block test', verified: false },
      );
      store = await startPageServer();
      browser = await launchBrowser();
    });

    after(async () => {
      await browser?.close();
      await store?.close();
      await t?.close();
    });

    /** The block rendered as a theme would, on a product page of the store with a Shopify-like variant picker. */
    async function productPage(path: string, page: { lang: string; title: string; picker: string; options: Array<[number, string]> }, liquid: Record<string, unknown>) {
      const block = await new Liquid().parseAndRender(BLOCK.replace(SCHEMA, ''), { shop: { permanent_domain: SHOP }, ...liquid });
      const options = page.options.map(([id, label]) => `<option value="${id}">${label}</option>`).join('');
      store.setPage(
        path,
        `<!doctype html><html lang="${page.lang}"><head><meta charset="utf-8"><title>${page.title}</title></head><body><main>
<h1>${page.title}</h1>
<form action="/cart/add" method="post"><label for="v">${page.picker}</label>
<select id="v" name="id">${options}</select></form>
${block}
</main></body></html>`,
      );
    }

    /** Opens the page in a fresh browser context, closed afterwards whatever happens. */
    async function visit(path: string, use: (page: Page) => Promise<void>) {
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(5000);
        await page.goto(`${store.url}${path}`);
        await use(page);
      } finally {
        await context.close();
      }
    }

    it('renders the widget for the selected sold-out variant, in the store’s language, with the merchant’s button text', async () => {
      await productPage(
        '/products/teapot',
        { lang: 'fr', title: 'Théière', picker: 'Taille', options: [[51, 'Petite'], [52, 'Grande']] },
        {
          product: { id: 41, selected_or_first_available_variant: { id: 51 } },
          request: { locale: { iso_code: 'fr' } },
          block: { settings: { service_url: `${base}/`, button_label: 'Prévenez-moi "vite"' }, shopify_attributes: '' },
        },
      );
      await visit('/products/teapot', async (page) => {
        const button = page.locator('[data-restock-widget] button[type="submit"]');
        await button.waitFor({ state: 'visible' });
        assert.equal(await button.textContent(), 'Prévenez-moi "vite"');
        assert.equal(await page.locator('[data-restock-widget] label').first().textContent(), 'Adresse e-mail');
        assert.deepEqual(await seriousAccessibilityViolations(page), []);

        await page.locator('select[name="id"]').selectOption('52');
        await button.waitFor({ state: 'hidden' });
        await page.locator('select[name="id"]').selectOption('51');
        await page.locator('[data-restock-widget] input[type="email"]').fill('claire@example.fr');
        await button.click();
        await page.locator('[data-restock-widget] [role="status"]').filter({ hasText: /Merci/ }).waitFor();
      });
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'claire@example.fr').executeTakeFirstOrThrow();
      assert.deepEqual([row.store_domain, row.variant_id, row.locale], [SHOP, 'gid://shopify/ProductVariant/51', 'fr']);
    });

    it('uses the availability the theme renders, so a product Restock has not heard of still gets the form', async () => {
      await productPage(
        '/products/kettle',
        { lang: 'en', title: 'Kettle', picker: 'Colour', options: [[62, 'Red'], [61, 'Blue']] },
        {
          product: {
            id: 42,
            selected_or_first_available_variant: { id: 62 },
            variants: [
              { id: 61, available: false },
              { id: 62, available: true },
            ],
          },
          request: { locale: { iso_code: 'en' } },
          block: { settings: { service_url: base }, shopify_attributes: '' },
        },
      );
      await visit('/products/kettle', async (page) => {
        const email = page.locator('[data-restock-widget] input[type="email"]');
        // Red is in stock: nothing shows until the shopper picks the sold-out blue one.
        await page.waitForLoadState('networkidle');
        assert.equal(await email.isVisible(), false);
        await page.locator('select[name="id"]').selectOption('61');
        await email.waitFor({ state: 'visible' });
        await email.fill('kettle-fan@example.com');
        await email.press('Enter');
        await page.locator('[data-restock-widget] [role="status"]').filter({ hasText: /back in stock/ }).waitFor();
      });
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'kettle-fan@example.com').executeTakeFirstOrThrow();
      assert.deepEqual([row.store_domain, row.product_id, row.variant_id], [SHOP, 'gid://shopify/Product/42', 'gid://shopify/ProductVariant/61']);
    });
  });
});
