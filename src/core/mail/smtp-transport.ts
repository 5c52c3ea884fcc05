import net from 'node:net';
import nodemailer from 'nodemailer';
import { parseConnectionUrl } from 'nodemailer/lib/shared/index.js';
import type { MailMessage, MailTransport } from './transport.ts';

/**
 * Applied unless the SMTP URL's query sets them (`smtp://host:587?connectionTimeout=5000`). The
 * library's own waits run to minutes; a request waiting on mail should fail in seconds instead.
 */
const URL_DEFAULTS: Record<string, string> = {
  pool: 'true',
  connectionTimeout: '10000',
  greetingTimeout: '10000',
  socketTimeout: '30000',
};

/** The SMTP server did not take a mail: unreachable, too slow, or refused it. */
export class MailDeliveryError extends Error {
  /** The server's reply code when it answered with a refusal, e.g. 550. */
  readonly responseCode: number | undefined;

  constructor(message: string, options: { cause?: unknown; responseCode?: number } = {}) {
    super(message, { cause: options.cause });
    this.name = 'MailDeliveryError';
    this.responseCode = options.responseCode;
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
    const settings = parseConnectionUrl(withDefaults(smtpUrl, options.poolSize));
    this.transporter = nodemailer.createTransport({ ...settings, ...(!settings.secure && { getSocket: socketWithoutDelay }) } as nodemailer.TransportOptions);
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
      const responseCode = (err as { responseCode?: unknown }).responseCode;
      throw new MailDeliveryError(`SMTP server did not take the mail: ${(err as Error).message}`, {
        cause: err,
        ...(typeof responseCode === 'number' && { responseCode }),
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

function withDefaults(smtpUrl: string, poolSize: number | undefined): string {
  let url: URL;
  try {
    url = new URL(smtpUrl);
  } catch {
    // Not the parser's message: it would carry the URL, password included, into logs.
    throw new Error('SMTP_URL is not a valid URL');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new Error(`SMTP_URL must start with smtp:// or smtps://, not ${url.protocol}//`);
  }
  const defaults = poolSize === undefined ? URL_DEFAULTS : { ...URL_DEFAULTS, maxConnections: String(poolSize) };
  for (const [key, value] of Object.entries(defaults)) {
    if (!url.searchParams.has(key)) url.searchParams.set(key, value);
  }
  return url.toString();
}
