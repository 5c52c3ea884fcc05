/**
 * The BigCommerce stand-in itself, driven through Node's global fetch at BigCommerce's real
 * hosts as the service drives it: the auth code exchanged once for a token, hooks refused and
 * made as BigCommerce refuses and makes them, products read in the Catalog API's shapes, the
 * token dead after an uninstall, webhook deliveries with the hook's headers and a Standard
 * Webhooks signature, and the signed_payload_jwt verified with jose.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { jwtVerify } from 'jose';
import { Webhook } from 'standardwebhooks';
import { after, before, describe, it } from './fixtures/suites.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startBigCommerce, type BcProduct, type BigCommerceStandIn, type Outgoing } from './fixtures/bigcommerce.ts';

failOnLeakedHandles();

const CLIENT_ID = 'bcstandintestclient0000000000001';
const CLIENT_SECRET = randomBytes(32).toString('hex');
const AUTH_CALLBACK = 'https://restock.test/bigcommerce/auth';
const DESTINATION = 'https://restock.test/webhooks/bigcommerce';
const ERROR_TYPE = 'https://developer.bigcommerce.com/api-docs/getting-started/api-status-codes';

let counter = 0;
const newId = () => Number(`${Date.now() % 100_000}${String(++counter).padStart(3, '0')}`);

function boots(): BcProduct {
  return {
    id: newId(),
    name: `Boots ${counter}`,
    inventory_tracking: 'variant',
    inventory_level: 0,
    availability: 'available',
    is_visible: true,
    variants: [
      { id: newId(), sku: 'BOOTS-41', inventory_level: 0, purchasing_disabled: false, option_values: [{ label: '41', option_display_name: 'Size' }] },
      { id: newId(), sku: 'BOOTS-42', inventory_level: 2, purchasing_disabled: false, option_values: [{ label: '42', option_display_name: 'Size' }] },
    ],
  };
}

function mug(): BcProduct {
  return { id: newId(), name: `Mug ${counter}`, inventory_tracking: 'product', inventory_level: 0, availability: 'available', is_visible: true, variants: [] };
}

describe('the BigCommerce stand-in, as strict as BigCommerce', () => {
  let bc: BigCommerceStandIn;
  const sent: Outgoing[] = [];
  let answer = 200;

  before(async () => {
    bc = await startBigCommerce({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, authCallback: AUTH_CALLBACK }, async (request) => {
      sent.push(request);
      return answer;
    });
  });
  after(async () => {
    await bc?.close();
  });

  async function exchange(code: string, context: string, scope: string, overrides: Record<string, string> = {}) {
    return fetch('https://login.bigcommerce.com/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, code, context, scope, grant_type: 'authorization_code', redirect_uri: AUTH_CALLBACK, ...overrides }),
    });
  }

  /** An installed store: its hash, owner and access token. */
  async function installed() {
    const store = bc.createStore();
    const auth = bc.authorize(store.hash);
    const res = await exchange(auth.code, auth.context, auth.scope);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { access_token: string };
    return { ...store, token: body.access_token };
  }

  function api(hash: string, token: string, path: string, init: { method?: string; body?: unknown } = {}) {
    return fetch(`https://api.bigcommerce.com/stores/${hash}/v3${path}`, {
      method: init.method ?? 'GET',
      headers: { 'x-auth-token': token, accept: 'application/json', ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
  }

  it('exchanges the auth code once for a token, in the documented shape, by JSON or form', async () => {
    const store = bc.createStore();
    const auth = bc.authorize(store.hash);
    assert.equal(auth.context, `stores/${store.hash}`);
    assert.match(auth.account_uuid, /^[0-9a-f-]{36}$/);

    const wrongSecret = await exchange(auth.code, auth.context, auth.scope, { client_secret: 'not-the-secret' });
    assert.equal(wrongSecret.status, 401);
    assert.equal(((await wrongSecret.json()) as { error: string }).error, 'invalid_client');

    const res = await exchange(auth.code, auth.context, auth.scope);
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ['access_token', 'account_uuid', 'context', 'owner', 'scope', 'user']);
    assert.match(body.access_token as string, /^[a-z0-9]{31}$/);
    assert.equal(body.scope, 'store_v2_products_read_only');
    assert.deepEqual(body.user, { id: store.owner.id, username: store.owner.email, email: store.owner.email });
    assert.deepEqual(body.owner, body.user);
    assert.equal(body.context, `stores/${store.hash}`);
    assert.equal(body.account_uuid, auth.account_uuid);

    const again = await exchange(auth.code, auth.context, auth.scope);
    assert.equal(again.status, 400);
    assert.equal(((await again.json()) as { error: string }).error, 'invalid_grant');

    const form = bc.authorize(store.hash);
    const formRes = await fetch('https://login.bigcommerce.com/oauth2/token', {
      method: 'POST',
      body: new URLSearchParams({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, code: form.code, context: form.context, scope: form.scope, grant_type: 'authorization_code', redirect_uri: AUTH_CALLBACK }),
    });
    assert.equal(formRes.status, 200);
    // The new token replaces the old one.
    const oldToken = body.access_token as string;
    assert.equal((await api(store.hash, oldToken, '/hooks')).status, 401);
  });

  it('refuses a hook whose destination is not https on port 443, and makes one that is', async () => {
    const store = await installed();
    for (const destination of ['http://restock.test/webhooks', 'https://restock.test:8443/webhooks']) {
      const res = await api(store.hash, store.token, '/hooks', { method: 'POST', body: { scope: 'store/product/updated', destination, is_active: true } });
      assert.equal(res.status, 422, destination);
      const error = (await res.json()) as { status: number; title: string; type: string; errors: Record<string, string> };
      assert.equal(error.status, 422);
      assert.equal(error.type, ERROR_TYPE);
      assert.ok(error.errors.destination, JSON.stringify(error));
    }
    assert.deepEqual(bc.hooks(store.hash), []);

    const res = await api(store.hash, store.token, '/hooks', { method: 'POST', body: { scope: 'store/sku/inventory/updated', destination: DESTINATION, is_active: true, headers: { 'x-restock-key': 'k1' } } });
    assert.equal(res.status, 200);
    const { data, meta } = (await res.json()) as { data: Record<string, unknown>; meta: unknown };
    assert.deepEqual(meta, {});
    assert.deepEqual(Object.keys(data).sort(), ['client_id', 'created_at', 'destination', 'headers', 'id', 'is_active', 'scope', 'store_hash', 'updated_at']);
    assert.equal(data.client_id, CLIENT_ID);
    assert.equal(data.store_hash, store.hash);
    assert.deepEqual(data.headers, { 'x-restock-key': 'k1' });

    const duplicate = await api(store.hash, store.token, '/hooks', { method: 'POST', body: { scope: 'store/sku/inventory/updated', destination: DESTINATION } });
    assert.equal(duplicate.status, 422);

    const list = (await (await api(store.hash, store.token, '/hooks')).json()) as { data: unknown[]; meta: { pagination: { total: number } } };
    assert.equal(list.data.length, 1);
    assert.equal(list.meta.pagination.total, 1);
    const missing = await api(store.hash, store.token, '/hooks/1');
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { status: 404, title: 'Webhook with id [1] not found', type: ERROR_TYPE });
  });

  it('reads products with their variants in the Catalog API shapes, and 404s an unknown one', async () => {
    const store = await installed();
    const product = boots();
    const simple = mug();
    bc.products(store.hash).set(product.id, product);
    bc.products(store.hash).set(simple.id, simple);

    const plain = (await (await api(store.hash, store.token, `/catalog/products/${product.id}`)).json()) as { data: Record<string, unknown>; meta: unknown };
    assert.deepEqual(plain.meta, {});
    assert.equal(plain.data.variants, undefined);
    assert.equal(plain.data.inventory_tracking, 'variant');
    assert.equal(plain.data.inventory_level, 2, 'tracked by variant: the sum of the variants');
    assert.equal(plain.data.base_variant_id, null);
    assert.equal(plain.data.type, 'physical');
    assert.equal(typeof plain.data.calculated_price, 'number');

    const withVariants = (await (await api(store.hash, store.token, `/catalog/products/${product.id}?include=variants`)).json()) as { data: { variants: Array<Record<string, unknown>> } };
    const [first] = withVariants.data.variants;
    assert.equal(first!.id, product.variants[0]!.id);
    assert.equal(first!.product_id, product.id);
    assert.equal(first!.sku, 'BOOTS-41');
    assert.equal(first!.inventory_level, 0);
    assert.equal(first!.purchasing_disabled, false);
    assert.notEqual(first!.sku_id, first!.id);
    assert.deepEqual(
      (first!.option_values as Array<Record<string, unknown>>).map(({ label, option_display_name }) => ({ label, option_display_name })),
      [{ label: '41', option_display_name: 'Size' }],
    );

    const variants = (await (await api(store.hash, store.token, `/catalog/products/${simple.id}/variants`)).json()) as { data: Array<Record<string, unknown>>; meta: { pagination: { total: number } } };
    assert.equal(variants.data.length, 1, 'a product without options has its base variant');
    assert.deepEqual(variants.data[0]!.option_values, []);
    assert.equal(variants.meta.pagination.total, 1);

    const list = (await (await api(store.hash, store.token, `/catalog/products?id:in=${product.id},${simple.id}&include=variants`)).json()) as {
      data: Array<{ id: number; variants: unknown[] }>;
      meta: { pagination: { total: number; count: number; per_page: number; current_page: number; total_pages: number } };
    };
    assert.deepEqual(list.data.map((p) => p.id).sort(), [product.id, simple.id].sort());
    assert.ok(list.data.every((p) => Array.isArray(p.variants)));
    assert.deepEqual({ ...list.meta.pagination, links: undefined }, { total: 2, count: 2, per_page: 50, current_page: 1, total_pages: 1, links: undefined });

    const unknown = await api(store.hash, store.token, '/catalog/products/999999999');
    assert.equal(unknown.status, 404);
    const error = (await unknown.json()) as Record<string, unknown>;
    assert.equal(error.status, 404);
    assert.equal(error.type, ERROR_TYPE);
    assert.equal(typeof error.title, 'string');
  });

  it('answers 401 to a bad token, another store’s token, and every token after the uninstall, and forgets the hooks', async () => {
    const store = await installed();
    const other = await installed();
    assert.equal((await api(store.hash, 'not-a-token', '/hooks')).status, 401);
    assert.equal((await api(store.hash, other.token, '/hooks')).status, 401);
    await api(store.hash, store.token, '/hooks', { method: 'POST', body: { scope: 'store/product/updated', destination: DESTINATION } });
    assert.equal(bc.hooks(store.hash).length, 1);

    bc.uninstall(store.hash);
    const res = await api(store.hash, store.token, '/hooks');
    assert.equal(res.status, 401);
    assert.deepEqual(Object.keys((await res.json()) as object).sort(), ['status', 'title', 'type']);
    assert.deepEqual(bc.hooks(store.hash), []);
    assert.equal((await api(other.hash, other.token, '/hooks')).status, 200);
  });

  it('delivers the webhooks a change fires, with the hook’s headers and a Standard Webhooks signature', async () => {
    const store = await installed();
    const product = boots();
    const simple = mug();
    bc.products(store.hash).set(product.id, product);
    bc.products(store.hash).set(simple.id, simple);
    for (const scope of ['store/sku/inventory/updated', 'store/product/*']) {
      const res = await api(store.hash, store.token, '/hooks', { method: 'POST', body: { scope, destination: DESTINATION, headers: { 'x-restock-key': 'k1' } } });
      assert.equal(res.status, 200);
    }

    sent.length = 0;
    const statuses = await bc.update(store.hash, product.id, (p) => {
      p.variants[0]!.inventory_level = 5;
    });
    assert.deepEqual(statuses, [200]);
    assert.equal(sent.length, 1);
    const delivery = sent[0]!;
    assert.equal(delivery.url, DESTINATION);
    assert.equal(delivery.headers['x-restock-key'], 'k1');
    assert.equal(delivery.headers['content-type'], 'application/json');
    const payload = JSON.parse(delivery.body) as Record<string, unknown>;
    assert.deepEqual(Object.keys(payload), ['scope', 'store_id', 'data', 'hash', 'created_at', 'producer']);
    assert.equal(payload.scope, 'store/sku/inventory/updated');
    assert.equal(payload.store_id, store.storeId);
    assert.equal(payload.producer, `stores/${store.hash}`);
    assert.match(payload.hash as string, /^[0-9a-f]{40}$/);
    const data = payload.data as { type: string; id: number; inventory: Record<string, unknown> };
    assert.equal(data.type, 'sku');
    assert.notEqual(data.id, product.variants[0]!.id, 'data.id is the SKU id, not the variant id');
    assert.deepEqual(data.inventory, { product_id: product.id, method: 'absolute', value: 5, variant_id: product.variants[0]!.id });
    // Verified as BigCommerce's documentation verifies it: the standardwebhooks library with base64(client secret).
    const verifier = new Webhook(Buffer.from(CLIENT_SECRET).toString('base64'));
    assert.deepEqual(verifier.verify(delivery.body, delivery.headers), payload);
    assert.throws(() => new Webhook(Buffer.from('another secret').toString('base64')).verify(delivery.body, delivery.headers));

    // A product tracked by product: its inventory event and the product update (the level is a tracked field).
    sent.length = 0;
    assert.deepEqual(await bc.update(store.hash, simple.id, (p) => (p.inventory_level = 3)), [200, 200]);
    assert.deepEqual(sent.map((s) => (JSON.parse(s.body) as { scope: string }).scope), ['store/product/inventory/updated', 'store/product/updated']);
    assert.deepEqual((JSON.parse(sent[0]!.body) as { data: unknown }).data, { type: 'product', id: simple.id, inventory: { product_id: simple.id, method: 'absolute', value: 3 } });

    // Made unavailable: store/product/updated only. Missed: nothing at all.
    sent.length = 0;
    assert.deepEqual(await bc.update(store.hash, simple.id, (p) => (p.availability = 'disabled')), [200]);
    assert.deepEqual(await bc.update(store.hash, product.id, (p) => (p.variants[1]!.inventory_level = 0), { deliver: false }), []);
    assert.equal(sent.length, 1);
    assert.deepEqual(JSON.parse(sent[0]!.body).data, { type: 'product', id: simple.id });

    // The app's answer comes back as is; an inactive hook gets nothing.
    answer = 503;
    assert.deepEqual(await bc.update(store.hash, product.id, (p) => (p.variants[1]!.inventory_level = 4)), [503]);
    answer = 200;
    for (const hook of bc.hooks(store.hash)) hook.is_active = false;
    assert.deepEqual(await bc.update(store.hash, product.id, (p) => (p.variants[1]!.inventory_level = 6)), []);
  });

  it('signs the signed_payload_jwt with the client secret, for the app as audience', async () => {
    const store = bc.createStore();
    const jwt = bc.signedPayload(store.hash);
    const { payload, protectedHeader } = await jwtVerify(jwt, new TextEncoder().encode(CLIENT_SECRET), { algorithms: ['HS256'], audience: CLIENT_ID, issuer: 'bc', subject: `stores/${store.hash}` });
    assert.equal(protectedHeader.alg, 'HS256');
    assert.deepEqual(payload.user, { id: store.owner.id, email: store.owner.email, locale: 'en-US' });
    assert.deepEqual(payload.owner, store.owner);
    assert.equal(payload.url, '/');
    assert.equal(payload.channel_id, null);
    assert.equal(payload.exp! - payload.nbf!, 24 * 60 * 60);
    assert.match(payload.jti!, /^[0-9a-f-]{36}$/);

    const user = { id: 9_876_543, email: 'staff@example.com' };
    const staff = await jwtVerify(bc.signedPayload(store.hash, user), new TextEncoder().encode(CLIENT_SECRET), { audience: CLIENT_ID });
    assert.deepEqual(staff.payload.user, { ...user, locale: 'en-US' });
    await assert.rejects(jwtVerify(jwt, new TextEncoder().encode('another secret')));
  });

  it('refuses any other host instead of reaching it', async () => {
    await assert.rejects(fetch('https://example.com/'));
    await assert.rejects(fetch('https://api.bigcommerce.com:8443/stores/x/v3/hooks'));
  });
});
