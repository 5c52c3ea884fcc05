import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from './fixtures/suites.ts';
import type { Browser, Page, Request } from 'playwright-core';
import { createStore } from './fixtures/agents.ts';
import { startTestApp, type TestApp } from './fixtures/app.ts';
import { browserSkipReason, launchBrowser } from './fixtures/browser.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';

failOnLeakedHandles();

/** WordPress ships jQuery 3; the page loads the real library, as a WooCommerce store's does. */
const JQUERY = readFileSync(createRequire(import.meta.url).resolve('jquery/dist/jquery.min.js'), 'utf8');

const WOO = 'woo-platforms.example.com';
const BIG = 'big-platforms.example.com';
const SHOPIFY = 'platforms-shop.myshopify.com';

// WooCommerce: a variable product and its variations (each a post id), and a simple product.
const WOO_PRODUCT = '77';
const WOO_SMALL = '78'; // reported in stock
const WOO_LARGE = '79'; // reported sold out
const WOO_MEDIUM = '80'; // never reported: only the page says it is out of stock
const WOO_SIMPLE = '90'; // out of stock, and a simple product's page then has no cart form

// BigCommerce: a product with one option (id 7) whose values resolve to catalog (V3) variants.
// The storefront answer also carries the older V2 SKU id as `variantId`: it must not be taken.
const BIG_PRODUCT = '111';
const BIG_OPTION = '7';
const BIG_VARIANTS: Record<string, { v3: number; v2: number; sku: string; instock: boolean }> = {
  '10': { v3: 501, v2: 9001, sku: 'MUG-S', instock: true },
  '11': { v3: 502, v2: 9002, sku: 'MUG-L', instock: false },
};
const CSRF_TOKEN = 'csrf-3f1a9c';

const EN_SUCCESS = 'Thank you! We’ll e-mail you when it’s back in stock.';
const gid = (platform: string, kind: 'Product' | 'ProductVariant', id: string | number) => `gid://${platform}/${kind}/${id}`;

