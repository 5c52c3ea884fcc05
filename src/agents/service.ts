// Longer than most files on purpose: the three registration methods, claims, token exchange and
// revocation all move one agent row through its states (pending → active → revoked) under the
// same checks; split apart, each part would need the others' private rules.
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { AgentConfig } from '../config.ts';
import { isoAfter, nowIso } from '../core/clock.ts';
import { normaliseEmail } from '../core/email.ts';
import { ownStore, type Caller } from '../core/http/caller.ts';
import { newId } from '../core/ids.ts';
import type { MailTransport } from '../core/mail/transport.ts';
import { Forbidden, NotFound, ServiceUnavailable, ValidationFailed } from '../core/problems.ts';
import type { StoreService } from '../stores/service.ts';
import type { AccessTokens } from './access-tokens.ts';
import { ClaimFailed, InvalidGrant, InvalidRequest, InvalidToken } from './errors.ts';
import { ID_JAG_TOKEN_TYPE, type IdentityAssertions, type VerifiedAssertion } from './identity-assertions.ts';
import type { AgentView, ClaimInput, RegisterAgentInput } from './schemas.ts';
import type { Scope } from '../core/scopes.ts';
import { formatScopes, grantScopes, parseScopes, postClaimScopes, preClaimScopes, storeScopes } from './scopes.ts';
import type { AgentRow, AgentRepository, ClaimAttemptRow } from './repository.ts';

/** What agents ask of the stores: a store as it is (its owner, to claim an agent). */
export type AgentStores = Pick<StoreService, 'findStore'>;

/** What the MCP and A2A endpoints use of the agents' gate. */
export type { BearerGate } from './gate.ts';
export { InsufficientScope } from './errors.ts';

/** How many claim codes one claim token may ask for, so a claim URL cannot be used to flood an inbox. */
const MAX_CLAIM_CODES = 5;

/** What the transport tells us about the client beyond its request. */
export interface ClientContext {
  /** RFC 8705 thumbprint of the client certificate, when the request came over the mTLS listener with one. */
  certThumbprint: string | null;
}

export interface Credential {
  credential_type: 'bearer_token' | 'mtls';
  credential: string;
  token_type: 'Bearer';
  credential_expires: string;
}

interface ClaimOffer {
  claim_url: string;
  claim_token: string;
  claim_token_expires: string;
  post_claim_scopes: string[];
}

interface Deps {
  store: AgentRepository;
  stores: AgentStores;
  tokens: AccessTokens;
  assertions: IdentityAssertions;
  mail: MailTransport;
  config: AgentConfig;
  baseUrl: string;
}

/**
 * Agent identity: the three registration methods, the claim that ties an agent to a person (and
 * through its owner, to a store), the token endpoint, revocation, and the check every
 * authenticated request passes.
 */
export class AgentService {
  constructor(private readonly deps: Deps) {}

  /** POST /api/agent/register: dispatches on the registration method. */
  async registerAgent(input: RegisterAgentInput, client: ClientContext) {
    if (input.type === 'anonymous') return this.registerAnonymous(input, client);
    if (input.assertion_type === ID_JAG_TOKEN_TYPE) return this.registerWithIdJag(input, client);
    return this.registerWithVerifiedEmail(input);
  }

  /** Method C: a bearer credential at once, with pre-claim scopes and the anonymous rate limit. */
  private async registerAnonymous(input: RegisterAgentInput, client: ClientContext) {
    this.refuseMtlsWithout(input, client, false);
    const now = nowIso();
    const requested = parseScopes(input.scope);
    const claim = this.newClaimOffer(requested);
    const scopes = grantScopes(requested, preClaimScopes);
    const agent = this.newAgent({ method: 'anonymous', status: 'active', scopes, claim, now });
    await this.deps.store.insertAgent(agent);
    const credential = await this.issueCredential(agent, scopes, 'bearer_token', null);
    return {
      registration_id: agent.id,
      registration_type: 'anonymous' as const,
      ...credential,
      scopes,
      rate_limit: { requests_per_minute: this.rateLimitFor(agent) },
      ...claim.offer,
    };
  }

