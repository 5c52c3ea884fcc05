/**
 * x402 end to end with no internet: a local chain (anvil) with Circle's real USDC, an x402
 * facilitator in the test process over HTTP, the service listening on loopback, and the
 * official `@x402/fetch` client paying.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { uniqueEmail } from './fixtures/agents.ts';
import { dialectSkip, testDialects } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startListeningApp, type ListeningApp } from './fixtures/oauth.ts';
import { startX402Chain, x402PayingFetch, x402Payment, type X402Chain } from './fixtures/x402-chain.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const PRICE = 50_000n; // USD 0.05 in USDC's 6 decimals

const subscription = () => JSON.stringify({ productId: 'gid://shopify/Product/7', email: uniqueEmail('x402') });
const json = { 'content-type': 'application/json' };

/** Signs a payment for `signed` (what the authorisation says) but presents it as `presented`. */
async function signedPayment(chain: X402Chain, required: PaymentRequired, signed: Partial<PaymentRequirements>, presented?: PaymentRequirements): Promise<string> {
  const altered = { ...required, accepts: [{ ...required.accepts[0]!, ...signed }] };
  const payload = await x402Payment(chain, altered);
  return encodePaymentSignatureHeader({ ...payload, accepted: presented ?? payload.accepted });
}

for (const dialect of testDialects()) {
  describe(`x402 pay per request on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let service: ListeningApp;
    let url: string;

    before(async () => {
      chain = await startX402Chain();
      service = await startListeningApp(dialect, {
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: chain.facilitatorUrl,
        PAYMENT_SETTLE_TIMEOUT_MS: '1500',
      });
      url = `${service.baseUrl}${SUBSCRIBE}`;
    });
    after(async () => {
      await service.close();
      await chain.close();
    });

    const requiredOffer = async (): Promise<PaymentRequired> => {
      const res = await fetch(url, { method: 'POST', headers: json, body: subscription() });
      assert.equal(res.status, 402);
      return decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    };
    const balances = async () => ({ payer: await chain.usdcBalance(chain.payer.address), payTo: await chain.usdcBalance(chain.payTo.address) });
    const ledger = () => service.database.db.selectFrom('payments').selectAll().orderBy('created_at').execute();
    /** One paid request while the facilitator answers every settlement with `reason`. */
    const payWhileSettleFails = async (reason: string): Promise<Response> => {
      const header = await signedPayment(chain, await requiredOffer(), {});
      chain.facilitator.failSettle = reason;
      try {
        return await fetch(url, { method: 'POST', headers: { ...json, 'payment-signature': header }, body: subscription() });
      } finally {
        chain.facilitator.failSettle = false;
      }
    };

    it('answers 402 with x402 v2 requirements in PAYMENT-REQUIRED and in the body', async () => {
      const res = await fetch(url, { method: 'POST', headers: json, body: subscription() });
      assert.equal(res.status, 402);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
      assert.equal(required.x402Version, 2);
      assert.equal(required.resource.url, url);
      assert.deepEqual(required.accepts, [
        { scheme: 'exact', network: chain.network, amount: String(PRICE), asset: chain.usdc, payTo: chain.payTo.address, maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' } },
      ]);
      const body = await res.json();
      assert.deepEqual(body.accepts, required.accepts);
      assert.equal(body.x402Version, 2);
      const index = await fetch(`${service.baseUrl}/api`);
      assert.equal(index.status, 402);
      assert.ok(index.headers.get('payment-required'), 'GET /api answers with x402 requirements');
    });

    it('pays with the official client and gets the subscription in one retry: balances moved, receipt, ledger', async () => {
      const start = await balances();
      const res = await x402PayingFetch(chain)(url, { method: 'POST', headers: json, body: subscription() });
      assert.equal(res.status, 200, await res.clone().text());
      const { subscriptionId, status } = await res.json();
      assert.equal(status, 'active');
      const receipt = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      assert.equal(receipt.success, true);
      assert.match(receipt.transaction, /^0x[0-9a-f]{64}$/);
      assert.equal(receipt.payer?.toLowerCase(), chain.payer.address.toLowerCase());
      const end = await balances();
      assert.equal(start.payer - end.payer, PRICE);
      assert.equal(end.payTo - start.payTo, PRICE);
      const row = (await ledger()).find((r) => r.result_ref === subscriptionId)!;
      assert.equal(row.status, 'settled');
      assert.equal(row.protocol, 'x402');
      assert.equal(row.amount, String(PRICE));
      assert.equal(row.reference, receipt.transaction);
      assert.equal(row.payer, chain.payer.address.toLowerCase());
    });

    it('settles nothing when the handler fails, and the same authorisation may pay for the retry', async () => {
      const header = await signedPayment(chain, await requiredOffer(), {});
      const start = await balances();
      await service.database.db.schema.alterTable('subscriptions').renameTo('subscriptions_away').execute();
      let failed: Response;
      try {
        failed = await fetch(url, { method: 'POST', headers: { ...json, 'payment-signature': header }, body: subscription() });
      } finally {
        await service.database.db.schema.alterTable('subscriptions_away').renameTo('subscriptions').execute();
      }
      assert.ok(failed.status >= 500);
      assert.equal(failed.headers.get('payment-response'), null);
      assert.deepEqual(await balances(), start, 'nothing settled');
      const retried = await fetch(url, { method: 'POST', headers: { ...json, 'payment-signature': header }, body: subscription() });
      assert.equal(retried.status, 200);
      assert.equal((await balances()).payTo - start.payTo, PRICE);
      const statuses = (await ledger()).slice(-2).map((r) => r.status);
      assert.deepEqual(statuses, ['cancelled', 'settled']);
    });

    it('one signature sent 10 times at once gets exactly one success', async () => {
      const header = await signedPayment(chain, await requiredOffer(), {});
      const start = await balances();
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => fetch(url, { method: 'POST', headers: { ...json, 'payment-signature': header }, body: subscription() })),
      );
      const codes = answers.map((r) => r.status);
      assert.equal(codes.filter((c) => c === 200).length, 1, String(codes));
      assert.ok(codes.every((c) => c === 200 || c === 402), String(codes));
      assert.equal((await balances()).payTo - start.payTo, PRICE);
      for (const res of answers) await res.arrayBuffer();
    });

    it('refuses expired, underpaid and wrong-recipient authorisations, moving nothing', async () => {
      const required = await requiredOffer();
      const genuine = required.accepts[0]!;
      const start = await balances();
      const refused = async (header: string, type: RegExp) => {
        const res = await fetch(url, { method: 'POST', headers: { ...json, 'payment-signature': header }, body: subscription() });
        const body = await res.json();
        assert.equal(res.status, 402, JSON.stringify(body));
        assert.match(body.type, type);
        assert.ok(res.headers.get('payment-required'), 'fresh requirements come with the refusal');
        return body;
      };
      // Expired: the authorisation's validity window is already over.
      await refused(await signedPayment(chain, required, { maxTimeoutSeconds: 1 }, genuine), /payment-expired/);
      // Underpaid, presented as the genuine offer: the facilitator sees the value.
      await refused(await signedPayment(chain, required, { amount: String(PRICE - 1n) }, genuine), /payment-insufficient/);
      // Underpaid and saying so: refused before the facilitator is asked.
      await refused(await signedPayment(chain, required, { amount: String(PRICE - 1n) }), /payment-insufficient/);
      // Paying someone else.
      await refused(await signedPayment(chain, required, { payTo: chain.stranger.address }, genuine), /payment-insufficient/);
      // Garbage.
      await refused('not base64 at all', /malformed-credential/);
      assert.deepEqual(await balances(), start);
    });

    it('a settlement that times out is served, recorded as pending, and reconciled as settled', async () => {
      chain.facilitator.settleDelayMs = 3000;
      let res: Response;
      try {
        res = await x402PayingFetch(chain)(url, { method: 'POST', headers: json, body: subscription() });
      } finally {
        chain.facilitator.settleDelayMs = 0;
      }
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('payment-status'), 'pending');
      const { subscriptionId } = await res.json();
      const pending = (await ledger()).find((r) => r.result_ref === subscriptionId)!;
      assert.equal(pending.status, 'pending');
      await service.app.restock.payments.reconcile(0);
      const row = await service.database.db.selectFrom('payments').selectAll().where('id', '=', pending.id).executeTakeFirstOrThrow();
      assert.equal(row.status, 'settled', row.error ?? '');
    });

    it('a settlement that fails for a passing reason is served as pending and settled by reconciliation', async () => {
      const start = await balances();
      const res = await payWhileSettleFails('invalid_exact_evm_transaction_failed');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('payment-status'), 'pending');
      const { subscriptionId } = await res.json();
      assert.deepEqual(await balances(), start, 'nothing moved yet');
      const pending = (await ledger()).find((r) => r.result_ref === subscriptionId)!;
      assert.equal(pending.status, 'pending');
      assert.match(pending.error ?? '', /transaction_failed/);
      await service.app.restock.payments.reconcile(0);
      const row = await service.database.db.selectFrom('payments').selectAll().where('id', '=', pending.id).executeTakeFirstOrThrow();
      assert.equal(row.status, 'settled');
      assert.equal((await balances()).payTo - start.payTo, PRICE);
    });

    it("a settlement refused for the payer's fault turns the answer into a 402, recorded as failed", async () => {
      const start = await balances();
      const res = await payWhileSettleFails('invalid_exact_evm_insufficient_balance');
      assert.equal(res.status, 402);
      const body = await res.json();
      assert.match(body.type, /settlement-failed/);
      assert.equal(body.reason, 'invalid_exact_evm_insufficient_balance', 'the x402 code');
      assert.ok(!JSON.stringify(body).includes('failSettle'), `but never the facilitator's own words: ${body.detail}`);
      assert.ok(res.headers.get('payment-required'), 'fresh requirements come with the refusal');
      assert.deepEqual(await balances(), start);
      const row = await service.database.db.selectFrom('payments').selectAll().where('id', '=', body.paymentId).executeTakeFirstOrThrow();
      assert.equal(row.status, 'failed');
      assert.match(row.error ?? '', /failSettle is on/, 'which the ledger keeps, for the operator');
      assert.equal(row.result_ref, body.resultRef, 'what the request created is kept with the unpaid row');
    });
  });
}
