import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { nowIso } from '../core/clock.ts';
import { newId } from '../core/ids.ts';
import type { AgentRepository, SigningKeyRow } from './repository.ts';

const ALG = 'ES256';
/** How often, at most, this process re-reads the keys on demand (an unknown kid, a JWKS request). */
const RELOAD_COOLDOWN_MS = 1000;
/**
 * A process learns of a rotation at its next refresh (about a minute), signing with the old key
 * until then; the old key stays valid this much longer than the tokens' lifetime to cover that.
 */
export const RETIREMENT_SLACK_MS = 10 * 60_000;

interface LoadedKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
  createdAt: string;
  retiredAt: string | null;
}

/**
 * The ES256 keys that sign access tokens, persisted in the database so every process signs and
 * verifies with the same set. The newest key signs; a rotated-out key stays published and valid
 * until the longest-lived token it could have signed has expired, then it is dropped.
 */
export class SigningKeys {
  private keys = new Map<string, LoadedKey>();
  private current: LoadedKey | undefined;
  private lastReload = 0;

  constructor(
    private readonly store: AgentRepository,
    /** The longest a token lives: how long a retired key must keep verifying. */
    private readonly maxTokenLifetimeMs: number,
  ) {}

  /** Loads the keys, creating the first one or rotating one older than `maxAgeDays` (0: never). */
  async load(maxAgeDays: number): Promise<void> {
    await this.reload();
    const tooOld = maxAgeDays > 0 && this.current && Date.parse(this.current.createdAt) < Date.now() - maxAgeDays * 86_400_000;
    if (!this.current || tooOld) await this.rotate();
  }

  /** Makes a new key the signing key; older keys are kept for verification. Returns its kid. */
  async rotate(): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair(ALG, { extractable: true });
    const kid = newId('key');
    const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: ALG, use: 'sig' };
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: ALG };
    await this.store.addSigningKey({
      kid,
      private_jwk: JSON.stringify(privateJwk),
      public_jwk: JSON.stringify(publicJwk),
      created_at: nowIso(),
      retired_at: null,
    });
    await this.reload();
    return kid;
  }

  /**
   * Picks up keys other processes added or retired; at most once per cooldown, so a public
   * endpoint that calls it on every request costs the database nothing more under load.
   */
  async refresh(): Promise<void> {
    if (Date.now() - this.lastReload > RELOAD_COOLDOWN_MS) await this.reload();
  }

  signingKey(): { kid: string; key: CryptoKey } {
    if (!this.current) throw new Error('signing keys are not loaded');
    return { kid: this.current.kid, key: this.current.privateKey };
  }

  /** The public key for `kid`, if it is still valid; an unknown kid may be a key another process made. */
  async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    let key = this.keys.get(kid);
    if (!key) {
      await this.refresh();
      key = this.keys.get(kid);
    }
    if (!key || !this.stillValid(key)) return undefined;
    return key.publicKey;
  }

  /** The JWKS document: every key a valid token may have been signed with. */
  jwks(): { keys: JWK[] } {
    return { keys: [...this.keys.values()].filter((key) => this.stillValid(key)).map((key) => key.publicJwk) };
  }

  private stillValid(key: LoadedKey): boolean {
    return key.retiredAt === null || Date.parse(key.retiredAt) + this.maxTokenLifetimeMs + RETIREMENT_SLACK_MS > Date.now();
  }

  private async reload(): Promise<void> {
    this.lastReload = Date.now();
    const rows = await this.store.listSigningKeys();
    const keys = new Map<string, LoadedKey>();
    for (const row of rows) keys.set(row.kid, this.keys.get(row.kid) ?? (await importKey(row)));
    for (const key of keys.values()) key.retiredAt = rows.find((row) => row.kid === key.kid)!.retired_at;
    this.keys = keys;
    this.current = [...keys.values()].filter((key) => key.retiredAt === null).at(-1);
  }
}

async function importKey(row: SigningKeyRow): Promise<LoadedKey> {
  const publicJwk = JSON.parse(row.public_jwk) as JWK;
  return {
    kid: row.kid,
    privateKey: (await importJWK(JSON.parse(row.private_jwk) as JWK, ALG)) as CryptoKey,
    publicKey: (await importJWK(publicJwk, ALG)) as CryptoKey,
    publicJwk,
    createdAt: row.created_at,
    retiredAt: row.retired_at,
  };
}
