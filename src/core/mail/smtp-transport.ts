import net from 'node:net';
import type nodemailer from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { lazyPackage } from '../lazy-package.ts';
import { connectGuarded, ForbiddenDestination, type OutboundPolicy } from '../net/outbound-guard.ts';
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

export interface SmtpTransportOptions {
  poolSize?: number;
  /**
   * Set for a server a tenant named (a store's own): the URL may carry no options at all, and
   * every connection is checked against this policy (no loopback, private or metadata address).
   */
  tenant?: OutboundPolicy;
  /**
   * The operator's private CA(s), PEM (SMTP_CA_FILE): the server's certificate must chain to
   * them instead of the system's authorities. A connection that is not TLS is then refused, as
   * whoever names a CA expects: the library would otherwise send the login in clear text to a
   * server (or a man in the middle) that does not offer STARTTLS.
   */
  ca?: string;
}

const mailLibrary = lazyPackage<typeof nodemailer>('nodemailer');

/** Sends through an SMTP server over a small pool of reused connections. */
export class SmtpTransport implements MailTransport {
  readonly kind = 'smtp' as const;
  private readonly transporter: nodemailer.Transporter;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    smtpUrl: string,
    private readonly from: string,
    options: SmtpTransportOptions = {},
  ) {
    const server = parseSmtpUrl(smtpUrl, { options: options.tenant ? 'none' : 'operator' });
    this.transporter = mailLibrary().createTransport(poolOptions(server, options));
    // Failures reach the caller through sendMail's promise; an unhandled 'error' would end the process.
    this.transporter.on('error', () => {});
  }

  async send(message: MailMessage): Promise<void> {
    if (this.closed) throw new MailDeliveryError('the mail transport is closed');
    // Both parts: a multipart/alternative, whose parts may carry their encoding (bodyPart). A
    // single part is the message itself, where the library places the header elsewhere.
    const alternative = message.text !== '' && message.html !== undefined && message.html !== '';
    const sending = this.transporter.sendMail({
      from: message.from ?? this.from,
      // An address object, not a string: a string is parsed as a list, and one mail must reach one person.
      to: { name: '', address: message.to },
      subject: message.subject,
      text: alternative ? bodyPart(message.text) : message.text,
      ...(message.html !== undefined && { html: alternative ? bodyPart(message.html) : message.html }),
      headers: message.headers ?? {},
    });
    this.inFlight.add(sending);
    let info: { rejected: unknown[] };
    try {
      info = await sending;
    } catch (err) {
      const { responseCode, command } = err as { responseCode?: unknown; command?: unknown };
      const code = typeof responseCode === 'number' ? responseCode : undefined;
      throw new MailDeliveryError(`SMTP server did not take the mail: ${summarise(err, code)}`, {
        cause: err,
        ...(code !== undefined && { responseCode: code }),
        recipientRefused: command === 'RCPT TO' && code !== undefined && code >= 500 && code < 600 && !refusedByPolicy(err),
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

/** Text the library sends as it is (7bit): no control or non-ASCII character, no line over 76. */
const NOT_PLAIN = /[\x00-\x08\x0b\x0c\x0e-\x1f\u0080-\uffff]/;
const LONG_LINE = /^.{77,}/m;

/**
 * A part of a multipart/alternative message with its transfer encoding chosen here, by the
 * library's own rule: as it is when plain, else quoted-printable when it holds fewer non-ASCII
 * (and control) characters than ASCII letters, else base64. The library decides the same by
 * collecting every letter of the part into an array, twice per part; at thousands of alerts a
 * second that was a tenth of the CPU of a fan-out and most of its garbage. Counting in place
 * gives the same encoding, so the same bytes on the wire.
 */
function bodyPart(content: string): string | { content: string; contentTransferEncoding: 'quoted-printable' | 'base64' } {
  // The library's own checks for 7bit, which it makes anyway when it reads the content.
  if (!NOT_PLAIN.test(content) && content.length <= 128 * 1024 && !LONG_LINE.test(content)) return content;
  let letters = 0;
  let others = 0;
  for (let i = 0; i < content.length; i++) {
    const c = content.charCodeAt(i);
    if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) letters++;
    else if (c <= 0x08 || c === 0x0b || c === 0x0c || (c >= 0x0e && c <= 0x1f) || c >= 0x80) others++;
  }
  return { content, contentTransferEncoding: others < letters ? 'quoted-printable' : 'base64' };
}

/**
 * A 5xx to RCPT TO whose enhanced status code is of class 7 (security or policy, RFC 3463) is about
 * the sender: Postfix refuses each recipient with `554 5.7.1 … Client host rejected` to a client
 * that did not log in where a login is required, and `5.7.1 Relay access denied` where the
 * sender may not relay. Neither says anything of the shopper's address, which must not be
 * suppressed for it.
 */
function refusedByPolicy(err: unknown): boolean {
  const { response } = err as { response?: unknown };
  return typeof response === 'string' && /^5\d\d[ -]5\.7\.\d{1,3}\b/.test(response);
}

function refusedStep(err: unknown): string {
  const { code, command } = err as { code?: unknown; command?: unknown };
  if (command === 'RCPT TO') return refusedByPolicy(err) ? 'the recipient for a policy or login reason' : 'the recipient';
  if (command === 'MAIL FROM') return 'the sender';
  if (code === 'EAUTH') return 'the login';
  if (code === 'ETLS') return 'to start TLS';
  return 'the message';
}

/** The library reports a certificate it could not verify as a socket error (ESOCKET), by Node's message. */
function tlsRefused(err: unknown): boolean {
  const { code, message } = err as { code?: unknown; message?: unknown };
  return code === 'ESOCKET' && typeof message === 'string' && /certificate|self[- ]signed|\bSSL\b|\bTLS\b/i.test(message);
}

/**
 * What went wrong, in our words: what a remote server answered, or which of our internal ports
 * refused a connection, is never repeated to whoever reads the outcome (a store's own server is
 * the store's choice, and its banner or error text would turn the setting into a port scanner).
 * The library's error stays as the `cause`, for the service's own logs.
 */
function summarise(err: unknown, responseCode: number | undefined): string {
  if (err instanceof ForbiddenDestination) return 'the mail server is on an internal network address, which is refused';
  const { code, command } = err as { code?: unknown; command?: unknown };
  if (responseCode !== undefined) {
    return `the mail server refused ${refusedStep(err)} (reply code ${responseCode})`;
  }
  if (code === 'EAUTH') return 'the mail server refused the login';
  if (code === 'ETIMEDOUT') return 'the mail server did not answer in time';
  if (code === 'ETLS' || tlsRefused(err)) return 'the secure (TLS) connection to the mail server failed';
  if (code === 'EDNS') return 'the mail server host name could not be resolved';
  if (code === 'ECONNECTION' || code === 'ESOCKET') return 'the mail server could not be reached';
  if (code === 'EPROTOCOL') return 'the mail server does not speak SMTP as expected';
  return 'the connection to the mail server failed';
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

/**
 * A tenant's server: every connection, implicit TLS included (the library upgrades the socket
 * it is handed), goes through the outbound guard. The socket is handed over while it connects,
 * so a refusal or a connection error reaches the library through the socket itself and fails the
 * mails waiting for it (an error given to the pool's callback instead is not passed on to them),
 * and the library never connects by itself.
 */
function guardedSocket(policy: OutboundPolicy) {
  return (options: { host?: string; port?: number }, callback: (err: null, socketOptions: { connection: net.Socket }) => void): void => {
    callback(null, { connection: connectGuarded(options.host ?? '', options.port ?? 25, policy, { noDelay: true }) });
  };
}

/** Every option spelled out from typed values: nothing of the URL reaches the library as text. */
function poolOptions(server: SmtpServer, options: SmtpTransportOptions): SMTPPool.Options {
  const { poolSize, tenant, ca } = options;
  const getSocket = tenant ? guardedSocket(tenant) : !server.secure ? socketWithoutDelay : undefined;
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
    ...(getSocket && { getSocket: getSocket as SMTPPool.Options['getSocket'] }),
    ...(ca !== undefined && { tls: { ca }, requireTLS: true }),
  };
}
