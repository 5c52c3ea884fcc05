/**
 * MPP `tempo` charges end to end with no internet: a stand-in for the Tempo RPC backed by anvil
 * in Tempo mode (test/fixtures/tempo-rpc.ts), a TIP-20 token issued through the factory, the
 * service listening on loopback, and mppx's own client paying. mppx's server-side verification
 * runs unchanged against the chain: it decodes, simulates and broadcasts the signed transfer, or
 * reads the receipt of one the payer broadcast, and checks its TIP-20 logs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { Challenge, Credential, Receipt } from 'mppx';
import { Mppx as MppxClient, tempo as tempoClient } from 'mppx/client';
import { Mppx as MppxServer, Store as MppxStore, tempo as tempoServer } from 'mppx/server';
import { Subscription as TempoSubscription } from 'mppx/tempo';
import { toHex } from 'viem';
import { uniqueEmail } from './fixtures/agents.ts';
import { assertOnlyGrew, dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startTempoRpc, tempoChargeClient, tempoPayingClient, tempoRpcClient, type TempoRpc } from './fixtures/tempo-rpc.ts';

failOnLeakedHandles();

const SUBSCRIBE = '/api/v1/alerts/subscribe';
const API_INDEX = '/api';
/** USD 0.05 in a TIP-20 token's 6 decimals. */
const PRICE = 50_000n;

type ChargeMode = 'pull' | 'push';
interface ChargeRequest {
  amount: string;
  currency: string;
  recipient: string;
  methodDetails?: { chainId?: number };
}

const subscription = () => JSON.stringify({ productId: 'gid://shopify/Product/9', email: uniqueEmail('tempo') });
const json = { 'content-type': 'application/json' };
const isBroadcast = (method: string) => method.startsWith('eth_sendRawTransaction');

function tempoChallengeOf(res: Response): Challenge.Challenge {
  const challenge = Challenge.fromResponseList(res).find((c) => c.method === 'tempo' && c.intent === 'charge');
  assert.ok(challenge, 'the 402 offers a tempo charge');
  return challenge;
}

