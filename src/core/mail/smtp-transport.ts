import net from 'node:net';
import nodemailer from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { parseSmtpUrl, type SmtpServer } from './smtp-url.ts';
import type { MailMessage, MailTransport } from './transport.ts';

/** The SMTP server did not take a mail: unreachable, too slow, or refused it. */
export class MailDeliveryError extends Error {
  /** The server's reply code when it answered with a refusal, e.g. 550. */
  readonly responseCode: number | undefined;
  /**
   * The server refused the recipient itself (a 5xx to RCPT TO): the one failure that says
   * something about the address. A refused login or sender is the sender's problem, and says
   * nothing about the shopper.
   */
  readonly recipientRefused: boolean;

  constructor(message: string, options: { cause?: unknown; responseCode?: number; recipientRefused?: boolean } = {}) {
    super(message, { cause: options.cause });
    this.name = 'MailDeliveryError';
    this.responseCode = options.responseCode;
    this.recipientRefused = options.recipientRefused ?? false;
  }
}

/** Sends through an SMTP server over a small pool of reused connections. */
export class SmtpTransport implements MailTransport {
  readonly kind = 'smtp' as const;
  private readonly transporter: nodemailer.Transporter;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    smtpUrl: string,
    private readonly from: string,
    options: { poolSize?: number } = {},
  ) {
    this.transporter = nodemailer.createTransport(poolOptions(parseSmtpUrl(smtpUrl), options.poolSize));
    // Failures reach the caller through sendMail's promise; an unhandled 'error' would end the process.
    this.transporter.on('error', () => {});
  }

  async send(message: MailMessage): Promise<void> {
    if (this.closed) throw new MailDeliveryError('the mail transport is closed');
    const sending = this.transporter.sendMail({
      from: message.from ?? this.from,
      // An address object, not a string: a string is parsed as a list, and one mail must reach one person.
      to: { name: '', address: message.to },
      subject: message.subject,
      text: message.text,
      ...(message.html !== undefined && { html: message.html }),
      headers: message.headers ?? {},
    });
    this.inFlight.add(sending);
    let info: { rejected: unknown[] };
    try {
      info = await sending;
    } catch (err) {
      const { responseCode, command } = err as { responseCode?: unknown; command?: unknown };
      const code = typeof responseCode === 'number' ? responseCode : undefined;
      throw new MailDeliveryError(`SMTP server did not take the mail: ${(err as Error).message}`, {
        cause: err,
        ...(code !== undefined && { responseCode: code }),
        recipientRefused: command === 'RCPT TO' && code !== undefined && code >= 500 && code < 600,
      });
    } finally {
      this.inFlight.delete(sending);
    }
    if (info.rejected.length > 0) throw new MailDeliveryError('SMTP server refused the recipient');
  }

  /** Lets mails already handed over finish, then closes the pooled connections. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.transporter.close();
  }
}

/**
 * The library leaves Nagle's algorithm on, so each SMTP command of a pipelined conversation
 * waits for the peer's delayed ACK (~40 ms): about 20 messages a second per connection. For a
 * plain connection (STARTTLS still upgrades it) the pool is handed a socket already connected
 * with no delay; implicit TLS (smtps) keeps the library's own socket.
 */
function socketWithoutDelay(
  options: { host?: string; port?: number; connectionTimeout?: number },
  callback: (err: null, socketOptions?: { connection: net.Socket }) => void,
): void {
  const socket = net.connect({ host: options.host ?? 'localhost', port: options.port ?? 25, noDelay: true });
  const timer = setTimeout(() => socket.destroy(new Error('SMTP connection timed out')), options.connectionTimeout ?? 10_000);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.removeAllListeners('error');
    callback(null, { connection: socket });
  });
  // The pool does not hand a failure here on to the mails waiting for it; the library's own
  // connection attempt fails the same way through its usual path, which does.
  socket.once('error', () => {
    clearTimeout(timer);
    callback(null);
  });
}

/** Every option spelled out from typed values: nothing of the URL reaches the library as text. */
function poolOptions(server: SmtpServer, poolSize: number | undefined): SMTPPool.Options {
  return {
    pool: true,
    ...(poolSize !== undefined && { maxConnections: poolSize }),
    host: server.host,
    port: server.port,
    secure: server.secure,
    ...(server.auth && { auth: { user: server.auth.user, pass: server.auth.pass } }),
    ...(server.clientName !== undefined && { name: server.clientName }),
    connectionTimeout: server.connectionTimeoutMs,
    greetingTimeout: server.greetingTimeoutMs,
    socketTimeout: server.socketTimeoutMs,
    ...(!server.secure && { getSocket: socketWithoutDelay as SMTPPool.Options['getSocket'] }),
  };
}
