/**
 * A query's rows read a page at a time on a keyset cursor, so an export of a million rows holds
 * one page in memory, and works the same on both databases (no server-side cursor needed).
 */
export async function* inPages<Row, Cursor>(
  readPage: (after: Cursor | undefined, limit: number) => Promise<Row[]>,
  cursorOf: (row: Row) => Cursor,
  pageSize = 1000,
): AsyncGenerator<Row> {
  let after: Cursor | undefined;
  for (;;) {
    const page = await readPage(after, pageSize);
    yield* page;
    if (page.length < pageSize) return;
    after = cursorOf(page[page.length - 1]!);
  }
}
