import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** Resolves once everything readers can see is on disk; undefined when it already is (Database.durable). */
export type Durable = () => Promise<void> | undefined;

/**
 * No answer leaves before what it may describe is on disk. On SQLite a commit is visible to
 * readers from its COMMIT on, while the log flush that makes it durable runs off the event loop
 * (GroupCommit): an answer built from a read in between waits for that flush. Writers' own
 * answers already wait for theirs; this covers everything else, in one place.
 */
export function answersAfterDurable(app: FastifyInstance, durable: Durable): void {
  app.addHook('onSend', (_request, _reply, payload, done) => {
    const flushing = durable();
    if (!flushing) return done(null, payload);
    void flushing.then(() => done(null, payload));
  });
}

/**
 * The same for an answer a library writes to the socket itself (a hijacked reply): each write
 * waits, in order, for what was visible when it was made to be on disk.
 */
export function rawAnswerAfterDurable(raw: ServerResponse, durable: Durable): void {
  const write = raw.write.bind(raw) as (...args: unknown[]) => boolean;
  const end = raw.end.bind(raw) as (...args: unknown[]) => ServerResponse;
  let queued: Promise<void> = Promise.resolve();
  let waiting = 0;
  const inOrder = (send: () => void): boolean => {
    const flushing = durable();
    if (!flushing && waiting === 0) {
      send();
      return true;
    }
    waiting++;
    queued = Promise.all([queued, flushing]).then(() => {
      waiting--;
      send();
    });
    return true;
  };
  raw.write = ((...args: unknown[]) => inOrder(() => void write(...args))) as ServerResponse['write'];
  raw.end = ((...args: unknown[]) => {
    inOrder(() => void end(...args));
    return raw;
  }) as ServerResponse['end'];
}
