import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { ConfigError, type Config, type HttpTimeouts } from './config.ts';
import { Database } from './core/db/database.ts';

export interface RunningServer {
  app: FastifyInstance;
  database: Database;
  url: string;
  /** The mTLS listener's address (its real port, when TLS_PORT=0), when TLS_PORT is set. */
  tlsUrl?: string;
  /** Stops taking connections on every listener, lets in-flight requests finish (up to the timeout), then closes storage. */
  stop(): Promise<void>;
}

/** Opens storage, applies pending migrations, starts listening and (unless RUN_WORKER=false) the dispatch worker. */
export async function startServer(config: Config): Promise<RunningServer> {
  const database = Database.open(config.database);
  let app: FastifyInstance | undefined;
  let tls: TlsListener | undefined;
  try {
    await database.migrate();
    // Bound before the app is built, because the metadata advertises its port and TLS_PORT=0
    // only learns it here.
    if (config.tls) tls = await openTlsListener(config.tls, config.host, config.http);
    app = await buildApp(config, database, { mtlsBaseUrl: tls && mtlsOrigin(config.baseUrl, tls.port) });
    // Before the mTLS listener copies the plain one's settings (join).
    applyTimeouts(app.server, config.http);
    // Before the mTLS listener's hooks, so that it lingers too before it closes.
    const linger = lingerBeforeClosing(app, tls, Math.min(LINGER_MS, config.shutdownTimeoutMs));
    tls?.join(app);
    const url = await app.listen({ port: config.port, host: config.host });
    tls?.serve(app);
    // Embedded mode sends alerts from this process; scaled out, `restock worker` processes do.
    if (config.runWorker) app.restock.worker.start();
    const running = app;
    let stopping: Promise<void> | undefined;
    const stop = () => (stopping ??= shutdown(running, tls, database, config.shutdownTimeoutMs, linger));
    return { app, database, url, tlsUrl: tls?.url, stop };
  } catch (err) {
    // Nothing was served yet: what reached the mTLS listener is cut, not drained.
    const tlsClosed = tls?.close();
    tls?.cut();
    await app?.close().catch(() => {});
    await tlsClosed;
    await database.close().catch(() => {});
    throw err;
  }
}

async function shutdown(app: FastifyInstance, tls: TlsListener | undefined, database: Database, timeoutMs: number, linger: Linger): Promise<void> {
  const force = setTimeout(() => {
    app.log.warn({ timeoutMs }, 'shutdown timeout reached; closing remaining connections');
    app.server.closeAllConnections();
    tls?.cut();
  }, timeoutMs);
  linger.begin();
  try {
    // Also drains the mTLS listener (see join), before the app's own resources close.
    await app.close();
  } finally {
    clearTimeout(force);
    linger.end();
    await database.close();
  }
}

/**
 * After SIGTERM, how long connections stay open before the idle ones are closed. A keep-alive
 * client about to send its next request is answered (503, and the connection closed) instead of
 * having the connection shut under it, which it cannot tell from a request lost on the way.
 */
const LINGER_MS = 1000;

interface Linger {
  /** The next close of the app is a shutdown: linger, then sweep idle connections. */
  begin(): void;
  end(): void;
}

/**
 * Once closing, the app answers every new request 503 with `Connection: close` (installErrorHandling),
 * so connections end as they are answered. Lingering first lets requests already sent on idle
 * keep-alive connections arrive and get that answer; the sweep then shuts what stays idle,
 * including connections whose answer bypassed the hooks (a hijacked reply).
 */
function lingerBeforeClosing(app: FastifyInstance, tls: TlsListener | undefined, lingerMs: number): Linger {
  let shuttingDown = false;
  let sweep: NodeJS.Timeout | undefined;
  let wait: NodeJS.Timeout | undefined;
  // Runs after the error handling's preClose hook, which turns new requests away.
  app.addHook('preClose', async () => {
    if (!shuttingDown) return;
    // Stop accepting connections but keep the open ones: http.Server's own close() would also
    // shut the idle ones at once. Fastify's close() of the server afterwards still waits for
    // every connection to end.
    for (const server of [app.server, tls?.server]) if (server?.listening) net.Server.prototype.close.call(server);
    await new Promise<void>((resolve) => (wait = setTimeout(resolve, lingerMs)));
    sweep = setInterval(() => {
      app.server.closeIdleConnections();
      tls?.server.closeIdleConnections();
    }, 50);
  });
  return {
    begin: () => void (shuttingDown = true),
    end() {
      clearTimeout(wait);
      clearInterval(sweep);
    },
  };
}

