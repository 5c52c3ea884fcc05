/**
 * The test networks' wallet (src/payments/wallet.ts) is made and read without viem, so a serving
 * process need not load it to say where payments go: its address must still be the one viem
 * (and so every x402 and MPP client) derives from the same key.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, it } from './fixtures/suites.ts';
import { propertyParams } from './fixtures/properties.ts';
import { addressOf } from '../src/payments/wallet.ts';

/** secp256k1's group order: a private key is between 1 and this, exclusive. */
const ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const hex32 = (value: bigint): `0x${string}` => `0x${value.toString(16).padStart(64, '0')}`;

describe('the payment wallet', () => {
  it("derives viem's checksummed address from any private key", () => {
    const keys = fc.bigInt({ min: 1n, max: ORDER - 1n }).map(hex32);
    fc.assert(
      fc.property(keys, (key) => {
        assert.equal(addressOf(key), privateKeyToAccount(key).address);
      }),
      propertyParams(200),
    );
  });

  it('at the ends of the range too', () => {
    for (const key of [1n, 2n, ORDER - 1n, 1n << 255n].map(hex32)) assert.equal(addressOf(key), privateKeyToAccount(key).address);
  });
});
