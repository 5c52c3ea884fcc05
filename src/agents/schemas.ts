import { z } from 'zod';
import { emailSchema } from '../core/email.ts';
import { shopSchema } from '../stores/schemas.ts';
import { ID_JAG_TOKEN_TYPE } from './identity-assertions.ts';
import { allScopes } from '../core/scopes.ts';

const scopeList = z.array(z.enum(allScopes as [string, ...string[]]));
const credentialType = z.enum(['bearer_token', 'mtls']);
const scopeString = z
  .string()
  .max(200)
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'must be space-separated scope names')
  .describe('Space-separated scopes wanted (api:read api:write inventory:alerts); fewer may be granted');

export const registerAgentBody = z
  .object({
    type: z.enum(['anonymous', 'identity_assertion']).describe('anonymous (method C) or identity_assertion (methods A and B)'),
    assertion_type: z
      .enum([ID_JAG_TOKEN_TYPE, 'verified_email'])
      .optional()
      .describe(`For identity_assertion: ${ID_JAG_TOKEN_TYPE} (method A) or verified_email (method B)`),
    assertion: z.string().min(1).max(8192).optional().describe('The ID-JAG (a JWT) for method A; the e-mail address for method B'),
    requested_credential_type: credentialType.optional().describe('bearer_token (default) or mtls (method A, over the mTLS listener)'),
    scope: scopeString.optional(),
    store: shopSchema.optional().describe('Method B: the store to bind the agent to once its owner confirms the code'),
  })
  .superRefine((body, ctx) => {
    if (body.type === 'anonymous') {
      if (body.assertion_type !== undefined || body.assertion !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['assertion'], message: 'anonymous registrations carry no assertion' });
      }
      return;
    }
    if (body.assertion_type === undefined) {
      ctx.addIssue({ code: 'custom', path: ['assertion_type'], message: `is required for identity_assertion` });
    }
    if (body.assertion === undefined) {
      ctx.addIssue({ code: 'custom', path: ['assertion'], message: 'is required for identity_assertion' });
    } else if (body.assertion_type === 'verified_email' && !emailSchema.safeParse(body.assertion).success) {
      ctx.addIssue({ code: 'custom', path: ['assertion'], message: 'must be the e-mail address to verify' });
    }
  })
  .describe('Agent registration: one of the three methods');

const claimOffer = {
  claim_url: z.url().describe('Page (and API address) where the registration is claimed'),
  claim_token: z.string().describe('Send this to the claim endpoint'),
  claim_token_expires: z.string(),
  post_claim_scopes: scopeList.describe('Scopes the agent holds once claimed (plus inventory:alerts when its store owner claims it naming the store)'),
};

const credential = {
  credential_type: credentialType,
  credential: z.string().describe('Access token: send it as `Authorization: Bearer <credential>`'),
  token_type: z.literal('Bearer'),
  credential_expires: z.string().describe('ISO-8601 time the credential stops working'),
};

const rateLimit = z.object({ requests_per_minute: z.number().int() });

export const registerAgentResponse = z
  .object({
    registration_id: z.string(),
    registration_type: z.enum(['anonymous', 'identity_assertion']),
    status: z.literal('pending').optional().describe('Method B: no credential until the claim is completed'),
    credential_type: credentialType,
    credential: credential.credential.optional(),
    token_type: credential.token_type.optional(),
    credential_expires: credential.credential_expires.optional(),
    scopes: scopeList.optional(),
    rate_limit: rateLimit.optional(),
    claim_attempt_id: z.string().optional(),
    claim_attempt_expires: z.string().optional(),
    claim_url: claimOffer.claim_url.optional(),
    claim_token: claimOffer.claim_token.optional(),
    claim_token_expires: claimOffer.claim_token_expires.optional(),
    post_claim_scopes: claimOffer.post_claim_scopes.optional(),
  })
  .describe('The registered agent: its credential, or (method B) how to complete the claim');

export const claimBody = z
  .object({
    claim_token: z.string().min(1).max(200).describe('From the registration response'),
    email: emailSchema.optional().describe('Step 1: the address to send a one-time code to'),
    store: shopSchema.optional().describe('Step 1: bind the agent to this store (the e-mail must be its owner)'),
    otp: z
      .string()
      .regex(/^\s*[0-9]{6}\s*$/, 'must be the 6-digit code from the e-mail')
      .optional()
      .describe('Step 2: the code from the e-mail'),
  })
  .describe('Claim: first with an e-mail (a code is sent), then with the code');

export const claimResponse = z
  .object({
    registration_id: z.string(),
    status: z.enum(['initiated', 'claimed']),
    claim_attempt_id: z.string().optional(),
    expires_at: z.string().optional().describe('When the code stops working'),
    credential_type: credentialType.optional(),
    credential: credential.credential.optional(),
    token_type: credential.token_type.optional(),
    credential_expires: credential.credential_expires.optional(),
    scopes: scopeList.optional(),
    store: z.string().nullable().optional(),
    rate_limit: rateLimit.optional(),
  })
  .describe('initiated: a code was e-mailed; claimed: the agent is upgraded and here is its new credential');

export const agentViewSchema = z
  .object({
    registration_id: z.string(),
    method: z.enum(['anonymous', 'id_jag', 'verified_email']),
    status: z.enum(['pending', 'active', 'revoked']),
    credential_type: credentialType,
    scopes: scopeList,
    email: z.string().nullable().describe('The confirmed e-mail of the person answerable for the agent'),
    store: z.string().nullable().describe('The store the agent is bound to'),
    rate_limit: rateLimit,
    created_at: z.string(),
    claimed_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    token_scopes: scopeList.optional().describe('The scopes in force for the token used'),
  })
  .describe('An agent');

export const agentIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be an agent id such as agt_...');

export const tokenRequestBody = z.object({
  grant_type: z.string().min(1).max(200),
  assertion: z.string().min(1).max(8192).optional(),
  scope: z.string().max(200).optional(),
});

export const revokeRequestBody = z.object({
  token: z.string().min(1).max(8192),
  token_type_hint: z.string().max(100).optional(),
});

export type RegisterAgentInput = z.infer<typeof registerAgentBody>;
export type ClaimInput = z.infer<typeof claimBody>;
export type AgentView = z.infer<typeof agentViewSchema>;
