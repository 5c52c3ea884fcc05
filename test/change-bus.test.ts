/**
 * The bus between processes, over a channel that delivers to each listener in its own time (as
 * PostgreSQL's notifications and Redis's messages do: one listener hearing a message says nothing
 * of when another does). A publication resolves only once every other process has dropped what
 * the change made stale.
 */
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { describe, it } from './fixtures/suites.ts';
import { CONFIRM_WAIT_MS, RemoteChangeBus, type ChangeTransport } from '../src/core/changes/bus.ts';

type Events = Parameters<ChangeTransport['start']>[0];

/** One channel, many processes; each process's messages arrive after its own delay. */
class Channel {
  private readonly ends = new Set<{ events: Events; delayMs: number }>();

  transport(delayMs: number): ChangeTransport {
    const end = { events: undefined as unknown as Events, delayMs };
    return {
      maxMessageBytes: 7000,
      start: (events) => {
        end.events = events;
        this.ends.add(end);
        setImmediate(() => events.up());
      },
      send: async (text) => {
        for (const { events, delayMs: delay } of this.ends) setTimeout(() => events.message(text), delay);
      },
      close: async () => {
        this.ends.delete(end);
      },
    };
  }
}

function processOn(channel: Channel, delayMs: number) {
  const heard: string[] = [];
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
  const bus = new RemoteChangeBus(channel.transport(delayMs), log, 'test');
  bus.listen('agent', { changed: (key) => heard.push(key), reset: () => {} });
  return { bus, heard, warnings };
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the change bus between processes', () => {
  it('resolves a publication only once a slower process has dropped what it kept', async () => {
    const channel = new Channel();
    const one = processOn(channel, 0);
    const two = processOn(channel, 80);
    try {
      // Each hears the other's first heartbeat, sent as it comes up.
      await settle(150);
      await one.bus.publish('agent', ['agt_1']);
      assert.deepEqual(two.heard, ['agt_1'], 'the slower process heard the change before the publication resolved');
      assert.deepEqual(one.warnings, [], 'confirmed, not given up on');
    } finally {
      await one.bus.close();
      await two.bus.close();
    }
  });

  it('waits for every process it has heard from, however many', async () => {
    const channel = new Channel();
    const one = processOn(channel, 0);
    const others = [processOn(channel, 30), processOn(channel, 90), processOn(channel, 60)];
    try {
      await settle(200);
      await one.bus.publish('agent', ['agt_1', 'agt_2']);
      for (const other of others) assert.deepEqual(other.heard, ['agt_1', 'agt_2']);
      assert.deepEqual(one.warnings, []);
    } finally {
      for (const { bus } of [one, ...others]) await bus.close();
    }
  });

  it('does not wait for a process that said goodbye, and waits at most its limit for a silent one', async () => {
    const channel = new Channel();
    const one = processOn(channel, 0);
    const leaving = processOn(channel, 0);
    try {
      await settle(50);
      await leaving.bus.close();
      await settle(20);
      let started = Date.now();
      await one.bus.publish('agent', ['agt_1']);
      assert.ok(Date.now() - started < CONFIRM_WAIT_MS, 'a closed process is not waited for');
      assert.deepEqual(one.warnings, []);

      const stalled = processOn(channel, 0);
      await settle(50);
      // The process stops hearing anything: its acknowledgements never come.
      await stalled.bus['transport'].close();
      started = Date.now();
      await one.bus.publish('agent', ['agt_2']);
      const waited = Date.now() - started;
      assert.ok(waited >= CONFIRM_WAIT_MS - 20 && waited < CONFIRM_WAIT_MS * 4, `waited ${waited} ms`);
      assert.deepEqual(one.warnings, ['a change was not confirmed by every process in time']);
      await stalled.bus.close();
    } finally {
      await one.bus.close();
    }
  });
});
