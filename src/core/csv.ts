/**
 * CSV exports of any length, written as they are read. RFC 4180: a header line first, CRLF after
 * every record (the last too), a field quoted when it holds a comma, a double quote, CR or LF
 * (and a semicolon, the separator spreadsheets use in many locales), double quotes doubled
 * inside. UTF-8 without a byte order mark: parsers, `cat` of several exports and `text/csv`
 * consumers take the bytes as they are, and Excel reads UTF-8 through Data → From Text/CSV.
 *
 * Cells are guarded against formula injection (OWASP "CSV Injection"): text beginning with =, +,
 * -, @, tab, CR or NUL gets a leading single quote, so a spreadsheet shows it as text instead of
 * running it. Numbers given as numbers are written as they are (a refund of -5 stays -5); a
 * number given as text ("-5") is text, and guarded like any other.
 */
import { Readable } from 'node:stream';

export interface CsvColumn<Row> {
  header: string;
  value: (row: Row) => string | number | null;
}

/** Rows are joined into chunks of about this many characters before they are pushed. */
const CHUNK_CHARS = 64 * 1024;
/** The first chunk is small: the header and the first rows leave at once, however big the export. */
const FIRST_CHUNK_CHARS = 4 * 1024;
const RECORD_END = '\r\n';
const FORMULA_START = /^[=+\-@\t\r\0]/;
const NEEDS_QUOTES = /[",;\r\n]/;

/**
 * A readable byte stream of `rows` as CSV. It pulls from `rows` only as its reader asks for more
 * (one chunk of about 64 KiB at a time, the first 4 KiB), so millions of rows never sit in memory. An error from
 * `rows` or from a column's `value` destroys the stream with that error; a reader that stops
 * early (the stream destroyed) ends the iteration, so the source's `finally` blocks run.
 */
export function csvStream<Row>(columns: CsvColumn<Row>[], rows: AsyncIterable<Row>): Readable {
  const iterator = rows[Symbol.asyncIterator]();
  let headerWritten = false;
  let finished = false;

  async function nextChunk(): Promise<string | null> {
    const records: string[] = [];
    let size = 0;
    const limit = headerWritten ? CHUNK_CHARS : FIRST_CHUNK_CHARS;
    if (!headerWritten) {
      headerWritten = true;
      records.push(recordOf(columns.map((column) => column.header)));
      size += records[0]!.length;
    }
    while (size < limit) {
      const next = await iterator.next();
      if (next.done) {
        finished = true;
        break;
      }
      const record = recordOf(columns.map((column) => column.value(next.value)));
      records.push(record);
      size += record.length;
    }
    return records.length > 0 ? records.join('') : null;
  }

  return new Readable({
    read() {
      if (finished) {
        this.push(null);
        return;
      }
      // Node calls read() again only after this push, so one pull runs at a time.
      nextChunk().then(
        (chunk) => {
          if (this.destroyed) return;
          if (chunk !== null) this.push(chunk, 'utf8');
          if (finished) this.push(null);
        },
        (error: unknown) => this.destroy(error instanceof Error ? error : new Error(String(error))),
      );
    },
    destroy(error, callback) {
      if (finished || !iterator.return) return callback(error);
      finished = true;
      // Ends the source early (a generator's finally runs); its own failure there is secondary.
      iterator.return().then(
        () => callback(error),
        () => callback(error),
      );
    },
  });
}

function recordOf(cells: Array<string | number | null>): string {
  return cells.map(cellOf).join(',') + RECORD_END;
}

/**
 * One field: guarded against formulas, then quoted when RFC 4180 (or a spreadsheet) needs it.
 * NaN and infinities have no CSV spelling ("-Infinity" would even read as a formula): empty.
 */
function cellOf(value: string | number | null): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  const text = FORMULA_START.test(value) ? `'${value}` : value;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
