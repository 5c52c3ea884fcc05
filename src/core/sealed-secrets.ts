import { CompactEncrypt, compactDecrypt } from 'jose';
import { NotConfigured } from './problems.ts';

const ALG = 'dir';
const ENC = 'A256GCM';

/**
 * Credentials kept at rest (a store's Admin API token, its SMTP password) are sealed as compact
 * JWEs (direct AES-256-GCM) under a key from the environment, never stored in clear. The key id
 * travels in the header so a later key rotation can tell which key sealed what.
 */
export class SecretBox {
  private constructor(
    private readonly key: Uint8Array | undefined,
    private readonly keyId: string,
  ) {}

  /** `encoded`: 32 bytes in base64 or base64url (RESTOCK_ENCRYPTION_KEY); undefined disables sealing. */
  static fromKey(encoded: string | undefined): SecretBox {
    if (encoded === undefined) return new SecretBox(undefined, '');
    const key = decodeKey(encoded);
    return new SecretBox(key, 'k1');
  }

  get available(): boolean {
    return this.key !== undefined;
  }

  async seal(plaintext: string): Promise<string> {
    const key = this.requireKey();
    return new CompactEncrypt(new TextEncoder().encode(plaintext)).setProtectedHeader({ alg: ALG, enc: ENC, kid: this.keyId }).encrypt(key);
  }

  async open(sealed: string): Promise<string> {
    const key = this.requireKey();
    const { plaintext } = await compactDecrypt(sealed, key);
    return new TextDecoder().decode(plaintext);
  }

  private requireKey(): Uint8Array {
    if (!this.key) {
      throw new NotConfigured('Storing credentials needs RESTOCK_ENCRYPTION_KEY (32 random bytes, base64): credentials are never kept in clear.');
    }
    return this.key;
  }
}

/** Throws a plain Error whose message names the setting; config loading turns it into a ConfigError. */
export function decodeKey(encoded: string): Uint8Array {
  const bytes = Buffer.from(encoded.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (bytes.length !== 32) throw new Error('must be 32 bytes encoded in base64 (e.g. `openssl rand -base64 32`)');
  return new Uint8Array(bytes);
}
