/**
 * The shape the code keeps, read from its imports (static and dynamic alike):
 * - the kernel (`src/core`) knows no module: it imports nothing outside itself;
 * - a module imports of another only its public files (`feature.ts`, `service.ts`,
 *   `schemas.ts`, `operations.ts`): the rest is its own. Imports of another's internals that
 *   are still there are listed below, each a debt that may only be paid: a new one fails, and so
 *   does a listed one that is gone (strike it);
 * - the platform registry (src/platforms.ts) is the only file that imports a platform's folder:
 *   the assembly and every other module reach platforms through it (debts listed, as above);
 * - assembly binds nothing late: no setter hands a service its collaborator after both are built.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from './fixtures/suites.ts';

const SRC = path.join(import.meta.dirname, '..', 'src');
const PUBLIC = new Set(['feature.ts', 'service.ts', 'schemas.ts', 'operations.ts']);
/** Every `from '…'`, `import '…'` and `import('…')` of a relative path. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

/** Imports of another module's internals still in the code, as `importer -> imported` (paths under src/). */
const KNOWN_DEBTS = new Set<string>([
  'a2a/agent-card.ts -> discovery/openapi.ts',
  'a2a/executor.ts -> agents/errors.ts',
  'a2a/executor.ts -> payments/pipeline.ts',
  'a2a/feature.ts -> agents/gate.ts',
  'a2a/routes.ts -> agents/gate.ts',
  'a2a/x402.ts -> payments/pipeline.ts',
  'alerts/confirmations.ts -> stores/settings.ts',
  'alerts/consent.ts -> stores/settings.ts',
  'alerts/feature.ts -> stores/settings.ts',
  'alerts/service.ts -> stores/settings.ts',
  'conversions/exports.ts -> alerts/repository.ts',
  'conversions/exports.ts -> dispatch/repository.ts',
  'conversions/service.ts -> dispatch/repository.ts',
  'conversions/service.ts -> stores/settings.ts',
  'dashboard/performance-views.ts -> conversions/money.ts',
  'dashboard/performance-views.ts -> conversions/repository.ts',
  'dashboard/routes.ts -> billing/plans.ts',
  'dashboard/routes.ts -> storefront/embed.ts',
  'dashboard/service.ts -> billing/plans.ts',
  'dashboard/service.ts -> conversions/exports.ts',
  'dashboard/sign-in.ts -> stores/repository.ts',
  'dashboard/views.ts -> alerts/repository.ts',
  'dashboard/views.ts -> billing/plans.ts',
  'dashboard/views.ts -> dispatch/repository.ts',
  'discovery/front-door.ts -> storefront/embed.ts',
  'dispatch/compose.ts -> stores/settings.ts',
  'dispatch/context.ts -> alerts/contact-points.ts',
  'dispatch/context.ts -> stores/settings.ts',
  'dispatch/planner.ts -> alerts/repository.ts',
  'dispatch/planner.ts -> stores/settings.ts',
  'dispatch/rules.ts -> stores/settings.ts',
  'dispatch/senders.ts -> stores/settings.ts',
  'dispatch/templates.ts -> stores/settings.ts',
  'mcp/feature.ts -> agents/gate.ts',
  'mcp/paid-tools.ts -> payments/pipeline.ts',
  'mcp/routes.ts -> agents/gate.ts',
  'mcp/tools.ts -> discovery/openapi.ts',
  'notices/messages.ts -> conversions/money.ts',
  'notices/service.ts -> stores/settings.ts',
  'observability/feature.ts -> dispatch/queue-readings.ts',
  'push/routes.ts -> shopify/app-proxy-routes.ts',
  'shopify/order-payloads.ts -> conversions/money.ts',
  'shopify/order-payloads.ts -> conversions/reports.ts',
  'shopify/feature.ts -> conversions/reports.ts',
  'shopify/webhook-worker.ts -> conversions/reports.ts',
  'shoppers/service.ts -> alerts/contact-points.ts',
  'shoppers/service.ts -> alerts/repository.ts',
  'shoppers/service.ts -> stores/settings.ts',
  'shoppers/views.ts -> alerts/contact-points.ts',
  'sms/for-dispatch.ts -> alerts/contact-points.ts',
  'sms/for-dispatch.ts -> stores/settings.ts',
  'storefront/schemas.ts -> stores/settings.ts',
  'stores/feature.ts -> sms/account-check.ts',
]);

/** Imports of a platform's folder from outside it, other than the registry's, still in the code. */
const PLATFORM_DEBTS = new Set<string>([
  // The app proxy's path, under which Shopify pages load the service worker.
  'push/routes.ts -> shopify/app-proxy-routes.ts',
  // The dashboard's connection page is still WooCommerce's own (lent through the registry's entry).
  'dashboard/woocommerce.ts -> woocommerce/service.ts',
]);

