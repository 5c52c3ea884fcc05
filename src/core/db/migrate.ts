import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import type { Dialect } from './dialect.ts';
import { migrations } from './migrations/index.ts';

/** Applies every pending migration; returns the names applied. Safe to run from many processes. */
export async function migrateToLatest(db: Kysely<any>, dialect: Dialect): Promise<string[]> {
  const provider: MigrationProvider = {
    async getMigrations() {
      const bound: Record<string, Migration> = {};
      for (const [name, migration] of Object.entries(migrations)) {
        bound[name] = { up: (kdb) => migration.up(kdb, dialect) };
      }
      return bound;
    },
  };
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
