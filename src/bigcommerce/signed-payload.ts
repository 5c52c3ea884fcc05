import { errors, jwtVerify } from 'jose';
import { z } from 'zod';
import { hashOfContext } from './api.ts';

/** What a load, uninstall or remove-user callback's `signed_payload_jwt` says, once verified. */
export interface SignedPayload {
  hash: string;
  user: { id: number; email: string };
  owner: { id: number; email: string } | undefined;
}

const claimsSchema = z.object({
  sub: z.string(),
  user: z.object({ id: z.number(), email: z.string() }),
  owner: z.object({ id: z.number(), email: z.string() }).optional(),
});

/** A signed payload that is not BigCommerce's for this app, or has expired. */
export class InvalidSignedPayload extends Error {
  override name = 'InvalidSignedPayload';
}

/**
 * Verifies a `signed_payload_jwt`: HS256 with the app's client secret, issued by `bc` for this
 * app (`aud` is its client id), within its validity, about one store (`sub` is `stores/{hash}`).
 */
export async function verifySignedPayload(app: { clientId: string; clientSecret: string }, token: string): Promise<SignedPayload> {
  let payload: unknown;
  try {
    ({ payload } = await jwtVerify(token, new TextEncoder().encode(app.clientSecret), { algorithms: ['HS256'], issuer: 'bc', audience: app.clientId, requiredClaims: ['exp', 'sub'] }));
  } catch (err) {
    if (err instanceof errors.JOSEError || err instanceof TypeError) throw new InvalidSignedPayload(`signed_payload_jwt was refused: ${err.message}`);
    throw err;
  }
  const claims = claimsSchema.safeParse(payload);
  const hash = claims.success ? hashOfContext(claims.data.sub) : undefined;
  if (!claims.success || hash === undefined) throw new InvalidSignedPayload('signed_payload_jwt does not name a store and its user');
  return { hash, user: claims.data.user, owner: claims.data.owner };
}