interface Import {
  /** The importing file, under src/. */
  from: string;
  /** The imported file, under src/ (or outside it, `../…`). */
  to: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

function importsOf(file: string): Import[] {
  const from = path.relative(SRC, file).split(path.sep).join('/');
  return [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((match) => ({
    from,
    to: path.relative(SRC, path.resolve(path.dirname(file), match[1]!)).split(path.sep).join('/'),
  }));
}

const moduleOf = (file: string) => (file.includes('/') ? file.split('/')[0]! : undefined);
const imports = sourceFiles(SRC).flatMap(importsOf);

/** A module's import of another's file that is not public. */
function reachesInternals({ from, to }: Import): boolean {
  const mine = moduleOf(from);
  const theirs = moduleOf(to);
  if (!mine || !theirs || mine === 'core' || theirs === 'core' || mine === theirs || to.startsWith('..')) return false;
  return !PUBLIC.has(to.slice(theirs.length + 1));
}

describe('module boundaries', () => {
  it('reads every import, dynamic ones included', () => {
    assert.ok(imports.length > 500, `only ${imports.length} imports found: the pattern no longer matches`);
    assert.ok(
      imports.some((i) => i.from === 'payments/feature.ts' && i.to === 'payments/x402.ts'),
      'the dynamic import of the x402 engine is seen',
    );
  });

  it('the kernel (src/core) imports no module, nor the assembly', () => {
    const outside = imports.filter((i) => i.from.startsWith('core/') && !i.to.startsWith('core/'));
    assert.deepEqual(outside.map((i) => `${i.from} -> ${i.to}`), [], 'the kernel must define what it needs as a port and let modules implement it');
  });

  it('a module imports of another only its public files (feature, service, schemas, operations)', () => {
    const found = imports.filter(reachesInternals).map((i) => `${i.from} -> ${i.to}`);
    const added = [...new Set(found)].filter((edge) => !KNOWN_DEBTS.has(edge));
    const paid = [...KNOWN_DEBTS].filter((edge) => !found.includes(edge));
    assert.deepEqual(added, [], "imports of another module's internals: import its public files, or move what both need to the kernel");
    assert.deepEqual(paid, [], 'these debts are paid: strike them from KNOWN_DEBTS');
  });

  it("only the platform registry imports a platform's folder", () => {
    const platformFolders = new Set(imports.filter((i) => i.from === 'platforms.ts' && moduleOf(i.to)).map((i) => moduleOf(i.to)!));
    assert.ok(platformFolders.size >= 3, `the registry lists ${[...platformFolders].join(', ')}`);
    const found = imports
      .filter((i) => i.from !== 'platforms.ts' && platformFolders.has(moduleOf(i.to) ?? '') && moduleOf(i.from) !== moduleOf(i.to))
      .map((i) => `${i.from} -> ${i.to}`);
    const added = [...new Set(found)].filter((edge) => !PLATFORM_DEBTS.has(edge));
    const paid = [...PLATFORM_DEBTS].filter((edge) => !found.includes(edge));
    assert.deepEqual(added, [], 'reach a platform through its registry entry (src/platform.ts), not its folder');
    assert.deepEqual(paid, [], 'these debts are paid: strike them from PLATFORM_DEBTS');
  });

  it('assembly binds nothing late: no setter hands a built service its collaborator', () => {
    const assembly = ['domain.ts', 'features.ts', 'app.ts'].map((file) => [file, readFileSync(path.join(SRC, file), 'utf8')] as const);
    for (const [file, text] of assembly) {
      assert.ok(!/\.service\.use[A-Z]\w*\(/.test(text), `${file} hands a service a collaborator after it is built`);
      assert.ok(!/\bget [a-z]\w*\(\)\s*\{/.test(text), `${file} binds through a getter read later`);
    }
    for (const [file, text] of assembly) {
      const lines = text.split('\n');
      for (const [at, line] of lines.entries()) {
        const declared = /^\s*const (\w+) = /.exec(line)?.[1];
        if (!declared) continue;
        const before = lines.slice(0, at).findIndex((earlier) => !/^import /.test(earlier) && new RegExp(`(?<![\\w.-])${declared}\\.`).test(earlier));
        assert.equal(before, -1, `${file}:${before + 1} uses ${declared} before line ${at + 1} builds it (a closure read later)`);
      }
    }
    const setters = sourceFiles(SRC)
      .filter((file) => /\n {2}use[A-Z]\w*\([^)]*\): void \{/.test(readFileSync(file, 'utf8')))
      .map((file) => path.relative(SRC, file));
    assert.deepEqual(setters, [], 'services take their collaborators when built');
  });
});
