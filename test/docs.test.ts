import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { problemTypes } from '../src/core/problems.ts';
import { describe, it } from './fixtures/suites.ts';

/** The rows of docs/api.md's "Problem types" table: type and status. */
function documentedProblemTypes(): Map<string, number> {
  const api = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
  const section = api.split('### Problem types')[1]?.split('\n## ')[0] ?? '';
  const rows = [...section.matchAll(/^\| `([a-z-]+)` \| (\d{3}) \|/gm)];
  return new Map(rows.map(([, type, status]) => [type!, Number(status)]));
}

/** What docs/performance.md may grow to: a page of current figures, not a history of runs. */
const performancePageMaxLines = 250;

function readRepoFile(path: string): string {
  return readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
}

interface FigureTable {
  headings: string[];
  rows: Array<{ line: number; cells: string[] }>;
}

function cellsOf(line: string): string[] {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((cell) => cell.trim());
}

/** The Markdown tables of a page: runs of lines starting with `|`, a heading row, a rule, the rows. */
function tablesOf(page: string): FigureTable[] {
  const tables: FigureTable[] = [];
  let current: FigureTable | undefined;
  for (const [index, text] of page.split('\n').entries()) {
    const line = text.trim();
    if (!line.startsWith('|')) {
      current = undefined;
    } else if (current === undefined) {
      current = { headings: cellsOf(line), rows: [] };
      tables.push(current);
    } else if (!/^\|[\s|:-]+\|$/.test(line)) {
      current.rows.push({ line: index + 1, cells: cellsOf(line) });
    }
  }
  return tables;
}

/** The code spans of a text that name a bench: an `npm run` script or a file under bench/. */
function commandsIn(text: string): string[] {
  return [...text.matchAll(/`([^`\n]+)`/g)].map(([, span]) => span!).filter((span) => /\bnpm run |\bbench\/[\w-]+\.ts\b/.test(span));
}

/** The bench file a command runs, after checking that its npm script and its file exist. */
function benchFileOf(command: string, scripts: Record<string, string>): string {
  const script = /\bnpm run ([\w:-]+)/.exec(command)?.[1];
  const runs = script === undefined ? command : scripts[script];
  assert.ok(runs !== undefined, `docs/performance.md names \`npm run ${script}\`, which package.json does not have`);
  const file = /\bbench\/[\w-]+\.ts\b/.exec(runs)?.[0];
  assert.ok(file !== undefined, `\`${command}\` in docs/performance.md runs no bench/*.ts file`);
  assert.ok(existsSync(new URL(`../${file}`, import.meta.url)), `docs/performance.md names ${file}, which does not exist`);
  return file;
}

describe('the documentation', () => {
  it('lists every problem type the service answers with, with its status, and no other', () => {
    const documented = documentedProblemTypes();
    const defined = new Map(Object.entries(problemTypes).map(([type, { status }]) => [type, status as number]));
    assert.deepEqual([...documented.keys()].sort(), [...defined.keys()].sort(), 'docs/api.md "Problem types" and src/core/problems.ts list different types');
    for (const [type, status] of defined) assert.equal(documented.get(type), status, `docs/api.md gives ${type} another status`);
  });

  it('keeps docs/performance.md to a page of current figures', () => {
    const lines = readRepoFile('docs/performance.md').split('\n').length;
    assert.ok(lines < performancePageMaxLines, `docs/performance.md has ${lines} lines: the history belongs in docs/performance-journal.md`);
  });

  it('gives every figure in docs/performance.md its command, date and commit', () => {
    const tables = tablesOf(readRepoFile('docs/performance.md'));
    assert.ok(tables.length > 0, 'docs/performance.md has no table of figures');
    for (const { headings, rows } of tables) {
      const column = (name: string): number => headings.findIndex((heading) => heading.startsWith(name));
      const [command, date, commit] = [column('Command'), column('Date'), column('Commit')];
      assert.ok(command >= 0 && date >= 0 && commit >= 0, `a table of docs/performance.md has no Command, Date or Commit column: ${headings.join(' | ')}`);
      for (const { line, cells } of rows) {
        assert.ok(commandsIn(cells[command] ?? '').length > 0, `docs/performance.md line ${line} names no command`);
        assert.match(cells[date] ?? '', /^\d{4}-\d{2}-\d{2}\b/, `docs/performance.md line ${line} has no date`);
        assert.match(cells[commit] ?? '', /^`[0-9a-f]{7,40}`$/, `docs/performance.md line ${line} has no commit`);
      }
    }
  });

  it('names only npm scripts and bench files that exist, with settings their bench reads', () => {
    const page = readRepoFile('docs/performance.md');
    const { scripts } = JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> };
    for (const [, script] of page.matchAll(/\bnpm run ([\w:-]+)/g)) {
      assert.ok(scripts[script!] !== undefined, `docs/performance.md names \`npm run ${script}\`, which package.json does not have`);
    }
    const shared = readRepoFile('bench/lib.ts');
    for (const command of commandsIn(page)) {
      const bench = readRepoFile(benchFileOf(command, scripts));
      for (const [, setting] of command.matchAll(/\b(BENCH_\w+)=/g)) {
        assert.ok(bench.includes(setting!) || shared.includes(setting!), `\`${command}\` in docs/performance.md sets ${setting}, which its bench does not read`);
      }
    }
  });
});
