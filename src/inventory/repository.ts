import { chunks } from '../core/chunks.ts';
import type { ChangeBus } from '../core/changes/bus.ts';
import { STOCK_CHANGES, STORE_CHANGES, stockKey } from '../core/changes/topics.ts';
import type { Database } from '../core/db/database.ts';
import type { InventoryLevelsTable, InventoryVariantsTable } from '../core/db/schema.ts';

export type VariantStockRow = InventoryVariantsTable;
export type LevelRow = InventoryLevelsTable;

/** Storage of known stock; the only code that touches `inventory_variants` and `inventory_levels`. */
export type Availability = Pick<VariantStockRow, 'variant_id' | 'available' | 'published' | 'purchasable_without_stock'>;

export class InventoryRepository {
  /** Built once: every storefront page view asks it. */
  readonly availability: (storeDomain: string, productId: string) => Promise<Availability[]>;

  constructor(
    private readonly database: Database,
    /** Every committed change to a product's stock is announced here (the storefront keeps answers built from it). */
    private readonly changes: ChangeBus,
  ) {
    this.availability = database.preparedReadAll<Availability>(2, (db, storeDomain, productId) =>
      db
        .selectFrom('inventory_variants')
        .select(['variant_id', 'available', 'published', 'purchasable_without_stock'])
        .where('store_domain', '=', storeDomain!)
        .where('product_id', '=', productId!)
        .orderBy('variant_id'),
    );
  }

  find(storeDomain: string, productId: string, variantKey: string): Promise<VariantStockRow | undefined> {
    return this.database.db
      .selectFrom('inventory_variants')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('product_id', '=', productId)
      .where('variant_id', '=', variantKey)
      .executeTakeFirst();
  }

  ofProduct(storeDomain: string, productId: string): Promise<VariantStockRow[]> {
    return this.database.db
      .selectFrom('inventory_variants')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('product_id', '=', productId)
      .orderBy('variant_id')
      .execute();
  }

  /** The known variants of several products at once, in runs short enough for any database. */
  async ofProducts(storeDomain: string, productIds: string[]): Promise<VariantStockRow[]> {
    const rows: VariantStockRow[] = [];
    for (const chunk of chunks(productIds)) {
      rows.push(...(await this.database.db.selectFrom('inventory_variants').selectAll().where('store_domain', '=', storeDomain).where('product_id', 'in', chunk).execute()));
    }
    return rows;
  }

  list(storeDomain: string, limit: number): Promise<VariantStockRow[]> {
    return this.database.db
      .selectFrom('inventory_variants')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .orderBy('product_id')
      .orderBy('variant_id')
      .limit(limit)
      .execute();
  }

  byItem(storeDomain: string, inventoryItemId: string): Promise<VariantStockRow | undefined> {
    return this.database.db
      .selectFrom('inventory_variants')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('inventory_item_id', '=', inventoryItemId)
      .executeTakeFirst();
  }

  async save(row: VariantStockRow): Promise<void> {
    const { store_domain, product_id, variant_id, ...changes } = row;
    await this.database.writeStatement((db) =>
      db
        .insertInto('inventory_variants')
        .values(row)
        .onConflict((oc) => oc.columns(['store_domain', 'product_id', 'variant_id']).doUpdateSet(changes))
        .execute(),
    );
    await this.changes.publish(STOCK_CHANGES, [stockKey(store_domain, product_id)]);
  }

  level(storeDomain: string, inventoryItemId: string, locationId: string): Promise<LevelRow | undefined> {
    return this.database.db
      .selectFrom('inventory_levels')
      .selectAll()
      .where('store_domain', '=', storeDomain)
      .where('inventory_item_id', '=', inventoryItemId)
      .where('location_id', '=', locationId)
      .executeTakeFirst();
  }

  async saveLevel(row: LevelRow): Promise<void> {
    const { store_domain, inventory_item_id, location_id, ...changes } = row;
    await this.database.writeStatement((db) =>
      db
        .insertInto('inventory_levels')
        .values(row)
        .onConflict((oc) => oc.columns(['store_domain', 'inventory_item_id', 'location_id']).doUpdateSet(changes))
        .execute(),
    );
  }

  /** The item's stock across the locations heard of; null when none reported a number. */
  async itemTotal(storeDomain: string, inventoryItemId: string): Promise<number | null> {
    const rows = await this.database.db
      .selectFrom('inventory_levels')
      .select('available')
      .where('store_domain', '=', storeDomain)
      .where('inventory_item_id', '=', inventoryItemId)
      .execute();
    const known = rows.filter((row) => row.available !== null);
    return known.length === 0 ? null : known.reduce((sum, row) => sum + Math.max(0, Number(row.available)), 0);
  }

  async setUnlistedCountries(storeDomain: string, productId: string, countries: string[], now: string): Promise<void> {
    await this.database.write(async (trx) => {
      await trx.deleteFrom('inventory_unlisted_countries').where('store_domain', '=', storeDomain).where('product_id', '=', productId).execute();
      if (countries.length === 0) return;
      await trx
        .insertInto('inventory_unlisted_countries')
        .values(countries.map((country) => ({ store_domain: storeDomain, product_id: productId, country, updated_at: now })))
        .execute();
    });
  }

  async unlistedCountries(storeDomain: string, productId: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('inventory_unlisted_countries')
      .select('country')
      .where('store_domain', '=', storeDomain)
      .where('product_id', '=', productId)
      .orderBy('country')
      .execute();
    return rows.map((row) => row.country);
  }

  async forgetStore(storeDomain: string): Promise<void> {
    await this.database.write(async (trx) => {
      await trx.deleteFrom('inventory_variants').where('store_domain', '=', storeDomain).execute();
      await trx.deleteFrom('inventory_levels').where('store_domain', '=', storeDomain).execute();
      await trx.deleteFrom('inventory_unlisted_countries').where('store_domain', '=', storeDomain).execute();
    });
    await this.changes.publish(STORE_CHANGES, [storeDomain]);
  }
}
