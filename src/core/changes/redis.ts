import type { Redis } from 'ioredis';
import { lazyPackage } from '../lazy-package.ts';
import { parseRedisUrl, redisConnectionOptions } from '../service-urls.ts';
import type { ChangeTransport } from './bus.ts';

/** The one channel every Restock process on a Redis server hears. */
export const REDIS_CHANNEL = 'restock:changes';
/** What a Redis connection used for changes is called in `CLIENT LIST`. */
export const REDIS_CONNECTION_NAME = 'restock-changes';

const redisClient = lazyPackage<typeof import('ioredis')>('ioredis');

/**
 * Redis publish/subscribe: one connection subscribed, one to publish on (a subscribed connection
 * can do nothing else). Both reconnect by themselves; the subscription is made anew on every
 * connection, and only then is the channel reported up.
 */
export class RedisChangeTransport implements ChangeTransport {
  readonly maxMessageBytes = 64 * 1024;
  private readonly subscriber: Redis;
  private readonly publisher: Redis;

  constructor(url: string) {
    const options = {
      ...redisConnectionOptions(parseRedisUrl(url)),
      connectionName: REDIS_CONNECTION_NAME,
      connectTimeout: 2000,
      // A change not sent now is not worth sending later: the heartbeat tells who missed it.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: (attempt: number) => Math.min(attempt * 200, 2000),
    };
    const { Redis } = redisClient();
    this.subscriber = new Redis({ ...options, autoResubscribe: false });
    this.publisher = new Redis({ ...options, commandTimeout: 1000 });
  }

  start(events: { message(text: string): void; up(): void; down(err?: unknown): void }): void {
    let lastError: unknown;
    this.subscriber.on('error', (err) => (lastError = err));
    this.publisher.on('error', () => {});
    this.subscriber.on('message', (_channel: string, text: string) => events.message(text));
    this.subscriber.on('ready', () => {
      this.subscriber.subscribe(REDIS_CHANNEL).then(
        () => events.up(),
        (err) => events.down(err),
      );
    });
    this.subscriber.on('close', () => events.down(lastError));
    this.subscriber.connect().catch(() => {});
    this.publisher.connect().catch(() => {});
  }

  async send(text: string): Promise<void> {
    await this.publisher.publish(REDIS_CHANNEL, text);
  }

  async close(): Promise<void> {
    for (const client of [this.subscriber, this.publisher]) {
      if (client.status === 'ready') await client.quit().catch(() => {});
      client.disconnect();
    }
  }
}
