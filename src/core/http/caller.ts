import { NotFound } from '../problems.ts';
/**
 * Who is making a request, as the access-token check established it (or a payment, or the
 * dashboard's session). Routes and MCP tools hand it to the services, which alone decide from
 * it what may be seen or changed; the rate limiter and Idempotency-Key read it to key their state.
 */
export interface Caller {
  agentId: string;
  /** The scopes in force: those in the token that the agent still holds. */
  scopes: ReadonlySet<string>;
  /** The store the agent is bound to, if any; it may then touch only that store's data. */
  storeDomain: string | null;
  rateLimitPerMinute: number;
  /** `jti` of the access token used. */
  tokenId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: Caller;
  }
}

/** Who a stored record belongs to: the agent that made it and the store it concerns. */
export interface Ownership {
  agentId: string | null;
  storeDomain: string | null;
}

/*
 * Tenancy. Only the services apply these rules (a test keeps routes, tools and the dashboard from
 * naming them), so HTTP, MCP and the dashboard cannot come to different answers.
 */

/**
 * Tenancy in one rule: an agent bound to a store sees that store's records (and its own made
 * before it was bound); any other agent sees only what it made itself.
 */
export function canSee(caller: Caller, record: Ownership): boolean {
  if (caller.storeDomain !== null && record.storeDomain === caller.storeDomain) return true;
  return record.agentId === caller.agentId && (record.storeDomain === null || caller.storeDomain === null);
}

/** The store a write on behalf of `caller` concerns: a bound agent acts for its own store only. */
export function storeForWrite(caller: Pick<Caller, 'storeDomain'>, named: string | undefined | null): { store: string | null; foreign: boolean } {
  const store = named ? named.toLowerCase() : null;
  if (caller.storeDomain === null) return { store, foreign: false };
  return { store: caller.storeDomain, foreign: store !== null && store !== caller.storeDomain };
}

/**
 * A store's own data (stock, alert queue, settings) is for agents bound to that store; to any
 * other caller the store answers as if it did not exist. Returns the normalised domain.
 */
export function ownStore(caller: Caller, domain: string): string {
  const normalised = domain.toLowerCase();
  if (caller.storeDomain !== normalised) throw new NotFound(`No store ${normalised} is visible to this agent; only agents its owner claimed can see it.`);
  return normalised;
}
