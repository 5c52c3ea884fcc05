import type { FastifyInstance } from 'fastify';
import { DIRECTORY_MAX_AGE_S, DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH, type MessageSigner } from './message-signatures.ts';

/**
 * `GET /.well-known/http-message-signatures-directory`: the public keys that sign our outgoing
 * requests, as the directory draft has it (a JWKS, its own media type), the response signed once
 * per key over the authority the client asked and the body's digest, so a client can tell the
 * keys are this origin's.
 */
export function signatureDirectoryRoutes(signer: MessageSigner, baseUrl: string) {
  return async function (app: FastifyInstance) {
    app.get(DIRECTORY_PATH, { schema: { hide: true } }, async (request, reply) => {
      await signer.refresh();
      const body = JSON.stringify(signer.directory());
      const asked = askedOrigin(request.headers.host, baseUrl);
      for (const [name, value] of Object.entries(signer.signDirectory(asked, body))) reply.header(name, value);
      return reply
        .header('cache-control', `public, max-age=${DIRECTORY_MAX_AGE_S}`)
        .header('access-control-allow-origin', '*')
        // A buffer, so the media type goes out as the draft names it, without a charset.
        .header('content-type', DIRECTORY_MEDIA_TYPE)
        .send(Buffer.from(body));
    });
  };
}

/** The authority the client named (the directory is signed for the origin it was fetched from), or ours when its Host does not parse. */
function askedOrigin(host: string | undefined, baseUrl: string): URL {
  const ours = new URL(baseUrl);
  if (host === undefined || !/^[A-Za-z0-9.:[\]-]{1,300}$/.test(host)) return ours;
  try {
    return new URL(`${ours.protocol}//${host}`);
  } catch {
    return ours;
  }
}