  /** Method A: a verified ID-JAG from a trusted issuer; the same identity always maps to the same agent. */
  private async registerWithIdJag(input: RegisterAgentInput, client: ClientContext) {
    const credentialType = input.requested_credential_type ?? 'bearer_token';
    this.refuseMtlsWithout(input, client, true);
    const { agent, scopes, claim } = await this.agentForAssertion(input.assertion!, input.scope, credentialType, client);
    if (agent.credential_type === 'mtls' && credentialType !== 'mtls') {
      throw new InvalidRequest('This agent holds mtls credentials: register over the mTLS listener with requested_credential_type mtls.');
    }
    const credential = await this.issueCredential(agent, scopes, credentialType, client.certThumbprint);
    return {
      registration_id: agent.id,
      registration_type: 'identity_assertion' as const,
      ...credential,
      scopes,
      rate_limit: { requests_per_minute: this.rateLimitFor(agent) },
      ...(claim ? claim.offer : {}),
    };
  }

  /** Method B: nothing usable until the person behind the e-mail enters the code we send. */
  private async registerWithVerifiedEmail(input: RegisterAgentInput) {
    if (input.requested_credential_type === 'mtls') {
      throw new InvalidRequest('Verified e-mail registrations receive bearer_token credentials only.');
    }
    const email = normaliseEmail(input.assertion!);
    const now = nowIso();
    const claim = this.newClaimOffer(parseScopes(input.scope));
    const agent = { ...this.newAgent({ method: 'verified_email', status: 'pending', scopes: [], claim, now }), claim_codes_sent: 1 };
    const { attempt, code } = this.newClaimCode(agent, email, input.store ?? null);
    // Mail first: when it cannot be sent, the 503 leaves nothing behind.
    await this.mailClaimCode(agent, attempt, code);
    await this.deps.store.insertAgentWithAttempt(agent, attempt);
    return {
      registration_id: agent.id,
      registration_type: 'identity_assertion' as const,
      status: 'pending' as const,
      credential_type: 'bearer_token' as const,
      claim_attempt_id: attempt.id,
      claim_attempt_expires: attempt.expires_at,
      ...claim.offer,
    };
  }

  /** POST /oauth/token with the RFC 7523 jwt-bearer grant: an ID-JAG in, an access token out. */
  async exchangeAssertion(assertion: string, scope: string | undefined, client: ClientContext) {
    const { agent, scopes } = await this.agentForAssertion(assertion, scope);
    // An mtls agent's tokens are all certificate-bound; a plain one would undo the binding.
    if (agent.credential_type === 'mtls' && !client.certThumbprint) {
      throw new InvalidRequest('This agent holds mtls credentials: request tokens over the mTLS listener with your certificate.');
    }
    const issued = await this.deps.tokens.issue({
      agentId: agent.id,
      scopes,
      ttlSeconds: this.deps.config.accessTokenTtlSeconds,
      certThumbprint: client.certThumbprint,
    });
    return {
      access_token: issued.token,
      token_type: 'Bearer' as const,
      expires_in: this.deps.config.accessTokenTtlSeconds,
      scope: formatScopes(scopes),
    };
  }

