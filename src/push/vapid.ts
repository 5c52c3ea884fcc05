import { createECDH } from 'node:crypto';
import { z } from 'zod';
import type { Database } from '../core/db/database.ts';
import { keepServiceSecret } from '../core/secrets.ts';
import { jsonOf } from '../core/json.ts';

/**
 * The service's VAPID key pair (RFC 8292): browsers bind each push subscription to its public
 * key for life, so it is made once, on the first start, and kept as a service secret
 * (core/secrets.ts): every process that shares the database gets the same pair, however many
 * start together, and a restart keeps it.
 *
 * The private key is kept as the other keys the service signs with are (the link-signing secret,
 * the access-token keys in `signing_keys`): in the database, not sealed. `SecretBox` seals what
 * tenants hand us and needs RESTOCK_ENCRYPTION_KEY, which is optional; sealing this key would make
 * web push depend on that setting, and a lost or rotated encryption key would orphan every
 * subscription browsers hold.
 */

const SECRET_NAME = 'vapid';

export interface VapidKeys {
  /** The uncompressed P-256 point, base64url: what `pushManager.subscribe` takes as `applicationServerKey`. */
  publicKey: string;
  /** The 32-byte private scalar, base64url. */
  privateKey: string;
}

const base64urlBytes = (length: number) =>
  z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .refine((text) => Buffer.from(text, 'base64url').length === length, `${length} bytes`);

const storedKeys = z.object({ publicKey: base64urlBytes(65), privateKey: base64urlBytes(32) });

/** The pair in the database, made by the first process that asks. `made` says whether this call made it. */
export async function loadVapidKeys(database: Database): Promise<VapidKeys & { made: boolean }> {
  const { value, made } = await keepServiceSecret(database, SECRET_NAME, () => JSON.stringify(freshKeys()));
  return { ...readStoredKeys(value), made };
}

/**
 * A new P-256 pair, as web-push's generateVAPIDKeys makes it, without loading web-push (whose
 * keys the first start alone would use): the private scalar padded to 32 bytes.
 */
function freshKeys(): VapidKeys {
  const curve = createECDH('prime256v1');
  curve.generateKeys();
  const privateKey = curve.getPrivateKey();
  return { publicKey: curve.getPublicKey().toString('base64url'), privateKey: Buffer.concat([Buffer.alloc(32 - privateKey.length), privateKey]).toString('base64url') };
}

/** A stored pair that does not parse, or whose halves do not belong together, stops start-up rather than signing with it. */
function readStoredKeys(value: string): VapidKeys {
  const keys = storedKeys.safeParse(jsonOf(value));
  if (!keys.success || !halvesMatch(keys.data)) {
    throw new Error(`The VAPID key pair in service_secrets ('${SECRET_NAME}') is damaged. Browsers' push subscriptions are bound to it; restore it from a backup.`);
  }
  return keys.data;
}

function halvesMatch(keys: VapidKeys): boolean {
  try {
    const curve = createECDH('prime256v1');
    curve.setPrivateKey(Buffer.from(keys.privateKey, 'base64url'));
    return curve.getPublicKey().equals(Buffer.from(keys.publicKey, 'base64url'));
  } catch {
    return false;
  }
}
