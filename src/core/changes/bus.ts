import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';

/**
 * How a process hears that data another process (or itself) changed, so that what it keeps in
 * memory (verified grants, storefront availability) can be dropped at once. Each message names a
 * topic and a key ("agent", an agent's id). Three ways, one shape: Redis publish/subscribe when
 * `REDIS_URL` is set, PostgreSQL `LISTEN/NOTIFY` on PostgreSQL without Redis, and in-process on
 * the embedded default (one process).
 */
export interface ChangeBus {
  /**
   * True while every change published anywhere is known to reach this process. While false, a
   * cache must not answer from memory: it reads the database (and keeps nothing it reads).
   */
  readonly live: boolean;
  /** Hears one topic's changes, and `reset` whenever the channel was (or may have been) lost. */
  listen(topic: string, listener: ChangeListener): void;
  /**
   * Tells every process, this one included, that these keys changed. Call it after the change is
   * committed. This process's listeners hear it before the promise is created, so the answer
   * that follows the change can never be served from a stale entry here.
   */
  publish(topic: string, keys: readonly string[]): Promise<void>;
  /** Resolves true once live, false if not within `timeoutMs` (a command about to publish waits for it). */
  whenLive(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface ChangeListener {
  changed(key: string): void;
  /** Drop everything: changes may have been missed. */
  reset(): void;
}

/** The listeners of one process, by topic. */
class Listeners {
  private readonly byTopic = new Map<string, ChangeListener[]>();

  add(topic: string, listener: ChangeListener): void {
    const list = this.byTopic.get(topic) ?? [];
    list.push(listener);
    this.byTopic.set(topic, list);
  }

  changed(topic: string, key: string): void {
    for (const listener of this.byTopic.get(topic) ?? []) listener.changed(key);
  }

  reset(): void {
    for (const list of this.byTopic.values()) for (const listener of list) listener.reset();
  }
}

/**
 * The embedded default: one process, so hearing its own changes is hearing all of them. Another
 * process may still write to the same SQLite file (`restock store create` while serving, a
 * `restock worker`): `otherWriters` moves when one did, and everything kept is then dropped
 * before the next lookup, since what it changed is not known.
 */
export class LocalChangeBus implements ChangeBus {
  private readonly listeners = new Listeners();
  private seenVersion: number | undefined;
  /**
   * Read once per turn of the event loop: a request asks several caches, and a write by another
   * process landing between two of them in one turn is no different from one landing just after.
   */
  private checkedThisTurn = false;
  private readonly nextTurn = () => {
    this.checkedThisTurn = false;
  };

  constructor(private readonly otherWriters?: () => number) {
    this.seenVersion = otherWriters?.();
  }

  get live(): boolean {
    if (this.otherWriters && !this.checkedThisTurn) {
      this.checkedThisTurn = true;
      setImmediate(this.nextTurn);
      const version = this.otherWriters();
      if (version !== this.seenVersion) {
        this.seenVersion = version;
        this.listeners.reset();
      }
    }
    return true;
  }

  listen(topic: string, listener: ChangeListener): void {
    this.listeners.add(topic, listener);
  }

  async publish(topic: string, keys: readonly string[]): Promise<void> {
    for (const key of keys) this.listeners.changed(topic, key);
  }

  async whenLive(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {}
}

/** A channel between processes: Redis pub/sub or PostgreSQL notifications. */
export interface ChangeTransport {
  /** Starts connecting; `up` once listening (again), `down` when the connection is lost. */
  start(events: { message(text: string): void; up(): void; down(err?: unknown): void }): void;
  /** Sends one message to every process listening, this one included. */
  send(text: string): Promise<void>;
  /** The most a message may carry, in UTF-8 bytes. */
  readonly maxMessageBytes: number;
  close(): Promise<void>;
}

/** How often each process sends a heartbeat through the channel (it also tells the others it is there). */
export const HEARTBEAT_MS = 1000;
/** A channel whose last heartbeat is older than this is treated as lost, even if its socket looks open. */
export const SILENT_AFTER_MS = 3000;
/** How long a publication waits for every other process to confirm it (see `publish`). */
export const CONFIRM_WAIT_MS = 500;
const BEAT = '~beat';
const ACK = '~ack';
const BYE = '~bye';

/** One publication waiting to be heard: by this process (its echo) and by every other one it knows. */
interface Pending {
  echoed: boolean;
  waitingFor: Set<string>;
  done(): void;
}

/**
 * A bus over a channel between processes. The channel is trusted only while it is connected and
 * its own heartbeats come back: a socket dropped without a reset (a partition, a paused server)
 * is found out within SILENT_AFTER_MS. Going down, and coming back, both reset every listener,
 * because changes published meanwhile were not heard.
 *
 * A message is `topic \t origin \t key \t key…`, the origin being a process and a sequence
 * number. Every process that hears another's change drops what it kept, then acknowledges it on
 * the channel; a publication resolves once its own echo and the acknowledgement of every process
 * heard from lately (by its heartbeats) are back. So the answer that follows a change (a
 * revocation's 200) leaves only after every other process has dropped what the change made stale,
 * whatever order the channel delivers in: a notification reaching one listener is no sign that it
 * reached another.
 */
export class RemoteChangeBus implements ChangeBus {
  private readonly listeners = new Listeners();
  private readonly processId = randomUUID();
  private sequence = 0;
  private readonly pending = new Map<number, Pending>();
  /** The other processes on the channel, by id, with when each was last heard. */
  private readonly peers = new Map<string, number>();
  private connected = false;
  private lastBeat = 0;
  private readonly heartbeat: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly transport: ChangeTransport,
    private readonly log: FastifyBaseLogger,
    private readonly name: string,
  ) {
    transport.start({
      message: (text) => this.received(text),
      up: () => this.up(),
      down: (err) => this.down(err),
    });
    this.heartbeat = setInterval(() => this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  get live(): boolean {
    return this.connected && Date.now() - this.lastBeat < SILENT_AFTER_MS;
  }

  listen(topic: string, listener: ChangeListener): void {
    this.listeners.add(topic, listener);
  }

  async publish(topic: string, keys: readonly string[]): Promise<void> {
    for (const key of keys) this.listeners.changed(topic, key);
    for (const chunk of chunksOf(keys, this.transport.maxMessageBytes - topic.length - 64)) {
      const sequence = ++this.sequence;
      const heard = this.connected ? this.confirmationOf(sequence) : Promise.resolve();
      try {
        await this.transport.send([topic, `${this.processId}:${sequence}`, ...chunk].join('\t'));
        await heard;
      } catch (err) {
        this.pending.get(sequence)?.done();
        // The change is committed; other processes that cannot hear it have lost the channel too,
        // or will find out within SILENT_AFTER_MS when their heartbeats stop coming back.
        this.log.warn({ channel: this.name, reason: reasonOf(err) }, 'a change could not be announced to other processes');
      }
    }
  }

  async whenLive(timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (!this.live && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    return this.live;
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    // So that no other process waits for this one's acknowledgements after it is gone.
    if (this.connected) await this.transport.send(`${BYE}\t${this.processId}:0`).catch(() => {});
    this.closed = true;
    this.connected = false;
    for (const pending of [...this.pending.values()]) pending.done();
    await this.transport.close();
  }

  /**
   * Resolves when this publication has come back here and every process heard from within
   * SILENT_AFTER_MS has acknowledged it, or after CONFIRM_WAIT_MS: a process that stays silent
   * that long is stalled or cut off, and its own heartbeats will stop coming back to it.
   */
  private confirmationOf(sequence: number): Promise<void> {
    const since = Date.now() - SILENT_AFTER_MS;
    const waitingFor = new Set([...this.peers].filter(([, heard]) => heard >= since).map(([id]) => id));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (pending.waitingFor.size > 0) this.log.warn({ channel: this.name, unconfirmed: pending.waitingFor.size }, 'a change was not confirmed by every process in time');
        pending.done();
      }, CONFIRM_WAIT_MS);
      const pending: Pending = {
        echoed: false,
        waitingFor,
        done: () => {
          clearTimeout(timer);
          this.pending.delete(sequence);
          resolve();
        },
      };
      this.pending.set(sequence, pending);
    });
  }

  private up(): void {
    if (this.closed) return;
    // Whatever was kept before the channel came (back) may have missed changes.
    this.listeners.reset();
    this.connected = true;
    this.lastBeat = Date.now();
    this.beat();
    this.log.info({ channel: this.name }, 'hearing changes from other processes: caches in use');
  }

  private down(err?: unknown): void {
    if (!this.connected) return;
    this.connected = false;
    this.listeners.reset();
    // One line, no stack: a database or Redis outage is reported where it is felt (the 503s).
    if (!this.closed) this.log.warn({ channel: this.name, reason: reasonOf(err) }, 'lost the channel other processes announce changes on: reading the database until it is back');
  }

  private beat(): void {
    const forgotten = Date.now() - SILENT_AFTER_MS;
    for (const [peer, heard] of this.peers) if (heard < forgotten) this.peers.delete(peer);
    if (!this.connected) return;
    this.transport.send(`${BEAT}\t${this.processId}:0`).catch(() => {});
  }

  private received(text: string): void {
    const [topic, origin, ...keys] = text.split('\t');
    if (!topic || !origin) return;
    const [sender = '', sequence = ''] = origin.split(':');
    const ours = sender === this.processId;
    if (topic === BEAT) return ours ? this.heardOwnBeat() : this.heardFrom(sender);
    if (topic === BYE) return void this.forget(sender);
    if (topic === ACK) return ours ? undefined : this.acknowledged(sender, keys[0]);
    for (const key of keys) this.listeners.changed(topic, key);
    if (ours) return this.echoed(Number(sequence));
    this.heardFrom(sender);
    this.transport.send(`${ACK}\t${this.processId}:0\t${origin}`).catch(() => {});
  }

  private heardOwnBeat(): void {
    // Beats stopped for a while and came back: changes in the gap may have been missed.
    if (Date.now() - this.lastBeat >= SILENT_AFTER_MS) this.listeners.reset();
    this.lastBeat = Date.now();
  }

  private heardFrom(peer: string): void {
    this.peers.set(peer, Date.now());
  }

  private forget(peer: string): void {
    this.peers.delete(peer);
    for (const pending of [...this.pending.values()]) this.settleIfHeard(pending, peer);
  }

  private echoed(sequence: number): void {
    const pending = this.pending.get(sequence);
    if (!pending) return;
    pending.echoed = true;
    this.settleIfHeard(pending);
  }

  private acknowledged(peer: string, origin: string | undefined): void {
    this.heardFrom(peer);
    const [publisher, sequence] = (origin ?? '').split(':');
    if (publisher !== this.processId) return;
    const pending = this.pending.get(Number(sequence));
    if (pending) this.settleIfHeard(pending, peer);
  }

  private settleIfHeard(pending: Pending, peer?: string): void {
    if (peer) pending.waitingFor.delete(peer);
    if (pending.echoed && pending.waitingFor.size === 0) pending.done();
  }
}

function reasonOf(err: unknown): string | undefined {
  return err instanceof Error ? err.message : undefined;
}

/** Keys split so that no message is over the channel's limit. */
function chunksOf(keys: readonly string[], maxBytes: number): string[][] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    const size = Buffer.byteLength(key) + 1;
    if (current.length > 0 && bytes + size > maxBytes) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(key);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
