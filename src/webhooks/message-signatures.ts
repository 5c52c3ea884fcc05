import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { z } from 'zod';
import type { Database } from '../core/db/database.ts';
import { jsonOf } from '../core/json.ts';
import { keepServiceSecret, replaceServiceSecret } from '../core/secrets.ts';

/**
 * HTTP Message Signatures (RFC 9421) on everything the service posts to a tenant's or an agent's
 * address, beside the Standard Webhooks signature: a receiver that knows no shared secret (or
 * wants proof the service itself sent it) verifies with the public keys of our directory,
 * `/.well-known/http-message-signatures-directory` (draft-meunier-webbotauth-httpsig-directory).
 *
 * The Ed25519 keys are kept as the service's other signing keys are (the VAPID pair, the
 * link-signing secret): in `service_secrets`, not sealed, since sealing needs the optional
 * RESTOCK_ENCRYPTION_KEY and the directory must be served without it. A key's id is its JWK
 * thumbprint (RFC 7638), which is what the draft asks `keyid` to be, so a rotation needs no
 * registry of names: the newest key signs, a retired one stays published for RETIRED_KEPT_MS so
 * receivers that cached the directory keep verifying what it signed.
 */

const SECRET_NAME = 'http-message-signatures';
export const DIRECTORY_PATH = '/.well-known/http-message-signatures-directory';
export const DIRECTORY_MEDIA_TYPE = 'application/http-message-signatures-directory+json';
/** The draft's tag for the directory's own signatures. */
export const DIRECTORY_TAG = 'http-message-signatures-directory';
/** Our tag for deliveries: a receiver can refuse a signature made for another purpose. */
export const DELIVERY_TAG = 'restock-delivery';
/** A signature says when it stops being valid; a retry is signed afresh, so this only has to cover the trip. */
const SIGNATURE_LIFETIME_S = 300;
/** The directory's signatures live as long as the directory may be cached. */
export const DIRECTORY_MAX_AGE_S = 3600;
const RETIRED_KEPT_MS = 7 * 86_400_000;
/** How often, at most, a process looks for a key another process rotated in. */
const REFRESH_MS = 60_000;

/** The fields a delivery's signature covers, in order; `signature-agent` by its member, as web bot auth signs it. */
export const DELIVERY_COMPONENTS = ['"@method"', '"@target-uri"', '"content-type"', '"content-digest"', '"webhook-id"', '"signature-agent";key="sig1"'] as const;

const storedKey = z.object({ privateJwk: z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string(), d: z.string() }), createdAt: z.string(), retiredAt: z.string().nullable() });
const storedKeys = z.object({ keys: z.array(storedKey).min(1) });
type StoredKeys = z.infer<typeof storedKeys>;

interface LoadedKey {
  keyid: string;
  privateKey: KeyObject;
  publicJwk: JWK;
  createdAt: string;
  retiredAt: string | null;
}

/** RFC 9530's `Content-Digest` with sha-256, as a structured-field dictionary. */
export function contentDigest(body: string | Buffer): string {
  return `sha-256=:${createHash('sha256').update(body).digest('base64')}:`;
}

/** `@authority` (RFC 9421 §2.2.3): the host, lower case, with the port only when it is not the scheme's default. */
function authorityOf(url: URL): string {
  return url.host.toLowerCase();
}

export class MessageSigner {
  private keys: LoadedKey[] = [];
  private loadedAt = 0;

  /** The origin whose directory holds our keys: `Signature-Agent` names it. */
  private readonly origin: string;

  /** Loads its keys on the first `refresh()`, so that building the feature stays synchronous. */
  constructor(
    private readonly database: Database,
    baseUrl: string,
  ) {
    this.origin = new URL(baseUrl).origin;
  }

  /** Loads the keys, and picks up a key another process rotated in, at most once a minute. Call before signing. */
  async refresh(): Promise<void> {
    if (this.keys.length === 0 || Date.now() - this.loadedAt >= REFRESH_MS) await this.reload();
  }

  /** A new signing key; the former one stays in the directory for a week. Returns the new keyid. */
  async rotate(): Promise<string> {
    const current = await readKeys(this.database);
    const now = new Date().toISOString();
    const kept = current.keys
      .map((key) => ({ ...key, retiredAt: key.retiredAt ?? now }))
      .filter((key) => Date.parse(key.retiredAt) + RETIRED_KEPT_MS > Date.now());
    const fresh = freshKey();
    await replaceServiceSecret(this.database, SECRET_NAME, JSON.stringify({ keys: [...kept, fresh] } satisfies StoredKeys));
    await this.reload();
    return this.signing().keyid;
  }

  /** The directory's body: every key a live signature may have been made with, public halves only. */
  directory(): { keys: JWK[] } {
    return { keys: this.keys.map((key) => key.publicJwk) };
  }

  /** `Signature-Agent`, a dictionary whose member names where our keys are (the draft's `directory` type, its default). */
  signatureAgent(): string {
    return `sig1="${this.origin}"`;
  }

