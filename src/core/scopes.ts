/**
 * The scopes of the seed, with what each lets an agent do here: every transport (the HTTP gate,
 * MCP, A2A) and every declared operation names them.
 */
export const scopeDescriptions = {
  'api:read': 'Read stock status, alert queue lengths, store configuration and subscriptions',
  'api:write': 'Create and manage back-in-stock customer subscriptions; check out plans',
  'inventory:alerts': 'Report stock and dispatch e-mail alerts for the store the agent is bound to',
} as const;

export type Scope = keyof typeof scopeDescriptions;
export const allScopes = Object.keys(scopeDescriptions) as Scope[];

export function isScope(value: string): value is Scope {
  return Object.hasOwn(scopeDescriptions, value);
}
