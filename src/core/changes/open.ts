import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../db/database.ts';
import { LocalChangeBus, RemoteChangeBus, type ChangeBus } from './bus.ts';
import { PostgresChangeTransport } from './postgres.ts';
import { RedisChangeTransport } from './redis.ts';

/**
 * The bus this deployment's processes share: Redis when it is configured (every process already
 * reaches it for rate limits), else PostgreSQL's notifications, else this process alone (SQLite
 * is one process's database; another process's writes to the file are noticed, not heard).
 */
export function openChangeBus(redisUrl: string | undefined, database: Database, log: FastifyBaseLogger): ChangeBus {
  if (redisUrl) return new RemoteChangeBus(new RedisChangeTransport(redisUrl), log, 'redis');
  if (database.dialect === 'postgres') return new RemoteChangeBus(new PostgresChangeTransport(database), log, 'postgres');
  return new LocalChangeBus(database.otherWritersVersion());
}
