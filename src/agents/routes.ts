import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { sendProblem, toProblem } from '../core/http/errors.ts';
import { parseUrlEncodedForms } from '../core/http/form-posts.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { html, page, type SafeHtml } from '../core/html.ts';
import type { Problem } from '../core/problems.ts';
import { OAuthProblem } from './errors.ts';
import { clientContext } from './gate.ts';
import { JWT_BEARER_GRANT } from './metadata.ts';
import {
  claimBody,
  claimResponse,
  registerAgentBody,
  registerAgentResponse,
  revokeRequestBody,
  tokenRequestBody,
  type ClaimInput,
} from './schemas.ts';
import type { AgentService } from './service.ts';

const FORM = 'application/x-www-form-urlencoded';

/** Registration and claim (API and page), and the OAuth endpoints. */
export function agentRoutes(service: AgentService, baseUrl: string, bodyLimitBytes: number) {
  return async function (app: FastifyInstance) {
    parseUrlEncodedForms(app);
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.post('/api/agent/register', {
      config: { rateLimitByAddress: 'registration' },
      schema: {
        operationId: 'registerAgent',
        summary: 'Register an agent and obtain credentials',
        description:
          'Three methods: `anonymous` (a bearer credential at once, pre-claim scopes, 100 requests/minute); ' +
          '`identity_assertion` with an ID-JAG from a trusted issuer (`urn:ietf:params:oauth:token-type:id-jag`); ' +
          '`identity_assertion` with `verified_email` (a code is e-mailed; the credential comes with the claim). ' +
          'See /.well-known/oauth-authorization-server (`agent_auth`).',
        tags: ['agents'],
        body: registerAgentBody,
        response: { 201: registerAgentResponse, ...problemResponses(400, 413, 415, 429, 503) },
      },
      handler: async (request, reply) => {
        const registered = await service.registerAgent(request.body, clientContext(request));
        return reply.code(201).header('cache-control', 'no-store').send(registered);
      },
    });

    api.post('/api/agent/claim', {
      config: { page: true, rateLimitByAddress: 'registration' },
      schema: {
        operationId: 'claimAgent',
        summary: 'Claim a registration: confirm an e-mail (and optionally a store) to upgrade the agent',
        description:
          'Step 1: `{claim_token, email[, store]}` e-mails a 6-digit code. Step 2: `{claim_token, otp}` completes the claim and ' +
          'returns a credential with the post-claim scopes (plus `inventory:alerts` when the store owner named their store). ' +
          'The same address takes HTML form posts from the claim page.',
        tags: ['agents'],
        body: claimBody,
        response: { 200: claimResponse, ...problemResponses(400, 403, 413, 415, 429, 503) },
      },
      handler: async (request, reply) => {
        if (!isForm(request)) return reply.header('cache-control', 'no-store').send(await service.claim(request.body, clientContext(request)));
        return sendClaimPage(reply, request.body, await service.claim(request.body, clientContext(request)));
      },
    });

    api.get('/api/agent/claim', {
      config: { page: true },
      schema: { hide: true, querystring: z.object({ claim_token: z.string().min(1).max(200) }) },
      handler: async (request, reply) => {
        const state = await service.claimPageState(request.query.claim_token);
        const token = request.query.claim_token;
        const body = state.openAttempt
          ? codeForm(token, html`<p>We sent a code to ${state.openAttempt.email}.</p>`)
          : emailForm(token, state.emailToConfirm);
        return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(page('Claim your agent', body));
      },
    });

    await app.register(oauthEndpoints(service, baseUrl, bodyLimitBytes));
  };
}

/**
 * The token (RFC 7523 jwt-bearer) and revocation (RFC 7009) endpoints. They take form posts and
 * answer errors in RFC 6749's JSON shape (`error`, `error_description`), which OAuth client
 * libraries expect, with the problem fields alongside.
 */
