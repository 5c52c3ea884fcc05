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
import { uniqueEmail } from './fixtures/agents.ts';
import { assertOnlyGrew, dialectSkip, startListeningTestApp, testDialects, type TestApp } from './fixtures/app.ts';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startTempoRpc, tempoChargeClient, tempoPayingClient, type TempoRpc } from './fixtures/tempo-rpc.ts';

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
  });
}
