import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case
const TIME_CHARS = 10; // 50 bits of milliseconds: good until the year 37648
const RANDOM_CHARS = 16; // 80 random bits

/** Random bytes drawn in blocks: one call into the CSPRNG per 4 KiB rather than per id. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/**
 * A new identifier such as `sub_01jq3k9x...`: a type prefix, the creation time, then 80 random
 * bits. The time prefix keeps inserts at the right edge of the primary-key index (fewer pages
 * touched per commit than scattered random keys); the random part makes ids impossible to guess.
 */
export function newId(prefix: string): string {
  let time = '';
  let t = Date.now();
  for (let i = 0; i < TIME_CHARS; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let random = '';
  for (let i = 0; i < RANDOM_CHARS; i++) random += ALPHABET[randomByte() & 31];
  return `${prefix}_${time}${random}`;
}
