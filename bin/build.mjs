#!/usr/bin/env node
// Compiles src/ to dist/ for production (`npm run build`, run by `npm ci` through `prepare`): each
// TypeScript module becomes one JavaScript module at the same place under dist/, with a source map,
// so stack traces name the TypeScript lines. Our modules are not bundled: relative paths read at
// run time (`new URL('./skills/', import.meta.url)`, ../../extensions/…) stay right. Every package
// stays an import of node_modules but those in VENDORED, bundled into dist/vendor/. Files that are
// not server modules (the browser scripts, the agent skills' Markdown) are copied beside the
// compiled ones, and each browser script's JavaScript is written beside its copy
// (src/core/browser-scripts.ts), so the service never runs esbuild. Type checking is
// `npm run typecheck`'s job; this only transpiles and bundles (esbuild), in about two seconds.
import { build } from 'esbuild';
import { cpSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const dist = join(root, 'dist');
// Built beside dist/ and swapped in whole, so a process starting meanwhile never finds half a build.
const staging = join(root, `.dist-${process.pid}`);

/** Browser code: tsconfig.json leaves it out of the server's program, and the service reads it as text. */
const browserFiles = new Set(JSON.parse(stripComments(readFileSync(join(root, 'tsconfig.json'), 'utf8'))).exclude);

function stripComments(json) {
  return json.replace(/^\s*\/\/.*$/gm, '');
}

function filesUnder(folder) {
  return readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name));
}

/** Whether tsconfig.json excludes the file (its patterns use `*` for one folder name). */
function isBrowserFile(file) {
  const path = relative(root, file);
  return [...browserFiles].some((pattern) => new RegExp(`^${pattern.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]+')}$`).test(path));
}

const files = filesUnder(src);
const modules = files.filter((file) => file.endsWith('.ts') && !isBrowserFile(file));
const copied = files.filter((file) => !modules.includes(file));

/**
 * Packages that only the service imports, bundled under dist/vendor/ (one file per import path,
 * the code they share in common chunks, so each library is still one copy): Kysely is 262
 * modules, jose 46, the payment protocols' SDKs with viem some 560, and one file loads in about a
 * tenth of the time and memory of that many (bench:startup; the first 402 loads the payment
 * ones). Packages whose objects other packages take (zod's schemas go to the MCP SDK and the
 * Fastify type provider) must stay the one copy in node_modules.
 */
const VENDORED = ['kysely', 'jose', 'viem', 'viem/tempo', 'mppx', 'mppx/server', '@x402/core/http', '@x402/core/server', '@x402/evm', '@x402/evm/exact/server'];

/** The bundle of an import path, under dist/vendor/: `@x402/core/http` → `x402-core-http`. */
function vendorFileOf(name) {
  return name.replace(/^@/, '').replaceAll('/', '-');
}

/** Every import stays an import; a relative one to a .ts module names the .js it compiles to, a vendored package its bundle. */
const keepImports = {
  name: 'keep-imports',
  setup(esbuild) {
    esbuild.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      if (VENDORED.includes(args.path)) return { path: vendorPathFrom(args.importer, args.path), external: true };
      const relativeTs = args.path.startsWith('.') && args.path.endsWith('.ts');
      return { path: relativeTs ? `${args.path.slice(0, -3)}.js` : args.path, external: true };
    });
  },
};

/** Entry points `vendor:<name>`, each a module that re-exports the package (its named exports: nothing here imports a default). */
const reexportPackages = {
  name: 'reexport-packages',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^vendor:/ }, (args) => ({ path: args.path.slice('vendor:'.length), namespace: 'vendor' }));
    esbuild.onLoad({ filter: /.*/, namespace: 'vendor' }, (args) => ({ contents: `export * from '${args.path}';`, resolveDir: root }));
  },
};

/** The import of a vendored package's bundle from the compiled module of `importer` (a file under src/). */
function vendorPathFrom(importer, name) {
  const path = relative(dirname(relative(src, importer)), join('vendor', `${vendorFileOf(name)}.js`));
  return path.startsWith('.') ? path : `./${path}`;
}

rmSync(staging, { recursive: true, force: true });
await build({
  entryPoints: modules,
  outdir: staging,
  outbase: src,
  bundle: true,
  plugins: [keepImports],
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  logLevel: 'warning',
});
await build({
  entryPoints: Object.fromEntries(VENDORED.map((name) => [vendorFileOf(name), `vendor:${name}`])),
  outdir: join(staging, 'vendor'),
  bundle: true,
  splitting: true,
  chunkNames: 'shared/[name]-[hash]',
  // zod stays the one copy the service's own schemas use; the MCP SDK is an optional import of mppx's.
  external: ['zod', 'zod/*', '@modelcontextprotocol/*'],
  plugins: [reexportPackages],
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  logLevel: 'warning',
});
for (const file of copied) cpSync(file, join(staging, relative(src, file)));
const { writeBrowserScripts } = await import(pathToFileURL(join(staging, 'core/browser-scripts.js')).href);
const browserScripts = copied.filter(isBrowserFile);
await writeBrowserScripts(browserScripts.map((file) => pathToFileURL(join(staging, relative(src, file)))));
if (!existsSync(join(staging, 'main.js'))) throw new Error('the build made no main.js');
// What bin/restock.js compares with the sources' times, to notice a build older than them.
writeFileSync(join(staging, '.built'), `${new Date().toISOString()}\n`);
const previous = `${staging}-previous`;
if (existsSync(dist)) renameSync(dist, previous);
renameSync(staging, dist);
rmSync(previous, { recursive: true, force: true });
console.log(`compiled ${modules.length} modules and ${browserScripts.length} browser scripts to dist/, copied ${copied.length} other files`);
