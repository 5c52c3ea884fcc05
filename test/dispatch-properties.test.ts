/**
 * Property tests over the store endpoints an agent bound to a store may call: whatever body
 * reaches the inventory API, suppressions or the settings, and whatever query reaches the read
 * endpoints, the answer is below 500, has no stack trace, is problem+json when refused, and a
 * refused request stores nothing. Most generated bodies are valid, so that the handlers' work is
 * checked too: an accepted report leaves the known stock as a model of the rules says (stale
 * reports ignored, restocks started exactly when a variant becomes sellable), an accepted
 * suppression or settings change is stored as sent, and the worker then sends what the stock
 * and the suppressions allow, once.
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/dispatch-properties.test.ts
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import type { InventoryVariantsTable } from '../src/core/db/schema.ts';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { call, storeWithAgent, type StoreAgent } from './fixtures/agents.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { bad, ok, propertyParams, STACK, type Tagged } from './fixtures/properties.ts';

failOnLeakedHandles();

const params = propertyParams();
const RUNS = params.numRuns;

// ---------------------------------------------------------------------------------------------
// Generated fields, each tagged valid or not, so the expected answer is known before sending.
// ---------------------------------------------------------------------------------------------

/** A field left out: valid where the field is optional, not where it is required. */
const ABSENT = undefined;
/** A field taken out of a report that would otherwise name its product from the catalogue. */
const REMOVED = '(removed)';

const oddValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', 'gid://shopify/Product/1\u0000', 'javascript:x', '{{shop}}'),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }),
);

/**
 * A body from tagged fields, with at most one field broken (a body broken in several places
 * tells nothing more, and keeps most bodies valid enough to reach the handler).
 */
function taggedBody(fields: Record<string, { valid: fc.Arbitrary<unknown>; invalid: fc.Arbitrary<unknown> }>, brokenWeight = 1) {
  const names = Object.keys(fields);
  const valid = fc.record(Object.fromEntries(names.map((name) => [name, fields[name]!.valid])) as Record<string, fc.Arbitrary<unknown>>);
  const broken = fc
    .tuple(valid, fc.constantFrom(...names, '(extra)'))
    .chain(([values, name]) =>
      name === '(extra)'
        ? fc.tuple(fc.constantFrom('colour', 'x', '__proto__x', ''), oddValue).map(([key, value]) => ({ values: { ...values, [key]: value }, valid: false }))
        : fields[name]!.invalid.map((value) => ({ values: { ...values, [name]: value }, valid: false })),
    );
  return fc.oneof({ weight: 4, arbitrary: valid.map((values) => ({ values, valid: true })) }, { weight: brokenWeight, arbitrary: broken }).map(({ values, valid: whole }) => ({
    // As sent: what fast-check builds (null prototypes included) is compared after JSON's round trip.
    body: JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(values).filter(([, value]) => value !== ABSENT)))) as Record<string, unknown>,
    valid: whole,
  }));
}

const maybe = <T>(arb: fc.Arbitrary<T>, weight = 1) => fc.oneof({ weight, arbitrary: fc.constant(ABSENT) }, { weight: 2, arbitrary: arb });

// ---------------------------------------------------------------------------------------------
// The store's catalogue and shoppers: reports name these products, so restocks find people waiting.
// ---------------------------------------------------------------------------------------------

const product = (n: number) => `gid://shopify/Product/${n}`;
const variant = (n: number) => `gid://shopify/ProductVariant/${n}`;
/** Per product, its variants; the last product is counted as a whole (variantId null). */
const CATALOGUE: Array<{ productId: string; variants: string[] }> = [
  { productId: product(71), variants: [variant(7101), variant(7102)] },
  { productId: product(72), variants: [variant(7201), variant(7202)] },
  { productId: product(73), variants: [] },
];
const SHOPPERS = Array.from({ length: 10 }, (_, i) => `shopper${i}@example.com`);
/** Only a few shoppers may be suppressed, so that most restocks still have someone to mail. */
const SUPPRESSIBLE = SHOPPERS.slice(0, 3);

type Target = { productId: string; variantId: string | null };
const targetsOf = (catalogue: typeof CATALOGUE): Target[] =>
  catalogue.flatMap(({ productId, variants }) => [...variants.map((variantId) => ({ productId, variantId: variantId as string | null })), { productId, variantId: null }]);
