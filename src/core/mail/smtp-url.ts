/**
 * An SMTP URL turned into the few typed values the transport needs. The mail library reads any
 * query key as one of its own options (`sendmail=true&path=/bin/sh` makes it run a program), so
 * a URL is never handed to it: only what this parser gives back is.
 */
export interface SmtpServer {
  /** Implicit TLS (smtps://); plain smtp:// still upgrades with STARTTLS when the server offers it. */
  secure: boolean;
  host: string;
  port: number;
  auth: { user: string; pass: string } | undefined;
  /** The name we greet the server with (EHLO); the library's default (this machine's) when undefined. */
  clientName: string | undefined;
  connectionTimeoutMs: number;
  greetingTimeoutMs: number;
  socketTimeoutMs: number;
}

/** The query keys an SMTP URL may carry besides `name`, each a whole number of milliseconds. */
const TIMEOUT_KEYS = {
  connectionTimeout: 'connectionTimeoutMs',
  greetingTimeout: 'greetingTimeoutMs',
  socketTimeout: 'socketTimeoutMs',
} as const;

/** The library's own waits run to minutes; a request waiting on mail should fail in seconds. */
const DEFAULT_TIMEOUTS = { connectionTimeoutMs: 10_000, greetingTimeoutMs: 10_000, socketTimeoutMs: 30_000 };
const MAX_TIMEOUT_MS = 600_000;

/** Why a URL was refused; the message never repeats the URL, which may carry a password. */
export class SmtpUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SmtpUrlError';
  }
}

/**
 * `operator`: the service's own SMTP_URL, which may carry `name` and the timeouts.
 * `none`: a server a tenant named (a store's own): host, port, security and credentials only.
 */
export type SmtpUrlOptions = 'operator' | 'none';

export function parseSmtpUrl(text: string, accept: { options: SmtpUrlOptions } = { options: 'operator' }): SmtpServer {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new SmtpUrlError('the SMTP URL is not a valid URL');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw new SmtpUrlError(`the SMTP URL must start with smtp:// or smtps://, not ${url.protocol}//`);
  }
  const secure = url.protocol === 'smtps:';
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new SmtpUrlError('the SMTP URL names no host');
  if (url.pathname !== '' && url.pathname !== '/') throw new SmtpUrlError('the SMTP URL has a path; only host, port, credentials and timeouts are read');
  if (url.hash !== '') throw new SmtpUrlError('the SMTP URL has a fragment');

  const timeouts = { ...DEFAULT_TIMEOUTS };
  let clientName: string | undefined;
  if (accept.options === 'none' && url.search !== '') {
    throw new SmtpUrlError("a store's SMTP URL takes no options (nothing after ?): only host, port, smtp:// or smtps://, user and password");
  }
  for (const [key, value] of url.searchParams) {
    if (key === 'name') clientName = parseClientName(value);
    else if (Object.hasOwn(TIMEOUT_KEYS, key)) timeouts[TIMEOUT_KEYS[key as keyof typeof TIMEOUT_KEYS]] = parseTimeout(key, value);
    else throw new SmtpUrlError(`the SMTP URL option "${key.slice(0, 40)}" is not supported; only name, ${Object.keys(TIMEOUT_KEYS).join(', ')} are`);
  }

  return {
    secure,
    host,
    port: url.port === '' ? (secure ? 465 : 587) : Number(url.port),
    auth: credentials(url),
    clientName,
    ...timeouts,
  };
}

function parseTimeout(key: string, value: string): number {
  if (!/^\d{1,7}$/.test(value) || Number(value) < 1 || Number(value) > MAX_TIMEOUT_MS) {
    throw new SmtpUrlError(`the SMTP URL option ${key} must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`);
  }
  return Number(value);
}

function parseClientName(value: string): string {
  if (!/^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(value)) throw new SmtpUrlError('the SMTP URL option name must be a host name');
  return value;
}

function credentials(url: URL): SmtpServer['auth'] {
  if (url.username === '' && url.password === '') return undefined;
  try {
    return { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) };
  } catch {
    throw new SmtpUrlError('the SMTP URL has badly escaped credentials');
  }
}
