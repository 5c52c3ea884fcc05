/**
 * Property tests over the payment headers of the paid operations: whatever arrives in
 * PAYMENT-SIGNATURE, X-PAYMENT or `Authorization: Payment`, with whatever body, the answer is
 * below 500 (503 only when a payment network is said to be unreachable), has no stack trace, and
 * is problem+json. Most generated proofs are built from the offers of a real 402 (x402
 * requirements, MPP challenges issued by the service), so they get past decoding and the
 * offline checks to verification, where the networks of this app do not answer or refuse: each
 * kind of proof must end in its own problem type, a refusal before verification must store
 * nothing, and one at verification must leave exactly its ledger row, failed, with the proof
 * freed when the network (not the payer) was at fault (docs/payments.md).
 *
 *   RESTOCK_PROPERTY_RUNS=1000 npm test -- test/payments-properties.test.ts
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { after, before, describe, it } from './fixtures/suites.ts';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { Challenge, Credential } from 'mppx';
import { dialectSkip, startTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { propertyParams, STACK } from './fixtures/properties.ts';

failOnLeakedHandles();

const params = propertyParams();
const RUNS = params.numRuns;

const SERVICE_SECRET = 'payments-property-service-secret-0123456789abcdef';
/** How the service keys its MPP challenges (src/payments/feature.ts), so that an expired one can be made genuine. */
const MPP_SECRET = createHmac('sha256', Buffer.from(SERVICE_SECRET, 'utf8')).update('mpp-challenge-binding').digest('hex');

type Target = { name: 'subscribeAlert' | 'checkoutPlan' | 'getApiIndex'; method: 'GET' | 'POST'; url: string; body?: unknown };
const TARGETS: Target[] = [
  { name: 'subscribeAlert', method: 'POST', url: '/api/v1/alerts/subscribe', body: { productId: 'gid://shopify/Product/5', email: 'prop@example.com' } },
  { name: 'checkoutPlan', method: 'POST', url: '/api/v1/plans/checkout', body: { plan: 'starter', shop: 'prop.myshopify.com' } },
  { name: 'getApiIndex', method: 'GET', url: '/api' },
];

/** Where a proof is refused: before anything is recorded, or at verification, with its ledger row. */
type Depth = 'offline' | 'verification';
interface Expected {
  status: number;
  slug: string;
  depth: Depth;
}
const offline = (status: number, slug: string): Expected => ({ status, slug, depth: 'offline' });
const atVerification = (status: number, slug: string): Expected => ({ status, slug, depth: 'verification' });
/** Refusals for which the network, not the payer, is at fault: the proof may pay for a retry. */
const FREES_THE_PROOF = new Set(['payment-network-unreachable', 'payment-method-unavailable']);

interface Offers {
  accepts: Array<Record<string, unknown>>;
  challenges: Challenge.Challenge[];
}

const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => `0x${Buffer.from(b).toString('hex')}`);
const visible = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 80 });
const base64Json = fc.anything({ maxDepth: 3 }).map((value) => Buffer.from(JSON.stringify(value) ?? 'null').toString('base64'));

