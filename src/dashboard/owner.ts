import type { Caller } from '../core/http/caller.ts';
import type { AdminFrame } from './embedded.ts';

/**
 * The owner a dashboard request comes from, and the caller they are to the services: signed in by
 * cookie (whose forms carry `csrfToken`), or inside the Shopify admin (`frame`), by the request's
 * session token.
 */
export interface SignedInOwner {
  shop: string;
  caller: Caller;
  csrfToken?: string;
  frame?: AdminFrame;
  /** The store's platform, whose own dashboard page (if any) it is shown; absent inside the Shopify admin, which frames only Shopify stores. */
  platform?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    owner?: SignedInOwner;
  }
}
