import { z } from 'zod';

export const emailSchema = z
  .email('must be a valid e-mail address')
  .max(254, 'must be at most 254 characters')
  .describe('E-mail address');

/**
 * The address mail is sent to and shown as: the domain lower-cased (domains are
 * case-insensitive), the local part as given (RFC 5321 lets a server tell cases apart). Never
 * compare this form; compare `addressKey`.
 */
export function normaliseEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return `${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`;
}

/**
 * The one form in which two addresses are compared: the whole address NFC-normalised and
 * lower-cased, local part included. Suppression, the per-restock dedupe, the frequency cap, the
 * one live subscription per address and customer data requests all compare this, never the
 * address as typed: a mailbox that is truly case-sensitive is rare, and treating `Jane@` and
 * `jane@` as two people let a complaint be dodged by changing one letter's case. Mail still goes
 * to the address as typed (`normaliseEmail`).
 */
export function addressKey(email: string): string {
  // Lower-casing can itself produce decomposed sequences (`İ`), hence the second normalisation.
  return email.normalize('NFC').toLowerCase().normalize('NFC');
}