  private async agentForAssertion(
    assertion: string,
    requestedScope: string | undefined,
    credentialType: 'bearer_token' | 'mtls' = 'bearer_token',
    client: ClientContext = { certThumbprint: null },
  ) {
    const verified = await this.deps.assertions.verify(assertion);
    const fresh = await this.deps.store.useAssertion(verified.issuer, verified.jti, verified.expiresAt.toISOString());
    if (!fresh) throw new InvalidGrant('replay_detected', 'This assertion was already used; ask your identity provider for a new one.');

    const existing = await this.deps.store.findAgentByIdentity(verified.issuer, verified.subject);
    if (existing?.status === 'revoked') throw new InvalidGrant('access_denied', 'This agent identity has been revoked.');
    const requested = parseScopes(requestedScope);
    const byProvider = verified.scope === undefined ? undefined : parseScopes(verified.scope);
    let agent = existing;
    let claim: ReturnType<AgentService['newClaimOffer']> | undefined;
    if (!agent) {
      claim = this.newClaimOffer(requested, byProvider);
      agent = this.newAgent({ method: 'id_jag', status: 'active', scopes: preClaimScopes, claim, now: nowIso(), assertion: verified, credentialType });
      if (credentialType === 'mtls') agent.cert_thumbprint = client.certThumbprint;
      await this.deps.store.insertAgent(agent);
    }
    const allowed = parseScopes(agent.scopes);
    const scopes = grantScopes(requested, allowed.filter((scope) => byProvider?.includes(scope) ?? true));
    return { agent, scopes, claim };
  }

  /**
   * POST /api/agent/claim. With an e-mail: sends a one-time code there. With the code: confirms
   * the e-mail, upgrades the agent (and binds it to the store it named, when the e-mail is the
   * store owner's), and hands out a credential carrying the new scopes.
   */
  async claim(input: ClaimInput, client: ClientContext) {
    const agent = await this.agentForClaimToken(input.claim_token);
    if (input.otp !== undefined) return this.completeClaim(agent, input.otp, client);
    // Method B's address was asserted at registration; a new code can only go there again.
    const previous = agent.method === 'verified_email' || input.email === undefined ? await this.emailOfLastAttempt(agent) : undefined;
    const email = input.email === undefined ? previous! : normaliseEmail(input.email);
    if (agent.method === 'verified_email' && email !== previous) {
      throw new ClaimFailed('invalid_request', 'This registration was made for another e-mail address.');
    }
    const attempt = await this.sendClaimCode(agent, email, input.store ?? null);
    return { registration_id: agent.id, claim_attempt_id: attempt.id, status: 'initiated' as const, expires_at: attempt.expires_at };
  }

  /** What the claim page shows for a claim token. */
  async claimPageState(claimToken: string) {
    const agent = await this.agentForClaimToken(claimToken);
    const attempt = await this.deps.store.latestClaimAttempt(agent.id);
    const open = attempt && attempt.status === 'initiated' && attempt.expires_at > nowIso() ? attempt : undefined;
    return { agent, openAttempt: open, emailToConfirm: agent.method === 'verified_email' ? attempt?.email : undefined };
  }

  private async completeClaim(agent: AgentRow, otp: string, client: ClientContext) {
    const { claimCodeMaxAttempts } = this.deps.config;
    const open = await this.deps.store.openClaimAttempts(agent.id, nowIso());
    const attempt = open.find((candidate) => sameCode(candidate, otp));
    if (!attempt) {
      if (open.length === 0) throw await this.whyNoOpenCode(agent);
      let failures = 0;
      for (const candidate of open) failures = Math.max(failures, await this.deps.store.failClaimAttempt(candidate.id, claimCodeMaxAttempts));
      if (failures >= claimCodeMaxAttempts) throw new ClaimFailed('otp_attempts_exceeded', 'Too many wrong codes; ask for a new code.');
      throw new ClaimFailed('otp_invalid', `The code is wrong; ${claimCodeMaxAttempts - failures} attempt(s) left.`);
    }

    let storeDomain = agent.store_domain;
    if (attempt.store_domain) {
      const store = await this.deps.stores.findStore(attempt.store_domain);
      if (!store || store.owner_email !== attempt.email) {
        throw new Forbidden(`${attempt.email} is not the owner of ${attempt.store_domain}; claim without naming the store.`);
      }
      storeDomain = store.domain;
    }
    // A claim grants only what the registration asked for: a bound agent gains inventory:alerts
    // when its registration asked for it, or asked for no scope in particular.
    const asked = parseScopes(agent.post_claim_scopes);
    const scopes = (storeDomain ? [...postClaimScopes, ...storeScopes] : postClaimScopes).filter((scope) => asked.includes(scope));
    const claimed = await this.deps.store.completeClaim(attempt.id, agent.id, {
      status: 'active',
      email: attempt.email,
      store_domain: storeDomain,
      scopes: formatScopes(scopes),
      claimed_at: nowIso(),
    });
    if (!claimed || claimed.status !== 'active') throw new ClaimFailed('claim_expired', 'This claim was already completed.');
    // An mtls agent gets a new credential only when its certificate is presented (a person on the
    // claim page has none); it can always mint one with its next assertion over the mTLS listener.
    const mtls = claimed.credential_type === 'mtls';
    const credential =
      mtls && !client.certThumbprint
        ? undefined
        : await this.issueCredential(claimed, scopes, mtls ? 'mtls' : 'bearer_token', client.certThumbprint);
    return {
      registration_id: claimed.id,
      status: 'claimed' as const,
      ...credential,
      scopes,
      store: claimed.store_domain,
      rate_limit: { requests_per_minute: this.rateLimitFor(claimed) },
    };
  }

