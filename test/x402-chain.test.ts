import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from './fixtures/suites.ts';
import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse } from '@x402/core/types';
import { parseAbi, type Hex } from 'viem';
import { failOnLeakedHandles } from './fixtures/leaks.ts';
import { startX402Chain, x402PayingFetch, type X402Chain } from './fixtures/x402-chain.ts';

failOnLeakedHandles();

const PRICE = 50_000n;

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
const decode = <T>(header: string) => JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as T;

async function postToFacilitator<T>(chain: X402Chain, route: 'verify' | 'settle', payload: PaymentPayload, requirements: PaymentRequirements): Promise<T> {
  const response = await fetch(`${chain.facilitatorUrl}/${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payload, paymentRequirements: requirements }),
  });
  assert.equal(response.status, 200, `facilitator /${route} answered ${response.status}`);
  return (await response.json()) as T;
}

interface Paywall {
  url: string;
  /** Payloads that arrived in PAYMENT-SIGNATURE headers, in order. */
  payments: PaymentPayload[];
  close(): Promise<void>;
}

/**
 * A resource server reduced to the x402 protocol and nothing of ours: 402 with the
 * requirements, then verify and settle each signed payment through the facilitator's HTTP API.
 */
async function startPaywall(chain: X402Chain): Promise<Paywall> {
  const payments: PaymentPayload[] = [];
  let requirements!: PaymentRequirements;

  async function handle(request: http.IncomingMessage, response: http.ServerResponse, url: string) {
    const signature = request.headers['payment-signature'];
    if (typeof signature !== 'string') {
      const paymentRequired = { x402Version: 2, resource: { url }, accepts: [requirements] };
      response.writeHead(402, { 'PAYMENT-REQUIRED': encode(paymentRequired), 'content-type': 'application/json' });
      response.end('{}');
      return;
    }
    const payment = decode<PaymentPayload>(signature);
    payments.push(payment);
    const verified = await postToFacilitator<VerifyResponse>(chain, 'verify', payment, requirements);
    if (!verified.isValid) {
      response.writeHead(402, { 'content-type': 'application/json' }).end(JSON.stringify(verified));
      return;
    }
    const settled = await postToFacilitator<SettleResponse>(chain, 'settle', payment, requirements);
    if (!settled.success) {
      response.writeHead(402, { 'content-type': 'application/json' }).end(JSON.stringify(settled));
      return;
    }
    response.writeHead(200, { 'PAYMENT-RESPONSE': encode(settled), 'content-type': 'application/json' });
    response.end(JSON.stringify({ ok: true }));
  }

  const server = http.createServer((request, response) => {
    handle(request, response, url).catch((error: unknown) => {
      response.writeHead(500).end(String(error));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report`;
  requirements = {
    scheme: 'exact',
    network: chain.network,
    amount: String(PRICE),
    asset: chain.usdc,
    payTo: chain.payTo.address,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  };
  return {
    url,
    payments,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

function nonceOf(payment: PaymentPayload): Hex {
  return (payment.payload as { authorization: { nonce: Hex } }).authorization.nonce;
}

describe('x402 chain fixture', () => {
  let chain: X402Chain;
  let paywall: Paywall;
  before(async () => {
    chain = await startX402Chain();
    paywall = await startPaywall(chain);
  });
  after(async () => {
    await paywall?.close();
    await chain?.close();
  });
  beforeEach(() => {
    chain.facilitator.failSettle = false;
    chain.facilitator.settleDelayMs = 0;
  });

  it('deploys USDC as Circle ships it and funds the payer with 100 USDC', async () => {
    const abi = parseAbi(['function name() view returns (string)', 'function version() view returns (string)', 'function decimals() view returns (uint8)']);
    const read = (functionName: 'name' | 'version' | 'decimals') => chain.publicClient.readContract({ address: chain.usdc, abi, functionName });
    assert.equal(await read('name'), 'USD Coin');
    assert.equal(await read('version'), '2');
    assert.equal(await read('decimals'), 6);
    assert.equal(chain.chainId, 31337);
    assert.equal(await chain.publicClient.getChainId(), 31337);
    assert.equal(await chain.usdcBalance(chain.payer.address), 100_000_000n);
    assert.equal(await chain.usdcBalance(chain.payTo.address), 0n);
    assert.equal(await chain.usdcBalance(chain.stranger.address), 0n);
  });

  it('lists the exact scheme on eip155:31337 at GET /supported', async () => {
    const response = await fetch(`${chain.facilitatorUrl}/supported`);
    assert.equal(response.status, 200);
    const supported = (await response.json()) as { kinds: { x402Version: number; scheme: string; network: string }[] };
    assert.ok(
      supported.kinds.some((kind) => kind.x402Version === 2 && kind.scheme === 'exact' && kind.network === 'eip155:31337'),
      JSON.stringify(supported),
    );
  });

  it('moves USDC from payer to payTo when a paying fetch meets a 402', async () => {
    const payerBefore = await chain.usdcBalance(chain.payer.address);
    const payToBefore = await chain.usdcBalance(chain.payTo.address);
    const calls = { verify: chain.facilitator.verifyCalls, settle: chain.facilitator.settleCalls };

    const response = await x402PayingFetch(chain)(paywall.url);
    assert.equal(response.status, 200, await response.clone().text());
    assert.deepEqual(await response.json(), { ok: true });

    const settlement = decode<SettleResponse>(response.headers.get('payment-response')!);
    assert.equal(settlement.success, true);
    assert.match(settlement.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(await chain.usdcBalance(chain.payTo.address), payToBefore + PRICE);
    assert.equal(await chain.usdcBalance(chain.payer.address), payerBefore - PRICE);
    assert.equal(chain.facilitator.verifyCalls, calls.verify + 1);
    assert.equal(chain.facilitator.settleCalls, calls.settle + 1);
    assert.equal(await chain.authorizationUsed(chain.payer.address, nonceOf(paywall.payments.at(-1)!)), true);
  });

  it('refuses a replayed payment: the nonce is spent on chain', async () => {
    const payment = paywall.payments.at(-1)!;
    const requirements = payment.accepted;
    const verified = await postToFacilitator<VerifyResponse>(chain, 'verify', payment, requirements);
    assert.equal(verified.isValid, false);
    assert.match(verified.invalidReason ?? '', /nonce/i);
    const settled = await postToFacilitator<SettleResponse>(chain, 'settle', payment, requirements);
    assert.equal(settled.success, false);
  });

  it('refuses a payment beyond the payer balance, checked on chain', async () => {
    const response = await x402PayingFetch(chain, chain.stranger.account)(paywall.url);
    assert.equal(response.status, 402);
    const verified = (await response.json()) as VerifyResponse;
    assert.equal(verified.isValid, false);
    assert.match(verified.invalidReason ?? '', /insufficient/i);
  });

  it('answers a settlement failure when failSettle is on, and moves nothing', async () => {
    chain.facilitator.failSettle = true;
    const payerBefore = await chain.usdcBalance(chain.payer.address);
    const response = await x402PayingFetch(chain)(paywall.url);
    assert.equal(response.status, 402);
    const settled = (await response.json()) as SettleResponse;
    assert.equal(settled.success, false);
    assert.equal(await chain.usdcBalance(chain.payer.address), payerBefore);
    assert.equal(await chain.authorizationUsed(chain.payer.address, nonceOf(paywall.payments.at(-1)!)), false);
  });

  it('holds the settle answer for settleDelayMs', async () => {
    chain.facilitator.settleDelayMs = 400;
    const started = Date.now();
    const response = await x402PayingFetch(chain)(paywall.url);
    assert.equal(response.status, 200);
    assert.ok(Date.now() - started >= 400, `answered after ${Date.now() - started} ms`);
  });
});

describe('x402 chain fixture shutdown', () => {
  it('leaves no anvil process behind after close()', async () => {
    const chain = await startX402Chain({ payerBalance: 1n });
    assert.equal(await chain.usdcBalance(chain.payer.address), 1n);
    assert.ok(existsSync(`/proc/${chain.anvilPid}`), 'anvil is running');
    await chain.close();
    // A zombie keeps its /proc entry until reaped: gone means exited and reaped.
    assert.equal(existsSync(`/proc/${chain.anvilPid}`), false);
    await assert.rejects(fetch(chain.rpcUrl, { method: 'POST', body: '{}' }));
  });
});