/** A generated proof: which kind, and the random parts it is made of (the offers come at run time). */
const proof = fc.oneof(
  // x402
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('x402-junk' as const), text: visible }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('x402-json' as const), text: base64Json }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('x402-version' as const), version: fc.oneof(fc.constantFrom(1, 3, '2', null), fc.integer()).filter((v) => v !== 2), from: hex(20), nonce: hex(32) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('x402-mismatch' as const),
      change: fc.constantFrom<[string, unknown]>(['amount', '1'], ['amount', '49999'], ['payTo', '0x3333333333333333333333333333333333333333'], ['network', 'eip155:1'], ['asset', '0x0000000000000000000000000000000000000001'], ['scheme', 'upto']),
      from: hex(20),
      nonce: hex(32),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('x402-no-authorization' as const), payload: fc.constantFrom<unknown>({ signature: '0x' }, { authorization: { nonce: '0x01' } }, { authorization: { from: 5, nonce: '0x01' } }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('x402-signed' as const), from: hex(20), nonce: hex(32), signature: hex(65) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('x-payment' as const), text: base64Json }) },
  // MPP
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('mpp-junk' as const), text: visible }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('mpp-json' as const), value: fc.anything({ maxDepth: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('mpp-tampered' as const), pick: fc.nat(), change: fc.constantFrom('amount', 'recipient', 'realm', 'id') }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('mpp-expired' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('mpp-elsewhere' as const), pick: fc.nat(), other: fc.nat(1) }) },
  {
    // The share that reaches a payment network: since x402 proofs with a forged signature stop offline (finding 7), only these do.
    weight: 12,
    arbitrary: fc.record({
      kind: fc.constant('mpp-fresh' as const),
      pick: fc.nat(),
      payload: fc.oneof(
        { weight: 3, arbitrary: fc.stringMatching(/^spt_[A-Za-z0-9]{8,24}$/).map((spt) => ({ spt }) as unknown) },
        { weight: 3, arbitrary: hex(32).map((hash) => ({ type: 'hash', hash }) as unknown) },
        { weight: 1, arbitrary: fc.oneof(fc.constant<unknown>({ type: 'transaction', signature: '0x1234' }), fc.anything({ maxDepth: 2 })) },
      ),
    }),
  },
);
type Proof = typeof proof extends fc.Arbitrary<infer P> ? P : never;

const body = fc.oneof({ weight: 6, arbitrary: fc.constant('(valid)' as unknown) }, { weight: 1, arbitrary: fc.anything({ maxDepth: 2 }) });

const x402Header = (value: unknown) => ({ 'payment-signature': Buffer.from(JSON.stringify(value)).toString('base64') });
const mppHeader = (challenge: Challenge.Challenge, payload: unknown) => ({ authorization: Credential.serialize(Credential.from({ challenge, payload: payload as never })) });

/** An EIP-3009 authorisation of the offer's amount to its recipient, well-formed but signed by no one. */
function authorization(accepted: Record<string, unknown>, from: string, nonce: string) {
  const now = Math.floor(Date.now() / 1000);
  return { from, to: accepted.payTo, value: accepted.amount, validAfter: String(now - 60), validBefore: String(now + 240), nonce };
}

/** An x402 offer as this service would make it, for proofs sent where none is made. */
const UNOFFERED_REQUIREMENT = {
  scheme: 'exact',
  network: 'eip155:8453',
  amount: '9990000',
  asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  payTo: '0x3333333333333333333333333333333333333333',
  maxTimeoutSeconds: 300,
  extra: { name: 'USD Coin', version: '2' },
};

