/**
 * The shape the code keeps, read from its imports (static and dynamic alike):
 * - the kernel (`src/core`) knows no module: it imports nothing outside itself;
 * - a module imports of another only its public files (`feature.ts`, `service.ts`,
 *   `schemas.ts`, `operations.ts`): the rest is its own, and what others may use of it is
 *   exported from those;
 * - the platform registry (src/platforms.ts) is the only file that imports a platform's folder:
 *   the assembly and every other module reach platforms through it;
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
    const found = [...new Set(imports.filter(reachesInternals).map((i) => `${i.from} -> ${i.to}`))];
    assert.deepEqual(found, [], "imports of another module's internals: import its public files (export there what others may use), or move what both need to the kernel");
  });

  it("only the platform registry imports a platform's folder", () => {
    // What the registry imports besides the kernel: the platforms' folders.
    const platformFolders = new Set(imports.filter((i) => i.from === 'platforms.ts' && moduleOf(i.to) && moduleOf(i.to) !== 'core').map((i) => moduleOf(i.to)!));
    assert.ok(platformFolders.size >= 3, `the registry lists ${[...platformFolders].join(', ')}`);
    const found = imports
      .filter((i) => i.from !== 'platforms.ts' && platformFolders.has(moduleOf(i.to) ?? '') && moduleOf(i.from) !== moduleOf(i.to))
      .map((i) => `${i.from} -> ${i.to}`);
    assert.deepEqual([...new Set(found)], [], 'reach a platform through its registry entry (src/platform.ts), not its folder');
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