  /** Why no code can be entered: none was asked for, the last one died of wrong guesses, or it expired. */
  private async whyNoOpenCode(agent: AgentRow): Promise<ClaimFailed> {
    const latest = await this.deps.store.latestClaimAttempt(agent.id);
    if (!latest) return new ClaimFailed('claim_not_initiated', 'Ask for a code first: send the claim token with an e-mail address.');
    if (latest.status === 'failed') return new ClaimFailed('otp_attempts_exceeded', 'Too many wrong codes; ask for a new code.');
    return new ClaimFailed('claim_expired', 'The code has expired; ask for a new one.');
  }

  /** RFC 7009: revokes one of our access tokens. Anything else is ignored, as the RFC asks. */
  async revokeToken(token: string): Promise<void> {
    let claims;
    try {
      claims = await this.deps.tokens.verify(token);
    } catch (err) {
      if (err instanceof InvalidToken) return;
      throw err;
    }
    await this.deps.store.revokeToken(claims.jti, claims.sub, nowIso(), new Date(claims.exp * 1000).toISOString());
  }

  /**
   * The check every authenticated request passes: a genuine token of ours, bound to the
   * certificate presented (mtls), not revoked, of an agent still active. Scopes in force are the
   * token's scopes that the agent still holds, so a downgrade or revocation applies at once.
   */
  async authenticate(token: string, client: ClientContext): Promise<Caller> {
    const claims = await this.deps.tokens.verify(token);
    const bound = claims.cnf?.['x5t#S256'];
    if (bound !== undefined && bound !== client.certThumbprint) {
      throw new InvalidToken('This token is bound to a client certificate; present it over the mTLS listener.');
    }
    const state = await this.deps.store.agentState(claims.sub, claims.jti);
    if (!state || state.status === 'revoked') throw new InvalidToken('The agent this token was issued to has been revoked.');
    if (state.token_revoked) throw new InvalidToken('The access token has been revoked.');
    if (state.status !== 'active') throw new InvalidToken('The agent this token was issued to is not active.');
    const held = new Set(state.scopes.split(' '));
    return {
      agentId: claims.sub,
      scopes: new Set(claims.scope.split(' ').filter((scope) => held.has(scope))),
      storeDomain: state.store_domain,
      rateLimitPerMinute: this.rateLimitFor(state),
      tokenId: claims.jti,
    };
  }

  async describeAgent(caller: Caller): Promise<AgentView> {
    const agent = await this.deps.store.findAgent(caller.agentId);
    if (!agent) throw new NotFound('No such agent.');
    return { ...this.present(agent), token_scopes: [...caller.scopes] };
  }

  /** The owner's view: every agent bound to their store. */
  async listStoreAgents(domain: string, caller: Caller): Promise<AgentView[]> {
    const agents = await this.deps.store.listStoreAgents(ownStore(caller, domain));
    return agents.map((agent) => this.present(agent));
  }

