import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from './fixtures/suites.ts';
import { ConfigError, loadConfig } from '../src/config.ts';

describe('configuration', () => {
  it('with nothing set, runs embedded: SQLite under ./data, durable writes, port 3000', () => {
    const config = loadConfig({});
    assert.equal(config.port, 3000);
    assert.equal(config.baseUrl, 'http://localhost:3000');
    assert.deepEqual(config.database, {
      dialect: 'sqlite',
      file: path.resolve('data', 'restock.db'),
      synchronous: 'FULL',
      busyTimeoutMs: 1000,
    });
    assert.equal(config.bodyLimitBytes, 16 * 1024);
    // Pay per request and plans: test networks (paid to the wallet the service makes at start),
    // our test checkout page, the free allowance.
    assert.equal(config.payments.x402.payTo, undefined);
    assert.deepEqual(config.payments.testNetwork, {
      x402: { network: 'eip155:84532', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', assetName: 'USDC', assetVersion: '2', facilitatorUrl: 'https://x402.org/facilitator' },
    });
    assert.equal(config.billing.checkoutProvider, 'local');
    assert.equal(config.billing.freeAlertsPerMonth, 100);
  });

  it('DATABASE_URL=postgres://... selects PostgreSQL', () => {
    const config = loadConfig({ DATABASE_URL: 'postgresql://u@db:5432/restock', PG_POOL_MAX: '4' });
    assert.deepEqual(config.database, { dialect: 'postgres', url: 'postgresql://u@db:5432/restock', poolMax: 4, statementTimeoutMs: 5000 });
  });

  it('Shopify Billing charges are real unless SHOPIFY_BILLING_TEST=true (development stores are told apart at checkout)', () => {
    const app = { SHOPIFY_API_KEY: 'key', SHOPIFY_API_SECRET: 'secret', RESTOCK_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64') };
    assert.equal(loadConfig(app).platforms.shopify?.alwaysTestCharges, false);
    assert.equal(loadConfig({ ...app, SHOPIFY_BILLING_TEST: 'true' }).platforms.shopify?.alwaysTestCharges, true);
  });

  it('takes payments on test networks or on configured ones, never both; in production only when told', () => {
    const payTo = '0x1111111111111111111111111111111111111111';
    assert.equal(loadConfig({ X402_PAY_TO: payTo }).payments.testNetwork, undefined, 'a configured network replaces the test one');
    assert.equal(loadConfig({ MPP_TEMPO_RECIPIENT: payTo }).payments.testNetwork, undefined);
    assert.equal(loadConfig({ PAYMENTS_TEST_NETWORK: 'off' }).payments.testNetwork, undefined);
    assert.ok(loadConfig({ PAYMENTS_TEST_NETWORK: 'on', NODE_ENV: 'production' }).payments.testNetwork, 'production takes test networks when told by name');
    assert.equal(loadConfig({ NODE_ENV: 'production', PAYMENTS_TEST_NETWORK: 'off' }).payments.testNetwork, undefined);
    assert.equal(loadConfig({ NODE_ENV: 'production', X402_PAY_TO: payTo }).payments.testNetwork, undefined);
    for (const env of [{ NODE_ENV: 'production' }, { PAYMENTS_TEST_NETWORK: 'on', X402_PAY_TO: payTo }]) {
      assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && err.message.includes('PAYMENTS_TEST_NETWORK'), JSON.stringify(env));
    }
  });

  it('BASE_URL loses its trailing slash; empty variables mean the default', () => {
    assert.equal(loadConfig({ BASE_URL: 'https://restock.example/', PORT: '' }).baseUrl, 'https://restock.example');
  });

  for (const [name, env] of [
    ['a port that is not a number', { PORT: 'http' }],
    ['a port out of range', { PORT: '70000' }],
    ['an unknown database scheme', { DATABASE_URL: 'mysql://x' }],
    ['a base URL that is not a URL', { BASE_URL: 'restock' }],
    ['an unknown log level', { LOG_LEVEL: 'loud' }],
    ['a short secret', { RESTOCK_SECRET: 'short' }],
    ['Stripe checkout without its webhook secret', { CHECKOUT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: 'sk_test_x' }],
    ['an x402 address that is not one', { X402_PAY_TO: '0x123' }],
  ] as const) {
    it(`refuses ${name}, naming the variable`, () => {
      assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && err.message.includes(Object.keys(env)[0]!));
    });
  }
});
