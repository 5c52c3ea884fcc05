/**
 * The web push side of bench/fanout.ts --mixed, in a process of its own: a lean push service on
 * 127.0.0.1 that answers 201 Created with a `Location` (RFC 8030 §5) to every POST of a well-formed
 * message to `/wpush/v2/<prefix><n>`, and counts it per phase (bench/fanout-counter.ts).
 *
 * Well formed, checked cheaply on every message: `Authorization: vapid t=<JWT>, k=<key>`
 * (RFC 8292), a `TTL`, `Content-Encoding: aes128gcm` and a body of at most 4096 bytes; anything
 * else is answered 400 and counted as unexpected. It does not verify the JWT nor decrypt, as
 * test/fixtures/push-service.ts does, except for one sample per phase: the bench hands over the
 * browser keys of one subscriber, and that subscriber's message is decrypted (RFC 8291, with the
 * fixture's `decryptAes128gcm`) and its plaintext reported, so the bench can check that what the
 * service encrypted is what a browser would read.
 *
 * Started with an IPC channel. From the bench: { type: 'expect', ..., sample? } and
 * { type: 'report' }. To the bench: { type: 'ready', origin }, the counter's events, and
 * { type: 'sample', plaintext | error }. Exits when the channel closes.
 */
import { createECDH, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decryptAes128gcm, MAX_BODY_BYTES } from '../test/fixtures/push-service.ts';
import { PhaseCounter, PUSH_PATH, now, type CounterCommand, type CounterEvent } from './fanout-counter.ts';

/** One subscriber's browser keys (base64url), whose message the sink decrypts. */
export interface PushSample {
  endpoint: string;
  privateKey: string;
  publicKey: string;
  auth: string;
}

export type PushSinkCommand = (CounterCommand & { sample?: PushSample }) | { type: 'report' };
export type PushSinkEvent =
  | { type: 'ready'; origin: string }
  | CounterEvent
  | { type: 'sample'; endpoint: string; plaintext?: string; error?: string };

if (!process.send) {
  process.stderr.write('fanout-push-sink: start me with an IPC channel (from bench/fanout.ts)\n');
  process.exit(2);
}

const send = (event: PushSinkEvent) => void process.send?.(event);
const counter = new PhaseCounter(send);
let sample: PushSample | undefined;
let origin = '';

function wellFormed(request: http.IncomingMessage, size: number): boolean {
  return (
    request.method === 'POST' &&
    /^vapid t=[\w-]+\.[\w-]+\.[\w-]+, k=[\w-]{87}$/.test(request.headers.authorization ?? '') &&
    /^\d+$/.test(String(request.headers.ttl ?? '')) &&
    request.headers['content-encoding'] === 'aes128gcm' &&
    size > 0 &&
    size <= MAX_BODY_BYTES
  );
}

function decryptSample(body: Buffer, keys: PushSample): void {
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(Buffer.from(keys.privateKey, 'base64url'));
    const plaintext = decryptAes128gcm(body, { ecdh, publicKey: Buffer.from(keys.publicKey, 'base64url'), auth: Buffer.from(keys.auth, 'base64url') }).toString('utf8');
    send({ type: 'sample', endpoint: keys.endpoint, plaintext });
  } catch (err) {
    send({ type: 'sample', endpoint: keys.endpoint, error: (err as Error).message });
  }
}

const server = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  let size = 0;
  request.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES + 1) chunks.push(chunk);
  });
  request.on('end', () => {
    const path = (request.url ?? '').split('?')[0]!;
    const address = path.startsWith(PUSH_PATH) ? path.slice(PUSH_PATH.length) : path;
    if (!wellFormed(request, size)) {
      counter.record(`malformed:${address}`, now());
      response.writeHead(400, { 'content-type': 'application/json' }).end('{"code":400,"errno":999,"error":"Bad Request"}');
      return;
    }
    counter.record(address, now());
    if (sample && `${origin}${path}` === sample.endpoint) {
      const keys = sample;
      sample = undefined;
      decryptSample(Buffer.concat(chunks), keys);
    }
    response.writeHead(201, { location: `${origin}/m/${randomBytes(12).toString('base64url')}`, ttl: String(request.headers.ttl) }).end();
  });
});
server.on('error', () => {});

process.on('message', (command: PushSinkCommand) => {
  if (command.type === 'expect') sample = (command as { sample?: PushSample }).sample;
  counter.command(command);
});
process.on('disconnect', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
});

server.listen(0, '127.0.0.1', () => {
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  send({ type: 'ready', origin });
});