  /** The owner revokes one of their store's agents; its tokens stop working at once everywhere. */
  async revokeStoreAgent(domain: string, agentId: string, caller: Caller): Promise<AgentView> {
    const store = ownStore(caller, domain);
    const agent = await this.deps.store.findAgent(agentId);
    if (!agent || agent.store_domain !== store) throw new NotFound(`No agent ${agentId} is bound to ${store}.`);
    const revoked = await this.deps.store.revokeAgent(agentId, nowIso());
    return this.present(revoked!);
  }

  rateLimitFor(agent: Pick<AgentRow, 'method' | 'claimed_at'>): number {
    const limits = this.deps.config.rateLimits;
    if (agent.method === 'id_jag') return limits.idJag;
    if (agent.method === 'anonymous' && !agent.claimed_at) return limits.anonymous;
    return limits.verifiedEmail;
  }

  private present(agent: AgentRow): AgentView {
    return {
      registration_id: agent.id,
      method: agent.method as AgentView['method'],
      status: agent.status,
      credential_type: agent.credential_type as AgentView['credential_type'],
      scopes: parseScopes(agent.scopes),
      email: agent.email,
      store: agent.store_domain,
      rate_limit: { requests_per_minute: this.rateLimitFor(agent) },
      created_at: agent.created_at,
      claimed_at: agent.claimed_at,
      revoked_at: agent.revoked_at,
    };
  }

  private async issueCredential(agent: AgentRow, scopes: Scope[], type: 'bearer_token' | 'mtls', certThumbprint: string | null): Promise<Credential> {
    const ttlSeconds = agent.method === 'id_jag' ? this.deps.config.accessTokenTtlSeconds : this.deps.config.credentialTtlSeconds;
    const issued = await this.deps.tokens.issue({
      agentId: agent.id,
      scopes,
      ttlSeconds,
      certThumbprint: type === 'mtls' ? certThumbprint : null,
    });
    return { credential_type: type, credential: issued.token, token_type: 'Bearer', credential_expires: issued.expiresAt.toISOString() };
  }

  private refuseMtlsWithout(input: RegisterAgentInput, client: ClientContext, mtlsAllowed: boolean): void {
    if (input.requested_credential_type !== 'mtls') return;
    if (!mtlsAllowed) throw new InvalidRequest('Anonymous registrations receive bearer_token credentials only.');
    if (!client.certThumbprint) {
      throw new InvalidRequest('An mtls credential must be requested over the mTLS listener, presenting the client certificate it will be bound to.');
    }
  }

  /**
   * A claim token, and what its claim may grant: the scopes a claim gives (a store's among them)
   * that the registration asked for (all when it named none), and that the identity provider's
   * `scope` claim allows, when it made one.
   */
  private newClaimOffer(requested: Scope[], byProvider?: Scope[]) {
    const token = `clm_${randomBytes(32).toString('base64url')}`;
    const expires = isoAfter(this.deps.config.claimTokenTtlHours * 3600_000);
    const asked = grantScopes(requested, [...postClaimScopes, ...storeScopes]).filter((scope) => byProvider?.includes(scope) ?? true);
    const offer: ClaimOffer = {
      claim_url: `${this.deps.baseUrl}/api/agent/claim?claim_token=${token}`,
      claim_token: token,
      claim_token_expires: expires,
      post_claim_scopes: postClaimScopes.filter((scope) => asked.includes(scope)),
    };
    return { hash: hashToken(token), expires, asked, offer };
  }

  private newAgent(input: {
    method: 'anonymous' | 'id_jag' | 'verified_email';
    status: 'active' | 'pending';
    scopes: Scope[];
    claim: ReturnType<AgentService['newClaimOffer']>;
    now: string;
    assertion?: VerifiedAssertion;
    credentialType?: 'bearer_token' | 'mtls';
  }): AgentRow {
    return {
      id: newId('agt'),
      method: input.method,
      status: input.status,
      credential_type: input.credentialType ?? 'bearer_token',
      scopes: formatScopes(input.scopes),
      post_claim_scopes: formatScopes(input.claim.asked),
      email: null,
      issuer: input.assertion?.issuer ?? null,
      subject: input.assertion?.subject ?? null,
      store_domain: null,
      cert_thumbprint: null,
      claim_token_hash: input.claim.hash,
      claim_expires_at: input.claim.expires,
      claim_codes_sent: 0,
      created_at: input.now,
      claimed_at: null,
      revoked_at: null,
    };
  }

