import type { ChangeBus } from './bus.ts';

/**
 * Answers read from the database, kept per key until the bus says the key changed. A feature's
 * repository owns one per read that every request repeats (a store's settings, its webhook
 * endpoints) and publishes its topic after each committed write of what the read returns.
 *
 * While the bus cannot vouch that changes arrive, every lookup reads the database and keeps
 * nothing. A read racing a change could put back what the change just dropped: each read notes
 * the generation (moved by every change and reset heard) and keeps its answer only if nothing
 * moved it meanwhile. At most `maxEntries` keys are kept; the oldest goes first.
 */
export class ChangeCache<V> {
  private readonly entries = new Map<string, V>();
  private generation = 0;

  constructor(
    private readonly bus: ChangeBus,
    private readonly topic: string,
    private readonly read: (key: string) => Promise<V>,
    private readonly maxEntries: number,
  ) {
    bus.listen(topic, {
      changed: (key) => {
        this.generation++;
        this.entries.delete(key);
      },
      reset: () => {
        this.generation++;
        this.entries.clear();
      },
    });
  }

  async get(key: string): Promise<V> {
    if (this.bus.live && this.entries.has(key)) return this.entries.get(key)!;
    const generation = this.generation;
    const value = await this.read(key);
    if (generation === this.generation && this.bus.live) this.keep(key, value);
    return value;
  }

  /** Tells every process, once the write is committed, that these keys' answers changed. */
  changed(...keys: string[]): Promise<void> {
    return this.bus.publish(this.topic, keys);
  }

  private keep(key: string, value: V): void {
    if (!this.entries.has(key) && this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, value);
  }
}
