/**
 * Finding 13: whatever a client puts in a paid tool call's `_meta` (the x402 payment, the MPP
 * credential), the answer is a tool result in our words: a payment refusal or a 402 offer, never
 * a JavaScript error message or a stack. The property runs the official MCP client against the
 * real service; the payment networks are never reached (nothing generated here is genuine).
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/security/mcp-payment-meta.test.ts
 */
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import fc from 'fast-check';
import { after, before, describe, it } from '../fixtures/suites.ts';
import { uniqueEmail } from '../fixtures/agents.ts';
import { dialectSkip } from '../fixtures/app.ts';
import { failOnLeakedHandles } from '../fixtures/leaks.ts';
import { freePort } from '../fixtures/network.ts';
import { startListeningApp, type ListeningApp } from '../fixtures/oauth.ts';
import { propertyParams, STACK } from '../fixtures/properties.ts';
import { startStripeApi, type StripeApi } from '../fixtures/stripe-api.ts';

failOnLeakedHandles();

const params = propertyParams(100);
/** Words of a JavaScript error reaching the client instead of ours. */
const INTERNAL = /Cannot (read|destructure|convert)|is not a function|is not iterable|undefined|TypeError|ReferenceError|Unexpected token|\[object Object\]/;

// `__proto__` keys are refused with a 400 problem before any tool runs (the JSON parser's own
// guard), so they never reach a tool: left out here.
const anyValue = fc.anything({ maxDepth: 3, withNullPrototype: false, key: fc.string({ maxLength: 10 }).filter((key) => key !== '__proto__') });
/** A `_meta` value: junk under each protocol's key, or a credential-shaped object with junk inside. */
const meta = fc.oneof(
  fc.record({ 'x402/payment': anyValue }),
  fc.record({ 'org.paymentauth/credential': anyValue }),
  fc.record({ 'org.paymentauth/credential': fc.record({ challenge: anyValue, payload: anyValue, source: anyValue }, { requiredKeys: [] }) }),
  fc.record({
    'org.paymentauth/credential': fc.record({ challenge: fc.record({ id: anyValue, meta: anyValue, opaque: anyValue, method: anyValue, intent: anyValue }, { requiredKeys: [] }), payload: anyValue }),
  }),
  fc.record({ 'x402/payment': fc.record({ x402Version: anyValue, accepted: anyValue, payload: anyValue, resource: anyValue }, { requiredKeys: [] }) }),
  fc.record({ 'x402/payment': anyValue, 'org.paymentauth/credential': anyValue }),
);

/** Built on the offers of a real unpaid call, so that decoding passes and the junk sits deeper. */
const fromOffers = fc.oneof(
  fc.record({ kind: fc.constant('mpp-payload' as const), payload: anyValue }),
  fc.record({ kind: fc.constant('mpp-field' as const), field: fc.constantFrom('meta', 'opaque', 'request', 'id', 'realm', 'method', 'intent', 'expires'), value: anyValue, payload: anyValue }),
  fc.record({ kind: fc.constant('x402-payload' as const), payload: anyValue }),
  fc.record({ kind: fc.constant('x402-field' as const), field: fc.constantFrom('scheme', 'network', 'amount', 'asset', 'payTo', 'extra', 'maxTimeoutSeconds'), value: anyValue, payload: anyValue }),
);

interface Offers {
  accepted: Record<string, unknown>;
  challenge: Record<string, unknown>;
}

function metaFrom(generated: typeof fromOffers extends fc.Arbitrary<infer G> ? G : never, offers: Offers): Record<string, unknown> {
  switch (generated.kind) {
    case 'mpp-payload':
      return { 'org.paymentauth/credential': { challenge: offers.challenge, payload: generated.payload } };
    case 'mpp-field':
      return { 'org.paymentauth/credential': { challenge: { ...offers.challenge, [generated.field]: generated.value }, payload: generated.payload } };
    case 'x402-payload':
      return { 'x402/payment': { x402Version: 2, accepted: offers.accepted, payload: generated.payload } };
    case 'x402-field':
      return { 'x402/payment': { x402Version: 2, accepted: { ...offers.accepted, [generated.field]: generated.value }, payload: generated.payload } };
  }
}

describe('finding 13: a malformed payment in a paid tool call’s _meta is a clear tool error', { skip: dialectSkip('sqlite') }, () => {
  let service: ListeningApp;
  let stripe: StripeApi;
  let client: Client;
  let offers: Offers;

  before(async () => {
    stripe = await startStripeApi();
    service = await startListeningApp('sqlite', {
      STRIPE_SECRET_KEY: stripe.secretKey,
      STRIPE_API_URL: `http://127.0.0.1:${stripe.port}`,
      STRIPE_NETWORK_ID: 'profile_meta',
      X402_PAY_TO: '0x1111111111111111111111111111111111111111',
      X402_NETWORK: 'eip155:84532',
      X402_ASSET: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      // A closed port: a proof that got as far as the facilitator would say so, not hang.
      X402_FACILITATOR_URL: `http://127.0.0.1:${await freePort()}`,
    });
    client = new Client({ name: 'malformed-payer', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`)));
    const unpaid = await client.callTool({ name: 'subscribe_alert', arguments: { productId: 'gid://shopify/Product/13', email: uniqueEmail('meta') } });
    const required = unpaid._meta?.['org.paymentauth/payment-required'] as { challenges: Array<Record<string, unknown>> };
    offers = { accepted: (unpaid.structuredContent as { accepts: Array<Record<string, unknown>> }).accepts[0]!, challenge: required.challenges[0]! };
    assert.ok(offers.accepted && offers.challenge, 'both protocols make an offer');
  });
  after(async () => {
    await client.close();
    await service.close();
    await stripe.close();
  });

  it('finding 13: any _meta value gives a tool error in our words, with no stack and nothing taken as payment', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(meta, fromOffers), async (generated) => {
        const given = 'kind' in generated && typeof generated.kind === 'string' && Object.keys(generated).some((key) => key === 'payload') ? metaFrom(generated as never, offers) : generated;
        const result = await client.callTool({
          name: 'subscribe_alert',
          arguments: { productId: 'gid://shopify/Product/13', email: uniqueEmail('meta') },
          _meta: given as Record<string, unknown>,
        });
        assert.equal(result.isError, true, `a malformed payment was served: ${JSON.stringify(result)}`);
        const text = (result.content as Array<{ text: string }>).map((part) => part.text).join('\n');
        assert.doesNotMatch(text, STACK);
        assert.doesNotMatch(text, INTERNAL, `an internal error reached the client: ${text}`);
        assert.ok(text.length > 0);
      }),
      params,
    );
    // A proof that decodes reaches verification, which records it as failed; nothing is ever settled.
    const rows = await service.database.db.selectFrom('payments').select('status').execute();
    assert.deepEqual(rows.filter((row) => row.status !== 'failed'), [], 'nothing malformed was taken as payment');
  });
});