const targets = targetsOf(CATALOGUE);
const UPDATED_AT = Array.from({ length: 6 }, (_, i) => [`2026-01-01T00:0${i}:00Z`, `2026-01-01T02:0${i}:00.000+02:00`]).flat();

const stockItem = taggedBody({
  productId: {
    valid: fc.constant(ABSENT), // filled in from the target below
    invalid: fc.oneof(fc.constantFrom(REMOVED, 'gid://shopify/Product/', 'gid://shopify/ProductVariant/7101', `${product(71)} `, 71), oddValue),
  },
  variantId: { valid: fc.constant(ABSENT), invalid: fc.constantFrom('', product(71), 'gid://shopify/ProductVariant/x', 7101, true) },
  available: {
    valid: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(0, 0, -2) }, { weight: 4, arbitrary: fc.integer({ min: 1, max: 12 }) }, { weight: 1, arbitrary: fc.constantFrom(-1_000_000_000, 1_000_000_000) }),
    invalid: fc.constantFrom(ABSENT, null, 1.5, '3', 1_000_000_001, -1_000_000_001, true),
  },
  published: { valid: fc.constantFrom(ABSENT, ABSENT, true, false), invalid: fc.constantFrom(null, 'true', 1, 0) },
  productTitle: { valid: maybe(fc.constantFrom('Blue mug', 'Ünïcode – tea pot', 'x'.repeat(255))), invalid: fc.constantFrom('', null, 'x'.repeat(256), 5) },
  variantTitle: { valid: maybe(fc.constantFrom(null, 'Large', 'Small / Red')), invalid: fc.constantFrom('', 'y'.repeat(256), 7) },
  imageUrl: { valid: maybe(fc.constantFrom(null, 'https://cdn.example.com/mug.png', 'http://img.example.org/a?b=c')), invalid: fc.constantFrom('javascript:alert(1)', 'ftp://x.example/y', 'not a url', '') },
  productUrl: { valid: maybe(fc.constantFrom(null, 'https://shop.example.com/products/mug')), invalid: fc.constantFrom('data:text/html,x', 'mug', 3) },
  updatedAt: { valid: maybe(fc.constantFrom(...UPDATED_AT), 6), invalid: fc.constantFrom('2026-13-01T00:00:00Z', 'yesterday', '2026-01-01', null, 5) },
});

/** A report names one of the targets (or a product nobody waits for), unless its id is what is broken. */
function reportItemArb(among: Target[], validOnly = false) {
  const item = validOnly ? stockItem.filter(({ valid }) => valid) : stockItem;
  return fc
    .tuple(item, fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...among) }, { weight: 1, arbitrary: fc.constant({ productId: product(79), variantId: variant(7901) }) }), fc.boolean())
    .map(([{ body, valid }, target, nullVariant]) => {
      const report: Record<string, unknown> = { productId: target.productId, ...body };
      // A whole product is named by variantId null or by leaving it out; both mean the same.
      if (!('variantId' in body) && (target.variantId !== null || nullVariant)) report.variantId = target.variantId;
      for (const [key, value] of Object.entries(report)) if (value === REMOVED) delete report[key];
      return { item: report, valid };
    });
}
const itemArb = reportItemArb(targets);

const inventoryBody = fc.oneof(
  { weight: 8, arbitrary: fc.array(itemArb, { minLength: 1, maxLength: 3 }).map((items) => ({ body: { items: items.map((i) => i.item) } as unknown, valid: items.every((i) => i.valid) })) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constant({ body: { items: [] } as unknown, valid: false }),
      // One item over the limit of 100, each small enough that the body stays under the size limit.
      fc.constant({ body: { items: Array.from({ length: 101 }, (_, i) => ({ productId: product(7000 + i), available: 1 })) } as unknown, valid: false }),
      itemArb.map(({ item }) => ({ body: { items: [item], store: 'x' } as unknown, valid: false })),
      itemArb.map(({ item }) => ({ body: item as unknown, valid: false })),
      fc.anything({ maxDepth: 3 }).map((body) => ({ body, valid: false })),
    ),
  },
);

