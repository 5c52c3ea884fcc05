/**
 * The Vendure connector's own rules, without a server: which Admin API addresses it will call,
 * how it reads a variant's stock (Vendure's rule, case by case), and which deliveries it takes.
 * Against a real Vendure server, end to end: test/vendure.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAdminApiUrl } from '../src/vendure/admin-api.ts';
import { stockReportOf, vendureNumber, type VendureVariant } from '../src/vendure/catalog.ts';
import { vendureMessageSchema } from '../src/vendure/messages.ts';
import { parseOutboundAllowList, STRICT_OUTBOUND } from '../src/core/net/outbound-guard.ts';

describe('the Admin API address', () => {
  it('is https on the internet; loopback, private, link-local and metadata addresses are refused', () => {
    assert.ok(parseAdminApiUrl('https://shop.example.com/admin-api/', STRICT_OUTBOUND) instanceof URL);
    assert.equal((parseAdminApiUrl('https://shop.example.com/admin-api/', STRICT_OUTBOUND) as URL).href, 'https://shop.example.com/admin-api');
    for (const address of ['https://127.0.0.1/admin-api', 'https://10.0.0.5/admin-api', 'https://169.254.169.254/latest', 'https://[::1]/admin-api', 'https://0x7f.1/admin-api']) {
      assert.equal(typeof parseAdminApiUrl(address, STRICT_OUTBOUND), 'string', address);
    }
    assert.match(parseAdminApiUrl('http://shop.example.com/admin-api', STRICT_OUTBOUND) as string, /https/);
    assert.match(parseAdminApiUrl('https://user:pw@shop.example.com/admin-api', STRICT_OUTBOUND) as string, /credentials/);
    assert.match(parseAdminApiUrl('https://shop.example.com/admin-api?x=1', STRICT_OUTBOUND) as string, /query/);
  });

  it('plain http only to an address the operator allowed', () => {
    assert.ok(parseAdminApiUrl('http://127.0.0.1:3000/admin-api', parseOutboundAllowList('127.0.0.1/32')) instanceof URL);
  });
});

const settings = { trackInventory: true, outOfStockThreshold: 0 };
function variant(overrides: Partial<VendureVariant> = {}): VendureVariant {
  return {
    id: '7',
    productId: '3',
    name: 'Boots 42',
    enabled: true,
    trackInventory: 'INHERIT',
    outOfStockThreshold: 0,
    useGlobalOutOfStockThreshold: true,
    stockLevels: [
      { stockOnHand: 4, stockAllocated: 1 },
      { stockOnHand: 2, stockAllocated: 0 },
    ],
    featuredAsset: null,
    product: { id: '3', name: 'Boots', slug: 'boots', enabled: true, featuredAsset: { preview: 'https://cdn.example.com/boots.jpg' } },
    ...overrides,
  };
}
const at = '2026-11-29T10:00:00.000Z';
const url = (slug: string) => `https://shop.example.com/products/${slug}`;

describe("a variant's stock, by Vendure's rule", () => {
  it('sums every location, less what orders hold, less the shop’s threshold', () => {
    const report = stockReportOf(variant(), { trackInventory: true, outOfStockThreshold: 2 }, at, url);
    assert.deepEqual(report, {
      productId: 'gid://vendure/Product/3',
      variantId: 'gid://vendure/ProductVariant/7',
      available: 3,
      purchasableWithoutStock: false,
      published: true,
      productTitle: 'Boots',
      variantTitle: 'Boots 42',
      imageUrl: 'https://cdn.example.com/boots.jpg',
      productUrl: 'https://shop.example.com/products/boots',
      updatedAt: at,
    });
  });

  it('takes the variant’s own threshold when it has one, and never reads below 0', () => {
    assert.equal(stockReportOf(variant({ useGlobalOutOfStockThreshold: false, outOfStockThreshold: 9 }), settings, at, url).available, 0);
    assert.equal(stockReportOf(variant({ useGlobalOutOfStockThreshold: false, outOfStockThreshold: -5, stockLevels: [] }), settings, at, url).available, 5, 'a negative threshold sells on backorder');
  });

  it('untracked inventory is always for sale: its own FALSE, or INHERIT from a shop that does not track', () => {
    assert.equal(stockReportOf(variant({ trackInventory: 'FALSE' }), settings, at, url).purchasableWithoutStock, true);
    assert.equal(stockReportOf(variant(), { trackInventory: false, outOfStockThreshold: 0 }, at, url).purchasableWithoutStock, true);
    assert.equal(stockReportOf(variant({ trackInventory: 'TRUE' }), { trackInventory: false, outOfStockThreshold: 0 }, at, url).purchasableWithoutStock, false);
  });

  it('is on sale only while the variant and its product are enabled', () => {
    assert.equal(stockReportOf(variant({ enabled: false }), settings, at, url).published, false);
    assert.equal(stockReportOf(variant({ product: { ...variant().product, enabled: false } }), settings, at, url).published, false);
  });

  it('knows its own ids only', () => {
    assert.equal(vendureNumber('gid://vendure/Product/12', 'Product'), '12');
    assert.equal(vendureNumber('gid://shopify/Product/12', 'Product'), undefined);
    assert.equal(vendureNumber('gid://vendure/Product/T_1', 'Product'), undefined);
  });
});

describe("the plugin's messages", () => {
  it('takes each kind, and refuses what is not one', () => {
    assert.ok(vendureMessageSchema.safeParse({ type: 'variants.changed', variantIds: ['1', '2'] }).success);
    assert.ok(vendureMessageSchema.safeParse({ type: 'app.uninstalled' }).success);
    assert.ok(
      vendureMessageSchema.safeParse({ type: 'order.placed', order: { code: 'ABC', email: 'a@example.com', placedAt: at, currency: 'EUR', lines: [{ lineId: '1', productId: '3', variantId: '7', quantity: 1, amount: 1200 }] } }).success,
    );
    for (const bad of [
      { type: 'variants.changed', variantIds: [] },
      { type: 'variants.changed', variantIds: ['T_1'] },
      { type: 'order.placed', order: { code: 'ABC', email: null, placedAt: 'yesterday', currency: 'EUR', lines: [] } },
      { type: 'order.refunded', code: 'ABC', refundId: '1', refundedAt: at, currency: 'eur', lines: [] },
      { type: 'order.placed', order: { code: 'ABC', email: null, placedAt: at, currency: 'EUR', lines: [{ lineId: '1', productId: '3', variantId: '7', quantity: 1, amount: -1 }] } },
      { type: 'something.else' },
    ]) {
      assert.equal(vendureMessageSchema.safeParse(bad).success, false, JSON.stringify(bad));
    }
  });
});
