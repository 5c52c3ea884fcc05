import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
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
  const fresh = generatePrivateKey();
  const { value, made } = await keepServiceSecret(database, SECRET_NAME, () => `${PLAIN}${fresh}`);
  // Made here: sealed now that it is the one kept (a process that lost the race reads the winner's).
  if (made && secrets.available) await replaceServiceSecret(database, SECRET_NAME, `${SEALED}${await secrets.seal(fresh)}`);
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
  return { address: privateKeyToAccount(privateKey).address, privateKey };
}