/** The headers a proof makes against a target's offers, and the answer the rules give it. */
function build(generated: Proof, target: Target, offers: Offers, elsewhere: Offers): { headers: Record<string, string>; expected: Expected } {
  // x402 is not offered for every operation (checkoutPlan may have to be refunded): a proof made
  // on another operation's offer is then refused as a method this one does not take.
  const offered = offers.accepts.length > 0;
  const accepted = offers.accepts[0] ?? elsewhere.accepts[0] ?? UNOFFERED_REQUIREMENT;
  const unoffered = (expected: Expected): Expected => (offered ? expected : offline(402, 'payment-method-unavailable'));
  const choose = (list: Challenge.Challenge[], i: number) => list[i % list.length]!;
  switch (generated.kind) {
    case 'x402-junk':
      return { headers: { 'payment-signature': generated.text }, expected: offline(402, 'malformed-credential') };
    case 'x402-json':
      return { headers: { 'payment-signature': generated.text }, expected: offline(402, 'malformed-credential') };
    case 'x-payment':
      // Version 1's header is answered by saying which one this service takes.
      return { headers: { 'x-payment': generated.text }, expected: offline(402, 'malformed-credential') };
    case 'x402-version':
      return {
        headers: x402Header({ x402Version: generated.version, accepted, payload: { signature: '0x', authorization: authorization(accepted, generated.from, generated.nonce) } }),
        expected: unoffered(offline(402, 'malformed-credential')),
      };
    case 'x402-mismatch': {
      const [name, value] = generated.change;
      const changed = { ...accepted, [name]: value };
      return {
        headers: x402Header({ x402Version: 2, accepted: changed, payload: { signature: '0x', authorization: authorization(changed, generated.from, generated.nonce) } }),
        expected: unoffered(offline(402, 'payment-insufficient')),
      };
    }
    case 'x402-no-authorization':
      return { headers: x402Header({ x402Version: 2, accepted, payload: generated.payload }), expected: unoffered(offline(402, 'malformed-credential')) };
    case 'x402-signed':
      // The terms match the offer, but a random signature recovers no one's `from`: refused
      // offline, before the ledger and the facilitator (finding 7).
      return {
        headers: x402Header({ x402Version: 2, accepted, payload: { signature: generated.signature, authorization: authorization(accepted, generated.from, generated.nonce) } }),
        expected: unoffered(offline(402, 'verification-failed')),
      };
    case 'mpp-junk':
      return { headers: { authorization: `Payment ${generated.text}` }, expected: offline(402, 'malformed-credential') };
    case 'mpp-json':
      return { headers: { authorization: `Payment ${Buffer.from(JSON.stringify(generated.value) ?? 'null').toString('base64url')}` }, expected: offline(402, 'malformed-credential') };
    case 'mpp-tampered': {
      const challenge = choose(offers.challenges, generated.pick);
      const request = challenge.request as Record<string, unknown>;
      const tampered = {
        amount: { ...challenge, request: { ...request, amount: '1' } },
        recipient: { ...challenge, request: { ...request, recipient: '0x3333333333333333333333333333333333333333' } },
        realm: { ...challenge, realm: 'elsewhere.example' },
        id: { ...challenge, id: `${challenge.id.startsWith('A') ? 'B' : 'A'}${challenge.id.slice(1)}` },
      }[generated.change] as Challenge.Challenge;
      return { headers: mppHeader(tampered, { spt: 'spt_tampered' }), expected: offline(402, 'invalid-challenge') };
    }
    case 'mpp-expired': {
      const { id: _id, ...fields } = choose(offers.challenges, generated.pick);
      const expired = Challenge.from({ ...fields, expires: new Date(Date.now() - 1000).toISOString(), secretKey: MPP_SECRET } as never) as Challenge.Challenge;
      return { headers: mppHeader(expired, { spt: 'spt_expired' }), expected: offline(402, 'payment-expired') };
    }
    case 'mpp-elsewhere': {
      // A genuine challenge of another operation: refused as issued for another one, or as a method this one does not take.
      const challenge = choose(elsewhere.challenges, generated.pick);
      const taken = offers.challenges.some((c) => c.method === challenge.method && c.intent === challenge.intent);
      return { headers: mppHeader(challenge, { spt: 'spt_elsewhere' }), expected: taken ? offline(402, 'invalid-challenge') : offline(400, 'method-unsupported') };
    }
    case 'mpp-fresh': {
      const challenge = choose(offers.challenges, generated.pick);
      return { headers: mppHeader(challenge, generated.payload), expected: freshOutcome(challenge, generated.payload, target) };
    }
  }
}

/**
 * What the method's own verification makes of a genuine challenge (docs/payments.md): Stripe
 * cannot charge USD 0.05; there is no card processor; a well-formed Stripe token or Tempo
 * transaction hash goes to a network that does not answer here; any other payload is refused.
 */
