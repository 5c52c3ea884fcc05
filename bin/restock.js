#!/usr/bin/env node
// Runs the compiled service (dist/, made by `npm run build`, which `npm ci` runs). When there is no
// build, or a source changed after it, runs the TypeScript sources through tsx instead and says so
// on stderr (a warning log line), so an edit is never silently ignored in development.
import { readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mapStackTraces } from './stack-source-maps.js';

const src = fileURLToPath(new URL('../src/', import.meta.url));
const built = fileURLToPath(new URL('../dist/.built', import.meta.url));

/** The build's time, or 0 when there is none. */
function buildTime() {
  try {
    return statSync(built).mtimeMs;
  } catch {
    return 0;
  }
}

/** Whether any source file is newer than `since`. */
function sourcesChangedSince(since) {
  for (const entry of readdirSync(src, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs > since) return true;
  }
  return false;
}

const since = buildTime();
if (since > 0 && !sourcesChangedSince(since)) {
  // Stack traces of the compiled code name the TypeScript lines.
  mapStackTraces(new URL('../dist/', import.meta.url));
  await import('../dist/main.js');
} else {
  // A warning in the service's own log format (pino's JSON lines), so log readers take it as one.
  const why = since > 0 ? 'src/ changed after the last build' : 'no build in dist/';
  process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), msg: `${why}: running the sources through tsx (npm run build compiles them)` })}\n`);
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main.ts');
}