interface TlsListener {
  server: https.Server;
  port: number;
  url: string;
  /** Takes the plain listener's HTTP settings and error handling, and closes along with the app. */
  join(app: FastifyInstance): void;
  /** Hands requests to the app, which must be ready; those that arrived while it was being built go first. */
  serve(app: FastifyInstance): void;
  /** Cuts every connection, including those still in their TLS handshake. */
  cut(): void;
  close(): Promise<void>;
}

/**
 * How long the listener waits on a client: for its headers and its whole request (408 after, so
 * a client that trickles bytes cannot hold a connection), for anything at all on the connection,
 * and for the next request on a kept-alive one. Fastify sets the request timeout to 0 (none) and
 * Node waits on a silent connection for ever.
 */
function applyTimeouts(server: Server, timeouts: HttpTimeouts): void {
  server.headersTimeout = timeouts.headersTimeoutMs;
  server.requestTimeout = timeouts.requestTimeoutMs;
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs;
  server.setTimeout(timeouts.connectionTimeoutMs);
  // Read when the server starts listening: set before it does, it replaces Node's 30 s.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = checkingIntervalMs(timeouts);
}

/**
 * Node looks for requests past their headers or request timeout on a timer, every 30 s by
 * default, so a stalled request could outlive its bound by as much: look often enough that a
 * bound is overrun by a quarter of it at most, and at least once a second.
 */
function checkingIntervalMs(timeouts: HttpTimeouts): number {
  return Math.max(25, Math.min(1000, Math.floor(Math.min(timeouts.headersTimeoutMs, timeouts.requestTimeoutMs) / 4)));
}

/** The plain server's settings the mTLS listener copies, so both read requests alike. */
const MIRRORED_SETTINGS = [
  'requireHostHeader',
  'keepAliveTimeout',
  'requestTimeout',
  'headersTimeout',
  'timeout',
  'maxRequestsPerSocket',
  'maxHeadersCount',
] as const;

/**
 * The RFC 8705 listener: HTTPS that asks every client for a certificate and accepts any,
 * self-signed included (§2.2), since a bound token names the exact certificate and
 * authentication is the token's job, not the handshake's.
 */
async function openTlsListener(tls: NonNullable<Config['tls']>, host: string, timeouts: HttpTimeouts): Promise<TlsListener> {
  const keyPair = readKeyPair(tls);
  let server: https.Server;
  try {
    // The interval is read when the server starts listening, which is before join copies the rest.
    server = https.createServer({ ...keyPair, requestCert: true, rejectUnauthorized: false, connectionsCheckingInterval: checkingIntervalMs(timeouts) });
  } catch (err) {
    throw new ConfigError(
      `Invalid configuration:\n  TLS_CERT_FILE, TLS_KEY_FILE: not a usable certificate and private key (${(err as Error).message})`,
    );
  }
  // HTTP connection tracking starts after the handshake; a client stalled before it would
  // otherwise hold a shutdown open until the handshake timeout.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  let route: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const early: [IncomingMessage, ServerResponse][] = [];
  server.on('request', (req: IncomingMessage, res: ServerResponse) => (route ? route(req, res) : early.push([req, res])));

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(tls.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;

  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= new Promise<void>((resolve) => {
      // Not running (a start that failed early) is closed enough.
      server.close(() => resolve());
    }));
  return {
    server,
    port,
    url: `https://${address.includes(':') ? `[${address}]` : address}:${port}`,
    join(app) {
      const plain = app.server as Server & Record<(typeof MIRRORED_SETTINGS)[number], unknown>;
      Object.assign(server, Object.fromEntries(MIRRORED_SETTINGS.map((setting) => [setting, plain[setting]])));
      for (const listener of plain.listeners('clientError')) server.on('clientError', listener as (...args: unknown[]) => void);
      // preClose runs once the app has begun closing (it turns new requests away) and before it
      // closes its own server: both listeners stop accepting together. onClose hooks run last-added first, so this one
      // waits for the mTLS listener's in-flight requests before the app's resources (mail,
      // counters) close.
      app.addHook('preClose', async () => {
        void close();
      });
      app.addHook('onClose', async () => {
        await close();
      });
    },
    serve(app) {
      route = app.routing;
      for (const [req, res] of early.splice(0)) route(req, res);
    },
    cut() {
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
    },
    close,
  };
}

function readKeyPair(tls: NonNullable<Config['tls']>): { cert: Buffer; key: Buffer } {
  const read = (variable: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new ConfigError(`Invalid configuration:\n  ${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? err})`);
    }
  };
  return { cert: read('TLS_CERT_FILE', tls.certFile), key: read('TLS_KEY_FILE', tls.keyFile) };
}

/** BASE_URL's host on the mTLS port: where clients reach the listener, as the metadata tells them. */
function mtlsOrigin(baseUrl: string, port: number): string {
  const url = new URL(baseUrl);
  url.protocol = 'https:';
  url.port = String(port);
  return url.origin;
}
