/**
 * Plants, one at a time, bugs that once passed every test, each in a temporary copy of the
 * repository, runs the test files that should catch it, and reports caught or missed. A bug the
 * suite misses means a stand-in has grown kinder than the service it stands for.
 *
 *   npm run test:mutations                 all of them (exit 1 if one is missed)
 *   npm run test:mutations -- shopify      only those whose name contains "shopify"
 *
 * The copies run on SQLite only: these bugs live at the boundary with Shopify and Stripe, or in
 * what is computed from what is stored, not in the storage, and the suite runs every dialect anyway.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface Edit {
  file: string;
  /** Text that must be there exactly once: a mutation whose anchor is gone fails loudly instead of passing. */
  find: string;
  replace: string;
}

interface Mutation {
  name: string;
  what: string;
  edits: Edit[];
  tests: string[];
}

const MUTATIONS: Mutation[] = [
  {
    name: 'shopify-graphql',
    what: 'Admin GraphQL queries with a wrong variable type, an unknown type and a field that does not exist',
    edits: [
      { file: 'src/shopify/catalog.ts', find: 'query RestockInventoryItem($id: ID!)', replace: 'query RestockInventoryItem($id: Int!)' },
      { file: 'src/shopify/catalog.ts', find: '    ... on Product {\n', replace: '    ... on Orange { bogus }\n    ... on Product {\n' },
      { file: 'src/shopify/catalog.ts', find: 'nodes { id title inventoryPolicy sellableOnlineQuantity inventoryItem { id tracked }', replace: 'nodes { id title inventoryPolicy sellableOnlineQuantity bogusField inventoryItem { id tracked }' },
    ],
    tests: ['test/shopify.test.ts'],
  },
  {
    name: 'mpp-stripe-succeeded',
    what: 'MPP Stripe payments accepted whatever the PaymentIntent status (the "must be succeeded" check disabled)',
    edits: [{ file: 'src/payments/mpp.ts', find: "if (intent.status !== 'succeeded') {", replace: 'if (false as boolean) {' }],
    tests: ['test/payments-mpp.test.ts', 'test/mcp-payments.test.ts'],
  },
  {
    name: 'stripe-billing-fields',
    what: 'Stripe billing reading only the fields the pinned API version dropped (subscription current_period_*, invoice.subscription)',
    edits: [
      { file: 'src/billing/stripe-billing.ts', find: 'const named = invoice.parent?.subscription_details?.subscription ?? invoice.subscription;', replace: 'const named = invoice.subscription;' },
      { file: 'src/billing/stripe-billing.ts', find: 'const start = item?.current_period_start ?? legacy.current_period_start;', replace: 'const start = legacy.current_period_start;' },
      { file: 'src/billing/stripe-billing.ts', find: 'const end = item?.current_period_end ?? legacy.current_period_end;', replace: 'const end = legacy.current_period_end;' },
    ],
    tests: ['test/plans.test.ts'],
  },
  {
    name: 'cancelled-order-revenue',
    what: "an order's revision recomputing its net from the row as it was before the change (a cancellation kept the revenue)",
    edits: [{ file: 'src/conversions/repository.ts', find: 'const stored = await readStoredOrder(trx, changed);', replace: 'const stored = await readStoredOrder(trx, order);' }],
    tests: ['test/ledger-figures.test.ts'],
  },
];

const root = path.resolve(import.meta.dirname, '..');
const only = process.argv[2];
const chosen = MUTATIONS.filter((m) => only === undefined || m.name.includes(only));
if (chosen.length === 0) {
  console.error(`no mutation named like "${only}"; there are: ${MUTATIONS.map((m) => m.name).join(', ')}`);
  process.exit(2);
}

let caught = 0;
for (const mutation of chosen) {
  const outcome = await tryMutation(mutation);
  if (outcome.caught) caught++;
  console.log(`${outcome.caught ? 'caught' : 'MISSED'}  ${mutation.name}: ${mutation.what}`);
  for (const line of outcome.failing.slice(0, 8)) console.log(`          ${line}`);
}
console.log(`\n${caught}/${chosen.length} caught`);
process.exit(caught === chosen.length ? 0 : 1);

async function tryMutation(mutation: Mutation): Promise<{ caught: boolean; failing: string[] }> {
  const copy = copyOfRepository();
  try {
    for (const edit of mutation.edits) plant(copy, edit);
    const { code, output } = await runTests(copy, mutation.tests);
    const failing = [...new Set(output.split('\n').filter((line) => /^\s*✖ /.test(line)).map((line) => line.trim()))];
    return { caught: code !== 0 && failing.length > 0, failing };
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

/** The tracked files as they are now (committed or not), with the installed packages linked in. */
function copyOfRepository(): string {
  const copy = mkdtempSync(path.join(os.tmpdir(), 'restock-mutation-'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const file of files) {
    mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
    cpSync(path.join(root, file), path.join(copy, file));
  }
  symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
  return copy;
}

function plant(copy: string, edit: Edit): void {
  const file = path.join(copy, edit.file);
  const text = readFileSync(file, 'utf8');
  const found = text.split(edit.find).length - 1;
  if (found !== 1) throw new Error(`${edit.file}: the text to mutate is there ${found} times, not once: ${JSON.stringify(edit.find)}`);
  writeFileSync(file, text.replace(edit.find, edit.replace));
}

function runTests(copy: string, tests: string[]): Promise<{ code: number; output: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, RESTOCK_TEST_DIALECTS: 'sqlite' };
  delete env.RESTOCK_REQUIRE_SERVICES;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/run.ts', ...tests], { cwd: copy, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => resolve({ code: code ?? 1, output }));
  });
}