function freshOutcome(challenge: Challenge.Challenge, payload: unknown, target: Target): Expected {
  const record = typeof payload === 'object' && payload !== null && !Array.isArray(payload) ? (payload as Record<string, unknown>) : {};
  const sptShaped = typeof record.spt === 'string' && record.spt.length > 0;
  const hashShaped = record.type === 'hash' && typeof record.hash === 'string' && /^0x[0-9a-f]{64}$/.test(record.hash);
  // The card session's payload must first parse ({ spt?, token? }, strings): only then is it told there is no processor.
  const cardShaped = record === payload && ['spt', 'token'].every((key) => record[key] === undefined || typeof record[key] === 'string');
  if (challenge.method === 'card') return cardShaped ? atVerification(402, 'payment-method-unavailable') : atVerification(402, 'verification-failed');
  if (challenge.method === 'stripe' && sptShaped) return target.name === 'checkoutPlan' ? atVerification(503, 'payment-network-unreachable') : atVerification(402, 'payment-method-unavailable');
  if (challenge.method === 'tempo' && hashShaped) return atVerification(503, 'payment-network-unreachable');
  return atVerification(402, 'verification-failed');
}

/** The injected answer as a web Response, which is what mppx reads challenges from. */
function asResponse(res: LightMyRequestResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) for (const v of [value].flat()) if (v !== undefined) headers.append(name, String(v));
  return new Response(res.body, { status: res.statusCode, headers });
}

