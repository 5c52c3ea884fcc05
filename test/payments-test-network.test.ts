/**
 * Test-network payments (PAYMENTS_TEST_NETWORK): with no payment settings the service offers x402
 * on a test network, paid to a wallet it made on its first start and keeps in its database. Here
 * the local chain (anvil, Circle's USDC, a facilitator over HTTP) is configured as that test
 * network; the official `@x402/fetch` client pays `GET /api`, the service's own address receives
 * the amount, and the ledger records it.
 */
import assert from 'node:assert/strict';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { Challenge, Credential, Receipt } from 'mppx';
import { createStore, uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { browserSkipReason, launchBrowser } from './fixtures/browser.ts';
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

    it("checkoutPlan's card session is the hosted test checkout: a test token opens it, no money moves, and the owner completes it there in Chromium", { skip: browserSkipReason() }, async () => {
      const shop = uniqueDomain('card');
      const owner = uniqueEmail('card-owner');
      await createStore(service.database, shop, owner);
      const checkout = (headers: Record<string, string> = {}) =>
        fetch(`${service.baseUrl}/api/v1/plans/checkout`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ plan: 'starter', shop }) });

      const offered = await checkout();
      assert.equal(offered.status, 402);
      const card = Challenge.fromResponseList(offered.clone()).find((challenge) => challenge.method === 'card');
      assert.equal(card?.intent, 'session');
      const problem = await offered.json();
      assert.match(problem.detail, /MPP card is this deployment's hosted test checkout, in test mode: no card is charged/);
      assert.equal((problem.unavailable ?? []).some((gap: { method: string }) => gap.method === 'card'), false, 'the card session is not named missing');

      const credential = Credential.serialize(Credential.from({ challenge: card!, payload: { token: 'tok_test_visa' } }));
      const paid = await checkout({ authorization: credential });
      assert.equal(paid.status, 200, await paid.clone().text());
      const receipt = Receipt.deserialize(paid.headers.get('payment-receipt')!);
      assert.equal(receipt.method, 'card');
      assert.match(receipt.reference, /^test_card_/);
      const { checkoutUrl, sessionId } = await paid.json();
      assert.equal(checkoutUrl, `${service.baseUrl}/checkout/${sessionId}`, 'the payer gets the page, never the owner’s key');

      // A card session moved no money: the checkout it opened is a plain one at the hosted page,
      // a proposal its owner completes there, not a purchase already paid for.
      const session = await service.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(session.provider, 'local');
      assert.equal(session.status, 'awaiting_owner');
      const ledger = await service.database.db.selectFrom('payments').selectAll().where('result_ref', '=', sessionId).execute();
      assert.deepEqual(ledger.map((row) => [row.protocol, row.method, row.intent, row.status, row.amount]), [['mpp', 'card', 'session', 'settled', '999']]);
      assert.match(ledger[0]!.reference ?? '', /^test_card_/);
      const replayed = await checkout({ authorization: credential });
      assert.equal(replayed.status, 402, 'one challenge opens one session');

      const mail = await service.database.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', owner).where('purpose', '=', 'plan-confirmation').executeTakeFirstOrThrow();
      assert.doesNotMatch(mail.text_body, /has paid/, 'the owner is not told that anything was paid');
      const link = new RegExp(`(https?://\\S+/checkout/${sessionId}\\?owner_key=[A-Za-z0-9_-]{43})`).exec(mail.text_body)![1]!;

      const browser = await launchBrowser();
      try {
        const page = await browser.newPage();
        await page.goto(link.replace(/^https?:\/\/[^/]+/, service.baseUrl));
        await page.getByRole('button', { name: 'Accept and continue to payment' }).click();
        await page.getByRole('button', { name: 'Complete test purchase' }).click();
        await page.waitForLoadState();
      } finally {
        await browser.close();
      }
      const plan = await service.database.db.selectFrom('store_plans').selectAll().where('shop', '=', shop).executeTakeFirstOrThrow();
      assert.deepEqual([plan.plan, plan.status], ['starter', 'active']);
      const completed = await service.database.db.selectFrom('checkout_sessions').select('status').where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(completed.status, 'completed');
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
