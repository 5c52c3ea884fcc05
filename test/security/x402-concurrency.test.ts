/**
 * x402 is verify → serve → settle: the facilitator checks the payer's balance when it verifies,
 * and the transfer happens only after the handler answered. N proofs signed by one payer with
 * distinct nonces, sent at once, would each verify against the same balance before any of them
 * settles. The payer here holds exactly one payment's worth; the proofs come from the official
 * x402 client, the chain is anvil with Circle's USDC, and the service runs as two processes over
 * one database. Before a payer was held to one payment in flight, every proof was served (each
 * handler ran) and all settlements but one were refused, leaving the results unpaid.
 */
import assert from 'node:assert/strict';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, testDialects } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { startListeningApp, type ListeningApp, type ServiceProcess } from '../fixtures/oauth.ts';
import { startX402Chain, x402Payment, type X402Chain } from '../fixtures/x402-chain.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
/** USD 0.05 in USDC's 6 decimals: the price, and all the payer holds at first. */
const PRICE = 50_000n;
const PROOFS = 6;
const PAYER_AGENT = (chain: X402Chain) => `payer:x402:${chain.payer.address.toLowerCase()}`;

interface Answer {
  status: number;
  contentType: string;
  retryAfter: string | undefined;
  paymentStatus: string | undefined;
  body: { type?: string; reason?: string; subscriptionId?: string };
}

