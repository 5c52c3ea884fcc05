import type { AuthInfo, ServerContext } from '@modelcontextprotocol/server';
import type { Caller } from '../core/http/caller.ts';

/**
 * The auth info the SDK hands to the handlers of one request, carrying the caller the endpoint
 * found for that request's token: a session's server outlives its requests, so its tools and
 * resources act for the caller of each request, never for the one that opened the session.
 */
export function authInfoOf(caller: Caller, resource: URL, resourceMetadataUrl: string): AuthInfo {
  return {
    token: caller.tokenId,
    clientId: caller.agentId,
    scopes: [...caller.scopes],
    resource,
    resourceMetadataUrl,
    extra: { caller },
  };
}

/** The caller of the request being handled; undefined for a caller without a token (learning the tools, paying for one). */
export function callerIn(ctx: ServerContext): Caller | undefined {
  return ctx.http?.authInfo?.extra?.caller as Caller | undefined;
}
