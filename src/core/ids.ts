import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/**
 * A new opaque identifier such as `sub_3k9x...`: a type prefix and 130 random bits, so ids
 * cannot be guessed or enumerated.
 */
export function newId(prefix: string): string {
  const bytes = randomBytes(26);
  let out = `${prefix}_`;
  for (const byte of bytes) out += ALPHABET[byte & 31];
  return out;
}
