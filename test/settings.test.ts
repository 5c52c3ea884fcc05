/**
 * The settings' documentation follows the code: the catalogue in src/config.ts (SETTINGS, read off
 * the schema that parses the environment) against the variables the sources read, `.env.example`
 * and the README's table.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { SETTINGS } from '../src/config.ts';
import { README, REBUILD_COMMAND, settingsTable, settingsTableIn } from '../bin/build-settings-table.ts';
import { describe, it } from './fixtures/suites.ts';

const ROOT = new URL('../', import.meta.url);
const catalogued = new Map(SETTINGS.map((setting) => [setting.name, setting]));

interface SourceReads {
  /** Variables read by a name written in the source. */
  named: Set<string>;
  /** Reads such as `env[name]`, whose variable only running the code would tell. */
  computed: number;
}

/** `env` or `process.env`, not a name that ends so (`.env.example`, `someEnv`). */
const ENV = String.raw`(?:(?<=\bprocess\.)|(?<![\w$.]))env`;

/** What a source file reads of the environment: `process.env.X`, `env.X`, `env['X']`, `const { X } = process.env`. */
function environmentReads(source: string): SourceReads {
  const named = new Set<string>();
  for (const [, name] of source.matchAll(new RegExp(String.raw`${ENV}\.([A-Za-z_$][\w$]*)`, 'g'))) named.add(name!);
  for (const [, , name] of source.matchAll(new RegExp(String.raw`${ENV}\[\s*(['"\x60])([^'"\x60]+)\1\s*\]`, 'g'))) named.add(name!);
  for (const [, fields] of source.matchAll(new RegExp(String.raw`\{([^{}]*)\}\s*=\s*(?:process\.)?${ENV}\b`, 'g'))) {
    for (const field of fields!.split(',')) {
      const name = field.split(/[:=]/)[0]!.trim();
      if (name && !name.startsWith('...')) named.add(name);
    }
  }
  const computed = [...source.matchAll(new RegExp(String.raw`${ENV}\[\s*(?!['"\x60][^'"\x60]+['"\x60]\s*\])`, 'g'))].length;
  return { named, computed };
}

function serviceSources(): string[] {
  return ['src', 'bin'].flatMap((dir) =>
    readdirSync(new URL(dir, ROOT), { recursive: true, encoding: 'utf8' })
      .filter((file) => /\.(ts|js)$/.test(file))
      .map((file) => `${dir}/${file}`),
  );
}

interface ExampleEntry {
  name: string;
  value: string;
  commentedOut: boolean;
  /** A comment line opens its paragraph before it, saying what it is for. */
  explained: boolean;
  line: number;
}

/** `NAME=value` and commented-out `# NAME=value` lines of `.env.example`. */
function exampleEntries(text: string): ExampleEntry[] {
  const entries: ExampleEntry[] = [];
  let explained = false;
  text.split('\n').forEach((line, index) => {
    const entry = /^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (line.trim() === '') explained = false;
    else if (entry) entries.push({ name: entry[2]!, value: entry[3]!, commentedOut: entry[1] !== undefined, explained, line: index + 1 });
    else if (line.startsWith('#')) explained = true;
  });
  return entries;
}

function duplicates(names: string[]): string[] {
  return names.filter((name, index) => names.indexOf(name) !== index);
}

describe('the settings', () => {
  it('describe each setting in one line', () => {
    for (const { name, description } of SETTINGS) {
      assert.match(description, /^[^\n]+$/, `${name} in src/config.ts has no description (.describe('…') on its schema), or one over several lines`);
    }
  });

  it('name every variable the sources read, by a name written out', () => {
    for (const file of serviceSources()) {
      const { named, computed } = environmentReads(readFileSync(new URL(file, ROOT), 'utf8'));
      const unknown = [...named].filter((name) => !catalogued.has(name));
      assert.deepEqual(unknown, [], `${file} reads variables that src/config.ts's settings schema does not list`);
      assert.equal(computed, 0, `${file} reads the environment by a computed name; read settings through src/config.ts`);
    }
  });

  it('are each in .env.example once, explained by a comment, and nothing else is', () => {
    const entries = exampleEntries(readFileSync(new URL('.env.example', ROOT), 'utf8'));
    const names = entries.map((entry) => entry.name);
    assert.deepEqual(SETTINGS.map((setting) => setting.name).filter((name) => !names.includes(name)), [], '.env.example lacks these settings');
    assert.deepEqual(names.filter((name) => !catalogued.has(name)), [], '.env.example names variables the service does not read');
    assert.deepEqual(duplicates(names), [], '.env.example names these more than once');
    const unexplained = entries.filter((entry) => !entry.explained).map((entry) => `${entry.name} (line ${entry.line})`);
    assert.deepEqual(unexplained, [], '.env.example: no comment line above these in their paragraph');
  });

  it('set in .env.example only to their defaults, so a copy of it changes nothing', () => {
    for (const { name, value, commentedOut, line } of exampleEntries(readFileSync(new URL('.env.example', ROOT), 'utf8'))) {
      const setting = catalogued.get(name);
      if (commentedOut || value === '' || !setting) continue;
      assert.equal(value, setting.default, `.env.example line ${line} sets ${name} to something other than its default; leave it empty or commented out`);
    }
  });

  it(`are the README's table (rebuild: ${REBUILD_COMMAND})`, () => {
    const rows = (table: string) => table.split('\n');
    assert.deepEqual(rows(settingsTableIn(readFileSync(README, 'utf8'))), rows(settingsTable()), `README.md's settings table differs from src/config.ts: run ${REBUILD_COMMAND}`);
  });
});
