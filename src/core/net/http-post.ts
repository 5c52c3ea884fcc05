import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { ForbiddenDestination, guardedLookup, isAllowedDestination, type OutboundPolicy } from './outbound-guard.ts';
import { checkDestination } from './destination.ts';

/** Redirects followed at most, each target checked as the first URL was. */
export const MAX_REDIRECTS = 3;
/** Of a response body, at most this much is read; the rest is dropped with the connection. */
export const RESPONSE_BODY_CAP_BYTES = 64 * 1024;

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export interface PostOptions {
  policy: OutboundPolicy;
  /** For the whole exchange, redirects included. */
  timeoutMs: number;
  /** Redirects followed, at most MAX_REDIRECTS; 0 takes a redirect as the answer. */
  maxRedirects?: number;
}

/** What one attempt came to. `error` is in our words: nothing the destination sent is repeated. */
export interface PostOutcome {
  /** The last response's status, if any came. */
  statusCode: number | null;
  error: string | null;
  /** The destination was refused by our checks (its URL, or the addresses it resolved to): no request was sent to it. */
  refused: boolean;
  durationMs: number;
}

export interface Hop {
  statusCode: number;
  location: string | undefined;
  /** The body as far as it was read, when asked for (`keepBody`). */
  body: Buffer;
  /** The whole body was read: it was within the cap. */
  complete: boolean;
}

/** One request of an exchange with a tenant's host: what is sent, and whether the answer's body is kept. */
export interface HopRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  body: string | Buffer;
  headers: Record<string, string>;
  keepBody?: boolean;
  /** Of the body, at most this much is read; RESPONSE_BODY_CAP_BYTES unless said. */
  maxBodyBytes?: number;
}

class ExchangeTimeout extends Error {
  override name = 'ExchangeTimeout';
}

/**
 * POSTs `body` to a URL a tenant or a shopper's browser named: every connection through the outbound guard (the name's
 * addresses checked as it resolves, the connected peer checked again), no connection reuse, one
 * deadline for the whole exchange, a bounded read of each answer, and redirects followed by hand.
 */
export async function postToTenant(url: string, body: string | Buffer, headers: Record<string, string> | ((target: URL) => Record<string, string>), options: PostOptions): Promise<PostOutcome> {
  const started = Date.now();
  const deadline = started + options.timeoutMs;
  const maxRedirects = Math.min(options.maxRedirects ?? MAX_REDIRECTS, MAX_REDIRECTS);
  const outcome = (statusCode: number | null, error: string | null, refused = false): PostOutcome => ({ statusCode, error, refused, durationMs: Date.now() - started });
  let target: string | URL = url;
  let lastStatus: number | null = null;
  for (let hop = 0; hop <= maxRedirects; hop++) {
    const destination = checkDestination(target, options.policy);
    if ('refused' in destination) {
      return outcome(lastStatus, hop === 0 ? `the endpoint URL ${destination.refused}` : `redirected to a URL that ${destination.refused}; not followed`, true);
    }
    let answer: Hop;
    try {
      // Headers may sign the URL they are sent to (RFC 9421's @target-uri): made again for each hop.
      const sent = typeof headers === 'function' ? headers(destination.url) : headers;
      answer = await exchange(destination.url, destination.host, { method: 'POST', body, headers: sent }, options.policy, deadline);
    } catch (err) {
      return outcome(lastStatus, describeFailure(err, options.timeoutMs, hop > 0), err instanceof ForbiddenDestination);
    }
    lastStatus = answer.statusCode;
    if (!REDIRECTS.has(answer.statusCode)) return outcome(answer.statusCode, answer.statusCode >= 200 && answer.statusCode < 300 ? null : `answered ${answer.statusCode}`);
    if (answer.location === undefined) return outcome(answer.statusCode, `answered ${answer.statusCode} without a Location`);
    try {
      target = new URL(answer.location, destination.url);
    } catch {
      return outcome(answer.statusCode, `answered ${answer.statusCode} with a Location that is not a URL`);
    }
  }
  return outcome(lastStatus, maxRedirects === 0 ? `answered ${lastStatus} (a redirect, not followed here)` : `redirected more than ${maxRedirects} times`);
}

/**
 * One request and its answer, reading at most `maxBodyBytes` of the body (kept only
 * with `keepBody`), through the outbound guard; `host` is `url`'s, checked by checkDestination.
 */
export function exchange(url: URL, host: string, { method, body, headers, keepBody = false, maxBodyBytes = RESPONSE_BODY_CAP_BYTES }: HopRequest, policy: OutboundPolicy, deadline: number): Promise<Hop> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: Error | undefined, hop?: Hop) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      if (error) reject(error);
      else resolve(hop!);
    };
    const client = url.protocol === 'https:' ? https : http;
    const request = client.request({
      protocol: url.protocol,
      hostname: host,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method,
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      // A connection of its own: none is shared with another tenant or kept for a later request.
      agent: false,
      lookup: guardedLookup(policy) as unknown as net.LookupFunction,
    });
    const timer = setTimeout(() => finish(new ExchangeTimeout()), Math.max(0, deadline - Date.now()));
    request.on('socket', (socket: net.Socket) => {
      // IP literals are never looked up, and an answer may change after the lookup: the peer decides.
      socket.once('connect', () => {
        const peer = socket.remoteAddress;
        if (peer === undefined || !isAllowedDestination(peer, policy)) finish(new ForbiddenDestination(host));
      });
    });
    request.on('error', (err) => finish(err));
    request.on('response', (response) => {
      const kept: Buffer[] = [];
      let read = 0;
      const hop = (complete: boolean): Hop => ({
        statusCode: response.statusCode ?? 0,
        location: response.headers.location,
        body: Buffer.concat(kept),
        complete,
      });
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (keepBody) kept.push(chunk);
        if (read > maxBodyBytes) finish(undefined, hop(false));
      });
      response.on('end', () => finish(undefined, hop(true)));
      response.on('error', (err) => finish(err));
    });
    request.end(body);
  });
}

const CONNECTION_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was closed while sending',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved just now',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ETIMEDOUT: 'the connection timed out',
  HPE_INVALID_CONSTANT: 'the answer is not HTTP',
};

/** A failure in our own words: codes only, never a message that could carry what the far side sent. */
export function describeFailure(err: unknown, timeoutMs: number, redirected: boolean): string {
  const prefix = redirected ? 'after a redirect, ' : '';
  if (err instanceof ExchangeTimeout) return `${prefix}no complete answer within ${timeoutMs} ms`;
  if (err instanceof ForbiddenDestination) return `${prefix}the host resolves to a loopback, private, link-local or otherwise internal address; not connected`;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_ERRORS[code]) return `${prefix}${CONNECTION_ERRORS[code]}`;
  if (typeof code === 'string' && /^(ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|ERR_SSL_)/.test(code)) return `${prefix}the TLS handshake failed (${code})`;
  if (typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code)) return `${prefix}the request failed (${code})`;
  return `${prefix}the request failed`;
}
