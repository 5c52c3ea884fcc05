/**
 * The operator's connection URLs (REDIS_URL, DATABASE_URL) turned into the few typed values the
 * clients need. Both client libraries read a URL's query string as their own options (ioredis
 * any of its options, node-postgres `sslcert`/`sslkey` file paths among them), so no URL is handed
 * to them: what these parsers give back is, and an option they do not know is refused at start-up.
 */

/** Why a URL was refused; the message never repeats the URL, which may carry a password. */
export class ServiceUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServiceUrlError';
  }
}

export interface RedisServer {
  host: string;
  port: number;
  username: string | undefined;
  password: string | undefined;
  db: number;
  /** `rediss://`: TLS with the system's certificate authorities. */
  tls: boolean;
}

export function parseRedisUrl(text: string): RedisServer {
  const url = parse(text, 'REDIS_URL', ['redis:', 'rediss:']);
  if (url.search !== '') throw new ServiceUrlError('REDIS_URL takes no options (nothing after ?): only host, port, user, password and /db');
  const db = url.pathname === '' || url.pathname === '/' ? '0' : url.pathname.slice(1);
  if (!/^\d{1,2}$/.test(db)) throw new ServiceUrlError('REDIS_URL: the path must be a database number such as /0');
  const { username, password } = credentials(url, 'REDIS_URL');
  return { host: hostOf(url, 'REDIS_URL'), port: url.port === '' ? 6379 : Number(url.port), username, password, db: Number(db), tls: url.protocol === 'rediss:' };
}

/** A parsed REDIS_URL as ioredis's connection options, nothing else taken from the URL. */
export function redisConnectionOptions(server: RedisServer) {
  return {
    host: server.host,
    port: server.port,
    ...(server.username !== undefined && { username: server.username }),
    ...(server.password !== undefined && { password: server.password }),
    db: server.db,
    ...(server.tls && { tls: { servername: server.host } }),
  };
}

export interface PostgresServer {
  host: string;
  port: number;
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
  /** `sslmode`: `disable` (the default) sends in clear; `require` encrypts without checking the certificate; `verify-full` checks it. */
  ssl: 'disable' | 'require' | 'verify-full';
  applicationName: string | undefined;
}

const SSL_MODES = new Set(['disable', 'require', 'verify-full']);

export function parsePostgresUrl(text: string): PostgresServer {
  const url = parse(text, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  let ssl: PostgresServer['ssl'] = 'disable';
  let applicationName: string | undefined;
  for (const [key, value] of url.searchParams) {
    if (key === 'sslmode' && SSL_MODES.has(value)) ssl = value as PostgresServer['ssl'];
    else if (key === 'application_name' && /^[\w .-]{1,63}$/.test(value)) applicationName = value;
    else throw new ServiceUrlError(`DATABASE_URL option "${key.slice(0, 40)}" is not supported; only sslmode (disable, require, verify-full) and application_name are`);
  }
  const database = url.pathname.length > 1 ? decode(url.pathname.slice(1), 'DATABASE_URL') : undefined;
  const { username, password } = credentials(url, 'DATABASE_URL');
  return { host: hostOf(url, 'DATABASE_URL'), port: url.port === '' ? 5432 : Number(url.port), user: username, password, database, ssl, applicationName };
}

function parse(text: string, name: string, protocols: string[]): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ServiceUrlError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(url.protocol)) throw new ServiceUrlError(`${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  if (url.hash !== '') throw new ServiceUrlError(`${name} has a fragment`);
  return url;
}

function hostOf(url: URL, name: string): string {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') throw new ServiceUrlError(`${name} names no host`);
  return host;
}

function credentials(url: URL, name: string): { username: string | undefined; password: string | undefined } {
  return {
    username: url.username === '' ? undefined : decode(url.username, name),
    password: url.password === '' ? undefined : decode(url.password, name),
  };
}

function decode(text: string, name: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ServiceUrlError(`${name} has badly escaped characters`);
  }
}

/** A parsed DATABASE_URL as node-postgres's connection options, nothing else taken from the URL. */
export function postgresConnectionOptions(server: PostgresServer) {
  return {
    host: server.host,
    port: server.port,
    ...(server.user !== undefined && { user: server.user }),
    ...(server.password !== undefined && { password: server.password }),
    ...(server.database !== undefined && { database: server.database }),
    ...(server.applicationName !== undefined && { application_name: server.applicationName }),
    ...(server.ssl !== 'disable' && { ssl: { rejectUnauthorized: server.ssl === 'verify-full' } }),
  };
}