for (const dialect of testDialects()) {
  describe(`payment headers under arbitrary input on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect, {
        RESTOCK_SECRET: SERVICE_SECRET,
        X402_PAY_TO: '0x1111111111111111111111111111111111111111',
        // Nothing listens here: a proof that reaches a network finds it unreachable.
        X402_FACILITATOR_URL: 'http://127.0.0.1:9',
        STRIPE_SECRET_KEY: 'sk_test_property',
        STRIPE_NETWORK_ID: 'profile_property',
        STRIPE_API_URL: 'http://127.0.0.1:9',
        MPP_TEMPO_RECIPIENT: '0x2222222222222222222222222222222222222222',
        MPP_TEMPO_RPC_URL: 'http://127.0.0.1:9',
        PAYMENT_SETTLE_TIMEOUT_MS: '500',
        // A real checkout, so that the card session is refused (beside the hosted test page it is taken in test mode).
        CHECKOUT_PROVIDER: 'stripe',
        STRIPE_WEBHOOK_SECRET: 'whsec_property',
      });
    });
    after(() => t.close());

    const send = (target: Target, payload: unknown, headers: Record<string, string>) =>
      t.app.inject({
        method: target.method,
        url: target.url,
        headers: { ...headers, ...(target.method === 'POST' ? { 'content-type': 'application/json' } : {}) },
        ...(target.method === 'POST' ? { payload: JSON.stringify(payload) ?? 'null' } : {}),
      });

    /** The offers of a fresh 402 for the target: each MPP challenge pays (or is refused) once. */
    async function offersFor(target: Target): Promise<Offers> {
      const res = await send(target, target.body, {});
      assert.equal(res.statusCode, 402, res.body);
      const header = res.headers['payment-required'];
      const required = header ? (JSON.parse(Buffer.from(String(header), 'base64').toString('utf8')) as { accepts: Array<Record<string, unknown>> }) : { accepts: [] };
      return { accepts: required.accepts, challenges: Challenge.fromResponseList(asResponse(res)) };
    }

    it('answers every payment proof with the problem its kind earns, storing nothing before verification and one failed ledger row at it', async (ctx) => {
      const seen: Record<string, number> = {};
      const count = (what: string) => (seen[what] = (seen[what] ?? 0) + 1);
      await fc.assert(
        fc.asyncProperty(fc.nat(TARGETS.length - 1), proof, body, async (which, generated, givenBody) => {
          const target = TARGETS[which]!;
          const other = TARGETS.filter((candidate) => candidate !== target)[generated.kind === 'mpp-elsewhere' ? generated.other : 0]!;
          const offers = await offersFor(target);
          const elsewhere = generated.kind === 'mpp-elsewhere' ? await offersFor(other) : offers;
          const { headers, expected: proofExpected } = build(generated, target, offers, elsewhere);
          // An invalid body is refused before any proof is looked at (version 1's header is answered before the body is read).
          const validBody = target.method === 'GET' || givenBody === '(valid)';
          const expected = validBody || generated.kind === 'x-payment' ? proofExpected : offline(400, 'validation-failed');
          const payload = givenBody === '(valid)' ? target.body : givenBody;

          const before = await t.tableDigests();
          const known = new Set((await t.database.db.selectFrom('payments').select('id').execute()).map((row) => row.id));
          const res = await send(target, payload, headers);
          const label = `${target.method} ${target.url} ${generated.kind} ${JSON.stringify(headers).slice(0, 200)}: ${res.statusCode} ${res.body.slice(0, 300)}`;
          assert.ok(!STACK.test(res.body), `stack trace: ${label}`);
          assert.match(String(res.headers['content-type']), /^application\/problem\+json/, label);
          const slug = String(res.json().type).split('/').pop();
          assert.deepEqual([res.statusCode, slug], [expected.status, expected.slug], label);
          count(`${expected.depth} ${slug}`);

          const after = await t.tableDigests();
          if (expected.depth === 'offline') {
            assert.deepEqual(after, before, `refused before verification, yet stored: ${label}`);
            return;
          }
          // Only the ledger changed, by one row: this attempt, failed, its proof freed when the network was at fault.
          assert.deepEqual(Object.keys(after).filter((table) => after[table] !== before[table]), ['payments'], label);
          const rows = (await t.database.db.selectFrom('payments').selectAll().execute()).filter((row) => !known.has(row.id));
          assert.equal(rows.length, 1, label);
          const [row] = rows;
          assert.equal(row!.status, 'failed', label);
          assert.ok(row!.error?.startsWith(`${expected.slug}:`), `${row!.error}: ${label}`);
          assert.equal(row!.proof_key.includes('#released:'), FREES_THE_PROOF.has(expected.slug), `${row!.proof_key}: ${label}`);
          assert.deepEqual([row!.protocol, row!.operation], [generated.kind.startsWith('x402') ? 'x402' : 'mpp', target.name], label);
        }),
        params,
      );
      ctx.diagnostic(`answers over ${RUNS} proofs: ${JSON.stringify(seen)}`);
      // Proofs that never got past decoding would test nothing of the checks behind it.
      const verified = Object.entries(seen).filter(([key]) => key.startsWith('verification')).reduce((sum, [, n]) => sum + n, 0);
      const offlineChecks = ['payment-insufficient', 'invalid-challenge', 'payment-expired', 'method-unsupported'].reduce((sum, slug) => sum + (seen[`offline ${slug}`] ?? 0), 0);
      assert.ok(verified >= RUNS * 0.15, `reached verification ${verified} times: ${JSON.stringify(seen)}`);
      assert.ok(offlineChecks >= RUNS * 0.1, `refused by an offline check past decoding ${offlineChecks} times: ${JSON.stringify(seen)}`);
      // At least once each: with a fresh seed per run, 150 proofs reached an unreachable network 4 times on one database and 15 on the other in the same run, so a floor of 5 failed at random.
      assert.ok((seen['verification payment-network-unreachable'] ?? 0) >= 1 && (seen['verification verification-failed'] ?? 0) >= 1, JSON.stringify(seen));
    });

    it('refuses a proof that already paid (or was refused) for a request, storing nothing more', async () => {
      // Each x402 authorisation and MPP challenge is claimed once; a refusal by the payer keeps it claimed.
      const target = TARGETS[2]!;
      const offers = await offersFor(target);
      const tempo = offers.challenges.find((c) => c.method === 'tempo')!;
      const header = mppHeader(tempo, { type: 'transaction', signature: `0x${randomBytes(4).toString('hex')}` });
      assert.equal((await send(target, undefined, header)).statusCode, 402);
      const before = await t.tableDigests();
      const again = await send(target, undefined, header);
      assert.deepEqual([again.statusCode, String(again.json().type).split('/').pop()], [402, 'invalid-challenge'], again.body);
      assert.deepEqual(await t.tableDigests(), before);
    });
  });
}
