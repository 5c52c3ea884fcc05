import { nowIso } from '../core/clock.ts';
import { NotFound, ValidationFailed } from '../core/problems.ts';
import { emailSchema, normaliseEmail } from '../core/email.ts';
import { shopSchema, type Store } from './schemas.ts';
import type { StoreRow, StoreStore } from './store.ts';

/** Stores and their owners. Agents consult it to bind a claimed agent to a store. */
export class StoreService {
  constructor(private readonly store: StoreStore) {}

  /** The operator's `restock store create`: creates the store or changes its owner. */
  async createStore(domain: string, ownerEmail: string): Promise<Store> {
    const errors = [];
    const domainCheck = shopSchema.safeParse(domain);
    if (!domainCheck.success) errors.push({ pointer: '/domain', message: domainCheck.error.issues[0]!.message });
    const emailCheck = emailSchema.safeParse(ownerEmail);
    if (!emailCheck.success) errors.push({ pointer: '/owner', message: emailCheck.error.issues[0]!.message });
    if (errors.length) throw new ValidationFailed(errors);
    const now = nowIso();
    const row = await this.store.upsert({
      domain: domain.toLowerCase(),
      owner_email: normaliseEmail(ownerEmail),
      created_at: now,
      updated_at: now,
    });
    return present(row);
  }

  findStore(domain: string): Promise<StoreRow | undefined> {
    return this.store.find(domain.toLowerCase());
  }

  async getStore(domain: string): Promise<Store> {
    const row = await this.findStore(domain);
    if (!row) throw new NotFound(`No store ${domain}.`);
    return present(row);
  }
}

function present(row: StoreRow): Store {
  return { domain: row.domain, ownerEmail: row.owner_email, createdAt: row.created_at };
}