const suppressionBody = taggedBody({
  email: {
    valid: fc.oneof(fc.constantFrom(...SUPPRESSIBLE), fc.constantFrom(...SUPPRESSIBLE).map((e) => e.replace('example.com', 'EXAMPLE.com')), fc.tuple(fc.stringMatching(/^[a-z0-9_+-]{1,10}(\.[a-z0-9]{1,5})?$/), fc.constantFrom('example.org', 'Mail.Example.NET')).map(([local, domain]) => `${local}@${domain}`)),
    invalid: fc.oneof(fc.constantFrom(ABSENT, 'shopper0', '@example.com', 'a b@example.com', `${'a'.repeat(250)}@example.com`, null), oddValue.filter((v) => typeof v !== 'string' || !v.includes('@'))),
  },
  reason: { valid: fc.constantFrom('complaint', 'bounce', 'manual'), invalid: fc.constantFrom(ABSENT, 'spam', 'Complaint', '', null, 1) },
  detail: { valid: maybe(fc.string({ maxLength: 500 })), invalid: fc.constantFrom('d'.repeat(501), null, 5, ['x']) },
});

const settingsBody = taggedBody(
  {
    batchMultiplier: { valid: maybe(fc.oneof(fc.constant(null), fc.double({ min: 0.1, max: 100, noNaN: true })), 3), invalid: fc.constantFrom(0, 0.09, -1, 100.5, '2', true) },
    batchIntervalSeconds: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 7 * 24 * 3600 })), 3), invalid: fc.constantFrom(-1, 1.5, 7 * 24 * 3600 + 1, '60') },
    minStock: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 1_000_000 })), 3), invalid: fc.constantFrom(0, 2.5, 1_000_001, 'one') },
    frequencyCapMinutes: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 30 * 24 * 60 })), 3), invalid: fc.constantFrom(-1, 30 * 24 * 60 + 1, true) },
    locale: { valid: maybe(fc.constantFrom(null, 'en', 'fr', 'de', 'es'), 3), invalid: fc.constantFrom('it', 'EN', '', 5) },
    senderName: { valid: maybe(fc.oneof(fc.constant(null), fc.stringMatching(/^[A-Za-z0-9 .&'-]{1,100}$/)), 3), invalid: fc.constantFrom('', 'a<b', 'say "hi"', 'a\nb', 'n'.repeat(101)) },
    template: {
      valid: maybe(fc.oneof(fc.constant(null), fc.record({ subject: fc.constantFrom('Back: {{product_title}}', 'S'), text: fc.constantFrom('{{product_url}}', 'Hello {{email}}'), html: fc.constant('<p>{{product_title}}</p>') }, { requiredKeys: [] })), 3),
      invalid: fc.constantFrom({ subject: '' }, { extra: 'x' }, 'text', { subject: 5 }, { text: 't'.repeat(8001) }),
    },
    attributionWindowDays: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 90 })), 3), invalid: fc.constantFrom(0, 91, 1.5, '7') },
    reminderDelayHours: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 720 })), 3), invalid: fc.constantFrom(0, 721, 2.5, 'soon') },
    reserveUnitsMinutes: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 7 * 24 * 60 })), 3), invalid: fc.constantFrom(-1, 7 * 24 * 60 + 1, 1.5, '30') },
    waitlistThreshold: { valid: maybe(fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 1_000_000 })), 3), invalid: fc.constantFrom(0, -3, 1_000_001, 'ten') },
    weeklyDigest: { valid: maybe(fc.constantFrom(null, true, false), 3), invalid: fc.constantFrom('yes', 1, 0) },
    doubleOptIn: { valid: maybe(fc.constantFrom(null, 'auto', 'always', 'never'), 3), invalid: fc.constantFrom('sometimes', true, '') },
    country: { valid: maybe(fc.constantFrom(null, 'DE', 'US', 'FR'), 3), invalid: fc.constantFrom('de', 'DEU', 'D', 49) },
    smsQuietHours: {
      valid: maybe(fc.oneof(fc.constant(null), fc.record({ start: fc.integer({ min: 0, max: 23 }), end: fc.integer({ min: 0, max: 23 }) })), 3),
      invalid: fc.constantFrom({ start: 24, end: 9 }, { start: 21 }, { start: 1.5, end: 2 }, '21-9', { start: 21, end: 9, extra: 1 }),
    },
    timeZone: { valid: maybe(fc.constantFrom(null, 'Europe/Paris', 'America/New_York', 'UTC'), 3), invalid: fc.constantFrom('Mars/Olympus', 'Europe/', '', 'x'.repeat(65)) },
    sms: { valid: maybe(fc.constantFrom(null, true, false), 3), invalid: fc.constantFrom('on', 1) },
    push: { valid: maybe(fc.constantFrom(null, true, false), 3), invalid: fc.constantFrom('off', 0) },
    smtpUrl: {
      valid: maybe(fc.constantFrom(null, 'smtp://mail.example.com:587', 'smtps://user:p%40ss@mail.example.com', 'smtps://[2606:4700:4700::1111]:465'), 3),
      // A store's server takes no options at all, and is never internal (docs/security.md).
      invalid: fc.constantFrom(
        'http://mail.example.com',
        'smtp://mail.example.com/path',
        'smtp://mail.example.com?sendmail=true',
        'smtp://mail.example.com?name=shop.example.com',
        'smtp://127.0.0.1:25',
        'smtp://localhost',
        'smtp://a b',
        5,
      ),
    },
  },
  2,
);

