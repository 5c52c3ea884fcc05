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
 * Anyone holding such an id can read when it was made: ids shown to other parties than the
 * record's own use `newOpaqueId`.
 */
export function newId(prefix: string): string {
  let time = '';
  let t = Date.now();
  for (let i = 0; i < TIME_CHARS; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return `${prefix}_${time}${randomChars(RANDOM_CHARS)}`;
}

/** As many random characters as a time-ordered id has in all: 130 random bits. */
const OPAQUE_CHARS = TIME_CHARS + RANDOM_CHARS;

/**
 * A new identifier that says nothing but its type, `sub_` and 26 random characters (130 bits),
 * for records handed to callers who must learn nothing from the id itself: a subscription id
 * reaches agents and sits in every unsubscribe link, and with `newId` it told anyone holding it
 * when the shopper signed up. Inserts land anywhere in the primary-key index rather than at its
 * right edge; the signup-order cursor does not care, it orders by `created_at` first.
 */
export function newOpaqueId(prefix: string): string {
  return `${prefix}_${randomChars(OPAQUE_CHARS)}`;
}

function randomChars(count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += ALPHABET[randomByte() & 31];
  return out;
}
