import type { FastifyInstance } from 'fastify';
import { ID_JAG_TOKEN_TYPE } from './identity-assertions.ts';
import {
  MCP_RESOURCE_PATH,
  PROTECTED_RESOURCE_METADATA_PATH,
  authorizationServerMetadata,
  openidConfiguration,
  protectedResourceMetadata,
  type MetadataOptions,
} from './metadata.ts';
import { scopeDescriptions } from '../core/scopes.ts';
import type { SigningKeys } from './signing-keys.ts';

/**
 * The well-known documents an agent discovers everything from, and the `auth.md` skill they
 * point to. All are public and cacheable for a short while; the JWKS changes on rotation.
 */
export function agentDiscoveryRoutes(options: MetadataOptions, keys: SigningKeys) {
  return async function (app: FastifyInstance) {
    const document = (path: string, build: () => unknown | Promise<unknown>, maxAge = 300) =>
      app.get(path, { schema: { hide: true } }, async (_request, reply) =>
        reply.header('cache-control', `public, max-age=${maxAge}`).header('access-control-allow-origin', '*').send(await build()),
      );
    document(PROTECTED_RESOURCE_METADATA_PATH, () => protectedResourceMetadata(options));
    // MCP clients look for the metadata at the endpoint's own path first (RFC 9728 §3.1), and the
    // MCP endpoint's 401 links here: a client checks that the `resource` it finds is the URL it
    // called (§3.3), so this document names {BASE_URL}/mcp, not the root's resource.
    document(`${PROTECTED_RESOURCE_METADATA_PATH}${MCP_RESOURCE_PATH}`, () => protectedResourceMetadata(options, MCP_RESOURCE_PATH, `${options.serviceName} MCP server`));
    document('/.well-known/oauth-authorization-server', () => authorizationServerMetadata(options));
    document('/.well-known/openid-configuration', () => openidConfiguration(options));
    // Read afresh each time (a few rows): a key another process just rotated in is published at once.
    document('/.well-known/jwks.json', async () => (await keys.refresh(), keys.jwks()), 60);

    app.get('/auth.md', { schema: { hide: true } }, async (_request, reply) =>
      reply.type('text/markdown; charset=utf-8').header('cache-control', 'public, max-age=300').send(skill(options)),
    );
  };
}

/** A short guide for agents: how to get and use a credential here. */
function skill(o: MetadataOptions): string {
  const scopes = Object.entries(scopeDescriptions)
    .map(([name, description]) => `- \`${name}\`: ${description}`)
    .join('\n');
  return `# auth.md: authenticating to ${o.serviceName}

Issuer and resource: ${o.baseUrl}. Metadata: ${o.baseUrl}/.well-known/oauth-authorization-server
(\`agent_auth\`) and ${o.baseUrl}/.well-known/oauth-protected-resource.

## Register (POST ${o.baseUrl}/api/agent/register, JSON)

- Anonymous: \`{"type":"anonymous"}\` returns a bearer \`credential\` at once (scopes api:read api:write,
  ${o.anonymousRateLimit} requests per minute) and a \`claim_url\`/\`claim_token\` to upgrade later.
- Identity assertion (ID-JAG): \`{"type":"identity_assertion","assertion_type":"${ID_JAG_TOKEN_TYPE}","assertion":"<JWT>"}\`
  with an assertion from a trusted issuer (typ oauth-id-jag+jwt, aud ${o.baseUrl}, single use). The same
  assertion can be exchanged at ${o.baseUrl}/oauth/token (grant_type urn:ietf:params:oauth:grant-type:jwt-bearer).
  \`requested_credential_type\` \`mtls\` binds the token to your client certificate (over the mTLS listener).
- Verified e-mail: \`{"type":"identity_assertion","assertion_type":"verified_email","assertion":"you@example.com"}\`;
  a 6-digit code is e-mailed; complete the claim to receive the credential.

## Claim (POST ${o.baseUrl}/api/agent/claim)

\`{"claim_token":"...","email":"owner@example.com","store":"my-store.myshopify.com"}\` sends a code;
\`{"claim_token":"...","otp":"123456"}\` completes it and returns a new credential. A person can use
the \`claim_url\` page instead. When the store's owner claims naming the store, the agent is bound to
it and may hold \`inventory:alerts\`.

## Use

Send \`Authorization: Bearer <credential>\`. 401 means no or a bad token (see \`WWW-Authenticate\`), 403
\`insufficient_scope\` names the scope needed, 429 carries \`Retry-After\`. Revoke with a form POST of
\`token\` to ${o.baseUrl}/oauth/revoke.

## Scopes

${scopes}
`;
}
