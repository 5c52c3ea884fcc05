// Stack traces of the compiled code (dist/) name the TypeScript lines, each map read only when a
// trace through its module is formatted. Node's own support (process.setSourceMapsEnabled) reads
// the map of every module as it loads: some 350 files and a third of a second at each start, for
// traces most processes never print.
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Formats every stack trace from now on with the frames under `distUrl` (a file: URL ending in `/`) mapped to their sources. */
export function mapStackTraces(distUrl) {
  const dist = distUrl.href;
  // One entry per compiled module at most (null: no usable map), so bounded by the build's size.
  const maps = new Map();

  function mapOf(url) {
    let map = maps.get(url);
    if (map === undefined) {
      try {
        map = new SourceMap(JSON.parse(readFileSync(fileURLToPath(`${url}.map`), 'utf8')));
      } catch {
        map = null;
      }
      maps.set(url, map);
    }
    return map;
  }

  /** The frame as V8 writes it, its `file:line:column` replaced by the source's when the build's map knows it. */
  function frameText(frame) {
    const text = String(frame);
    const url = frame.getFileName();
    const line = frame.getLineNumber();
    const column = frame.getColumnNumber();
    if (typeof url !== 'string' || !url.startsWith(dist) || line == null || column == null) return text;
    const entry = mapOf(url)?.findEntry(line - 1, column - 1);
    if (!entry || typeof entry.originalSource !== 'string') return text;
    const source = fileURLToPath(new URL(entry.originalSource, url));
    return text.replace(`${url}:${line}:${column}`, `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`);
  }

  Error.prepareStackTrace = (error, frames) => [headline(error), ...frames.map((frame) => `    at ${frameText(frame)}`)].join('\n');
}

/** The first line V8 writes: `Name: message`. */
function headline(error) {
  try {
    return Error.prototype.toString.call(error);
  } catch {
    return 'Error';
  }
}
