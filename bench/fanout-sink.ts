/**
 * The SMTP sink of bench/fanout.ts, in a process of its own: a real SMTP server (smtp-server) on
 * 127.0.0.1 that drains each message and counts it, and nothing more. It talks to the bench over
 * the IPC channel (it must be started with one) and exits when that channel closes.
 *
 * From the bench:
 *   { type: 'expect', phase, prefix, count }  start counting a phase: `count` messages, each to
 *                                             one address `<prefix><n>@...` with 0 <= n < count
 *   { type: 'capture', address }              send back the raw text of the next message to it
 *   { type: 'report' }                        answer with the phase's figures now
 * To the bench:
 *   { type: 'ready', port }
 *   { type: 'progress', phase, received, at } every 250 ms while messages arrive
 *   { type: 'complete' | 'report', ...PhaseStats } when the phase's count is reached / asked
 *                                             (with the messages per EHLO name, so runs with
 *                                             several sending processes can tell their shares)
 *   { type: 'captured', address, raw }
 *
 * Times are milliseconds on the wall clock (performance.timeOrigin + performance.now()), so the
 * bench can compare them with its own.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface PhaseStats {
  phase: string;
  /** Messages whose DATA was fully received. */
  received: number;
  /** Of those, messages to one expected address each (`<prefix><n>@`, n below the count). */
  expected: number;
  /** Distinct expected addresses that got a message. */
  distinct: number;
  /** Messages to an expected address that had already got one. */
  duplicates: number;
  /** Messages with no or several recipients, or to an address outside the phase's set. */
  unexpected: number;
  firstAt: number | null;
  lastAt: number | null;
  /** Arrivals per 100 ms since the first one (the run's shape: ramp-up, stalls). */
  buckets: number[];
  /** The first unexpected address, for the report. */
  firstUnexpected: string | null;
  /** Messages per EHLO name of the connection they came on: which sending process sent how many. */
  byClient?: Record<string, number>;
}

export type SinkCommand =
  | { type: 'expect'; phase: string; prefix: string; count: number }
  | { type: 'capture'; address: string }
  | { type: 'report' };

export type SinkEvent =
  | { type: 'ready'; port: number }
  | { type: 'progress'; phase: string; received: number; at: number }
  | ({ type: 'complete' | 'report' } & PhaseStats)
  | { type: 'captured'; address: string; raw: string };

const BUCKET_MS = 100;
const now = () => performance.timeOrigin + performance.now();

function send(event: SinkEvent): void {
  process.send?.(event);
}

if (!process.send) {
  process.stderr.write('fanout-sink: start me with an IPC channel (from bench/fanout.ts)\n');
  process.exit(2);
}

let phase = 'idle';
let prefix = '\u0000';
let count = 0;
let seen = new Uint8Array(0);
let stats: PhaseStats = fresh('idle');
let completeSent = false;
const captures = new Set<string>();

function fresh(name: string): PhaseStats {
  return { phase: name, received: 0, expected: 0, distinct: 0, duplicates: 0, unexpected: 0, firstAt: null, lastAt: null, buckets: [], firstUnexpected: null, byClient: {} };
}

function unexpected(address: string): void {
  stats.unexpected++;
  stats.firstUnexpected ??= address;
}

/** Counts one received message; the only per-message work besides draining its stream. */
function count1(recipients: string[], at: number, client: string): void {
  stats.received++;
  const byClient = (stats.byClient ??= {});
  byClient[client] = (byClient[client] ?? 0) + 1;
  stats.firstAt ??= at;
  stats.lastAt = at;
  const bucket = Math.floor((at - stats.firstAt) / BUCKET_MS);
  while (stats.buckets.length <= bucket) stats.buckets.push(0);
  stats.buckets[bucket]!++;
  const address = recipients[0] ?? '';
  if (recipients.length !== 1) return unexpected(recipients.join(','));
  if (!address.startsWith(prefix)) return unexpected(address);
  const at_ = address.indexOf('@', prefix.length);
  const n = Number(address.slice(prefix.length, at_));
  if (at_ < 0 || !Number.isInteger(n) || n < 0 || n >= count) return unexpected(address);
  stats.expected++;
  if (seen[n]) stats.duplicates++;
  else {
    seen[n] = 1;
    stats.distinct++;
  }
  if (!completeSent && stats.received >= count) {
    completeSent = true;
    send({ type: 'complete', ...stats });
  }
}

const server = new SMTPServer({
  disabledCommands: ['STARTTLS', 'AUTH'],
  authOptional: true,
  logger: false,
  // No DNS lookup of 127.0.0.1 for each of the pool's connections (nodemailer opens a new one
  // every 100 messages).
  disableReverseLookup: true,
  closeTimeout: 100,
  onData(stream, session, callback) {
    const recipients = session.envelope.rcptTo.map((r) => r.address);
    const capture = recipients.length === 1 && captures.has(recipients[0]!);
    const chunks: Buffer[] = [];
    if (capture) stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    else stream.resume();
    stream.on('end', () => {
      if (capture) {
        captures.delete(recipients[0]!);
        send({ type: 'captured', address: recipients[0]!, raw: Buffer.concat(chunks).toString('utf8') });
      }
      count1(recipients, now(), session.hostNameAppearsAs ?? '');
      callback();
    });
  },
});
server.on('error', () => {});

process.on('message', (command: SinkCommand) => {
  switch (command.type) {
    case 'expect':
      phase = command.phase;
      prefix = command.prefix;
      count = command.count;
      seen = new Uint8Array(command.count);
      stats = fresh(command.phase);
      completeSent = false;
      return;
    case 'capture':
      captures.add(command.address);
      return;
    case 'report':
      send({ type: 'report', ...stats });
      return;
  }
});
process.on('disconnect', () => process.exit(0));

let lastReported = -1;
setInterval(() => {
  if (stats.received === lastReported) return;
  lastReported = stats.received;
  send({ type: 'progress', phase, received: stats.received, at: now() });
}, 250).unref();

server.listen(0, '127.0.0.1', () => {
  send({ type: 'ready', port: (server.server.address() as AddressInfo).port });
});
