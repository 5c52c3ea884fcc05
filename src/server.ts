import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { Database } from './core/db/database.ts';

export interface RunningServer {
  app: FastifyInstance;
  database: Database;
  url: string;
  /** Stops taking connections, lets in-flight requests finish (up to the timeout), then closes storage. */
  stop(): Promise<void>;
}

/** Opens storage, applies pending migrations, and starts listening. */
export async function startServer(config: Config): Promise<RunningServer> {
  const database = Database.open(config.database);
  try {
    await database.migrate();
    const app = await buildApp(config, database);
    const url = await app.listen({ port: config.port, host: config.host });
    let stopping: Promise<void> | undefined;
    const stop = () => (stopping ??= shutdown(app, database, config.shutdownTimeoutMs));
    return { app, database, url, stop };
  } catch (err) {
    await database.close().catch(() => {});
    throw err;
  }
}

async function shutdown(app: FastifyInstance, database: Database, timeoutMs: number): Promise<void> {
  const force = setTimeout(() => {
    app.log.warn({ timeoutMs }, 'shutdown timeout reached; closing remaining connections');
    app.server.closeAllConnections();
  }, timeoutMs);
  // Closing only shuts the connections idle at that moment; a keep-alive connection whose request
  // was in flight becomes idle once answered, and is shut then.
  const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
  try {
    await app.close();
  } finally {
    clearTimeout(force);
    clearInterval(sweep);
    await database.close();
  }
}