  private async agentForClaimToken(claimToken: string): Promise<AgentRow> {
    const agent = await this.deps.store.findAgentByClaimToken(hashToken(claimToken));
    if (!agent || agent.status === 'revoked') {
      throw new ClaimFailed('invalid_claim_token', 'This claim token is not valid (or the claim was already completed).');
    }
    if (!agent.claim_expires_at || agent.claim_expires_at <= nowIso()) {
      throw new ClaimFailed('claim_expired', 'This claim token has expired; register again.');
    }
    return agent;
  }

  private async emailOfLastAttempt(agent: AgentRow): Promise<string> {
    const attempt = await this.deps.store.latestClaimAttempt(agent.id);
    if (!attempt) throw new ValidationFailed([{ pointer: '/body/email', message: 'is required to start a claim' }]);
    return attempt.email;
  }

  /** Claim step 1: reserves one of the token's codes, e-mails it, then stores it. */
  private async sendClaimCode(agent: AgentRow, email: string, storeDomain: string | null): Promise<ClaimAttemptRow> {
    if (!(await this.deps.store.reserveClaimCode(agent.id, MAX_CLAIM_CODES))) {
      throw new ClaimFailed('claim_attempts_exceeded', `A claim token can ask for at most ${MAX_CLAIM_CODES} codes; register again.`);
    }
    const { attempt, code } = this.newClaimCode(agent, email, storeDomain);
    try {
      await this.mailClaimCode(agent, attempt, code);
    } catch (err) {
      await this.deps.store.releaseClaimCode(agent.id);
      throw err;
    }
    await this.deps.store.insertClaimAttempt(attempt);
    return attempt;
  }

  private newClaimCode(agent: AgentRow, email: string, storeDomain: string | null): { attempt: ClaimAttemptRow; code: string } {
    const id = newId('cla');
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const attempt: ClaimAttemptRow = {
      id,
      agent_id: agent.id,
      email,
      store_domain: storeDomain?.toLowerCase() ?? null,
      otp_hash: hashCode(id, code),
      failed_attempts: 0,
      status: 'initiated',
      created_at: nowIso(),
      expires_at: isoAfter(this.deps.config.claimCodeTtlMinutes * 60_000),
    };
    return { attempt, code };
  }

  private async mailClaimCode(agent: AgentRow, attempt: ClaimAttemptRow, code: string): Promise<void> {
    const storeLine = attempt.store_domain ? `\nConfirming binds the agent to your store ${attempt.store_domain}.` : '';
    try {
      await this.deps.mail.send({
        to: attempt.email,
        subject: `Your Restock agent claim code: ${code}`,
        text:
          `Someone asked to claim the AI agent ${agent.id} on Restock with this address.${storeLine}\n\n` +
          `Your code: ${code}\n\nIt expires in ${this.deps.config.claimCodeTtlMinutes} minutes. If this was not you, ignore this e-mail: ` +
          'without the code nothing happens.\n',
        purpose: 'agent-claim-code',
      });
    } catch {
      throw new ServiceUnavailable('The claim code could not be e-mailed right now; nothing was changed. Try again shortly.');
    }
  }
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function hashCode(attemptId: string, code: string): string {
  return createHash('sha256').update(`${attemptId}:${code}`).digest('hex');
}

function sameCode(attempt: ClaimAttemptRow, otp: string): boolean {
  const given = Buffer.from(hashCode(attempt.id, otp.trim()), 'hex');
  return timingSafeEqual(given, Buffer.from(attempt.otp_hash, 'hex'));
}
