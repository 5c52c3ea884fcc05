/**
 * The baseline of bench/fanout.ts, in a process of its own: plain pooled nodemailer sending
 * `count` alert-sized messages straight to the sink, with the service's SMTP settings (the same
 * URL options SmtpTransport applies, the same pool size) and its concurrency model: up to
 * `window` sendMail calls outstanding at once (the worker's claim size), the pool queueing them
 * onto its connections. Each message is rendered with the service's own template and carries
 * the same headers, so both sides put the same bytes on the wire. No database, no ledger.
 *
 * The pool's connections are opened with TCP_NODELAY through nodemailer's `getSocket` hook (an
 * already connected socket, which is the only kind the pool takes from it). With nodemailer's
 * own sockets Nagle's algorithm stays on, and each message then waits about 40 ms for the
 * sink's delayed ACK: about 20 messages a second per connection, whatever the CPU. The
 * baseline is the library at its best on this machine, not that wait.
 *
 * Started with an IPC channel and these environment variables: FANOUT_SMTP_URL, FANOUT_COUNT,
 * FANOUT_PREFIX, FANOUT_WINDOW, FANOUT_FROM. It answers { type: 'ready' }, starts on
 * { type: 'go' }, and ends with { type: 'sent', ok, failed, firstError }.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import nodemailer from 'nodemailer';
import { parseConnectionUrl } from 'nodemailer/lib/shared/index.js';
import { renderNotification } from '../src/dispatch/templates.ts';

export type BaselineEvent = { type: 'ready' } | { type: 'sent'; ok: number; failed: number; firstError: string | null };

function setting(name: string): string {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`fanout-baseline: ${name} is not set (start me from bench/fanout.ts)\n`);
    process.exit(2);
  }
  return value;
}

if (!process.send) {
  process.stderr.write('fanout-baseline: start me with an IPC channel (from bench/fanout.ts)\n');
  process.exit(2);
}

const url = setting('FANOUT_SMTP_URL');
const count = Number(setting('FANOUT_COUNT'));
const prefix = setting('FANOUT_PREFIX');
const window = Number(setting('FANOUT_WINDOW'));
const from = setting('FANOUT_FROM');

/** nodemailer's getSocket: a connected socket with Nagle's algorithm off. */
function connectWithoutDelay(
  options: { host?: string; port?: number; connectionTimeout?: number },
  callback: (err: Error | null, socketOptions?: { connection: net.Socket }) => void,
): void {
  const socket = net.connect({ host: options.host ?? 'localhost', port: options.port ?? 25, noDelay: true, keepAlive: true });
  const timer = setTimeout(() => fail(new Error('connection timeout')), options.connectionTimeout ?? 10_000);
  function fail(err: Error) {
    clearTimeout(timer);
    socket.destroy();
    callback(err);
  }
  socket.once('error', fail);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.off('error', fail);
    callback(null, { connection: socket });
  });
}

const transporter = nodemailer.createTransport({ ...parseConnectionUrl(url), getSocket: connectWithoutDelay } as nodemailer.TransportOptions);
transporter.on('error', () => {});

/** What the worker's compose() produces for one subscriber, minus the database's part. */
const settings = { locale: 'en' as const, template: {} };
const mac = randomBytes(32).toString('base64url');
function message(n: number) {
  const email = `${prefix}${n}@example.com`;
  const id = `${String(n).padStart(10, '0')}${randomBytes(8).toString('hex').slice(0, 16)}`;
  const unsubscribeUrl = `http://localhost:3000/unsubscribe/sub_${id}.${mac}`;
  const content = renderNotification(
    {
      shop: 'fanout-bench.myshopify.com',
      productTitle: 'Fan-out Widget',
      variantTitle: 'Blue / M',
      productUrl: 'https://fanout-bench.myshopify.com/products/widget',
      imageUrl: 'https://cdn.example.com/widget.png',
      unsubscribeUrl,
      manageUrl: `http://localhost:3000/my/sub_${id}.${mac}`,
      email,
    },
    settings,
  );
  return {
    from,
    to: { name: '', address: email },
    subject: content.subject,
    text: content.text,
    html: content.html,
    headers: {
      'List-Unsubscribe': `<${unsubscribeUrl}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      'X-Restock-Alert': `ntf_${id}`,
    },
  };
}

async function run(): Promise<void> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | null = null;
  await new Promise<void>((resolve) => {
    let outstanding = 0;
    const issue = () => {
      while (outstanding < window && next < count) {
        const n = next++;
        outstanding++;
        transporter.sendMail(message(n)).then(
          (info) => {
            if (info.rejected.length > 0) {
              failed++;
              firstError ??= 'recipient refused';
            } else ok++;
          },
          (err: Error) => {
            failed++;
            firstError ??= err.message;
          },
        ).finally(() => {
          outstanding--;
          if (next < count) issue();
          else if (outstanding === 0) resolve();
        });
      }
    };
    if (count === 0) resolve();
    else issue();
  });
  transporter.close();
  process.send!({ type: 'sent', ok, failed, firstError } satisfies BaselineEvent);
}

process.on('message', (command: { type: string }) => {
  if (command.type === 'go') void run();
});
process.on('disconnect', () => process.exit(0));
process.send({ type: 'ready' } satisfies BaselineEvent);
