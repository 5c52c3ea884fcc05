import { readFile, writeFile } from 'node:fs/promises';
import type { TransformOptions } from 'esbuild';

/**
 * The scripts browsers run (tsconfig.json's `exclude`: the storefront's, the dashboard's frame
 * script, the push service worker) are kept as readable TypeScript and served as JavaScript in
 * one of two forms: `minified` (what every product page downloads) or `readable` (types stripped).
 * The build (bin/build.mjs, through `writeBrowserScripts`) writes both forms of each beside its
 * copy in dist/, so a compiled process reads them and never starts esbuild; running the sources
 * (tests, a development checkout), they are made with esbuild when first asked for. Both ways
 * go through `compile` below, so they give the same bytes.
 */
export type ScriptForm = 'minified' | 'readable';

const FORMS: Record<ScriptForm, { suffix: string; options: TransformOptions }> = {
  minified: { suffix: '.browser.min.js', options: { minify: true, target: 'es2019', loader: 'ts', legalComments: 'none' } },
  readable: { suffix: '.browser.js', options: { loader: 'ts' } },
};

/** Where the build keeps a script's JavaScript in one form: beside its source, `widget.ts` → `widget.browser.min.js`. */
function builtPath(source: URL, form: ScriptForm): URL {
  return new URL(source.href.replace(/\.ts$/, FORMS[form].suffix));
}

async function compile(source: URL, form: ScriptForm): Promise<string> {
  const { transform } = await import('esbuild');
  return (await transform(await readFile(source, 'utf8'), FORMS[form].options)).code;
}

/** A browser script's JavaScript in one form: as the build wrote it, or made now from its source. */
export async function browserScript(source: URL, form: ScriptForm): Promise<string> {
  try {
    return await readFile(builtPath(source, form), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return compile(source, form);
  }
}

/** Writes both forms of each script beside it (bin/build.mjs, on the copies in its staging dist/). */
export async function writeBrowserScripts(sources: readonly URL[]): Promise<void> {
  const forms = Object.keys(FORMS) as ScriptForm[];
  await Promise.all(sources.flatMap((source) => forms.map(async (form) => writeFile(builtPath(source, form), await compile(source, form)))));
}
