/**
 * Payers (issue 18, finding 7): an x402 proof is checked offline (the EIP-712 signature recovers
 * `from`; recipient, value and validity window are the offer's) before any ledger row or call to
 * the facilitator; paid requests without a token are limited per client address before that, and
 * per payer after; calls to the facilitator are bounded. A local chain with Circle's USDC and a
 * facilitator over HTTP, behind a relay that counts every byte sent to it. Each test failed on
 * the code before its fix.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from 'viem/accounts';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip, testDialects } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { TcpProxy } from '../fixtures/tcp-proxy.ts';
import { startListeningApp, type ListeningApp } from '../fixtures/oauth.ts';
import { startX402Chain, x402Payment, type X402Chain } from '../fixtures/x402-chain.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const PRICE = 50_000n;
const PER_ADDRESS = 5;
const PER_PAYER = 3;


/** What has reached the facilitator through the proxy in front of it. */
function seen(relay: TcpProxy): string {
  return `${relay.connections} connections, ${relay.sent.length} bytes`;
}

for (const dialect of testDialects()) {
  describe(`payers on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let relay: TcpProxy;
    let service: ListeningApp;
    let address = 0;
    /** Each request from an address of its own, unless the test is about one address. */
    const nextAddress = () => `203.0.113.${++address}`;

    before(async () => {
      chain = await startX402Chain();
      const facilitator = new URL(chain.facilitatorUrl);
      relay = await new TcpProxy(facilitator.hostname, Number(facilitator.port)).start();
      service = await startListeningApp(dialect, {
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: `http://127.0.0.1:${relay.port}`,
        X402_FACILITATOR_CONCURRENCY: '1',
        PAYMENT_SETTLE_TIMEOUT_MS: '4000',
        PAYMENT_LIMIT_PER_MINUTE: String(PER_ADDRESS),
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(PER_PAYER),
      });
    });
    after(async () => {
      await service?.close();
      await relay?.close();
      await chain?.close();
    });

    const subscription = () => JSON.stringify({ productId: 'gid://shopify/Product/7', email: uniqueEmail('payer') });
    const pay = (header: string | undefined, remoteAddress = nextAddress()) =>
      service.app.inject({
        method: 'POST',
        url: SUBSCRIBE,
        remoteAddress,
        headers: { 'content-type': 'application/json', ...(header ? { 'payment-signature': header } : {}) },
        payload: subscription(),
      });
    const offer = async (): Promise<PaymentRequired> => {
      const res = await pay(undefined);
      assert.equal(res.statusCode, 402);
      return decodePaymentRequiredHeader(res.headers['payment-required'] as string);
    };
    /** Signed by `account` for `signed` (what the authorisation says), presented as the genuine offer. */
    const signed = async (signedTerms: Partial<PaymentRequirements>, account?: LocalAccount, alter?: (payload: Record<string, unknown>) => void): Promise<string> => {
      const required = await offer();
      const genuine = required.accepts[0]!;
      const payload = await x402Payment(chain, { ...required, accepts: [{ ...genuine, ...signedTerms }] }, account);
      alter?.(payload.payload);
      return encodePaymentSignatureHeader({ ...payload, accepted: genuine });
    };
    const paymentRows = async () => (await service.database.db.selectFrom('payments').select('id').execute()).length;

    /** Refused with a 402 and fresh offers, before any ledger row and without a byte to the facilitator. */
    async function refusedOffline(header: string, type: RegExp, reason: string) {
      const rows = await paymentRows();
      const reached = seen(relay);
      const verifyCalls = chain.facilitator.verifyCalls;
      const res = await pay(header);
      const body = res.json();
      assert.equal(res.statusCode, 402, res.body);
      assert.match(body.type, type);
      assert.equal(body.reason, reason);
      assert.ok(res.headers['payment-required'], 'fresh offers come with the refusal');
      assert.equal(await paymentRows(), rows, 'no ledger row');
      assert.equal(seen(relay), reached, 'nothing reached the facilitator');
      assert.equal(chain.facilitator.verifyCalls, verifyCalls);
    }

    it('finding 7: a forged x402 proof (random signature) is refused with 402 before any ledger row or facilitator call', async () => {
      const header = await signed({}, undefined, (payload) => {
        payload.signature = `0x${randomBytes(65).toString('hex')}`;
      });
      await refusedOffline(header, /verification-failed/, 'invalid_signature');
      // Signed by someone else in the payer's name.
      const impostor = await signed({}, chain.stranger.account, (payload) => {
        (payload.authorization as Record<string, unknown>).from = chain.payer.address;
      });
      await refusedOffline(impostor, /verification-failed/, 'invalid_signature');
    });

    it('finding 7: a proof paying another address is refused with 402 before any ledger row or facilitator call', async () => {
      await refusedOffline(await signed({ payTo: chain.stranger.address }), /payment-insufficient/, 'recipient_mismatch');
    });

    it('finding 7: a proof for another value is refused with 402 before any ledger row or facilitator call', async () => {
      await refusedOffline(await signed({ amount: String(PRICE - 1n) }), /payment-insufficient/, 'value_mismatch');
      await refusedOffline(await signed({ amount: String(PRICE * 1000n) }), /payment-insufficient/, 'value_mismatch');
    });

    it('finding 7: an expired proof is refused with 402 before any ledger row or facilitator call', async () => {
      await refusedOffline(await signed({ maxTimeoutSeconds: -60 }), /payment-expired/, 'valid_before_expired');
    });

    it(`finding 7: a flood of paid requests from one address without a token gets 429 after ${PER_ADDRESS}, before the proof is looked at`, async () => {
      const from = '198.51.100.77';
      const forged = await signed({}, undefined, (payload) => {
        payload.signature = `0x${'11'.repeat(65)}`;
      });
      for (let i = 0; i < PER_ADDRESS; i++) assert.equal((await pay(forged, from)).statusCode, 402);
      const reached = seen(relay);
      const genuine = await signed({});
      const refused = await pay(genuine, from);
      assert.equal(refused.statusCode, 429, refused.body);
      assert.match(refused.headers['content-type'] as string, /^application\/problem\+json/);
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      assert.equal(refused.headers['ratelimit-policy'], `${PER_ADDRESS};w=60`);
      assert.equal(seen(relay), reached, 'nothing reached the facilitator');
      assert.equal((await pay(genuine, '198.51.100.78')).statusCode, 200, 'another address has its own count');
    });

    it(`finding 7: a payer is limited to ${PER_PAYER} a minute once its signature names it, before the ledger and the facilitator`, async () => {
      // A fresh account holding no USDC: its proofs pass the offline checks and the facilitator refuses them.
      const account = privateKeyToAccount(generatePrivateKey());
      for (let i = 0; i < PER_PAYER; i++) {
        const res = await pay(await signed({}, account));
        assert.equal(res.statusCode, 402, res.body);
        assert.equal(res.json().type, 'https://paymentauth.org/problems/payment-insufficient');
      }
      const rows = await paymentRows();
      const reached = seen(relay);
      const refused = await pay(await signed({}, account));
      assert.equal(refused.statusCode, 429, refused.body);
      assert.match(refused.json().detail, new RegExp(`payer:x402:${account.address.toLowerCase()}`));
      assert.equal(await paymentRows(), rows, 'no ledger row');
      assert.equal(seen(relay), reached, 'nothing reached the facilitator');
    });

    it('finding 7: calls to the facilitator are bounded: over the bound, 503 with Retry-After before any ledger row', { timeout: 60_000 }, async () => {
      chain.facilitator.settleDelayMs = 60_000;
      try {
        const settling = chain.facilitator.settleCalls;
        // Its settlement holds the only slot until the settlement timeout.
        const first = pay(await signed({}));
        const deadline = Date.now() + 20_000;
        while (chain.facilitator.settleCalls === settling) {
          assert.ok(Date.now() < deadline, 'the first payment never reached settlement');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const rows = await paymentRows();
        const verifyCalls = chain.facilitator.verifyCalls;
        const busy = await pay(await signed({}, chain.stranger.account));
        assert.equal(busy.statusCode, 503, busy.body);
        assert.match(busy.headers['content-type'] as string, /^application\/problem\+json/);
        assert.equal(busy.headers['retry-after'], '1');
        assert.equal(busy.json().type, `${service.baseUrl}/problems/service-unavailable`);
        assert.equal(await paymentRows(), rows, 'no ledger row');
        assert.equal(chain.facilitator.verifyCalls, verifyCalls, 'not sent to the facilitator');
        const served = await first;
        assert.equal(served.statusCode, 200, served.body);
        assert.equal(served.headers['payment-status'], 'pending', 'its settlement timed out and waits for reconciliation');
      } finally {
        chain.facilitator.settleDelayMs = 0;
      }
    });
  });
}