for (const dialect of testDialects()) {
  describe(`x402 proofs at once against one balance on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let service: ListeningApp;
    let peer: ServiceProcess;

    before(async () => {
      chain = await startX402Chain({ payerBalance: PRICE });
      service = await startListeningApp(dialect, {
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: chain.facilitatorUrl,
        PAYMENT_SETTLE_TIMEOUT_MS: '10000',
      });
      peer = await service.startPeer();
    });
    after(async () => {
      await peer?.close();
      await service?.close();
      await chain?.close();
    });

    const subscription = () => JSON.stringify({ productId: 'gid://shopify/Product/7', email: uniqueEmail('x402-race') });
    const json = { 'content-type': 'application/json' };

    /** Half the proofs go to the listening process over loopback, half to the other process. */
    async function send(signature: string, index: number): Promise<Answer> {
      if (index % 2 === 0) {
        const res = await fetch(`${service.baseUrl}${SUBSCRIBE}`, { method: 'POST', headers: { ...json, 'payment-signature': signature }, body: subscription() });
        const header = (name: string) => res.headers.get(name) ?? undefined;
        return { status: res.status, contentType: header('content-type') ?? '', retryAfter: header('retry-after'), paymentStatus: header('payment-status'), body: (await res.json()) as Answer['body'] };
      }
      const res = await peer.app.inject({ method: 'POST', url: SUBSCRIBE, headers: { ...json, 'payment-signature': signature }, payload: subscription() });
      const header = (name: string) => res.headers[name] as string | undefined;
      return { status: res.statusCode, contentType: header('content-type') ?? '', retryAfter: header('retry-after'), paymentStatus: header('payment-status'), body: res.json() };
    }
    async function offer(): Promise<PaymentRequired> {
      const res = await fetch(`${service.baseUrl}${SUBSCRIBE}`, { method: 'POST', headers: json, body: subscription() });
      assert.equal(res.status, 402);
      await res.arrayBuffer();
      return decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    }
    /** A fresh proof from the payer, signed by the official client for the subscription's offer. */
    const proof = async () => encodePaymentSignatureHeader(await x402Payment(chain, await offer()));
    const payerRows = () => service.database.db.selectFrom('payments').selectAll().where('payer', '=', chain.payer.address.toLowerCase()).orderBy('created_at').execute();
    const balances = async () => ({ payer: await chain.usdcBalance(chain.payer.address), payTo: await chain.usdcBalance(chain.payTo.address) });

    it(`suspicion: concurrent x402 proofs against a balance for one payment: ${PROOFS} sent at once to two processes, one served, none served unpaid`, { timeout: 60_000 }, async () => {
      const required = await offer();
      // The official client draws a fresh random nonce for every payload it signs.
      const payloads = await Promise.all(Array.from({ length: PROOFS }, () => x402Payment(chain, required)));
      const nonces = new Set(payloads.map((p) => (p.payload as { authorization: { nonce: string } }).authorization.nonce));
      assert.equal(nonces.size, PROOFS, 'distinct nonces');
      const headers = payloads.map((payload) => encodePaymentSignatureHeader(payload));

      const answers = await Promise.all(headers.map((header, index) => send(header, index)));
      const codes = answers.map((a) => a.status);
      const served = answers.filter((a) => a.status >= 200 && a.status < 300);
      assert.equal(served.length, 1, `one payment's balance, ${served.length} served: ${codes}`);
      // Refused while the first was in flight, or (arriving once it had settled) verified
      // against what was left.
      for (const answer of answers.filter((a) => a.status >= 300)) {
        assert.match(answer.contentType, /^application\/problem\+json/);
        if (answer.status === 409) {
          assert.equal(answer.body.reason, 'payment_in_flight');
          assert.equal(answer.retryAfter, '1');
        } else {
          assert.equal(answer.status, 402, JSON.stringify(answer.body));
          assert.equal(answer.body.type, 'https://paymentauth.org/problems/payment-insufficient');
        }
      }

      // The balance paid for one request, and the ledger holds nothing served without payment:
      // a proof held back left no row, one refused at verification a failed row that bought nothing.
      assert.deepEqual(await balances(), { payer: 0n, payTo: PRICE });
      const rows = await payerRows();
      assert.deepEqual(
        rows.filter((row) => row.status !== 'failed' || row.result_ref !== null).map((row) => [row.status, row.result_ref]),
        [['settled', served[0]!.body.subscriptionId]],
        JSON.stringify(rows.map((r) => [r.status, r.result_ref, r.error])),
      );
      assert.equal(rows.length, 1 + answers.filter((a) => a.status === 402).length);
      const made = await service.database.db.selectFrom('subscriptions').select('id').where('agent_id', '=', PAYER_AGENT(chain)).execute();
      assert.deepEqual(made.map((row) => row.id), [served[0]!.body.subscriptionId], 'a subscription exists only for the request that paid');

      // A proof held back was not used up: sent again, it is verified against what is left.
      const heldBack = answers.findIndex((a) => a.status === 409);
      assert.ok(heldBack >= 0, `some proofs arrived while the first was in flight: ${codes}`);
      const again = await send(headers[heldBack]!, 0);
      assert.equal(again.status, 402, JSON.stringify(again.body));
      assert.equal(again.body.type, 'https://paymentauth.org/problems/payment-insufficient');
      assert.match(again.body.reason ?? '', /insufficient/);
      assert.deepEqual(await balances(), { payer: 0n, payTo: PRICE });
    });

    it("suspicion: concurrent x402 proofs against a balance for one payment: while the payer's settlement is pending, its next proof waits for reconciliation", { timeout: 60_000 }, async () => {
      await chain.mintUsdc(chain.payer.address, 2n * PRICE);
      const start = await balances();
      // Refused for a passing reason: the answer is served as pending and nothing has moved yet.
      chain.facilitator.failSettle = 'invalid_exact_evm_transaction_failed';
      let first: Answer;
      try {
        first = await send(await proof(), 0);
      } finally {
        chain.facilitator.failSettle = false;
      }
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.paymentStatus, 'pending');
      assert.deepEqual(await balances(), start, 'nothing moved yet');

      const next = await proof();
      const rows = (await payerRows()).length;
      const held = await send(next, 1);
      assert.equal(held.status, 409, JSON.stringify(held.body));
      assert.equal(held.body.reason, 'payment_in_flight');
      assert.equal(held.retryAfter, '60');
      assert.equal((await payerRows()).length, rows, 'no ledger row');

      await service.app.restock.payments.reconcile(0);
      assert.deepEqual((await payerRows()).at(-1)?.status, 'settled');
      const served = await send(next, 0);
      assert.equal(served.status, 200, JSON.stringify(served.body));
      assert.equal(served.paymentStatus, undefined);
      assert.deepEqual(await balances(), { payer: start.payer - 2n * PRICE, payTo: start.payTo + 2n * PRICE });
      assert.deepEqual(
        (await payerRows()).slice(-2).map((row) => [row.status, row.result_ref]),
        [
          ['settled', first.body.subscriptionId],
          ['settled', served.body.subscriptionId],
        ],
      );
    });
  });
}
