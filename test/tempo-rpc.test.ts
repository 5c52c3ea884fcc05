/**
 * The Tempo RPC stand-in itself: it must be as strict as Tempo where payments touch it, or the
 * payment tests would pass against a kinder chain than the real one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from './fixtures/suites.ts';
import { createClient, http, publicActions, walletActions, type Hex } from 'viem';
import { Actions, Addresses } from 'viem/tempo';
import { tempo as tempoMainnet } from 'viem/tempo/chains';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startTempoRpc, type TempoAccount, type TempoRpc } from './fixtures/tempo-rpc.ts';

failOnLeakedHandles();

async function rpcCall(url: string, method: string, params: unknown[] = []) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return (await response.json()) as { result?: unknown; error?: { code: number; message: string } };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the Tempo RPC stand-in', () => {
  let rpc: TempoRpc;

  before(async () => {
    rpc = await startTempoRpc();
  });
  after(async () => {
    await rpc?.close();
  });

  const walletOf = (who: TempoAccount) =>
    createClient({ account: who.account, chain: tempoMainnet, transport: http(rpc.rpcUrl) }).extend(publicActions).extend(walletActions);

  /** A transfer signed as mppx's client signs one: a Tempo transaction with an expiring nonce. */
  async function signedTransfer(from: TempoAccount, amount: bigint): Promise<Hex> {
    const wallet = walletOf(from);
    const prepared = await wallet.prepareTransactionRequest({
      calls: [Actions.token.transfer.call({ token: rpc.token, to: rpc.recipient.address, amount })],
      nonceKey: 'expiring',
      validBefore: Math.floor(Date.now() / 1000) + 25,
    } as never);
    return wallet.signTransaction(prepared as never);
  }

  it("is Tempo mainnet, with the payment token a 6-decimal USD TIP-20", async () => {
    assert.equal(Number((await rpcCall(rpc.rpcUrl, 'eth_chainId')).result), tempoMainnet.id);
    assert.deepEqual(
      await rpc.tokenMetadata().then(({ decimals, currency }) => ({ decimals, currency })),
      { decimals: 6, currency: 'USD' },
    );
    assert.equal(await rpc.balanceOf(rpc.payer.address), 100_000_000n);
    assert.equal(await rpc.balanceOf(rpc.recipient.address), 0n);
  });

  it('answers the methods a production node lacks as it would, and records every call', async () => {
    const mark = rpc.calls.length;
    const cheat = await rpcCall(rpc.rpcUrl, 'anvil_setBalance', [rpc.stranger.address, '0x1']);
    assert.deepEqual(cheat.error, { code: -32601, message: 'Method not found' });
    assert.deepEqual(rpc.calls.slice(mark), ['anvil_setBalance']);
  });

  it('takes fees in stablecoins: an account holding none cannot send, a payment moves exactly its amount', async () => {
    await assert.rejects(
      signedTransfer(rpc.stranger, 1n).then((raw) => walletOf(rpc.stranger).sendRawTransactionSync({ serializedTransaction: raw })),
      /insufficient fee token balance/,
    );
    const start = { token: await rpc.balanceOf(rpc.payer.address), fees: await rpc.balanceOf(rpc.payer.address, Addresses.pathUsd) };
    const receipt = await walletOf(rpc.payer).sendRawTransactionSync({ serializedTransaction: await signedTransfer(rpc.payer, 1_000n) });
    assert.equal(receipt.status, 'success');
    assert.equal(start.token - (await rpc.balanceOf(rpc.payer.address)), 1_000n);
    assert.ok((await rpc.balanceOf(rpc.payer.address, Addresses.pathUsd)) < start.fees, 'the fee came out of pathUSD');
  });

  it('executes a signed transaction once: sent again, it moves nothing more (TIP-1009 expiring nonces)', async () => {
    const raw = await signedTransfer(rpc.payer, 1_000n);
    const wallet = walletOf(rpc.payer);
    const first = await wallet.sendRawTransactionSync({ serializedTransaction: raw });
    assert.equal(first.status, 'success');
    const before = await rpc.balanceOf(rpc.recipient.address);
    // Tempo's specification says the replay does not execute, not how the RPC words it: a refusal
    // or the first inclusion's receipt (anvil's answer) are both that.
    const again = await wallet.sendRawTransactionSync({ serializedTransaction: raw }).catch(() => undefined);
    if (again) assert.equal(again.transactionHash, first.transactionHash);
    assert.equal(await rpc.balanceOf(rpc.recipient.address), before);
  });

  it('stops anvil when closed', async () => {
    const standIn = await startTempoRpc();
    assert.ok(processAlive(standIn.anvilPid));
    await standIn.close();
    assert.equal(processAlive(standIn.anvilPid), false);
    await assert.rejects(fetch(standIn.rpcUrl, { method: 'POST', body: '{}' }));
  });
});