const query = fc.oneof(
  fc.constant(''),
  fc.constantFrom('?limit=5', '?status=sent', '?status=queued&limit=1000', `?productId=${encodeURIComponent(product(71))}`, '?restockId=rst_x'),
  fc.dictionary(fc.constantFrom('status', 'restockId', 'limit', 'productId', 'x'), fc.oneof(fc.string({ maxLength: 20 }), fc.integer().map(String)), { maxKeys: 3 }).map(
    (entries) => `?${new URLSearchParams(entries)}`,
  ),
);

function assertShape(res: LightMyRequestResponse, what: string) {
  const label = `${what}: ${res.statusCode} ${res.body.slice(0, 300)}`;
  assert.ok(res.statusCode < 500, label);
  assert.ok(!STACK.test(res.body), `stack trace: ${label}`);
  if (res.statusCode < 400) return;
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, label);
  const body = res.json() as Record<string, unknown>;
  assert.equal(body.status, res.statusCode, label);
}

// ---------------------------------------------------------------------------------------------
// A model of the known stock (docs/dispatch.md "Sources of stock"), to check accepted reports.
// ---------------------------------------------------------------------------------------------

/** The columns of a variant's stored stock that a report decides. */
type KnownStock = Omit<InventoryVariantsTable, 'store_domain' | 'product_id' | 'variant_id' | 'inventory_item_id' | 'updated_at' | 'purchasable_without_stock' | 'price_minor' | 'price_currency'>;

const stockKey = (productId: string, variantId: string | null | undefined) => `${productId}|${variantId ?? ''}`;
const MIN_STOCK = 1;
const sellable = (known: KnownStock | undefined) => known !== undefined && known.published === 1 && known.available !== null && known.available >= MIN_STOCK;

/** Applies one accepted report to the model; returns what the answer must say of it. */
function applyToModel(model: Map<string, KnownStock>, item: Record<string, unknown>) {
  const key = stockKey(item.productId as string, item.variantId as string | null | undefined);
  const known = model.get(key);
  const answer = (row: KnownStock) => ({ productId: item.productId, variantId: (item.variantId as string | null | undefined) ?? null, available: row.available, published: row.published === 1 });
  const given = item.updatedAt as string | undefined;
  // Stale: older than the state taken; a report without a time speaks for the present.
  if (known && given && known.source_updated_at && Date.parse(given) < Date.parse(known.source_updated_at)) return { ...answer(known), ignored: 'stale', restock: false };
  const field = <T>(name: string, old: T | null | undefined) => (item[name] === undefined ? (old ?? null) : (item[name] as T));
  const row: KnownStock = {
    available: item.available as number,
    published: item.published === undefined ? (known?.published ?? 1) : item.published ? 1 : 0,
    product_title: field('productTitle', known?.product_title),
    variant_title: field('variantTitle', known?.variant_title),
    image_url: field('imageUrl', known?.image_url),
    product_url: field('productUrl', known?.product_url),
    source_updated_at: given ?? known?.source_updated_at ?? null,
  };
  model.set(key, row);
  return { ...answer(row), restock: !sellable(known) && sellable(row) };
}