  /**
   * The headers that sign one request: `Content-Digest`, `Signature-Agent`, `Signature-Input` and
   * `Signature` over DELIVERY_COMPONENTS. `headers` must already hold `content-type` and `webhook-id`.
   */
  signRequest(method: string, url: URL, headers: Record<string, string>, body: string | Buffer, at = new Date()): Record<string, string> {
    const key = this.signing();
    const signed: Record<string, string> = { ...lowerCased(headers), 'content-digest': contentDigest(body), 'signature-agent': this.signatureAgent() };
    const values: Record<string, string> = {
      '"@method"': method.toUpperCase(),
      '"@target-uri"': url.href,
      '"signature-agent";key="sig1"': `"${this.origin}"`,
    };
    for (const name of ['content-type', 'content-digest', 'webhook-id']) {
      const value = signed[name];
      if (value === undefined) throw new Error(`A signed delivery needs a ${name} header.`);
      values[`"${name}"`] = value.trim();
    }
    const created = Math.floor(at.getTime() / 1000);
    const params = `(${DELIVERY_COMPONENTS.join(' ')});created=${created};expires=${created + SIGNATURE_LIFETIME_S};keyid="${key.keyid}";alg="ed25519";tag="${DELIVERY_TAG}"`;
    const base = [...DELIVERY_COMPONENTS.map((component) => `${component}: ${values[component]}`), `"@signature-params": ${params}`].join('\n');
    return { ...signed, 'signature-input': `sig1=${params}`, signature: `sig1=:${sign(null, Buffer.from(base), key.privateKey).toString('base64')}:` };
  }

  /**
   * The directory response's own signatures, one per key (the draft's "binding keys to the
   * directory authority"): `"@authority";req` (the authority the client asked) and
   * `content-digest`, tagged `http-message-signatures-directory`.
   */
  signDirectory(requestUrl: URL, body: string, at = new Date()): Record<string, string> {
    const digest = contentDigest(body);
    const created = Math.floor(at.getTime() / 1000);
    const inputs: string[] = [];
    const signatures: string[] = [];
    this.keys.forEach((key, index) => {
      const label = `sig${index + 1}`;
      const params = `("@authority";req "content-digest");created=${created};expires=${created + DIRECTORY_MAX_AGE_S};keyid="${key.keyid}";alg="ed25519";tag="${DIRECTORY_TAG}"`;
      const base = `"@authority";req: ${authorityOf(requestUrl)}\n"content-digest": ${digest}\n"@signature-params": ${params}`;
      inputs.push(`${label}=${params}`);
      signatures.push(`${label}=:${sign(null, Buffer.from(base), key.privateKey).toString('base64')}:`);
    });
    return { 'content-digest': digest, 'signature-input': inputs.join(', '), signature: signatures.join(', ') };
  }

  private signing(): LoadedKey {
    const key = this.keys.filter((candidate) => candidate.retiredAt === null).at(-1);
    if (!key) throw new Error('no HTTP message signing key is loaded');
    return key;
  }

  private async reload(): Promise<void> {
    this.loadedAt = Date.now();
    const stored = await readKeys(this.database);
    const live = stored.keys.filter((key) => key.retiredAt === null || Date.parse(key.retiredAt) + RETIRED_KEPT_MS > Date.now());
    this.keys = await Promise.all(live.map(loadKey));
  }
}

function lowerCased(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}

function freshKey(): StoredKeys['keys'][number] {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' }) as { kty: 'OKP'; crv: 'Ed25519'; x: string; d: string };
  return { privateJwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d }, createdAt: new Date().toISOString(), retiredAt: null };
}

/** The keys in the database, the first made by whichever process asks first; damaged keys stop the start rather than sign. */
async function readKeys(database: Database): Promise<StoredKeys> {
  const { value } = await keepServiceSecret(database, SECRET_NAME, () => JSON.stringify({ keys: [freshKey()] } satisfies StoredKeys));
  const keys = storedKeys.safeParse(jsonOf(value));
  if (!keys.success) throw new Error(`The HTTP message signing keys in service_secrets ('${SECRET_NAME}') are damaged; restore them from a backup or delete the row to start a new key.`);
  return keys.data;
}

async function loadKey(stored: StoredKeys['keys'][number]): Promise<LoadedKey> {
  const privateKey = createPrivateKey({ key: stored.privateJwk, format: 'jwk' });
  const publicOnly = createPublicKey(privateKey).export({ format: 'jwk' }) as { kty: string; crv: string; x: string };
  const base = { kty: publicOnly.kty, crv: publicOnly.crv, x: publicOnly.x };
  const keyid = await calculateJwkThumbprint(base, 'sha256');
  return { keyid, privateKey, publicJwk: { ...base, kid: keyid, use: 'sig' }, createdAt: stored.createdAt, retiredAt: stored.retiredAt };
}
