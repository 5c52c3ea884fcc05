import { isScope, type Scope } from '../core/scopes.ts';

/** What an agent holds before its claim, and what every claim grants. */
export const preClaimScopes: Scope[] = ['api:read', 'api:write'];
export const postClaimScopes: Scope[] = ['api:read', 'api:write'];
/** Only an agent bound to a store by its owner may hold these. */
export const storeScopes: Scope[] = ['inventory:alerts'];

/** Splits an OAuth `scope` string; unknown names are dropped (RFC 6749 §3.3 lets us grant less). */
export function parseScopes(text: string | undefined | null): Scope[] {
  if (!text) return [];
  return [...new Set(text.split(' ').filter(isScope))];
}

export function formatScopes(scopes: Iterable<string>): string {
  return [...scopes].join(' ');
}

/** The requested scopes that are also allowed; with no request, everything allowed. */
export function grantScopes(requested: Scope[] | undefined, allowed: Scope[]): Scope[] {
  if (!requested || requested.length === 0) return [...allowed];
  return allowed.filter((scope) => requested.includes(scope));
}
