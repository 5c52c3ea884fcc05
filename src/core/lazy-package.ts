import { createRequire } from 'node:module';

const requireFromHere = createRequire(import.meta.url);

/**
 * A CommonJS package, required the first time it is asked for and kept. For the drivers and
 * clients a process may never use (node-postgres on SQLite, ioredis without REDIS_URL,
 * nodemailer on the outbox, web-push before the first push is sent): each is dozens of modules that
 * would otherwise load at every start. `require` is synchronous, so constructors stay as they are.
 */
export function lazyPackage<T>(name: 'pg' | 'ioredis' | 'nodemailer' | 'web-push'): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= requireFromHere(name) as T);
}
