import { ID_JAG_TOKEN_TYPE } from './identity-assertions.ts';
import { allScopes } from '../core/scopes.ts';
import { postClaimScopes, preClaimScopes } from './scopes.ts';

export interface MetadataOptions {
  baseUrl: string;
  serviceName: string;
  anonymousRateLimit: number;
  /** Origin of the mTLS listener, when one is configured. */
  mtlsBaseUrl: string | undefined;
  trustedIssuers: string[];
}

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';
/** The MCP endpoint's path: a resource of its own, with its own metadata document. */
export const MCP_RESOURCE_PATH = '/mcp';

/**
 * Where the metadata of the resource `{baseUrl}{resourcePath}` is: RFC 9728 §3.1 puts the
 * well-known segment between the origin and the resource's path, and §3.3 has a client refuse a
 * document found there whose `resource` is not that identifier.
 */
export function protectedResourceMetadataUrl(baseUrl: string, resourcePath = ''): string {
  return `${baseUrl}${PROTECTED_RESOURCE_METADATA_PATH}${resourcePath}`;
}

/**
 * RFC 9728 protected resource metadata for `{baseUrl}{resourcePath}`: the API is the base URL
 * itself, an endpoint with a path of its own (the MCP endpoint) is named with it. Access tokens
 * are issued for the base URL whatever `resource` a client asked for (RFC 8707 lets the
 * authorization server widen it), and that audience covers every path below it, so both
 * documents name the same authorization server and the same tokens serve both.
 */
export function protectedResourceMetadata(o: MetadataOptions, resourcePath = '', name = o.serviceName) {
  return {
    resource: `${o.baseUrl}${resourcePath}`,
    resource_name: name,
    authorization_servers: [o.baseUrl],
    scopes_supported: allScopes,
    bearer_methods_supported: ['header'],
    jwks_uri: `${o.baseUrl}/.well-known/jwks.json`,
    resource_documentation: `${o.baseUrl}/api`,
    tls_client_certificate_bound_access_tokens: o.mtlsBaseUrl !== undefined,
  };
}

/**
 * RFC 8414 authorization server metadata, with the `agent_auth` object that tells an agent how
 * to register, claim and revoke. There is no authorization endpoint: agents register
 * themselves, or exchange an ID-JAG at the token endpoint (RFC 7523).
 */
export function authorizationServerMetadata(o: MetadataOptions) {
  const registerUri = `${o.baseUrl}/api/agent/register`;
  const claimUri = `${o.baseUrl}/api/agent/claim`;
  const revocationUri = `${o.baseUrl}/oauth/revoke`;
  return {
    issuer: o.baseUrl,
    token_endpoint: `${o.baseUrl}/oauth/token`,
    revocation_endpoint: revocationUri,
    jwks_uri: `${o.baseUrl}/.well-known/jwks.json`,
    scopes_supported: allScopes,
    response_types_supported: [] as string[],
    grant_types_supported: [JWT_BEARER_GRANT],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    service_documentation: `${o.baseUrl}/api`,
    tls_client_certificate_bound_access_tokens: o.mtlsBaseUrl !== undefined,
    ...(o.mtlsBaseUrl
      ? { mtls_endpoint_aliases: { token_endpoint: `${o.mtlsBaseUrl}/oauth/token`, revocation_endpoint: `${o.mtlsBaseUrl}/oauth/revoke` } }
      : {}),
    agent_auth: {
      skill: `${o.baseUrl}/auth.md`,
      register_uri: registerUri,
      claim_uri: claimUri,
      revocation_uri: revocationUri,
      identity_types_supported: ['anonymous', 'identity_assertion'],
      anonymous: {
        credential_types_supported: ['bearer_token'],
        claim_uri: claimUri,
        pre_claim_scopes: preClaimScopes,
        post_claim_scopes: postClaimScopes,
        rate_limit: { requests_per_minute: o.anonymousRateLimit },
      },
      identity_assertion: {
        assertion_types_supported: [ID_JAG_TOKEN_TYPE, 'verified_email'],
        [ID_JAG_TOKEN_TYPE]: {
          credential_types_supported: o.mtlsBaseUrl ? ['bearer_token', 'mtls'] : ['bearer_token'],
          revocation_uri: revocationUri,
          ...(o.mtlsBaseUrl ? { mtls_register_uri: `${o.mtlsBaseUrl}/api/agent/register` } : {}),
          trusted_issuers: o.trustedIssuers,
        },
        verified_email: { credential_types_supported: ['bearer_token'], claim_uri: claimUri },
      },
    },
  };
}

/** OpenID Connect discovery: the same facts, with the fields OIDC requires of every provider. */
export function openidConfiguration(o: MetadataOptions) {
  return {
    ...authorizationServerMetadata(o),
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['ES256'],
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'jti', 'client_id', 'scope', 'cnf'],
  };
}
