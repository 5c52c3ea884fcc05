import { z } from 'zod';

export const emailSchema = z
  .email('must be a valid e-mail address')
  .max(254, 'must be at most 254 characters')
  .describe('E-mail address');

/** Domains are case-insensitive; local parts may not be (RFC 5321), so they are kept as given. */
export function normaliseEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return `${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`;
}
