import { createHash, randomUUID, type X509Certificate } from 'node:crypto';
import { SignJWT, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from 'jose';
import { InvalidToken } from './errors.ts';
import type { SigningKeys } from './signing-keys.ts';

export const ACCESS_TOKEN_TYPE = 'at+jwt';

/** The claims of our RFC 9068 access tokens. */
export interface AccessTokenClaims extends JWTPayload {
  iss: string;
  sub: string;
  aud: string;
  client_id: string;
  scope: string;
  jti: string;
  iat: number;
  exp: number;
  /** RFC 8705: set on mtls credentials, the SHA-256 thumbprint of the client certificate. */
  cnf?: { 'x5t#S256': string };
}

export interface IssuedToken {
  token: string;
  jti: string;
  expiresAt: Date;
}

/** Other processes' clocks may run this far ahead of ours. */
const CLOCK_SKEW_SECONDS = 30;
/** Verified tokens are remembered so a busy agent pays for the signature check once. */
const CACHE_LIMIT = 10_000;

/**
 * Issues and verifies access tokens: ES256 JWTs with `typ: at+jwt`, `aud` = this API's resource
 * identifier. Verification pins the algorithm, type, issuer and audience, so no other kind of JWT
 * (an ID-JAG, an unsigned or HMAC token) passes as one of ours.
 */
export class AccessTokens {
  private readonly verified = new Map<string, AccessTokenClaims>();

  constructor(
    private readonly keys: SigningKeys,
    private readonly issuer: string,
    private readonly resource: string,
  ) {}

  async issue(input: { agentId: string; scopes: string[]; ttlSeconds: number; certThumbprint?: string | null }): Promise<IssuedToken> {
    const { kid, key } = this.keys.signingKey();
    const jti = randomUUID();
    const now = Math.floor(Date.now() / 1000);
    const exp = now + input.ttlSeconds;
    const claims: Record<string, unknown> = { client_id: input.agentId, scope: input.scopes.join(' ') };
    if (input.certThumbprint) claims.cnf = { 'x5t#S256': input.certThumbprint };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: ACCESS_TOKEN_TYPE, kid })
      .setIssuer(this.issuer)
      .setSubject(input.agentId)
      .setAudience(this.resource)
      .setJti(jti)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .sign(key);
    return { token, jti, expiresAt: new Date(exp * 1000) };
  }

  /** The claims of a genuine, unexpired token of ours; InvalidToken otherwise. */
  async verify(token: string): Promise<AccessTokenClaims> {
    const cached = this.verified.get(token);
    if (cached) {
      if (cached.exp * 1000 > Date.now()) return cached;
      this.verified.delete(token);
      throw new InvalidToken('The access token has expired.');
    }
    const claims = await this.verifySignature(token);
    if (this.verified.size >= CACHE_LIMIT) this.verified.clear();
    this.verified.set(token, claims);
    return claims;
  }

  private async verifySignature(token: string): Promise<AccessTokenClaims> {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      throw new InvalidToken('The access token is not a JWT.');
    }
    const key = kid ? await this.keys.verificationKey(kid) : undefined;
    if (!key) throw new InvalidToken('The access token was not signed by a current key of this service.');
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['ES256'],
        typ: ACCESS_TOKEN_TYPE,
        issuer: this.issuer,
        audience: this.resource,
        requiredClaims: ['sub', 'jti', 'iat', 'exp', 'client_id'],
      });
      if (typeof payload.scope !== 'string') throw new InvalidToken('The access token carries no scope.');
      // jose checks iat only with maxTokenAge; a token from the future is not one we issued.
      if (payload.iat! > Date.now() / 1000 + CLOCK_SKEW_SECONDS) throw new InvalidToken('The access token was issued in the future.');
      return payload as AccessTokenClaims;
    } catch (err) {
      throw asInvalidToken(err);
    }
  }
}

function asInvalidToken(err: unknown): InvalidToken {
  if (err instanceof InvalidToken) return err;
  if (err instanceof errors.JWTExpired) return new InvalidToken('The access token has expired.');
  if (err instanceof errors.JWTClaimValidationFailed) return new InvalidToken(`The access token's ${err.claim} claim is not valid.`);
  if (err instanceof errors.JOSEAlgNotAllowed) return new InvalidToken('The access token is not signed with ES256.');
  if (err instanceof errors.JWSSignatureVerificationFailed) return new InvalidToken('The access token signature does not verify.');
  return new InvalidToken('The access token is malformed.');
}

/** RFC 8705 §3.1: base64url SHA-256 of the certificate's DER encoding. */
export function certificateThumbprint(cert: X509Certificate | { raw: Buffer }): string {
  return createHash('sha256').update(cert.raw).digest('base64url');
}
