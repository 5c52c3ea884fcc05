import { createECDH, randomBytes } from 'node:crypto';
import { keccak_256 } from '@noble/hashes/sha3';
import type { Database } from '../core/db/database.ts';
import type { SecretBox } from '../core/sealed-secrets.ts';
import { keepServiceSecret, replaceServiceSecret } from '../core/secrets.ts';

/**
 * The wallet test-network payments are paid to (PAYMENTS_TEST_NETWORK): made on the first start
 * and kept as a service secret, so every process sharing the database offers the same address and
 * a restart keeps it. Sealed under RESTOCK_ENCRYPTION_KEY when one is set; otherwise kept as the
 * service's signing keys are, in the database (what it holds is test money). `restock wallet`
 * shows, exports and imports it.
 */
const SECRET_NAME = 'payment-wallet';
const SEALED = 'sealed:';
const PLAIN = 'plain:';
const PRIVATE_KEY = /^0x[0-9a-f]{64}$/;

export interface PaymentWallet {
  address: `0x${string}`;
  privateKey: `0x${string}`;
}

/** The wallet, made by the first process that asks. */
export async function loadPaymentWallet(database: Database, secrets: SecretBox): Promise<PaymentWallet> {
  let fresh: `0x${string}` | undefined;
  const make = () => {
    fresh = newPrivateKey();
    return `${PLAIN}${fresh}`;
  };
  const { value, made } = await keepServiceSecret(database, SECRET_NAME, make);
  // Made here: sealed now that it is the one kept (a process that lost the race reads the winner's).
  if (made && fresh && secrets.available) await replaceServiceSecret(database, SECRET_NAME, `${SEALED}${await secrets.seal(fresh)}`);
  return walletOf(await readKey(value, secrets));
}

/** Replaces the wallet with one whose private key the operator brings (`restock wallet import`). */
export async function importPaymentWallet(database: Database, secrets: SecretBox, privateKey: string): Promise<PaymentWallet> {
  const key = privateKey.trim().toLowerCase();
  if (!PRIVATE_KEY.test(key)) throw new Error('The private key must be 0x and 64 hex digits.');
  await replaceServiceSecret(database, SECRET_NAME, secrets.available ? `${SEALED}${await secrets.seal(key)}` : `${PLAIN}${key}`);
  return walletOf(key as `0x${string}`);
}

async function readKey(value: string, secrets: SecretBox): Promise<`0x${string}`> {
  const key = value.startsWith(SEALED) ? await secrets.open(value.slice(SEALED.length)) : value.startsWith(PLAIN) ? value.slice(PLAIN.length) : '';
  if (!PRIVATE_KEY.test(key)) throw new Error(`The payment wallet in service_secrets ('${SECRET_NAME}') is damaged; import its key again (restock wallet import).`);
  return key as `0x${string}`;
}

function walletOf(privateKey: `0x${string}`): PaymentWallet {
  return { address: addressOf(privateKey), privateKey };
}

// The key and its address are made here with Node's secp256k1 and a Keccak-256 rather than with
// viem: a serving process reads the wallet as it starts, and viem is hundreds of modules it
// otherwise loads only at the first payment.

/** 32 random bytes that are a valid secp256k1 private key (between 1 and the curve's order). */
function newPrivateKey(): `0x${string}` {
  for (;;) {
    const candidate = randomBytes(32);
    try {
      createECDH('secp256k1').setPrivateKey(candidate);
      return `0x${candidate.toString('hex')}`;
    } catch {
      // Zero or not below the order: about one draw in 2^128.
    }
  }
}

/** The account's address: the last 20 bytes of the Keccak-256 of its public key, checksummed (EIP-55). */
export function addressOf(privateKey: `0x${string}`): `0x${string}` {
  const ecdh = createECDH('secp256k1');
  ecdh.setPrivateKey(Buffer.from(privateKey.slice(2), 'hex'));
  const publicKey = ecdh.getPublicKey().subarray(1);
  const hex = Buffer.from(keccak_256(publicKey).subarray(12)).toString('hex');
  const hashOfHex = Buffer.from(keccak_256(hex)).toString('hex');
  let checksummed = '';
  for (let i = 0; i < hex.length; i += 1) checksummed += Number.parseInt(hashOfHex[i]!, 16) >= 8 ? hex[i]!.toUpperCase() : hex[i];
  return `0x${checksummed}`;
}
