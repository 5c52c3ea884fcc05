/**
 * The Shopify theme app block (extensions/restock-notify): rendered with a Liquid engine as a theme
 * would render it, on a product page of a stand-in store origin that serves the extension's script
 * from another origin (as Shopify's CDN does) and forwards /apps/restock/* to the app, signed, as
 * Shopify's app proxy does. The shopper's browser only ever talks to the store. On SQLite only, as
 * the other browser tests.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Liquid } from 'liquidjs';
import type { Browser, Page } from 'playwright-core';
import { THEME_EXTENSION_ASSETS } from '../src/storefront/widget-asset.ts';
import { startListeningTestApp, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser, seriousAccessibilityViolations } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startStorefront } from './fixtures/shopify-app-proxy.ts';

failOnLeakedHandles();

const BLOCK = readFileSync(new URL('../extensions/restock-notify/blocks/notify-me.liquid', import.meta.url), 'utf8');
const SCHEMA = /{% schema %}([\s\S]*){% endschema %}/;
const SHOP = 'theme-block.myshopify.com';
const SECRET = `shpss_${randomBytes(16).toString('hex')}`;

describe('the theme app block', () => {
  it('declares a product-template block that loads the widget from the extension’s assets, with the button text as its only setting', () => {
    const schema = JSON.parse(SCHEMA.exec(BLOCK)![1]!);
    assert.equal(schema.target, 'section');
    assert.equal(schema.javascript, 'restock-widget.js');
    assert.deepEqual(schema.enabled_on, { templates: ['product'] });
    assert.deepEqual(
      schema.settings.map((setting: { id: string }) => setting.id),
      ['button_label'],
    );
    assert.doesNotMatch(BLOCK.replace(SCHEMA, ''), /<script/, 'Shopify loads the script the schema names');
  });

  describe('in a browser', { skip: browserSkipReason() }, () => {
    let t: TestApp;
    let base: string;
    let store: Awaited<ReturnType<typeof startStorefront>>;
    let browser: Browser;
    /** Where the store's pages load the extension's script from: another origin, as Shopify's CDN is. */
    let cdn: string;

    before(async () => {
      ({ t, base } = await startListeningTestApp('sqlite', {
        SHOPIFY_API_KEY: 'restock-theme-block',
        SHOPIFY_API_SECRET: SECRET,
        RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      }));
      await t.app.restock.stores.createStore(SHOP, `owner@${SHOP}`);
      await t.app.restock.inventory.reportStock(
        SHOP,
        [
          { productId: 'gid://shopify/Product/41', variantId: 'gid://shopify/ProductVariant/51', available: 0 },
          { productId: 'gid://shopify/Product/41', variantId: 'gid://shopify/ProductVariant/52', available: 3 },
        ],
        { kind: 'inventory-api', ref: 'theme block test', verified: false },
      );
      store = await startStorefront({
        shop: SHOP,
        secret: SECRET,
        proxyUrl: `${base}/shopify/proxy`,
        // The widget, and the channels script it loads from beside itself when SMS or push is offered.
        assets: { 'restock-widget.js': readFileSync(THEME_EXTENSION_ASSETS['widget.js']), 'restock-channels.js': readFileSync(THEME_EXTENSION_ASSETS['widget-channels.js']) },
      });
      cdn = store.url.replace('127.0.0.1', 'localhost');
      browser = await launchBrowser();
    });

    after(async () => {
      await browser?.close();
      await store?.close();
      await t?.close();
    });

    /**
     * The block rendered as a theme would, on a product page of the store with a Shopify-like
     * variant picker, and the script its schema names loaded the way Shopify loads it.
     */
    async function productPage(path: string, page: { lang: string; title: string; picker: string; options: Array<[number, string]> }, liquid: Record<string, unknown>) {
      const block = await new Liquid().parseAndRender(BLOCK.replace(SCHEMA, ''), { shop: { permanent_domain: SHOP }, ...liquid });
      const options = page.options.map(([id, label]) => `<option value="${id}">${label}</option>`).join('');
      store.setPage(
        path,
        `<!doctype html><html lang="${page.lang}"><head><meta charset="utf-8"><title>${page.title}</title>
<script src="${cdn}/cdn/assets/restock-widget.js" defer></script></head><body><main>
<h1>${page.title}</h1>
<form action="/cart/add" method="post"><label for="v">${page.picker}</label>
<select id="v" name="id">${options}</select></form>
${block}
</main></body></html>`,
      );
    }

    /** Opens the page in a fresh browser context, closed afterwards whatever happens; returns every origin the page reached. */
    async function visit(path: string, use: (page: Page) => Promise<void>): Promise<Set<string>> {
      const context = await browser.newContext();
      const origins = new Set<string>();
      try {
        const page = await context.newPage();
        page.on('request', (request) => origins.add(new URL(request.url()).origin));
        page.setDefaultTimeout(5000);
        await page.goto(`${store.url}${path}`);
        await use(page);
      } finally {
        await context.close();
      }
      return origins;
    }

    it('signs a shopper up through the store’s own /apps/restock, in the store’s language, with the merchant’s button text and the shopper’s country', async () => {
      await productPage(
        '/products/teapot',
        { lang: 'fr', title: 'Théière', picker: 'Taille', options: [[51, 'Petite'], [52, 'Grande']] },
        {
          product: { id: 41, selected_or_first_available_variant: { id: 51 } },
          request: { locale: { iso_code: 'fr' } },
          localization: { country: { iso_code: 'FR' } },
          block: { settings: { button_label: 'Prévenez-moi "vite"' }, shopify_attributes: '' },
        },
      );
      const before = store.forwarded.length;
      const origins = await visit('/products/teapot', async (page) => {
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
      assert.deepEqual(origins, new Set([store.url, cdn]), 'the page reached only the store and the CDN, never the app');
      assert.deepEqual(
        store.forwarded.slice(before).map((line) => line.replace(/\?.*$/, '')),
        [`GET ${base}/shopify/proxy/availability`, `POST ${base}/shopify/proxy/subscriptions`],
      );
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'claire@example.fr').executeTakeFirstOrThrow();
      assert.deepEqual([row.store_domain, row.variant_id, row.locale, row.country], [SHOP, 'gid://shopify/ProductVariant/51', 'fr', 'FR']);
    });

    it('uses the availability the theme renders, a variant sold by a selling plan (pre-order) counting as on sale', async () => {
      await productPage(
        '/products/kettle',
        { lang: 'en', title: 'Kettle', picker: 'Colour', options: [[62, 'Red'], [63, 'Green'], [61, 'Blue']] },
        {
          product: {
            id: 42,
            selected_or_first_available_variant: { id: 62 },
            variants: [
              { id: 61, available: false, selling_plan_allocations: [] },
              { id: 62, available: true, selling_plan_allocations: [] },
              { id: 63, available: false, selling_plan_allocations: [{ selling_plan: { id: 9 } }] },
            ],
          },
          request: { locale: { iso_code: 'en' } },
          localization: { country: { iso_code: 'CA' } },
          block: { settings: {}, shopify_attributes: '' },
        },
      );
      await visit('/products/kettle', async (page) => {
        const email = page.locator('[data-restock-widget] input[type="email"]');
        // Red is in stock and green can be pre-ordered: nothing shows until the shopper picks the sold-out blue one.
        await page.waitForLoadState('networkidle');
        assert.equal(await email.isVisible(), false);
        await page.locator('select[name="id"]').selectOption('63');
        await page.waitForLoadState('networkidle');
        assert.equal(await email.isVisible(), false, 'a pre-order variant gets no form');
        await page.locator('select[name="id"]').selectOption('61');
        await email.waitFor({ state: 'visible' });
        await email.fill('kettle-fan@example.com');
        await email.press('Enter');
        await page.locator('[data-restock-widget] [role="status"]').filter({ hasText: /back in stock/ }).waitFor();
      });
      const row = await t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', 'kettle-fan@example.com').executeTakeFirstOrThrow();
      assert.deepEqual([row.store_domain, row.product_id, row.variant_id, row.country], [SHOP, 'gid://shopify/Product/42', 'gid://shopify/ProductVariant/61', 'CA']);
    });
  });
});