/** As wc_esc_json does (htmlspecialchars with ENT_QUOTES): JSON in a double-quoted attribute. */
const escapeAttribute = (value: string) =>
  value.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll("'", '&#039;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** A variation as WC_Product_Variable::get_available_variation renders it (the fields the form script reads, and more). */
function wooVariation(id: string, size: string, inStock: boolean) {
  return {
    attributes: { attribute_pa_size: size },
    availability_html: inStock ? '<p class="stock in-stock">5 in stock</p>' : '<p class="stock out-of-stock">Out of stock</p>',
    backorders_allowed: false,
    dimensions: { length: '', width: '', height: '' },
    dimensions_html: 'N/A',
    display_price: 12,
    display_regular_price: 12,
    image_id: 0,
    is_downloadable: false,
    is_in_stock: inStock,
    is_purchasable: true,
    is_sold_individually: 'no',
    is_virtual: false,
    max_qty: inStock ? 5 : '',
    min_qty: 1,
    price_html: '<span class="price"><span class="woocommerce-Price-amount amount">12.00&nbsp;€</span></span>',
    sku: `MUG-${size.toUpperCase()}`,
    variation_description: '',
    variation_id: Number(id),
    variation_is_active: true,
    variation_is_visible: true,
    weight: '',
    weight_html: 'N/A',
  };
}

/**
 * What a WooCommerce store's add-to-cart-variation.js does with the form
 * (plugins/woocommerce/client/legacy/js/frontend/add-to-cart-variation.js), reduced to the
 * events and the field a back-in-stock form can follow: a change of an attribute empties
 * `variation_id` and checks the choice; a complete choice matching a variation triggers
 * `found_variation` with it, which puts its id in `variation_id` (`.val(...).trigger('change')`);
 * anything else triggers `reset_data`, which hides the variation (`hide_variation` on
 * `.single_variation`, bubbling to the form). The first check runs 100 ms after set-up, as there.
 * A product with more variations than the page lists (`data-product_variations="false"`) asks
 * for the chosen one (`POST /?wc-ajax=get_variation`, the attributes and product_id), as there.
 */
const WOO_FORM_SCRIPT = `
jQuery(function ($) {
  $('.variations_form').each(function () {
    var $form = $(this);
    var variations = $form.data('product_variations');
    var useAjax = variations === false;
    var $variationId = $form.find('input[name="variation_id"], input.variation_id');
    var chosen = function () {
      var data = {}, count = 0, chosenCount = 0;
      $form.find('.variations select').each(function () {
        var name = $(this).data('attribute_name') || $(this).attr('name');
        var value = $(this).val() || '';
        if (value.length > 0) chosenCount++;
        count++;
        data[name] = value;
      });
      return { data: data, count: count, chosenCount: chosenCount };
    };
    var matching = function (attributes) {
      return variations.filter(function (variation) {
        return Object.keys(variation.attributes).every(function (name) {
          var value = variation.attributes[name];
          return value === '' || value === attributes[name];
        });
      });
    };
    $form.on('found_variation.wc-variation-form', function (event, variation) {
      $variationId.val(variation.variation_id).trigger('change');
      $form.find('.single_variation').show().trigger('show_variation', [variation, variation.is_in_stock && variation.is_purchasable]);
    });
    $form.on('check_variations.wc-variation-form', function () {
      var attributes = chosen();
      if (attributes.count && attributes.count === attributes.chosenCount && useAjax) {
        attributes.data.product_id = parseInt($form.data('product_id'), 10);
        $.ajax({
          url: '/?wc-ajax=get_variation',
          type: 'POST',
          data: attributes.data,
          success: function (variation) {
            if (variation) $form.trigger('found_variation', [variation]);
            else $form.trigger('reset_data');
          }
        });
      } else if (attributes.count && attributes.count === attributes.chosenCount) {
        var variation = matching(attributes.data).shift();
        if (variation) $form.trigger('found_variation', [variation]);
        else $form.trigger('reset_data');
      } else {
        $form.trigger('reset_data');
      }
    });
    $form.on('reset_data', function () {
      $form.find('.single_variation').hide().trigger('hide_variation');
    });
    $form.on('click.wc-variation-form', '.reset_variations', function (event) {
      event.preventDefault();
      $form.find('.variations select').val('').trigger('change');
      $form.trigger('reset_data');
    });
    $form.on('change.wc-variation-form', '.variations select', function () {
      $variationId.val('').trigger('change');
      $form.trigger('check_variations');
    });
    setTimeout(function () { $form.trigger('check_variations'); }, 100);
  });
});`;

/** A theme that drives the same form without jQuery: it only sets the hidden field's value. */
const WOO_FORM_SCRIPT_WITHOUT_JQUERY = `
document.querySelectorAll('.variations_form').forEach(function (form) {
  var variations = JSON.parse(form.getAttribute('data-product_variations'));
  var select = form.querySelector('.variations select');
  select.addEventListener('change', function () {
    var found = variations.filter(function (v) { return v.attributes.attribute_pa_size === select.value; })[0];
    form.querySelector('input[name="variation_id"]').value = found ? String(found.variation_id) : '';
  });
});`;

/** The tag as a store pastes it. */
function tag(serviceUrl: string, attributes: Record<string, string>): string {
  const attrs = Object.entries(attributes)
    .map(([name, value]) => ` ${name}="${escapeAttribute(value)}"`)
    .join('');
  return `<script src="${serviceUrl}/widget.js" defer${attrs}></script>`;
}

/**
 * A WooCommerce single product page of a variable product: the body classes of a single product,
 * content-single-product.php's `#product-<id>` element with the product's stock status as a class,
 * and templates/single-product/add-to-cart/variable.php (with wc_dropdown_variation_attribute_options'
 * select and variation-add-to-cart-button.php's hidden fields) as WooCommerce 9 renders them.
 * The tag sits on `woocommerce_single_product_summary` after the cart form, as docs/install-woocommerce.md says.
 */
const WOO_VARIATIONS = [wooVariation(WOO_SMALL, 'small', true), wooVariation(WOO_MEDIUM, 'medium', false), wooVariation(WOO_LARGE, 'large', false)];

function wooVariablePage(widgetTag: string, options: { jquery: boolean; listed?: boolean }): string {
  // WooCommerce lists them up to woocommerce_ajax_variation_threshold (30), else prints false.
  const listed = options.listed === false ? 'false' : escapeAttribute(JSON.stringify(WOO_VARIATIONS));
  return `<!doctype html>
<html lang="en-US">
<head><meta charset="UTF-8"><title>Mug – Woo store</title>
${options.jquery ? '<script src="/wp-includes/js/jquery/jquery.min.js"></script>' : ''}
</head>
<body class="product-template-default single single-product postid-${WOO_PRODUCT} theme-storefront woocommerce woocommerce-page">
<div id="product-${WOO_PRODUCT}" class="product type-product post-${WOO_PRODUCT} status-publish first instock product_cat-mugs has-post-thumbnail shipping-taxable purchasable product-type-variable">
  <div class="summary entry-summary">
    <h1 class="product_title entry-title">Mug</h1>
    <form class="variations_form cart" action="/product/mug/" method="post" enctype='multipart/form-data' data-product_id="${WOO_PRODUCT}" data-product_variations="${listed}">
      <table class="variations" role="presentation">
        <tbody>
          <tr>
            <th class="label"><label for="pa_size">Size</label></th>
            <td class="value">
              <select id="pa_size" class="" name="attribute_pa_size" data-attribute_name="attribute_pa_size" data-show_option_none="yes"><option value="">Choose an option</option><option value="small" class="attached enabled">Small</option><option value="medium" class="attached enabled">Medium</option><option value="large" class="attached enabled">Large</option></select>
            </td>
          </tr>
          <tr>
            <td colspan="2">
              <button class="reset_variations wp-element-button" aria-label="Clear options">Clear</button>
            </td>
          </tr>
        </tbody>
      </table>
      <div class="reset_variations_alert screen-reader-text" aria-live="assertive"></div>
      <div class="single_variation_wrap">
        <div class="woocommerce-variation single_variation" role="alert" aria-relevant="additions"></div>
        <div class="woocommerce-variation-add-to-cart variations_button">
          <div class="quantity"><label class="screen-reader-text" for="quantity_1">Mug quantity</label><input type="number" id="quantity_1" class="input-text qty text" name="quantity" value="1" aria-label="Product quantity" min="1" step="1" inputmode="numeric" autocomplete="off"></div>
          <button type="submit" class="single_add_to_cart_button button alt wp-element-button">Add to cart</button>
          <input type="hidden" name="add-to-cart" value="${WOO_PRODUCT}" />
          <input type="hidden" name="product_id" value="${WOO_PRODUCT}" />
          <input type="hidden" name="variation_id" class="variation_id" value="0" />
        </div>
      </div>
    </form>
    ${widgetTag}
    <div class="product_meta"><span class="sku_wrapper">SKU: <span class="sku">MUG</span></span></div>
  </div>
</div>
<script>${options.jquery ? WOO_FORM_SCRIPT : WOO_FORM_SCRIPT_WITHOUT_JQUERY}</script>
</body>
</html>`;
}

/** A simple product out of stock: simple.php prints the stock message and no cart form at all. */
function wooSimpleSoldOutPage(widgetTag: string): string {
  return `<!doctype html>
<html lang="en-US">
<head><meta charset="UTF-8"><title>Teapot – Woo store</title><script src="/wp-includes/js/jquery/jquery.min.js"></script></head>
<body class="product-template-default single single-product postid-${WOO_SIMPLE} theme-storefront woocommerce woocommerce-page">
<div id="product-${WOO_SIMPLE}" class="product type-product post-${WOO_SIMPLE} status-publish first outofstock product_cat-teapots shipping-taxable purchasable product-type-simple">
  <div class="summary entry-summary">
    <h1 class="product_title entry-title">Teapot</h1>
    <p class="stock out-of-stock">Out of stock</p>
    ${widgetTag}
  </div>
</div>
</body>
</html>`;
}

/**
 * A BigCommerce product page as Stencil's Cornerstone theme renders it
 * (templates/components/products/product-view.html, options/set-rectangle.html): the cart form
 * with the product id and the option's radios, and `window.BCData` as the platform prints it.
 * The tag is where Script Manager puts a footer script, rendering into the options' column.
 */
function bigPage(widgetTag: string, options: { defaultValue?: string } = {}): string {
  const radios = Object.entries({ '10': 'Small', '11': 'Large' })
    .map(
      ([value, label]) => `
        <div class="form-option-wrapper">
          <input class="form-radio" type="radio" id="attribute_rectangle__${BIG_OPTION}_${value}" name="attribute[${BIG_OPTION}]" value="${value}"${options.defaultValue === value ? ' checked data-default' : ''} required>
          <label class="form-option" for="attribute_rectangle__${BIG_OPTION}_${value}" data-product-attribute-value="${value}">
            <span class="form-option-variant">${label}</span>
          </label>
        </div>`,
    )
    .join('');
  return `<!doctype html>
<html class="no-js" lang="en">
<head><meta charset="utf-8"><title>Mug - Big store</title></head>
<body>
<main class="body" id="main-content" role="main">
<div class="container">
<div itemscope itemtype="http://schema.org/Product">
<div class="productView" data-event-type="product" data-entity-id="${BIG_PRODUCT}" data-name="Mug" data-product-variant="single-product-option">
  <section class="productView-details product-data">
    <div class="productView-product"><h1 class="productView-title">Mug</h1></div>
  </section>
  <section class="productView-details product-options">
    <div class="productView-options">
      <form class="form" method="post" action="https://${BIG}/cart.php" enctype="multipart/form-data" data-cart-item-add>
        <input type="hidden" name="action" value="add">
        <input type="hidden" name="product_id" value="${BIG_PRODUCT}"/>
        <div data-product-option-change>
          <div class="form-field" data-product-attribute="set-rectangle" role="radiogroup" aria-labelledby="rectangle-group-label">
            <label class="form-label form-label--alternate form-label--inlineSmall" id="rectangle-group-label">
              Size:
              <span data-option-value></span>
              <small>Required</small>
            </label>
            ${radios}
          </div>
        </div>
        <div class="form-field form-field--increments">
          <label class="form-label form-label--alternate" for="qty[]">Quantity:</label>
          <input class="form-input form-input--incrementTotal" id="qty[]" name="qty[]" type="tel" value="1" data-quantity-min="0" data-quantity-max="0" min="1" pattern="[0-9]*" aria-live="polite">
        </div>
        <div id="add-to-cart-wrapper" class="add-to-cart-wrapper">
          <div class="form-action"><input id="form-action-addToCart" data-wait-message="Adding to cart…" class="button button--primary" type="submit" value="Add to Cart"></div>
        </div>
      </form>
    </div>
  </section>
</div>
</div>
</div>
</main>
<script type="text/javascript">
window.BCData = {"csrf_protection":true,"csrf_token":"${CSRF_TOKEN}","product_attributes":{"sku":null,"upc":null,"mpn":null,"gtin":null,"weight":null,"base":true,"image":null,"price":{"without_tax":{"formatted":"$12.00","value":12,"currency":"USD"},"tax_label":"Tax"},"stock":null,"instock":true,"stock_message":null,"purchasable":true,"purchasing_message":null,"call_for_price_message":null}};
</script>
${widgetTag}
</body>
</html>`;
}

/**
 * BigCommerce's storefront answer to `POST /remote/v1/product-attributes/{productId}`, shaped as
 * the stores answer (the form's fields in, `{ data: { … } }` out: `base` while the options name
 * no variant, else `variantId` (V2 SKU id), `v3_variant_id`, `sku`, `instock`, `purchasable`,
 * `stock`, `available_variant_values`, `in_stock_attributes`, `selected_attributes`, `price`).
 */
function productAttributes(fields: URLSearchParams) {
  const value = fields.get(`attribute[${BIG_OPTION}]`) ?? '';
  const variant = BIG_VARIANTS[value];
  const price = { without_tax: { formatted: '$12.00', value: 12, currency: 'USD' }, tax_label: 'Tax' };
  const inStock = Object.entries(BIG_VARIANTS)
    .filter(([, v]) => v.instock)
    .map(([id]) => Number(id));
  if (!variant) {
    return { data: { sku: null, upc: null, base: true, image: null, price, stock: null, instock: true, purchasable: true, purchasing_message: null, stock_message: null, available_variant_values: [], in_stock_attributes: inStock, selected_attributes: {} } };
  }
  return {
    data: {
      sku: variant.sku,
      upc: null,
      base: false,
      image: null,
      available_variant_values: [Number(value)],
      in_stock_attributes: inStock,
      selected_attributes: { [BIG_OPTION]: Number(value) },
      stock: null,
      available_to_sell: variant.instock ? 5 : 0,
      instock: variant.instock,
      purchasable: variant.instock,
      purchasing_message: variant.instock ? null : 'The selected product combination is currently unavailable.',
      stock_message: variant.instock ? null : 'Out of stock',
      out_of_stock_behavior: 'label_option',
      out_of_stock_message: 'Out of stock',
      variantId: variant.v2,
      v3_variant_id: variant.v3,
      price,
    },
  };
}

interface StoreServer {
  url: string;
  setPage(path: string, html: string): void;
  /** Requests to the product-attributes endpoint: headers and the form's fields. */
  attributeCalls: Array<{ path: string; headers: http.IncomingHttpHeaders; fields: URLSearchParams }>;
  /** Milliseconds to hold the answer for an option value (to answer out of order). */
  delays: Record<string, number>;
  close(): Promise<void>;
}

/** A store's own origin: its pages, WordPress's jQuery, and BigCommerce's product-attributes endpoint. */
async function startStoreServer(): Promise<StoreServer> {
  const pages = new Map<string, string>();
  const attributeCalls: StoreServer['attributeCalls'] = [];
  const delays: Record<string, number> = {};
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://store.test').pathname;
    const attributes = /^\/remote\/v1\/product-attributes\/(\d+)$/.exec(path);
    if (attributes && request.method === 'POST') {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        const fields = new URLSearchParams(body);
        attributeCalls.push({ path, headers: request.headers, fields });
        const answer = () => {
          if (attributes[1] !== BIG_PRODUCT) {
            response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
            return;
          }
          response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(productAttributes(fields)));
        };
        const delay = delays[fields.get(`attribute[${BIG_OPTION}]`) ?? ''] ?? 0;
        if (!delay) return answer();
        const timer = setTimeout(() => {
          timers.delete(timer);
          answer();
        }, delay);
        timers.add(timer);
      });
      return;
    }
    // WC_AJAX::get_variation: the variation matching the posted attributes, or false.
    if (path === '/' && new URL(request.url ?? '/', 'http://store.test').searchParams.get('wc-ajax') === 'get_variation') {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        const fields = new URLSearchParams(body);
        const found = WOO_VARIATIONS.find((v) => fields.get('product_id') === WOO_PRODUCT && v.attributes.attribute_pa_size === fields.get('attribute_pa_size'));
        response.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify(found ?? false));
      });
      return;
    }
    if (path === '/wp-includes/js/jquery/jquery.min.js') {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(JQUERY);
      return;
    }
    const html = pages.get(path);
    response.writeHead(html === undefined ? 404 : 200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    response.end(html ?? '<!doctype html><title>Not found</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    setPage: (path, html) => void pages.set(path, html),
    attributeCalls,
    delays,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of timers) clearTimeout(timer);
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

// The browser runs against SQLite only, as test/widget.test.ts does: what the widget's calls store
// is covered on every dialect by the storefront tests. Here the platforms' pages are under test.
describe('the pasted widget on WooCommerce and BigCommerce product pages', { skip: browserSkipReason() }, () => {
  let t: TestApp;
  let browser: Browser;
  let store: StoreServer;
  let serviceUrl = '';

  before(async () => {
    t = await startTestApp('sqlite', { STOREFRONT_LIMIT_PER_HOUR: '100000' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    serviceUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    await createStore(t.database, WOO, 'owner@example.com', 'woocommerce');
    await createStore(t.database, BIG, 'owner@example.com', 'bigcommerce');
    await createStore(t.database, SHOPIFY, 'owner@example.com');
    const source = { kind: 'inventory-api', ref: 'widget-platforms-test', verified: true } as const;
    await t.app.restock.inventory.reportStock(
      WOO,
      [
        { productId: gid('woocommerce', 'Product', WOO_PRODUCT), variantId: gid('woocommerce', 'ProductVariant', WOO_SMALL), available: 5 },
        { productId: gid('woocommerce', 'Product', WOO_PRODUCT), variantId: gid('woocommerce', 'ProductVariant', WOO_LARGE), available: 0 },
      ],
      source,
    );
    await t.app.restock.inventory.reportStock(
      BIG,
      Object.values(BIG_VARIANTS).map((v) => ({ productId: gid('bigcommerce', 'Product', BIG_PRODUCT), variantId: gid('bigcommerce', 'ProductVariant', v.v3), available: v.instock ? 5 : 0 })),
      source,
    );
    store = await startStoreServer();
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await store?.close();
    await t?.close();
  });

  /** Opens a page of the store in a fresh context; fails the test if the page throws or warns. */
  async function withPage(path: string, html: string, use: (page: Page, requests: Request[]) => Promise<void>) {
    store.setPage(path, html);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      const requests: Request[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => {
        if (message.text().startsWith('Restock')) errors.push(message.text());
      });
      page.on('request', (request) => requests.push(request));
      const loaded = page.waitForResponse((response) => response.url().includes('/storefront/v1/availability'));
      await page.goto(store.url + path);
      assert.equal((await loaded).status(), 200);
      await use(page, requests);
      assert.deepEqual(errors, [], 'the page threw or the widget warned');
    } finally {
      await context.close();
    }
  }

  const widget = (page: Page) => page.locator('restock-widget').first();
  const form = (page: Page) => page.locator('restock-widget form').first();
  const hidden = (page: Page) => widget(page).waitFor({ state: 'hidden' });
  const subscriptionsOf = (email: string) => t.database.db.selectFrom('subscriptions').selectAll().where('email', '=', email).execute();

  /** Signs up through the widget's form, and answers the stored subscription. */
  async function signUp(page: Page, requests: Request[], email: string) {
    await page.locator('restock-widget input[type="email"]').fill(email);
    await page.locator('restock-widget button[type="submit"]').click();
    await page.locator('restock-widget [role="status"]').filter({ hasText: EN_SUCCESS }).waitFor();
    const sent = requests.filter((r) => r.method() === 'POST' && r.url() === `${serviceUrl}/storefront/v1/subscribe`);
    assert.equal(sent.length, 1, 'one sign-up sent');
    assert.equal((await sent[0]!.response())?.status(), 201);
    const rows = await subscriptionsOf(email);
    assert.equal(rows.length, 1);
    return { body: sent[0]!.postDataJSON(), row: rows[0]! };
  }

  describe('WooCommerce', () => {
    // No data-product: the widget reads the product from the page's form.
    const wooTag = () => tag(serviceUrl, { 'data-shop': WOO, 'data-platform': 'woocommerce' });

    it("follows the variation form through WooCommerce's jQuery events and signs up for the sold-out variation", async () => {
      await withPage('/product/mug/', wooVariablePage(wooTag(), { jquery: true }), async (page, requests) => {
        const availability = requests.find((r) => r.url().includes('/storefront/v1/availability'))!;
        assert.equal(new URL(availability.url()).searchParams.get('productId'), gid('woocommerce', 'Product', WOO_PRODUCT), 'the product, read from data-product_id');
        assert.ok(
          requests.some((r) => r.url() === `${serviceUrl}/widget-platforms.js`),
          'the platforms script is loaded from beside the widget',
        );
        // Nothing chosen, and not every variation is out of stock: no form.
        await page.waitForTimeout(200);
        assert.equal(await widget(page).isVisible(), false);

        await page.selectOption('select[name="attribute_pa_size"]', 'large');
        await form(page).waitFor({ state: 'visible' });
        assert.equal(await page.inputValue('input[name="variation_id"]'), WOO_LARGE, "WooCommerce's own form took the choice");

        await page.selectOption('select[name="attribute_pa_size"]', 'small');
        await hidden(page);

        // A variation Restock never heard of: the page's own data says it is out of stock.
        await page.selectOption('select[name="attribute_pa_size"]', 'medium');
        await form(page).waitFor({ state: 'visible' });

        // "Clear" resets the form (reset_data, hide_variation): no variation, no form.
        await page.click('.reset_variations');
        await hidden(page);

        await page.selectOption('select[name="attribute_pa_size"]', 'large');
        await form(page).waitFor({ state: 'visible' });
        const email = `woo.${Date.now()}@example.com`;
        const { body, row } = await signUp(page, requests, email);
        assert.equal(body.productId, gid('woocommerce', 'Product', WOO_PRODUCT));
        assert.equal(body.variantId, gid('woocommerce', 'ProductVariant', WOO_LARGE));
        assert.equal(row.store_domain, WOO);
        assert.equal(row.product_id, 'gid://woocommerce/Product/77');
        assert.equal(row.variant_id, 'gid://woocommerce/ProductVariant/79');
      });
    });

    it('learns the stock of variations the page does not list from the variation found_variation carries', async () => {
      await withPage('/product/mug-many/', wooVariablePage(wooTag(), { jquery: true, listed: false }), async (page, requests) => {
        // Medium is unknown to Restock: only the variation WooCommerce fetched tells it is out of stock.
        await page.selectOption('select[name="attribute_pa_size"]', 'medium');
        await form(page).waitFor({ state: 'visible' });
        await page.selectOption('select[name="attribute_pa_size"]', 'small');
        await hidden(page);
        await page.selectOption('select[name="attribute_pa_size"]', 'medium');
        await form(page).waitFor({ state: 'visible' });
        assert.ok(requests.some((r) => r.url().endsWith('/?wc-ajax=get_variation')), "the theme asked WooCommerce for the variation");
        const { row } = await signUp(page, requests, `woo.many.${Date.now()}@example.com`);
        assert.equal(row.variant_id, gid('woocommerce', 'ProductVariant', WOO_MEDIUM));
      });
    });

    it('follows the hidden variation_id field where no jQuery drives the form, with the product named as a gid', async () => {
      // The gid in data-product names the platform: no data-platform needed.
      const named = tag(serviceUrl, { 'data-shop': WOO, 'data-product': gid('woocommerce', 'Product', WOO_PRODUCT) });
      await withPage('/product/mug-plain/', wooVariablePage(named, { jquery: false }), async (page, requests) => {
        assert.equal(await page.evaluate(() => 'jQuery' in window), false);
        await page.selectOption('select[name="attribute_pa_size"]', 'small');
        await page.waitForTimeout(200);
        assert.equal(await widget(page).isVisible(), false);
        await page.selectOption('select[name="attribute_pa_size"]', 'large');
        await form(page).waitFor({ state: 'visible' });
        await page.selectOption('select[name="attribute_pa_size"]', '');
        await hidden(page);
        await page.selectOption('select[name="attribute_pa_size"]', 'large');
        await form(page).waitFor({ state: 'visible' });
        const { row } = await signUp(page, requests, `woo.plain.${Date.now()}@example.com`);
        assert.equal(row.variant_id, gid('woocommerce', 'ProductVariant', WOO_LARGE));
      });
    });

    it('offers the alert on an out-of-stock simple product, which has no cart form, from its stock class', async () => {
      await withPage('/product/teapot/', wooSimpleSoldOutPage(wooTag()), async (page, requests) => {
        await form(page).waitFor({ state: 'visible' });
        const { body, row } = await signUp(page, requests, `woo.simple.${Date.now()}@example.com`);
        assert.equal(body.productId, gid('woocommerce', 'Product', WOO_SIMPLE), 'the product, from the body’s postid-<id>');
        assert.equal(body.variantId, null);
        assert.equal(row.product_id, 'gid://woocommerce/Product/90');
        assert.equal(row.variant_id, null);
      });
    });
  });

  describe('BigCommerce', () => {
    const bigTag = () => tag(serviceUrl, { 'data-shop': BIG, 'data-platform': 'bigcommerce', 'data-target': '.productView-options' });
    const choose = (page: Page, value: string) => page.click(`label[for="attribute_rectangle__${BIG_OPTION}_${value}"]`);

    it('resolves the chosen options through the storefront’s product-attributes call and signs up for the sold-out variant', async () => {
      const before = store.attributeCalls.length;
      await withPage('/mug/', bigPage(bigTag()), async (page, requests) => {
        assert.equal(await page.locator('.productView-options restock-widget').count(), 1, 'rendered into data-target');
        await page.waitForTimeout(200);
        assert.equal(await widget(page).isVisible(), false);
        assert.equal(store.attributeCalls.length, before, 'nothing asked while no option is chosen');

        await choose(page, '11');
        await form(page).waitFor({ state: 'visible' });
        const call = store.attributeCalls.at(-1)!;
        assert.equal(call.path, `/remote/v1/product-attributes/${BIG_PRODUCT}`);
        assert.equal(call.fields.get('product_id'), BIG_PRODUCT);
        assert.equal(call.fields.get(`attribute[${BIG_OPTION}]`), '11');
        assert.equal(call.fields.get('action'), 'add', 'the whole form, as the theme sends it');
        assert.match(String(call.headers['content-type']), /^application\/x-www-form-urlencoded/);
        assert.equal(call.headers['x-xsrf-token'], CSRF_TOKEN);
        assert.equal(call.headers['x-requested-with'], 'stencil-utils');

        await choose(page, '10');
        await hidden(page);
        await choose(page, '11');
        await form(page).waitFor({ state: 'visible' });

        const email = `big.${Date.now()}@example.com`;
        const { body, row } = await signUp(page, requests, email);
        assert.equal(body.productId, gid('bigcommerce', 'Product', BIG_PRODUCT));
        assert.equal(body.variantId, gid('bigcommerce', 'ProductVariant', 502), 'the catalog (V3) variant, not the V2 SKU id');
        assert.equal(row.store_domain, BIG);
        assert.equal(row.product_id, 'gid://bigcommerce/Product/111');
        assert.equal(row.variant_id, 'gid://bigcommerce/ProductVariant/502');
      });
    });

    it('asks at load for options chosen by default, and keeps only the latest answer', async () => {
      await withPage('/mug-default/', bigPage(bigTag(), { defaultValue: '11' }), async (page) => {
        await form(page).waitFor({ state: 'visible' });
        // The sold-out size answers late; the in-stock one, chosen after it, answers first.
        store.delays['11'] = 600;
        try {
          await choose(page, '10');
          await choose(page, '11');
          await choose(page, '10');
          await page.waitForTimeout(900);
          assert.equal(await widget(page).isVisible(), false, 'the late answer for the sold-out size was dropped');
        } finally {
          delete store.delays['11'];
        }
      });
    });
  });

  it('loads no platforms script on a Shopify page', async () => {
    const shopifyPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Mug</title></head><body>
      <form action="/cart/add" method="post"><select name="id"><option value="1">One</option></select></form>
      ${tag(serviceUrl, { 'data-shop': SHOPIFY, 'data-product': '1001' })}</body></html>`;
    await withPage('/products/mug', shopifyPage, async (page, requests) => {
      await page.waitForLoadState('networkidle');
      assert.equal(await page.locator('restock-widget').count(), 1);
      assert.equal(new URL(requests.find((r) => r.url().includes('/storefront/v1/availability'))!.url()).searchParams.get('productId'), 'gid://shopify/Product/1001');
      assert.equal(requests.filter((r) => r.url().includes('widget-platforms')).length, 0);
    });
  });
});

// No browser needed.
describe('the platforms script', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp('sqlite');
  });
  after(() => t.close());

  it('is served minified and gzipped beside the widget, cached and loadable cross-origin, within 2 KiB on the wire', async (test) => {
    const plain = await t.app.inject({ method: 'GET', url: '/widget-platforms.js' });
    assert.equal(plain.statusCode, 200);
    assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.equal(plain.headers['cross-origin-resource-policy'], 'cross-origin');
    assert.match(String(plain.headers['cache-control']), /public, max-age=\d+/);
    assert.doesNotMatch(plain.body, /^\s*\/\//m, 'no comments left');
    const gzipped = await t.app.inject({ method: 'GET', url: '/widget-platforms.js', headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gzipped.headers['content-encoding'], 'gzip');
    test.diagnostic(`widget-platforms.js: ${plain.rawPayload.length} B minified, ${gzipped.rawPayload.length} B gzipped`);
    assert.ok(gzipped.rawPayload.length < 2048, `${gzipped.rawPayload.length} bytes`);
    const again = await t.app.inject({ method: 'GET', url: '/widget-platforms.js', headers: { 'accept-encoding': 'gzip', 'if-none-match': gzipped.headers.etag as string } });
    assert.equal(again.statusCode, 304);
  });
});
