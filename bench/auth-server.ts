/**
 * The server bench/auth.ts loads: Restock as `restock serve` builds it, from the same
 * environment, in one of two modes chosen by BENCH_AUTH.
 *
 *   BENCH_AUTH=token   unchanged: every request's bearer token goes through the real check.
 *   BENCH_AUTH=fixed   the baseline: AgentService.prototype.authenticate is replaced, in this
 *                      process only, by one that runs the real check once and then hands every
 *                      later request the Caller it produced, without looking at the token.
 *
 * The patch sits at `authenticate` rather than at the access-control hook because the hook is
 * installed inside buildApp and cannot be reached from outside it without changing src/.
 * Everything around the call stays in both modes (the Authorization header on the wire and its
 * parsing, the scope check, `request.caller`, the per-credential rate-limit counting keyed by
 * that caller, the idempotency hook), so the difference between the two is exactly what
 * `authenticate` does per request: the verified-token lookup and the agent/revocation query.
 *
 *   PORT=3001 BENCH_AUTH=fixed node --import tsx bench/auth-server.ts
 */
import { AgentService } from '../src/agents/service.ts';
import { loadConfig } from '../src/config.ts';
import type { Caller } from '../src/core/http/caller.ts';
import { startServer } from '../src/server.ts';

const mode = process.env.BENCH_AUTH;
if (mode !== 'token' && mode !== 'fixed') {
  process.stderr.write(`auth-server: BENCH_AUTH must be token or fixed, got ${JSON.stringify(mode)}\n`);
  process.exit(2);
}

if (mode === 'fixed') {
  const real = AgentService.prototype.authenticate;
  let fixed: Caller | undefined;
  AgentService.prototype.authenticate = async function (this: AgentService, token, client) {
    // The first requests still need a genuine token, so a baseline fed a wrong one fails loudly
    // with 401s instead of measuring something the authenticated side never does.
    return (fixed ??= await real.call(this, token, client));
  };
}

const server = await startServer(loadConfig());
let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  // Kept, not `once`: a second signal must not kill the process before in-flight requests finish.
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    server.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`auth-server: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  });
}