for (const dialect of testDialects()) {
  describe(`MPP tempo charges against a Tempo RPC stand-in on ${dialect}`, { skip: dialectSkip(dialect) }, () => {
    let rpc: TempoRpc;
    let t: TestApp;
    let base: string;

    before(async () => {
      rpc = await startTempoRpc();
      ({ t, base } = await startListeningTestApp(dialect, {
        MPP_TEMPO_RECIPIENT: rpc.recipient.address,
        MPP_TEMPO_RPC_URL: rpc.rpcUrl,
        MPP_TEMPO_CURRENCY: rpc.token,
        PAYMENT_SETTLE_TIMEOUT_MS: '10000',
      }));
    });
    after(async () => {
      await t?.close();
      await rpc?.close();
    });

    const subscribe = (headers: Record<string, string> = {}, body = subscription()) =>
      fetch(`${base}${SUBSCRIBE}`, { method: 'POST', headers: { ...json, ...headers }, body });
    const readIndex = (headers: Record<string, string> = {}) => fetch(`${base}${API_INDEX}`, { headers });
    const offer = async (ask: () => Promise<Response>): Promise<Challenge.Challenge> => {
      const res = await ask();
      assert.equal(res.status, 402);
      return tempoChallengeOf(res);
    };
    const balances = async () => ({
      payer: await rpc.balanceOf(rpc.payer.address),
      recipient: await rpc.balanceOf(rpc.recipient.address),
      stranger: await rpc.balanceOf(rpc.stranger.address),
    });
    const ledgerRow = (challengeId: string) =>
      t.database.db.selectFrom('payments').selectAll().where('proof_key', '=', `mpp:${challengeId}`).executeTakeFirstOrThrow();
    const broadcastsSince = (mark: number) => rpc.calls.slice(mark).filter(isBroadcast).length;

    /**
     * A credential from mppx's client for `challenge` as if it asked for `pays` instead (a
     * smaller amount, another recipient), presented with the challenge as issued: the HMAC holds
     * and the memo is bound to it, so only the transfer itself is wrong.
     */
    async function credentialPaying(challenge: Challenge.Challenge, mode: ChargeMode, pays: Partial<ChargeRequest>): Promise<string> {
      const asked = { ...challenge, request: { ...challenge.request, ...pays } };
      const made = await tempoChargeClient(rpc).createCredential({ challenge: asked as never, context: { mode } });
      return Credential.serialize({ ...Credential.deserialize(made), challenge });
    }

    /** A refused payment: 402 with fresh offers and the reason, nothing served; the ledger keeps the attempt as failed. */
    async function expectRefused(res: Response, challengeId: string, before: Record<string, string>) {
      assert.equal(res.status, 402, await res.clone().text());
      const problem = await res.json();
      assert.equal(problem.type, 'https://paymentauth.org/problems/verification-failed');
      tempoChallengeOf(res);
      assertOnlyGrew(before, await t.tableDigests(), 'payments', 1);
      const row = await ledgerRow(challengeId);
      assert.equal(row.status, 'failed');
      assert.equal(row.result_ref, null);
    }

    it('offers USD 0.05 in the configured TIP-20 token, to the configured recipient, on the RPC chain', async () => {
      const metadata = await rpc.tokenMetadata();
      assert.equal(metadata.decimals, 6);
      assert.equal(metadata.currency, 'USD');
      for (const ask of [() => subscribe(), () => readIndex()]) {
        const request = (await offer(ask)).request as unknown as ChargeRequest;
        assert.equal(BigInt(request.amount), 5n * 10n ** BigInt(metadata.decimals - 2));
        assert.equal(request.amount, String(PRICE));
        assert.equal(request.currency.toLowerCase(), rpc.token.toLowerCase());
        assert.equal(request.recipient.toLowerCase(), rpc.recipient.address.toLowerCase());
        assert.equal(request.methodDetails?.chainId, rpc.chainId);
      }
    });

    it('takes a transfer signed by the official client and broadcasts it: 200, subscription, tokens moved, receipt, ledger settled', async () => {
      const start = await balances();
      const mark = rpc.calls.length;
      let credential: string | undefined;
      const client = tempoPayingClient(rpc);
      client.onCredentialCreated(({ credential: made }) => void (credential = made));
      const res = await client.fetch(`${base}${SUBSCRIBE}`, { method: 'POST', headers: json, body: subscription() });
      assert.equal(res.status, 200, await res.clone().text());
      const { subscriptionId, status } = await res.json();
      assert.equal(status, 'active');
      const paid = Credential.deserialize(credential!);
      assert.equal((paid.payload as { type: string }).type, 'transaction', 'a local key pays in pull mode');
      assert.equal(broadcastsSince(mark), 1, 'the service broadcast the signed transfer once');

      const receipt = Receipt.deserialize(res.headers.get('payment-receipt')!);
      assert.equal(receipt.method, 'tempo');
      assert.equal(receipt.status, 'success');
      const onChain = await rpc.receipt(receipt.reference as `0x${string}`);
      assert.equal(onChain.status, 'success');
      assert.equal(onChain.from.toLowerCase(), rpc.payer.address.toLowerCase());

      const end = await balances();
      assert.equal(start.payer - end.payer, PRICE);
      assert.equal(end.recipient - start.recipient, PRICE);

      const row = await ledgerRow(paid.challenge.id);
      assert.equal(row.status, 'settled');
      assert.equal(row.protocol, 'mpp');
      assert.equal(row.method, 'tempo');
      assert.equal(row.intent, 'charge');
      assert.equal(row.amount, String(PRICE));
      assert.equal(row.currency.toLowerCase(), rpc.token.toLowerCase());
      assert.equal(row.reference, receipt.reference);
      assert.equal(row.result_ref, subscriptionId);
      assert.equal(row.payer?.toLowerCase(), `did:pkh:eip155:${rpc.chainId}:${rpc.payer.address}`.toLowerCase());
      const made = await t.database.db.selectFrom('subscriptions').selectAll().where('id', '=', subscriptionId).executeTakeFirstOrThrow();
      assert.equal(made.agent_id, `payer:mpp:${row.payer}`);
    });

    it('takes a transfer the payer broadcast itself (a transaction hash) for GET /api', async () => {
      const start = await balances();
      const challenge = await offer(() => readIndex());
      const credential = await tempoChargeClient(rpc).createCredential({ challenge: challenge as never, context: { mode: 'push' } });
      const { hash } = Credential.deserialize(credential).payload as { type: string; hash: `0x${string}` };
      const mark = rpc.calls.length;
      const res = await readIndex({ authorization: credential });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(broadcastsSince(mark), 0, 'nothing for the service to broadcast');
      assert.ok(rpc.calls.slice(mark).includes('eth_getTransactionReceipt'), 'the service read the receipt from the chain');
      assert.equal(Receipt.deserialize(res.headers.get('payment-receipt')!).reference, hash);
      const end = await balances();
      assert.equal(start.payer - end.payer, PRICE);
      assert.equal(end.recipient - start.recipient, PRICE);
      const row = await ledgerRow(challenge.id);
      assert.equal(row.status, 'settled');
      assert.equal(row.reference, hash);
      assert.equal(row.request_path, API_INDEX);
    });

    it('refuses a signed transfer of less than the price: 402, never broadcast, nothing created', async () => {
      const challenge = await offer(() => subscribe());
      const credential = await credentialPaying(challenge, 'pull', { amount: String(PRICE - 1n) });
      const before = await t.tableDigests();
      const start = await balances();
      const mark = rpc.calls.length;
      await expectRefused(await subscribe({ authorization: credential }), challenge.id, before);
      assert.equal(broadcastsSince(mark), 0);
      assert.deepEqual(await balances(), start);
    });

    it('refuses a broadcast transfer of less than the price: 402, nothing created', async () => {
      const challenge = await offer(() => subscribe());
      const start = await balances();
      const credential = await credentialPaying(challenge, 'push', { amount: String(PRICE - 1n) });
      assert.equal((await balances()).recipient - start.recipient, PRICE - 1n, 'the payer did send the smaller transfer');
      const before = await t.tableDigests();
      await expectRefused(await subscribe({ authorization: credential }), challenge.id, before);
    });

    it('refuses a transfer to another recipient, signed or broadcast: 402, nothing created', async () => {
      for (const mode of ['pull', 'push'] as const) {
        const challenge = await offer(() => subscribe());
        const start = await balances();
        const credential = await credentialPaying(challenge, mode, { recipient: rpc.stranger.address });
        const before = await t.tableDigests();
        const mark = rpc.calls.length;
        await expectRefused(await subscribe({ authorization: credential }), challenge.id, before);
        const end = await balances();
        assert.equal(end.recipient, start.recipient, mode);
        if (mode === 'pull') {
          assert.equal(broadcastsSince(mark), 0);
          assert.equal(end.stranger, start.stranger);
        }
      }
    });

    it('a credential pays for one request: replayed afterwards, or five times at once, exactly one succeeds', async () => {
      for (const mode of ['pull', 'push'] as const) {
        const challenge = await offer(() => subscribe());
        // In push mode the payer's transfer goes out while the credential is made.
        const start = await balances();
        const credential = await tempoChargeClient(rpc).createCredential({ challenge: challenge as never, context: { mode } });
        const first = await subscribe({ authorization: credential });
        assert.equal(first.status, 200, await first.clone().text());
        const before = await t.tableDigests();
        const again = await subscribe({ authorization: credential });
        assert.equal(again.status, 402, mode);
        tempoChallengeOf(again);
        assert.deepEqual(await t.tableDigests(), before, 'the replay is refused before it reaches the ledger');
        assert.equal((await balances()).recipient - start.recipient, PRICE, mode);
      }

      const challenge = await offer(() => subscribe());
      const credential = await tempoChargeClient(rpc).createCredential({ challenge: challenge as never, context: { mode: 'pull' } });
      const start = await balances();
      const before = await t.counts();
      const mark = rpc.calls.length;
      const answers = await Promise.all(Array.from({ length: 5 }, () => subscribe({ authorization: credential })));
      assert.deepEqual(answers.map((res) => res.status).sort(), [200, 402, 402, 402, 402]);
      assert.equal(broadcastsSince(mark), 1);
      const end = await balances();
      assert.equal(end.recipient - start.recipient, PRICE);
      assert.equal(start.payer - end.payer, PRICE);
      const now = await t.counts();
      assert.equal(now.subscriptions, before.subscriptions + 1);
      assert.equal(now.payments, before.payments + 1);
    });

    it('refuses a signed transfer whose credential names someone else as the payer: never broadcast, nothing created', async () => {
      const challenge = await offer(() => subscribe());
      const made = Credential.deserialize(await tempoChargeClient(rpc).createCredential({ challenge: challenge as never, context: { mode: 'pull' } }));
      const forged = Credential.serialize({ ...made, source: `did:pkh:eip155:${rpc.chainId}:${rpc.stranger.address}` });
      const before = await t.tableDigests();
      const start = await balances();
      const mark = rpc.calls.length;
      await expectRefused(await subscribe({ authorization: forged }), challenge.id, before);
      assert.equal(broadcastsSince(mark), 0);
      assert.deepEqual(await balances(), start);
    });

    it('a transfer that paid for one challenge does not pay for another', async () => {
      for (const mode of ['pull', 'push'] as const) {
        const paidFor = await offer(() => subscribe());
        const credential = Credential.deserialize(await tempoChargeClient(rpc).createCredential({ challenge: paidFor as never, context: { mode } }));
        assert.equal((await subscribe({ authorization: Credential.serialize(credential) })).status, 200);
        const other = await offer(() => subscribe());
        const start = await balances();
        const before = await t.tableDigests();
        const reused = Credential.serialize({ ...credential, challenge: other });
        await expectRefused(await subscribe({ authorization: reused }), other.id, before);
        assert.deepEqual(await balances(), start, mode);
      }
    });

    it('does not offer the subscription intent: mppx signs a TIP-1053 witness, which this chain cannot decode', async () => {
      // With Tempo configured, where it would be offered, neither the plan's 402 nor the discovery document names it.
      const res = await fetch(`${base}/api/v1/plans/checkout`, { method: 'POST', headers: json, body: JSON.stringify({ plan: 'starter', shop: 'my-store.myshopify.com' }) });
      assert.equal(res.status, 402);
      assert.deepEqual(Challenge.fromResponseList(res).filter((c) => c.intent === 'subscription'), []);
      assert.doesNotMatch(JSON.stringify(await res.json()), /subscription intent|tempo\/subscription/i);
      const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, { 'x-payment-info'?: { offers: { intent: string }[] } }>> };
      const offered = Object.values(doc.paths).flatMap((item) => Object.values(item).flatMap((operation) => operation['x-payment-info']?.offers ?? []));
      assert.ok(offered.length > 0);
      assert.deepEqual(offered.filter((offer) => offer.intent === 'subscription'), []);
      // No storage is involved below; it shares this suite's chain rather than start another beside it.
      await subscriptionCannotActivate(rpc);
    });
  });
}

