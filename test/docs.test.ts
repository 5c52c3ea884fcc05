import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { problemTypes } from '../src/core/problems.ts';
import { describe, it } from './fixtures/suites.ts';

/** The rows of docs/api.md's "Problem types" table: type and status. */
function documentedProblemTypes(): Map<string, number> {
  const api = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
  const section = api.split('### Problem types')[1]?.split('\n## ')[0] ?? '';
  const rows = [...section.matchAll(/^\| `([a-z-]+)` \| (\d{3}) \|/gm)];
  return new Map(rows.map(([, type, status]) => [type!, Number(status)]));
}

describe('the documentation', () => {
  it('lists every problem type the service answers with, with its status, and no other', () => {
    const documented = documentedProblemTypes();
    const defined = new Map(Object.entries(problemTypes).map(([type, { status }]) => [type, status as number]));
    assert.deepEqual([...documented.keys()].sort(), [...defined.keys()].sort(), 'docs/api.md "Problem types" and src/core/problems.ts list different types');
    for (const [type, status] of defined) assert.equal(documented.get(type), status, `docs/api.md gives ${type} another status`);
  });
});
