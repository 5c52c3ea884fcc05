import { z } from 'zod';
import type { RankedWaitlistKey } from '../alerts/service.ts';
import { ValidationFailed } from '../core/problems.ts';

/**
 * The keyset cursor of the purchasing view: the last row's rank, as JSON in base64url. It is
 * read back as typed values, checked like any other input: a cursor tampered with is a 400,
 * never a query with strings where numbers go.
 */
const cursorShape = z.tuple([
  z.int().min(1),
  z.int().min(0).max(Number.MAX_SAFE_INTEGER),
  z.string().min(1).max(200),
  z.string().max(200),
]);

export function encodeCursor(key: RankedWaitlistKey): string {
  return Buffer.from(JSON.stringify([key.waiting, key.waitingSinceSum, key.productId, key.variantKey]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): RankedWaitlistKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const key = cursorShape.safeParse(parsed);
  if (!key.success) throw new ValidationFailed([{ pointer: '/query/cursor', message: 'must be a `next` value from an earlier page' }]);
  const [waiting, waitingSinceSum, productId, variantKey] = key.data;
  return { waiting, waitingSinceSum, productId, variantKey };
}