/**
 * Why `checkoutPlan` does not offer MPP's `tempo/subscription` (docs/payments.md, "The
 * subscription intent"): mppx 0.11.0's own server and client, with nothing of the service
 * between them, against the stand-in chain. Every key authorization mppx signs for a
 * subscription carries a TIP-1053 witness (the challenge id), and the newest anvil that can be
 * installed here (1.7.1, Tempo rules up to T4) cannot decode a transaction carrying one, so no
 * subscription can be activated on it. This shows that, and nothing moving; the day it fails
 * because the payment went through, the chain can take the intent and the offer can be built.
 */
async function subscriptionCannotActivate(rpc: TempoRpc): Promise<void> {
  const getClient = () => tempoRpcClient(rpc);
  const server = MppxServer.create({
    secretKey: 'a test secret of at least 32 bytes, for mppx',
    realm: 'restock.test',
    methods: [
      tempoServer.subscription({
        recipient: rpc.recipient.address,
        currency: rpc.token,
        chainId: rpc.chainId,
        getClient,
        store: MppxStore.memory(),
        // The monthly plan as the intent can say it: its units are day and week (and dev_second).
        amount: '9.99',
        periodCount: 30,
        periodUnit: 'day',
        subscriptionExpires: new Date(Math.floor(Date.now() / 1000 + 365 * 86400) * 1000),
        resolve: async () => ({ key: 'store:my-store.myshopify.com' }),
        requireCredential: true,
      }),
    ],
  });
  const challenge = await server.challenge.tempo.subscription({});
  const request = subscriptionRequest(challenge.request);
  assert.deepEqual([challenge.intent, request.amount, request.periodCount, request.periodUnit], ['subscription', '9990000', '30', 'day']);
  const accessKey = request.methodDetails?.accessKey;
  assert.ok(accessKey, 'the server hands out an access key of its own for the payer to authorise');

  const client = MppxClient.create({ polyfill: false, methods: [tempoClient.subscription({ account: rpc.payer.account, getClient })] });
  const serialized = await client.createCredential(new Response(null, { status: 402, headers: { 'www-authenticate': Challenge.serialize(challenge) } }));
  const credential = Credential.deserialize<{ signature: `0x${string}`; type: 'keyAuthorization' }>(serialized);
  // The credential is sound by mppx's own reading: signed by the payer, for this challenge.
  const { authorization, source } = TempoSubscription.verifySubscriptionKeyAuthorization({
    accessKey,
    challengeId: challenge.id,
    chainId: rpc.chainId,
    payload: credential.payload,
    request: request as never,
  });
  assert.equal(source.address.toLowerCase(), rpc.payer.address.toLowerCase());
  assert.equal(authorization.witness, toHex(Buffer.from(challenge.id, 'base64url')), 'the TIP-1053 witness is the challenge id');
  assert.equal(authorization.limits?.[0]?.period, 30 * 86400, 'one pull of the amount per 30 days');

  const start = await rpc.balanceOf(rpc.recipient.address);
  const mark = rpc.calls.length;
  await assert.rejects(server.broadcastCredential(serialized), (error: unknown) => {
    assert.match(describeError(error), /Failed to decode transaction/);
    return true;
  });
  assert.ok(rpc.calls.slice(mark).some(isBroadcast), 'the activation was sent to the chain');
  assert.equal(await rpc.balanceOf(rpc.recipient.address), start, 'nothing moved');
}

interface SubscriptionRequest {
  amount: string;
  periodCount: string;
  periodUnit: string;
  methodDetails?: { accessKey?: { accessKeyAddress: `0x${string}`; keyType: 'secp256k1' | 'p256' | 'webAuthn' } };
}

function subscriptionRequest(request: unknown): SubscriptionRequest {
  return request as SubscriptionRequest;
}

/** An error with its causes and details, as one string: mppx wraps the node's answer. */
function describeError(error: unknown): string {
  const parts: string[] = [];
  for (let e = error as { message?: string; details?: string; cause?: unknown } | undefined, depth = 0; e && depth < 6; e = e.cause as typeof e, depth++) {
    parts.push(String(e.message ?? e), String(e.details ?? ''));
  }
  return parts.join(' | ');
}
