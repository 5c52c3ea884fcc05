/**
 * Paid MCP tools for agents without a token, as the MCP payment conventions carry x402 and MPP:
 * the official MCP client, x402 on a local chain with Circle's USDC (the official x402 client
 * builds the payment), MPP through the Stripe stand-in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { PaymentRequired } from '@x402/core/types';
import { Challenge, Credential } from 'mppx';
import { uniqueDomain, uniqueEmail } from './fixtures/agents.ts';
import { dialectSkip, testDialects } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startListeningApp, type ListeningApp } from './fixtures/oauth.ts';
import { startStripeApi, type StripeApi } from './fixtures/stripe-api.ts';
import { startX402Chain, x402Payment, type X402Chain } from './fixtures/x402-chain.ts';

failOnLeakedHandles();

const PRICE = 50_000n;

/** A value the result carries in `_meta` under `key` (fails the test when it is not there). */
function metaOf<T>(result: { _meta?: unknown }, key: string): T {
  const value = (result._meta as Record<string, unknown> | undefined)?.[key];
  assert.ok(value !== undefined, `no _meta["${key}"] in the result`);
  return value as T;
}

for (const dialect of testDialects()) {
  describe(`paid MCP tools on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let chain: X402Chain;
    let stripe: StripeApi;
    let service: ListeningApp;
    let client: Client;

    before(async () => {
      chain = await startX402Chain();
      stripe = await startStripeApi();
      service = await startListeningApp(dialect, {
        X402_PAY_TO: chain.payTo.address,
        X402_NETWORK: chain.network,
        X402_ASSET: chain.usdc,
        X402_FACILITATOR_URL: chain.facilitatorUrl,
        STRIPE_SECRET_KEY: stripe.secretKey,
        STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
        STRIPE_NETWORK_ID: 'profile_mcp',
      });
      client = new Client({ name: 'paying-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`)));
    });
    after(async () => {
      await client.close();
      await service.close();
      await stripe.close();
      await chain.close();
    });

    it('an unpaid call is a tool error carrying both protocols’ offers', async () => {
      const result = await client.callTool({ name: 'subscribe_alert', arguments: { productId: 'gid://shopify/Product/77', email: uniqueEmail('mcp-pay') } });
      assert.equal(result.isError, true);
      const required = result.structuredContent as unknown as PaymentRequired;
      assert.equal(required.x402Version, 2);
      assert.equal(required.resource.url, 'mcp://tool/subscribe_alert');
      assert.equal(required.accepts[0]!.amount, String(PRICE));
      const text = JSON.parse((result.content as Array<{ text: string }>)[0]!.text);
      assert.equal(text['x402/error'].code, 402);
      const mpp = metaOf<{ httpStatus: number; challenges: Challenge.Challenge[] }>(result, 'org.paymentauth/payment-required');
      assert.equal(mpp.httpStatus, 402);
      assert.deepEqual(mpp.challenges.map((c) => `${c.method}/${c.intent}`), ['stripe/charge']);
    });

    it('pays a subscription with x402 in _meta: subscribed, settled on chain, receipt in _meta; the same payment again is refused', async () => {
      const args = { productId: 'gid://shopify/Product/78', email: uniqueEmail('mcp-x402') };
      const unpaid = await client.callTool({ name: 'subscribe_alert', arguments: args });
      const payment = await x402Payment(chain, unpaid.structuredContent as unknown as PaymentRequired);
      const before = await chain.usdcBalance(chain.payTo.address);
      const paid = await client.callTool({ name: 'subscribe_alert', arguments: args, _meta: { 'x402/payment': payment } });
      assert.equal(paid.isError, undefined, JSON.stringify(paid));
      assert.equal((paid.structuredContent as { status: string }).status, 'active');
      const settlement = metaOf<{ success: boolean; transaction: string }>(paid, 'x402/payment-response');
      assert.equal(settlement.success, true);
      assert.match(settlement.transaction, /^0x[0-9a-f]{64}$/);
      assert.equal((await chain.usdcBalance(chain.payTo.address)) - before, PRICE);
      const ledger = await service.database.db.selectFrom('payments').selectAll().where('reference', '=', settlement.transaction).executeTakeFirstOrThrow();
      assert.equal(ledger.status, 'settled');
      assert.equal(ledger.request_path, '/mcp tools/call subscribe_alert');

      const replay = await client.callTool({ name: 'subscribe_alert', arguments: args, _meta: { 'x402/payment': payment } });
      assert.equal(replay.isError, true);
      assert.match(JSON.parse((replay.content as Array<{ text: string }>)[0]!.text)['x402/error'].message, /already been used/);
      assert.equal((await chain.usdcBalance(chain.payTo.address)) - before, PRICE);
    });

    it('pays a plan with an MPP stripe credential in _meta: the session is complete, the receipt in _meta', async () => {
      const args = { plan: 'starter', shop: uniqueDomain('mcp') };
      const unpaid = await client.callTool({ name: 'checkout_plan', arguments: args });
      const challenge = metaOf<{ challenges: Challenge.Challenge[] }>(unpaid, 'org.paymentauth/payment-required').challenges.find((c) => c.method === 'stripe')!;
      const credential = Credential.from({ challenge, payload: { spt: stripe.grantToken({ maxAmount: 999 }).id } });
      const paid = await client.callTool({ name: 'checkout_plan', arguments: args, _meta: { 'org.paymentauth/credential': credential } });
      assert.equal(paid.isError, undefined, JSON.stringify(paid));
      const receipt = metaOf<{ status: string; reference: string }>(paid, 'org.paymentauth/receipt');
      assert.equal(receipt.status, 'success');
      assert.equal(stripe.paymentIntents.get(receipt.reference)?.amount, 999);
      const { sessionId } = paid.structuredContent as { sessionId: string };
      const session = await service.database.db.selectFrom('checkout_sessions').selectAll().where('id', '=', sessionId).executeTakeFirstOrThrow();
      assert.equal(session.status, 'awaiting_owner', "paid for, it waits for the store's owner to accept (refunded otherwise)");
      assert.equal(session.provider, 'mpp');
    });

    /** `checkout_plan` paid with this token: the tool's answer, and the rows it left for the shop. */
    async function payPlan(spt: string) {
      const args = { plan: 'starter', shop: uniqueDomain('mcp') };
      const unpaid = await client.callTool({ name: 'checkout_plan', arguments: args });
      const challenge = metaOf<{ challenges: Challenge.Challenge[] }>(unpaid, 'org.paymentauth/payment-required').challenges.find((c) => c.method === 'stripe')!;
      const result = await client.callTool({ name: 'checkout_plan', arguments: args, _meta: { 'org.paymentauth/credential': Credential.from({ challenge, payload: { spt } }) } });
      const sessions = await service.database.db.selectFrom('checkout_sessions').selectAll().where('shop', '=', args.shop).execute();
      const plans = await service.database.db.selectFrom('store_plans').selectAll().where('shop', '=', args.shop).execute();
      return { result, sessions, plans };
    }

    it('refuses a payment that still needs the buyer’s action, or a token outside its limits: a tool error, no plan', async () => {
      const needsAction = stripe.grantToken({ maxAmount: 999, paymentMethod: 'pm_card_authenticationRequired' }).id;
      const tooSmall = stripe.grantToken({ maxAmount: 500 }).id;
      for (const spt of [needsAction, tooSmall]) {
        const { result, sessions, plans } = await payPlan(spt);
        assert.equal(result.isError, true);
        const mpp = metaOf<{ challenges: unknown[]; problem: { type: string } }>(result, 'org.paymentauth/payment-required');
        assert.equal(mpp.problem.type, 'verification-failed');
        assert.ok(mpp.challenges.length > 0, 'fresh offers come with the refusal');
        assert.equal((result._meta as Record<string, unknown> | undefined)?.['org.paymentauth/receipt'], undefined);
        assert.deepEqual(sessions, []);
        assert.deepEqual(plans, []);
      }
      assert.deepEqual(stripe.paymentIntentsWith(needsAction).map((intent) => intent.status), ['requires_action']);
      assert.deepEqual(stripe.paymentIntentsWith(tooSmall), []);
    });

    it('refuses a tampered credential with fresh offers, charging nothing', async () => {
      const args = { plan: 'starter', shop: uniqueDomain('mcp') };
      const unpaid = await client.callTool({ name: 'checkout_plan', arguments: args });
      const challenge = metaOf<{ challenges: Challenge.Challenge[] }>(unpaid, 'org.paymentauth/payment-required').challenges.find((c) => c.method === 'stripe')!;
      const cheaper = { ...challenge, request: { ...challenge.request, amount: '1' } } as Challenge.Challenge;
      const charges = stripe.paymentIntents.size;
      const refused = await client.callTool({ name: 'checkout_plan', arguments: args, _meta: { 'org.paymentauth/credential': Credential.from({ challenge: cheaper, payload: { spt: stripe.grantToken({ maxAmount: 999 }).id } }) } });
      assert.equal(refused.isError, true);
      const mpp = metaOf<{ challenges: unknown[]; problem: { type: string } }>(refused, 'org.paymentauth/payment-required');
      assert.equal(mpp.problem.type, 'invalid-challenge');
      assert.ok(mpp.challenges.length > 0);
      assert.equal(stripe.paymentIntents.size, charges);
    });
  });
}