/** What a restock of (product, variant) finds in stock: a whole product sums its published variants unless counted as a whole. */
function modelStockOf(model: Map<string, KnownStock>, productId: string, variantId: string | null) {
  if (variantId !== null) {
    const row = model.get(stockKey(productId, variantId));
    return { available: Math.max(0, row?.available ?? 0), published: row?.published === 1 };
  }
  const whole = model.get(stockKey(productId, null));
  if (whole) return { available: Math.max(0, whole.available ?? 0), published: whole.published === 1 };
  const rows = [...model.entries()].filter(([key]) => key.startsWith(`${productId}|`) && key !== stockKey(productId, null)).map(([, row]) => row);
  const published = rows.filter((row) => row.published === 1);
  return { available: published.reduce((sum, row) => sum + Math.max(0, row.available ?? 0), 0), published: published.length > 0 };
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

/** A source time as an instant: PostgreSQL keeps it as one, SQLite as the text sent. */
const instant = (time: string | Date | null) => (time === null ? null : new Date(time).toISOString());

const normalise = (email: string) => `${email.slice(0, email.lastIndexOf('@'))}@${email.slice(email.lastIndexOf('@') + 1).toLowerCase()}`;

for (const dialect of testDialects()) {
  describe(`store endpoints under arbitrary input on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    let store: StoreAgent;
    /** A second store for the settings, so that the first one's restocks keep the default policy. */
    let settingsStore: StoreAgent;
    const stock = new Map<string, KnownStock>();
    const suppressed = new Map<string, { reason: string; detail: string | null }>();

    before(async () => {
      // With the key, a store's own SMTP URL is accepted (sealed); without it, it is a 501 by design.
      // As in production: no internal address is a store's mail server here.
      t = await startTestApp(dialect, { RESTOCK_ENCRYPTION_KEY: randomBytes(32).toString('base64'), TENANT_OUTBOUND_ALLOW: '' });
      store = await storeWithAgent(t.app, t.database, 'props');
      settingsStore = await storeWithAgent(t.app, t.database, 'props-settings');
      // Shoppers wait for every variant and for whole products, some of them for several.
      let next = 0;
      for (const target of targets) {
        for (let i = 0; i < 3; i++) {
          const email = SHOPPERS[next++ % SHOPPERS.length]!;
          const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', payload: { shop: store.domain, productId: target.productId, ...(target.variantId ? { variantId: target.variantId } : {}), email } });
          assert.equal(res.statusCode, 201, res.body);
        }
      }
    });
    after(() => t.close());

    async function refusedChangesNothing(send: () => Promise<LightMyRequestResponse>, what: string, expected: number) {
      const before = await t.tableDigests();
      const res = await send();
      assertShape(res, what);
      assert.equal(res.statusCode, expected, `${what}: ${res.body.slice(0, 300)}`);
      if (res.statusCode >= 400) assert.deepEqual(await t.tableDigests(), before, `refused yet stored: ${what}`);
      return res;
    }

    async function storedStock(domain: string) {
      const rows = await t.database.db.selectFrom('inventory_variants').selectAll().where('store_domain', '=', domain).execute();
      return new Map(
        rows.map((row) => [
          stockKey(row.product_id, row.variant_id || null),
          { available: row.available, published: Number(row.published), product_title: row.product_title, variant_title: row.variant_title, image_url: row.image_url, product_url: row.product_url, source_updated_at: instant(row.source_updated_at) },
        ]),
      );
    }

    it('answers any inventory report with a result or a problem; an accepted one leaves the stock the rules say, restocking what became sellable', async (ctx) => {
      const seen: Record<string, number> = {};
      const count = (what: string) => (seen[what] = (seen[what] ?? 0) + 1);
      const waitedFor = new Set(targets.map((target) => stockKey(target.productId, target.variantId)));
      await fc.assert(
        fc.asyncProperty(inventoryBody, async ({ body, valid }) => {
          const what = String(JSON.stringify(body)).slice(0, 400);
          const res = await refusedChangesNothing(() => call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body }), what, valid ? 200 : 400);
          count(String(res.statusCode));
          if (res.statusCode !== 200) return;
          const items = (body as { items: Array<Record<string, unknown>> }).items;
          const answered = res.json().items as Array<Record<string, unknown>>;
          assert.equal(answered.length, items.length, what);
          for (const [i, item] of items.entries()) {
            const { restock, ...expected } = applyToModel(stock, item);
            const { restockId, ...got } = answered[i]!;
            assert.deepEqual(got, expected, `report ${i} of ${what}`);
            assert.equal(restockId !== undefined, restock, `a restock exactly when the report made it sellable: report ${i} of ${what}`);
            if ('ignored' in expected) count('stale');
            if (!restock) continue;
            const started = await t.database.db.selectFrom('restocks').selectAll().where('id', '=', restockId as string).executeTakeFirst();
            assert.equal(started?.store_domain, store.domain, what);
            assert.deepEqual([started?.product_id, started?.variant_id], [item.productId, item.variantId ?? null], what);
            if (waitedFor.has(stockKey(item.productId as string, item.variantId as string | null | undefined))) count('restocks for waiting shoppers');
          }
          const modelled = new Map([...stock].map(([key, known]) => [key, { ...known, source_updated_at: instant(known.source_updated_at) }]));
          assert.deepEqual(await storedStock(store.domain), modelled, `the stock known after ${what}`);
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} reports: ${JSON.stringify(seen)}`);
      // Reports that never got past validation, or never restocked anything, would test nothing of the handler.
      assert.ok((seen['200'] ?? 0) >= RUNS * 0.3 && (seen['400'] ?? 0) >= RUNS * 0.1, JSON.stringify(seen));
      assert.ok((seen['restocks for waiting shoppers'] ?? 0) >= 5 && (seen.stale ?? 0) >= 1, JSON.stringify(seen));
    });

    it('answers any suppression or settings change with a result or a problem; an accepted one is stored as sent', async (ctx) => {
      const seen = { suppressed: 0, suppressionRefused: 0, settingsChanged: 0, settingsRefused: 0 };
      let settings: Record<string, unknown> = {};
      let ownSmtp = false;
      await fc.assert(
        fc.asyncProperty(suppressionBody, settingsBody, async (suppression, change) => {
          const suppressionLabel = JSON.stringify(suppression.body);
          const suppressed_ = await refusedChangesNothing(
            () => call(t.app, 'POST', `/api/v1/stores/${store.domain}/suppressions`, { token: store.token, body: suppression.body }),
            suppressionLabel,
            suppression.valid ? 200 : 400,
          );
          if (suppressed_.statusCode === 200) {
            const { email, reason, detail } = suppression.body as { email: string; reason: string; detail?: string };
            // The first suppression of an address is the one kept.
            if (!suppressed.has(normalise(email))) suppressed.set(normalise(email), { reason, detail: detail ?? null });
            const rows = await t.database.db.selectFrom('suppressions').select(['email', 'reason', 'detail']).where('store_domain', '=', store.domain).execute();
            assert.deepEqual(new Map(rows.map((row) => [row.email, { reason: row.reason, detail: row.detail }])), suppressed, suppressionLabel);
            seen.suppressed++;
          } else seen.suppressionRefused++;

          const settingsLabel = JSON.stringify(change.body);
          const changed = await refusedChangesNothing(
            () => call(t.app, 'PATCH', `/api/v1/stores/${settingsStore.domain}`, { token: settingsStore.token, body: change.body }),
            settingsLabel,
            change.valid ? 200 : 400,
          );
          if (changed.statusCode !== 200) {
            seen.settingsRefused++;
            return;
          }
          const { smtpUrl, ...rest } = change.body as Record<string, unknown>;
          settings = { ...settings, ...rest };
          for (const [key, value] of Object.entries(rest)) if (value === null) delete settings[key];
          if (smtpUrl !== undefined) ownSmtp = smtpUrl !== null;
          const row = await t.database.db.selectFrom('stores').select(['settings', 'smtp_url_sealed']).where('domain', '=', settingsStore.domain).executeTakeFirstOrThrow();
          assert.deepEqual(JSON.parse(row.settings), settings, settingsLabel);
          assert.equal(row.smtp_url_sealed !== null, ownSmtp, settingsLabel);
          if (typeof smtpUrl === 'string') assert.ok(!row.smtp_url_sealed!.includes(smtpUrl), 'the SMTP URL is sealed');
          const answer = changed.json();
          assert.equal(answer.ownSmtp, ownSmtp, settingsLabel);
          const defaults = {
            batchMultiplier: 2,
            batchIntervalSeconds: 600,
            minStock: 1,
            frequencyCapMinutes: 60,
            locale: 'en',
            template: {},
            utm: { source: 'restock', medium: 'email', campaign: 'back-in-stock' },
            attributionWindowDays: 7,
            reminderDelayHours: null,
            reserveUnitsMinutes: 0,
            waitlistThreshold: null,
            weeklyDigest: false,
            doubleOptIn: 'auto',
            country: null,
            smsQuietHours: { start: 21, end: 9 },
            timeZone: 'UTC',
            sms: null,
            push: true,
          };
          assert.deepEqual(answer.settings, { ...defaults, ...settings }, settingsLabel);
          if (Object.keys(change.body).length > 0) seen.settingsChanged++;
        }),
        params,
      );
      ctx.diagnostic(`over ${RUNS} runs: ${JSON.stringify(seen)}`);
      assert.ok(seen.suppressed >= RUNS * 0.3 && seen.suppressionRefused >= RUNS * 0.05, JSON.stringify(seen));
      assert.ok(seen.settingsChanged >= RUNS * 0.3 && seen.settingsRefused >= RUNS * 0.1, JSON.stringify(seen));
    });

    it('answers any query on the read endpoints with a result or a problem', async (ctx) => {
      const seen: Record<number, number> = {};
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('stock', 'queue', 'notifications', 'suppressions', 'outbox'), query, async (path, q) => {
          const res = await call(t.app, 'GET', `/api/v1/stores/${store.domain}/${path}${q}`, { token: store.token });
          assertShape(res, `${path}${q}`);
          seen[res.statusCode] = (seen[res.statusCode] ?? 0) + 1;
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} queries: ${JSON.stringify(seen)}`);
      assert.ok((seen[200] ?? 0) >= RUNS * 0.2 && (seen[400] ?? 0) >= 1, JSON.stringify(seen));
    });

    /** Subscribes each of the round's shoppers to some of its targets, as the storefront widget does. */
    async function subscribeRound(among: Target[], shoppers: string[]) {
      for (const [i, target] of among.entries()) {
        for (const email of [shoppers[i % shoppers.length]!, shoppers[(i + 2) % shoppers.length]!]) {
          const payload = { shop: store.domain, productId: target.productId, ...(target.variantId ? { variantId: target.variantId } : {}), email };
          const res = await t.app.inject({ method: 'POST', url: '/storefront/v1/subscribe', payload });
          assert.equal(res.statusCode, 201, res.body);
        }
      }
    }

    /**
     * Runs the worker, then holds the whole ledger of the store to the rules: nothing left in
     * flight, every alert sent is for a restock whose stock is sellable now (the model's), to
     * an address not suppressed, once per subscription and once per address and restock, and
     * each one is a mail in the outbox.
     */
    async function runWorkerAndCheck() {
      await t.runWorker();
      const ledger = await t.database.db.selectFrom('notifications').selectAll().where('store_domain', '=', store.domain).execute();
      const restocks = new Map((await t.database.db.selectFrom('restocks').selectAll().where('store_domain', '=', store.domain).execute()).map((row) => [row.id, row]));
      const sent = ledger.filter((row) => row.status === 'sent');

      assert.deepEqual(ledger.filter((row) => row.status === 'sending' || row.status === 'failed'), [], 'nothing left in flight, nothing failed');
      for (const row of sent) {
        const restock = restocks.get(row.restock_id);
        assert.ok(restock, `the alert names a restock: ${row.id}`);
        assert.deepEqual([row.product_id, row.variant_id], [restock.product_id, restock.variant_id]);
        const now = modelStockOf(stock, restock.product_id, restock.variant_id);
        assert.ok(now.published && now.available >= MIN_STOCK, `an alert for stock that is not sellable: ${JSON.stringify({ row: row.id, restock: restock.id, now })}`);
        assert.ok(!suppressed.has(row.email), `an alert to the suppressed ${row.email}`);
      }
      for (const [id, rows] of groupBy(sent, (row) => row.subscription_id)) assert.equal(rows.length, 1, `subscription ${id} alerted ${rows.length} times`);
      for (const [key, rows] of groupBy(sent, (row) => `${row.restock_id} ${row.email}`)) assert.equal(rows.length, 1, `one mail per address per restock: ${key}`);
      const notified = await t.database.db.selectFrom('subscriptions').select(['id', 'status']).where('id', 'in', sent.length > 0 ? sent.map((row) => row.subscription_id) : ['none']).execute();
      assert.ok(notified.every((row) => row.status === 'notified'), JSON.stringify(notified));

      // This app has no SMTP server: what was sent is in the outbox, one mail per alert sent.
      const mail = await t.database.db.selectFrom('mail_outbox').selectAll().where('store_domain', '=', store.domain).where('purpose', '=', 'restock-alert').execute();
      const byAlert = new Map(mail.map((m) => [JSON.parse(m.headers)['X-Restock-Alert'] as string, m]));
      assert.equal(mail.length, sent.length, 'one mail per alert sent');
      for (const row of sent) assert.equal(byAlert.get(row.id)?.recipient, row.email, `the mail of alert ${row.id}`);
      return {
        sent: sent.length,
        skippedSuppressed: ledger.filter((row) => row.status === 'skipped' && suppressed.has(row.email)).length,
        statuses: Object.fromEntries([...groupBy(ledger, (row) => row.status)].map(([status, rows]) => [status, rows.length])),
      };
    }

    it('runs the worker over what the reports left behind, then over rounds of reports and suppressions: alerts only for sellable stock, once, never to a suppressed address', async (ctx) => {
      const leftBehind = await runWorkerAndCheck();
      ctx.diagnostic(`after the reports above: ${JSON.stringify(leftBehind.statuses)}`);

      // Each round: products of its own with shoppers waiting, valid reports (some restocking
      // them, some selling them out again), suppressions of some of its shoppers, a worker run.
      const ROUND_TARGETS = 4;
      const action = fc.oneof(
        { weight: 3, arbitrary: fc.array(fc.tuple(fc.nat(ROUND_TARGETS - 1), reportItemArb(targets, true)), { minLength: 1, maxLength: 3 }).map((items) => ({ report: items })) },
        { weight: 1, arbitrary: fc.record({ suppress: fc.nat(1), reason: fc.constantFrom('complaint', 'bounce', 'manual') }) },
      );
      const rounds = Math.max(10, Math.floor(RUNS / 5));
      let round = 0;
      const seen = { roundsSending: 0, sent: 0, skippedSuppressed: 0, restocks: 0 };
      let before = leftBehind;
      await fc.assert(
        fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 5 }), async (actions) => {
          const n = ++round;
          const catalogue = [
            { productId: product(100_000 + n * 10), variants: [variant(100_000 + n * 10 + 1)] },
            { productId: product(100_000 + n * 10 + 5), variants: [variant(100_000 + n * 10 + 6), variant(100_000 + n * 10 + 7)] },
          ];
          const among = targetsOf(catalogue).slice(0, ROUND_TARGETS);
          const shoppers = Array.from({ length: 4 }, (_, i) => `round${n}.shopper${i}@example.com`);
          await subscribeRound(among, shoppers);
          for (const step of actions) {
            if ('suppress' in step) {
              const email = shoppers[step.suppress]!;
              const res = await call(t.app, 'POST', `/api/v1/stores/${store.domain}/suppressions`, { token: store.token, body: { email, reason: step.reason } });
              assert.equal(res.statusCode, 200, res.body);
              if (!suppressed.has(email)) suppressed.set(email, { reason: step.reason, detail: null });
              continue;
            }
            // The generated report is about the first catalogue; it is moved onto this round's targets.
            const items = step.report.map(([i, { item }]) => {
              const target = among[i]!;
              const moved: Record<string, unknown> = { ...item, productId: target.productId };
              if (target.variantId === null) delete moved.variantId;
              else moved.variantId = target.variantId;
              return moved;
            });
            const res = await call(t.app, 'POST', `/api/v1/stores/${store.domain}/inventory`, { token: store.token, body: { items } });
            assert.equal(res.statusCode, 200, res.body);
            for (const [i, item] of items.entries()) {
              const { restock } = applyToModel(stock, item);
              assert.equal(res.json().items[i].restockId !== undefined, restock, JSON.stringify(item));
              if (restock) seen.restocks++;
            }
          }
          const after = await runWorkerAndCheck();
          if (after.sent > before.sent) seen.roundsSending++;
          seen.sent = after.sent;
          seen.skippedSuppressed = after.skippedSuppressed;
          before = after;
        }),
        { ...params, numRuns: rounds },
      );
      ctx.diagnostic(`over ${rounds} rounds: ${JSON.stringify(seen)}; ledger ${JSON.stringify(before.statuses)}`);
      // Rounds in which the worker sends nothing, or never meets a suppressed address, would test little of it.
      assert.ok(seen.roundsSending >= rounds * 0.2 && seen.skippedSuppressed >= 1, JSON.stringify(seen));
    });
  });
}
