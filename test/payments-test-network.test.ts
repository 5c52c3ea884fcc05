/**
 * Test-network payments (PAYMENTS_TEST_NETWORK): with no payment settings the service offers x402
 * on a test network, paid to a wallet it made on its first start and keeps in its database. Here
 * the local chain (anvil, Circle's USDC, a facilitator over HTTP) is configured as that test
 * network; the official `@x402/fetch` client pays `GET /api`, the service's own address receives
 * the amount, and the ledger records it.
 */
import assert from 'node:assert/strict';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { after, before, describe, it } from './fixtures/suites.ts';
import { dialectSkip, testDialects } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startListeningApp, type ListeningApp } from './fixtures/oauth.ts';
import { startX402Chain, x402PayingFetch, type X402Chain } from './fixtures/x402-chain.ts';
import { loadPaymentWallet } from '../src/payments/wallet.ts';
import { SecretBox } from '../src/core/sealed-secrets.ts';

failOnLeakedHandles();

const PRICE = 50_000n; // USD 0.05 in USDC's 6 decimals

for (const dialect of testDialects()) {
  describe(`test-network payments on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let service: ListeningApp;
    let wallet: `0x${string}`;

    before(async () => {
      chain = await startX402Chain();
      // Nothing says where real payments go: the local chain stands for the public test network.
      service = await startListeningApp(dialect, {
        PAYMENTS_TEST_NETWORK: 'auto',
        X402_TEST_NETWORK: chain.network,
        X402_TEST_ASSET: chain.usdc,
        X402_TEST_ASSET_NAME: 'USD Coin',
        X402_TEST_FACILITATOR_URL: chain.facilitatorUrl,
        PAYMENT_SETTLE_TIMEOUT_MS: '1500',
      });
      wallet = (await loadPaymentWallet(service.database, SecretBox.fromKey(undefined))).address;
    });
    after(async () => {
      await service?.close();
      await chain?.close();
    });

    it('GET /api answers a payable 402: an x402 requirement on the test network, paid to the wallet the service made, said to be test money', async () => {
      assert.notEqual(wallet, chain.payTo.address);
      const res = await fetch(`${service.baseUrl}/api`);
      assert.equal(res.status, 402);
      const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
      assert.deepEqual(required.accepts, [
        { scheme: 'exact', network: chain.network, amount: String(PRICE), asset: chain.usdc, payTo: wallet, maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' } },
      ]);
      const problem = await res.json();
      assert.match(problem.detail, /test networks only .* not money/);
      assert.equal((problem.unavailable ?? []).some((gap: { protocol: string }) => gap.protocol === 'x402'), false, 'x402 is not named missing');

      const document = await (await fetch(`${service.baseUrl}/openapi.json`)).json();
      const info = document.paths['/api'].get['x-payment-info'];
      assert.deepEqual(info.x402.accepts, required.accepts, "/openapi.json's x-payment-info holds the same requirement");
    });

    it("each 402's detail names only the ways that answer carries: checkoutPlan's card session, with no x402 and no test network it does not offer", async () => {
      for (const [path, body] of [['/api/v1/plans/checkout', { plan: 'starter' }], ['/api/v1/alerts/subscribe', { productId: 'gid://shopify/Product/1', email: 'buyer@example.com' }], ['/api', undefined]] as const) {
        const res = await fetch(`${service.baseUrl}${path}`, body ? { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {});
        assert.equal(res.status, 402, path);
        const problem = await res.json();
        const x402 = problem.accepts.length > 0;
        const methods = [...(res.headers.get('www-authenticate') ?? '').matchAll(/method="([a-z0-9-]+)"/g)].map((match) => match[1]!);
        const named = (word: RegExp) => word.test(problem.detail);
        assert.equal(named(/x402/), x402, `${path}: x402 named ${named(/x402/)}, carried ${x402}: ${problem.detail}`);
        assert.equal(named(/MPP/), methods.length > 0, `${path}: MPP named, carried ${methods}: ${problem.detail}`);
        for (const method of ['stripe', 'tempo', 'card']) assert.equal(named(new RegExp(`\\b${method}\\b`)), methods.includes(method), `${path}: ${method} named in ${problem.detail}, challenges ${methods}`);
        for (const gap of problem.unavailable ?? []) assert.doesNotMatch(gap.reason, /pay with/i, `${path}: a gap sends the payer elsewhere: ${gap.reason}`);
      }
    });

    it('the official client pays it: the amount reaches the service’s own address and the ledger records it', async () => {
      const before = await chain.usdcBalance(wallet);
      const res = await x402PayingFetch(chain)(`${service.baseUrl}/api`);
      assert.equal(res.status, 200, await res.clone().text());
      assert.match((await res.json()).testNetworkPayments, /test networks only/, 'the index says so too');
      assert.equal(await chain.usdcBalance(wallet), before + PRICE);
      const [row] = await service.database.db.selectFrom('payments').selectAll().where('operation', '=', 'getApiIndex').execute();
      assert.equal(row?.status, 'settled');
      assert.equal(row?.protocol, 'x402');
    });

    it('another process over the same database offers the same address', async () => {
      const peer = await service.startPeer();
      try {
        const res = await peer.app.inject({ method: 'GET', url: '/api' });
        assert.equal(res.statusCode, 402);
        assert.equal(decodePaymentRequiredHeader(res.headers['payment-required'] as string).accepts[0]!.payTo, wallet);
      } finally {
        await peer.close();
      }
    });
  });
}
