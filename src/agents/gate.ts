import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { Problem } from '../core/problems.ts';
import { certificateThumbprint } from './access-tokens.ts';
import { InsufficientScope, InvalidRequest, OAuthProblem } from './errors.ts';
import type { Scope } from '../core/scopes.ts';
import type { Caller } from '../core/http/caller.ts';
import type { AgentService, ClientContext } from './service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope an access token must hold to use this route; unset routes are public. */
    scope?: Scope;
  }
}

export const SECURITY_SCHEME = 'agentToken';
/** RFC 6750 §2.1 b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * The bearer-token check, RFC 6750 and RFC 9728: 401 with `WWW-Authenticate: Bearer ...
 * resource_metadata="..."` (an `error` only when a token was sent), 403 `insufficient_scope`
 * naming the scope, 400 `invalid_request` for a broken header. Used by the scoped routes and by
 * the MCP endpoint, whose tools check their own scopes.
 */
export interface BearerGate {
  /** The caller of a request with a valid token; with `scope`, only if the token holds it. */
  callerOf(request: FastifyRequest, scope?: Scope): Promise<Caller>;
  /**
   * The same check, its challenges linking to another resource's metadata: an endpoint that is a
   * resource of its own (RFC 9728 §3.3 has a client match the document to the URL it called).
   */
  withResourceMetadata(resourceMetadataUrl: string): BearerGate;
}

export function bearerGate(service: AgentService, resourceMetadataUrl: string): BearerGate {
  const challenge = (problem?: OAuthProblem) => {
    const params = ['realm="restock"'];
    if (problem) {
      params.push(`error="${problem.error}"`, `error_description="${problem.detail.replace(/["\\]/g, '')}"`);
      if (problem instanceof InsufficientScope) params.push(`scope="${problem.scope}"`);
    }
    params.push(`resource_metadata="${resourceMetadataUrl}"`);
    return `Bearer ${params.join(', ')}`;
  };
  return {
    withResourceMetadata: (url) => bearerGate(service, url),
    async callerOf(request, scope) {
      const header = request.headers.authorization;
      if (!header || !/^bearer(\s|$)/i.test(header)) {
        const needs = scope ? `an access token with the scope ${scope}` : 'an access token';
        const detail = header ? 'Only Bearer access tokens are accepted (`Authorization: Bearer <token>`).' : `This operation needs ${needs}. Register at /api/agent/register.`;
        throw new Problem('unauthorized', detail, { headers: { 'www-authenticate': challenge() }, extensions: scope ? { scope } : {} });
      }
      try {
        const match = BEARER.exec(header);
        if (!match) throw new InvalidRequest('The Authorization header is malformed; send `Authorization: Bearer <token>`.');
        const caller = await service.authenticate(match[1]!, clientContext(request));
        if (scope && !caller.scopes.has(scope)) throw new InsufficientScope(scope);
        return caller;
      } catch (err) {
        if (err instanceof OAuthProblem) err.headers['www-authenticate'] = challenge(err);
        throw err;
      }
    },
  };
}

/**
 * The access-token check in front of every route whose config names a `scope`, with that
 * requirement written into the route's OpenAPI operation. The first gate: the others key their
 * state by the caller it establishes.
 */
export function identityGate(gate: BearerGate) {
  return fp(async (app) => installAccessControl(app, gate), { name: 'identity-gate', fastify: '5.x' });
}

function installAccessControl(app: FastifyInstance, gate: BearerGate): void {
  const authenticate = async (request: FastifyRequest) => {
    const { scope, payment } = request.routeOptions.config;
    const header = request.headers.authorization;
    // A paid route lets a caller without a token through to the payment gate, which asks for payment.
    if (payment && (!header || /^payment\s/i.test(header))) return;
    request.caller = await gate.callerOf(request, scope!);
  };

  app.addHook('onRoute', (route) => {
    const scope = route.config?.scope;
    if (!scope) return;
    route.onRequest = [...[route.onRequest ?? []].flat(), authenticate];
    const schema = (route.schema ??= {});
    (schema as { security?: unknown }).security = [{ [SECURITY_SCHEME]: [scope] }];
    schema.response = { ...problemResponses(401, 403, 429), ...(schema.response as object) };
  });
}

const thumbprints = new WeakMap<object, string | null>();

/** What the connection says about the client: its certificate, when it came over the mTLS listener. */
export function clientContext(request: FastifyRequest): ClientContext {
  const socket = request.raw.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return { certThumbprint: null };
  let thumbprint = thumbprints.get(socket);
  if (thumbprint === undefined) {
    const cert = socket.getPeerCertificate();
    thumbprint = cert && cert.raw ? certificateThumbprint(cert) : null;
    thumbprints.set(socket, thumbprint);
  }
  return { certThumbprint: thumbprint };
}
