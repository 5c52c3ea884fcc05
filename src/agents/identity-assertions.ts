import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { TrustedIssuer } from '../config.ts';
import { InvalidGrant } from './errors.ts';

export const ID_JAG_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:id-jag';
export const ID_JAG_JWT_TYPE = 'oauth-id-jag+jwt';
/** Asymmetric algorithms only: a shared-secret or unsigned assertion proves nothing about its issuer. */
const ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA'];
/** Assertions are meant to be short-lived; one claiming a longer life is refused. */
const MAX_LIFETIME_SECONDS = 24 * 3600;

export interface VerifiedAssertion {
  issuer: string;
  subject: string;
  jti: string;
  expiresAt: Date;
  clientId: string | undefined;
  email: string | undefined;
  /** Scopes the identity provider granted; undefined when it did not say. */
  scope: string | undefined;
}

/**
 * Verifies identity assertion JWT authorization grants (ID-JAG) from the configured trusted
 * issuers only. Keys come from each issuer's configured JWKS, never from the token (`jku`, `x5u`
 * and embedded `jwk` are ignored); a remote JWKS is re-fetched on an unknown kid at most every
 * 30 s, so a stream of forged kids cannot turn into a stream of fetches.
 */
export class IdentityAssertions {
  private readonly keySets = new Map<string, JWTVerifyGetKey>();

  constructor(
    trustedIssuers: TrustedIssuer[],
    /** Our issuer identifier: an assertion must be addressed to it. */
    private readonly audience: string,
  ) {
    for (const trusted of trustedIssuers) {
      const keySet =
        'jwks_uri' in trusted
          ? createRemoteJWKSet(new URL(trusted.jwks_uri), { cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000, timeoutDuration: 5000 })
          : createLocalJWKSet(trusted.jwks as { keys: never[] });
      this.keySets.set(trusted.issuer, keySet);
    }
  }

  /** Checks signature, type, issuer, audience and lifetime. Single use is the caller's job (it needs storage). */
  async verify(assertion: string): Promise<VerifiedAssertion> {
    let unverified: JWTPayload;
    try {
      const header = decodeProtectedHeader(assertion);
      if (header.typ !== ID_JAG_JWT_TYPE) {
        throw new InvalidGrant('invalid_assertion', `The assertion's typ must be ${ID_JAG_JWT_TYPE}.`);
      }
      unverified = decodeJwt(assertion);
    } catch (err) {
      if (err instanceof InvalidGrant) throw err;
      throw new InvalidGrant('invalid_assertion', 'The assertion is not a JWT.');
    }
    const keySet = typeof unverified.iss === 'string' ? this.keySets.get(unverified.iss) : undefined;
    if (!keySet) throw new InvalidGrant('issuer_not_enabled', `The issuer ${String(unverified.iss)} is not trusted here.`);

    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(assertion, keySet, {
        algorithms: ALGORITHMS,
        typ: ID_JAG_JWT_TYPE,
        issuer: unverified.iss,
        audience: this.audience,
        requiredClaims: ['iss', 'sub', 'aud', 'jti', 'exp', 'iat'],
        clockTolerance: 30,
      }));
    } catch (err) {
      throw asInvalidGrant(err);
    }
    if (payload.exp! - payload.iat! > MAX_LIFETIME_SECONDS) {
      throw new InvalidGrant('invalid_assertion', 'The assertion lives longer than the 24 hours allowed.');
    }
    if (payload.iat! > Date.now() / 1000 + 30) throw new InvalidGrant('invalid_assertion', 'The assertion was issued in the future.');
    return {
      issuer: payload.iss!,
      subject: payload.sub!,
      jti: payload.jti!,
      expiresAt: new Date(payload.exp! * 1000),
      clientId: typeof payload.client_id === 'string' ? payload.client_id : undefined,
      email: typeof payload.email === 'string' ? payload.email : undefined,
      scope: typeof payload.scope === 'string' ? payload.scope : undefined,
    };
  }
}

function asInvalidGrant(err: unknown): InvalidGrant {
  if (err instanceof errors.JWTExpired) return new InvalidGrant('expired', 'The assertion has expired.');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return new InvalidGrant('audience_mismatch', 'The assertion is not addressed to this service.');
    if (err.claim === 'nbf') return new InvalidGrant('invalid_assertion', 'The assertion is not valid yet.');
    return new InvalidGrant('invalid_assertion', `The assertion's ${err.claim} claim is not valid.`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return new InvalidGrant('invalid_signature', 'The assertion is not signed with an allowed algorithm.');
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSNoMatchingKey) {
    return new InvalidGrant('invalid_signature', "The assertion's signature does not verify with its issuer's keys.");
  }
  if (err instanceof errors.JWKSTimeout || !(err instanceof errors.JOSEError)) {
    return new InvalidGrant('issuer_unreachable', "The issuer's keys could not be fetched; try again later.");
  }
  return new InvalidGrant('invalid_assertion', 'The assertion could not be verified.');
}
