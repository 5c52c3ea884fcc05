/**
 * A query's rows read a page at a time on a keyset cursor, so an export of a million rows holds
 * one page in memory, and works the same on both databases (no server-side cursor needed). The
 * first page is short, so the first rows of a big export leave as soon as a small one's would.
 */
export async function* inPages<Row, Cursor>(
  readPage: (after: Cursor | undefined, limit: number) => Promise<Row[]>,
  cursorOf: (row: Row) => Cursor,
  pageSize = 1000,
  firstPageSize = Math.min(100, pageSize),
): AsyncGenerator<Row> {
  let after: Cursor | undefined;
  for (let limit = firstPageSize; ; limit = pageSize) {
    const page = await readPage(after, limit);
    yield* page;
    if (page.length < limit) return;
    after = cursorOf(page[page.length - 1]!);
  }
}
