/**
 * What bench/fanout.ts and bench/latency.ts share: child processes with an IPC channel (the SMTP
 * sink, the baseline), killed however the run ends, and the store-bound agent each bench claims
 * with the code the sink captured.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SinkCommand, SinkEvent } from './fanout-sink.ts';
import { expectStatus, killedOnExit, outputTail, requestJson } from './lib.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface IpcChild<E> {
  process: ChildProcess;
  name: string;
  output(): string;
  exited: Promise<void>;
  /** The next event that matches, or a rejection after `timeoutMs` or when the child exits. */
  next<T extends E>(match: (event: E) => event is T, timeoutMs: number, what: string): Promise<T>;
  on(listener: (event: E) => void): () => void;
}

export function startIpcChild<E>(name: string, script: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = []): IpcChild<E> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  killedOnExit(child);
  const output = outputTail(child, 16_384);
  let gone = false;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      gone = true;
      resolve();
    }),
  );
  const on = (listener: (event: E) => void) => {
    child.on('message', listener as (message: unknown) => void);
    return () => void child.off('message', listener as (message: unknown) => void);
  };
  const next = <T extends E>(match: (event: E) => event is T, timeoutMs: number, what: string) =>
    new Promise<T>((resolve, reject) => {
      if (gone) return reject(new Error(`${name} has exited, no ${what}:\n${output()}`));
      const off = on((event) => {
        if (!match(event)) return;
        done();
        resolve(event);
      });
      const onExit = () => {
        done();
        reject(new Error(`${name} exited while waiting for ${what}:\n${output()}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${what} from ${name} within ${timeoutMs} ms:\n${output()}`));
      }, timeoutMs);
      child.once('exit', onExit);
      function done() {
        clearTimeout(timer);
        off();
        child.off('exit', onExit);
      }
    });
  return { process: child, name, output, exited, next, on };
}

export async function stopIpcChild(child: IpcChild<unknown>): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  if (child.process.connected) child.process.disconnect();
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 5000);
  await child.exited;
  clearTimeout(timer);
}

/** The sink as both benches drive it: commands in, events out. */
export interface SinkControl {
  command(command: SinkCommand): void;
  next<T extends SinkEvent>(match: (event: SinkEvent) => event is T, timeoutMs: number, what: string): Promise<T>;
}

/** An anonymous agent the store's owner claims for the store, the code read at the sink. */
export async function claimStoreAgent(base: string, sink: SinkControl, owner: string, domain: string): Promise<{ agentId: string; token: string }> {
  const registered = expectStatus('agent registration', await requestJson(base, 'POST', '/api/agent/register', { type: 'anonymous' }), 201);
  sink.command({ type: 'expect', phase: 'claim', prefix: '\u0000', count: 1 });
  sink.command({ type: 'capture', address: owner });
  const captured = sink.next((e): e is Extract<SinkEvent, { type: 'captured' }> => e.type === 'captured' && e.address === owner, 30_000, 'the claim mail');
  captured.catch(() => {});
  expectStatus('claim code request', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, email: owner, store: domain }), 200);
  const code = /code: (\d{6})/.exec((await captured).raw)?.[1];
  if (!code) throw new Error('no claim code in the claim mail');
  const claimed = expectStatus('claim', await requestJson(base, 'POST', '/api/agent/claim', { claim_token: registered.claim_token, otp: code }), 200);
  if (claimed.store !== domain) throw new Error(`the agent was bound to ${claimed.store}, not ${domain}`);
  return { agentId: registered.registration_id, token: claimed.credential };
}
