/**
 * The A2A task store's memory: what one kept task costs, and how far one agent's messages can
 * grow the heap. See docs/a2a.md, "Tasks", and docs/performance.md, "A2A task store".
 *
 *   node --expose-gc --import tsx bench/a2a-tasks.ts
 *
 * Restock runs in this process (the test app over a fresh SQLite file, LOG_LEVEL silent) on
 * 127.0.0.1 and a free port; the client is node's fetch in the same process, reading each answer
 * whole and keeping none (`app.inject` is not used: its mock sockets outlive their requests on
 * some routes and would be counted as the server's). Each agent subscribes once, then sends
 * `getSubscription` for its own subscription (a completed task, which is kept), each message as
 * large as the default body limit (16 KiB) allows, in one of these shapes:
 *
 * - `small`: the message alone (about 250 bytes);
 * - `string`: metadata holding one long string;
 * - `objects`: metadata holding an array of empty objects, the most heap per byte of JSON;
 * - `parts`: the data part followed by empty text parts.
 *
 * Each shape runs in a process of its own (the bench starts one per shape): 200 messages of an
 * agent of its own first (the first requests compile and cache what later ones reuse); full GCs,
 * then heapUsed + arrayBuffers; the agents' messages; full GCs again. The growth is what the
 * messages left held; divided by their number, what each cost (a kept task's memory when all are
 * kept: many agents, few messages each). About 1 to 2 MB of it is code the optimizer compiles
 * whatever is kept.
 *
 * Settings: BENCH_A2A_MESSAGES (per agent, default 200), BENCH_A2A_AGENTS (default 1),
 * BENCH_A2A_SHAPES (comma list, default all four).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startListeningTestApp } from '../test/fixtures/app.ts';
import { fail, intSetting } from './lib.ts';

const MESSAGES = intSetting('BENCH_A2A_MESSAGES', 200, 1, 10_000);
const AGENTS = intSetting('BENCH_A2A_AGENTS', 1, 1, 1_000);
const BODY_LIMIT = 16 * 1024;
const WARM_UP = 200;
const gc = (globalThis as { gc?: () => void }).gc ?? fail('run with node --expose-gc');

const head = (subscriptionId: string, rest: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"${randomUUID()}","role":"ROLE_USER","parts":[{"data":{"skill":"getSubscription","input":{"subscriptionId":"${subscriptionId}"}}}${rest}`;
/** `unit` repeated, comma-separated, to fill what is left of the body limit after `used` bytes. */
const fill = (unit: string, used: number) => Array.from({ length: Math.floor((BODY_LIMIT - used - 16) / (unit.length + 1)) }, () => unit).join(',');

const SHAPES: Record<string, (subscriptionId: string) => string> = {
  small: (id) => `${head(id, ']}}}')}`,
  string: (id) => {
    const start = head(id, '],"metadata":{"note":"');
    return `${start}${'x'.repeat(BODY_LIMIT - start.length - 16)}"}}}}`;
  },
  objects: (id) => {
    const start = head(id, '],"metadata":{"note":[');
    return `${start}${fill('{}', start.length)}]}}}}`;
  },
  parts: (id) => {
    const start = head(id, ',');
    return `${start}${fill('{"text":""}', start.length)}]}}}`;
  },
};
const shapes = (process.env.BENCH_A2A_SHAPES ?? Object.keys(SHAPES).join(',')).split(',');
for (const shape of shapes) if (!SHAPES[shape]) fail(`BENCH_A2A_SHAPES: no shape ${shape}; the shapes are ${Object.keys(SHAPES).join(', ')}`);

const held = () => {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

interface Agent {
  token: string;
  subscriptionId: string;
}

/** A fresh service (an empty task store) with the calls the bench makes to it. */
async function service() {
  const { t, base } = await startListeningTestApp('sqlite');
  const post = async (path: string, body: unknown, token?: string): Promise<unknown> => {
    const res = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) } });
    if (!res.ok) fail(`${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  return {
    close: () => t.close(),
    /** Agents with a subscription each, which their getSubscription answers as completed. */
    async register(count: number): Promise<Agent[]> {
      const agents: Agent[] = [];
      for (let i = 0; i < count; i++) {
        const { credential: token } = (await post('/api/agent/register', { type: 'anonymous' })) as { credential: string };
        const { subscriptionId } = (await post('/api/v1/alerts/subscribe', { productId: 'gid://shopify/Product/1', email: `bench.${randomUUID()}@example.com` }, token)) as { subscriptionId: string };
        agents.push({ token, subscriptionId });
      }
      return agents;
    },
    /** One message of the shape; answers its body's length. */
    async send(shape: string, agent: Agent): Promise<number> {
      const body = SHAPES[shape]!(agent.subscriptionId);
      const res = await fetch(`${base}/a2a`, { method: 'POST', body, headers: { 'content-type': 'application/json', 'a2a-version': '1.0', authorization: `Bearer ${agent.token}` } });
      const answer = await res.text();
      if (res.status !== 200 || !answer.includes('TASK_STATE_COMPLETED')) fail(`${shape}: ${res.status} ${answer.slice(0, 200)}`);
      return body.length;
    },
  };
}

if (shapes.length > 1) {
  // One process per shape: what a closed service leaves for the collector would blur the next one's figures.
  console.log(`${AGENTS} agent(s), ${MESSAGES} messages each, node ${process.version}`);
  console.log('| Shape | Body bytes | Held after, MB | KiB per message |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const shape of shapes) {
    const row = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], { env: { ...process.env, BENCH_A2A_SHAPES: shape }, encoding: 'utf8' });
    process.stdout.write(row);
  }
} else {
  const shape = shapes[0]!;
  const s = await service();
  try {
    // The first requests of a shape compile and cache what every later one reuses.
    const [warm] = await s.register(1);
    for (let i = 0; i < WARM_UP; i++) await s.send(shape, warm!);
    const agents = await s.register(AGENTS);
    const before = held();
    let bodyBytes = 0;
    for (const agent of agents) for (let i = 0; i < MESSAGES; i++) bodyBytes = await s.send(shape, agent);
    const grown = held() - before;
    console.log(`| ${shape} | ${bodyBytes} | ${mb(grown)} | ${(grown / (AGENTS * MESSAGES) / 1024).toFixed(1)} |`);
  } finally {
    await s.close();
  }
}