function oauthEndpoints(service: AgentService, baseUrl: string, bodyLimitBytes: number) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();
    app.setErrorHandler((err, request, reply) => sendOAuthError(request, reply, toProblem(err as Error, bodyLimitBytes), baseUrl));

    api.post('/oauth/token', {
      schema: {
        operationId: 'token',
        summary: 'Exchange an ID-JAG for an access token (RFC 7523 jwt-bearer grant)',
        tags: ['agents'],
        body: tokenRequestBody,
        response: {
          200: z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int(), scope: z.string() }),
          ...problemResponses(400, 503),
        },
      },
      handler: async (request, reply) => {
        const { grant_type, assertion, scope } = request.body;
        if (grant_type !== JWT_BEARER_GRANT) {
          throw new OAuthErrorResponse('unsupported_grant_type', `Only ${JWT_BEARER_GRANT} is supported.`);
        }
        if (!assertion) throw new OAuthErrorResponse('invalid_request', 'The assertion parameter is required.');
        const token = await service.exchangeAssertion(assertion, scope, clientContext(request));
        return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').send(token);
      },
    });

    api.post('/oauth/revoke', {
      schema: {
        operationId: 'revokeToken',
        summary: 'Revoke an access token (RFC 7009); unknown tokens are answered 200 too',
        tags: ['agents'],
        body: revokeRequestBody,
        response: { 200: z.object({}), ...problemResponses(400, 503) },
      },
      handler: async (request) => {
        await service.revokeToken(request.body.token);
        return {};
      },
    });
  };
}

/** An RFC 6749 error raised by the endpoint itself rather than by a step of the service. */
class OAuthErrorResponse extends OAuthProblem {
  constructor(error: string, detail: string) {
    super('malformed-request', error, detail);
  }
}

function sendOAuthError(request: FastifyRequest, reply: FastifyReply, problem: Problem, baseUrl: string) {
  if (problem.status >= 500) return sendProblem(request, reply, problem, baseUrl);
  const error = oauthErrorCode(problem);
  return reply
    .code(problem.status === 401 ? 401 : 400)
    .type('application/json; charset=utf-8')
    .header('cache-control', 'no-store')
    .serializer(JSON.stringify)
    .send({
      error,
      error_description: problem.detail,
      ...(problem instanceof OAuthProblem && problem.error !== error ? { reason: problem.error } : {}),
      type: `${baseUrl}/problems/${problem.slug}`,
      title: problem.title,
      status: problem.status === 401 ? 401 : 400,
      detail: problem.detail,
      requestId: request.id,
    });
}

function oauthErrorCode(problem: Problem): string {
  if (problem.slug === 'invalid-assertion') return 'invalid_grant';
  if (problem instanceof OAuthProblem) return problem.error;
  return 'invalid_request';
}

function isForm(request: FastifyRequest): boolean {
  return (request.headers['content-type'] ?? '').toLowerCase().startsWith(FORM);
}

type ClaimResult = Awaited<ReturnType<AgentService['claim']>>;

function sendClaimPage(reply: FastifyReply, input: ClaimInput, result: ClaimResult) {
  let body: SafeHtml;
  if (result.status === 'initiated') {
    body = codeForm(input.claim_token, html`<p>We sent a 6-digit code to ${input.email ?? 'your address'}. Enter it below.</p>`);
  } else {
    const claimed = result as Extract<ClaimResult, { status: 'claimed' }>;
    const store = claimed.store ? html`<dt>Store</dt><dd>${claimed.store}</dd>` : '';
    body = html`<h1>Agent claimed</h1><dl><dt>Agent</dt><dd>${claimed.registration_id}</dd>${store}
<dt>Scopes</dt><dd>${claimed.scopes.join(' ')}</dd></dl>
<p>The agent now works with its upgraded scopes. It receives its new credential from the claim API; you can close this page.</p>`;
  }
  return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(page('Claim your agent', body));
}

function emailForm(token: string, fixedEmail: string | undefined) {
  const emailField = fixedEmail
    ? html`<input type="hidden" name="email" value="${fixedEmail}"><p>The code goes to ${fixedEmail}.</p>`
    : html`<p><label>Your e-mail<br><input type="email" name="email" required autocomplete="email"></label></p>
<p><label>Your store (optional, if you own it)<br><input name="store" placeholder="my-store.myshopify.com"></label></p>`;
  return html`<h1>Claim your agent</h1>
<p>Claiming ties this AI agent to you: it gets its full scopes and a higher rate limit, and you can revoke it.</p>
<form method="post" action="/api/agent/claim"><input type="hidden" name="claim_token" value="${token}">${emailField}
<button type="submit">Send me a code</button></form>`;
}

function codeForm(token: string, intro: SafeHtml) {
  return html`<h1>Enter your code</h1>${intro}
<form method="post" action="/api/agent/claim"><input type="hidden" name="claim_token" value="${token}">
<p><label>Code<br><input name="otp" inputmode="numeric" pattern="[0-9]{6}" required autocomplete="one-time-code"></label></p>
<button type="submit">Claim</button></form>`;
}
