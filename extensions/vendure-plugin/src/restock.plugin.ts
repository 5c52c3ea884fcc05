import {
  EventBus,
  GlobalSettingsEvent,
  Logger,
  Order,
  OrderPlacedEvent,
  OrderService,
  OrderStateTransitionEvent,
  PluginCommonModule,
  ProductEvent,
  ProductVariantChannelEvent,
  ProductVariantEvent,
  Refund,
  RefundStateTransitionEvent,
  RequestContext,
  StockMovementEvent,
  TransactionalConnection,
  type Type,
  VendureEvent,
  VendurePlugin,
} from '@vendure/core';
import type { Subscription } from 'rxjs';
import { Deliveries } from './deliveries';
import type { OrderMessage, RestockMessage } from './messages';
import { checkOptions, type CheckedOptions, type RestockPluginOptions } from './options';

const LOG_CONTEXT = 'RestockPlugin';

/**
 * Tells Restock of what it needs to send back-in-stock alerts and count the revenue they win back:
 * stock and catalogue changes (as ids: Restock reads the levels back), orders placed and paid,
 * cancellations and refunds. Every delivery is signed with the store's secret.
 *
 *   plugins: [RestockPlugin.init({ restockUrl, store, signingSecret })]
 */
@VendurePlugin({
  imports: [PluginCommonModule],
  compatibility: '^3.0.0',
})
export class RestockPlugin {
  private static options: CheckedOptions | undefined;
  private deliveries: Deliveries | undefined;
  private readonly subscriptions: Subscription[] = [];

  constructor(
    private readonly eventBus: EventBus,
    private readonly orders: OrderService,
    private readonly connection: TransactionalConnection,
  ) {}

  static init(options: RestockPluginOptions): typeof RestockPlugin {
    RestockPlugin.options = checkOptions(options);
    return RestockPlugin;
  }

  /** Resolves once every delivery under way has succeeded or given up (for a clean shutdown, and tests). */
  static async settled(): Promise<void> {
    await RestockPlugin.running?.deliveries?.settled();
  }

  private static running: RestockPlugin | undefined;

  onApplicationBootstrap(): void {
    const options = RestockPlugin.options;
    if (options === undefined) throw new Error('RestockPlugin: add it to the plugins as RestockPlugin.init({ restockUrl, store, signingSecret })');
    this.deliveries = new Deliveries(options, { warn: (m) => Logger.warn(m, LOG_CONTEXT), error: (m) => Logger.error(m, LOG_CONTEXT) });
    RestockPlugin.running = this;
    this.listen();
    Logger.info(`Telling Restock at ${options.deliveryUrl.origin} of ${options.store}'s stock and orders`, LOG_CONTEXT);
  }

  async onApplicationShutdown(): Promise<void> {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
    this.deliveries?.stop();
    await this.deliveries?.settled();
    if (RestockPlugin.running === this) RestockPlugin.running = undefined;
  }

  private listen(): void {
    const on = <T extends VendureEvent>(type: Type<T>, handle: (event: T) => RestockMessage | undefined | Promise<RestockMessage | undefined>) => {
      this.subscriptions.push(
        this.eventBus.ofType(type).subscribe((event) => {
          Promise.resolve()
            .then(() => handle(event))
            .then((message) => message && this.deliveries?.send(message))
            .catch((err: unknown) => Logger.error(`Restock: ${(err as Error).message}`, LOG_CONTEXT));
        }),
      );
    };
    // A stock movement gives a change, not a level: Restock reads the variants back.
    on(StockMovementEvent, (event) => variantsChanged(event.stockMovements.map((movement) => movement.productVariant?.id)));
    // A variant made at stock 0 moves no stock; one enabled, disabled, deleted or given another threshold neither.
    on(ProductVariantEvent, (event) => variantsChanged(event.entity.map((variant) => variant.id)));
    on(ProductVariantChannelEvent, (event) => variantsChanged([event.productVariant.id]));
    on(ProductEvent, (event) => (event.type === 'created' ? undefined : { type: 'products.changed', productIds: [String(event.entity.id)] }));
    // The shop-wide threshold or inventory tracking: every product may have changed.
    on(GlobalSettingsEvent, () => ({ type: 'catalog.changed' }));
    on(OrderPlacedEvent, async (event) => ({ type: 'order.placed', order: await this.orderMessage(event.ctx, event.order) }));
    on(OrderStateTransitionEvent, async (event) => {
      if (event.toState === 'PaymentSettled') return { type: 'order.paid', order: await this.orderMessage(event.ctx, event.order) };
      if (event.toState === 'Cancelled') return { type: 'order.cancelled', code: event.order.code, cancelledAt: new Date().toISOString() };
      return undefined;
    });
    on(RefundStateTransitionEvent, (event) => (event.toState === 'Settled' ? this.refundMessage(event.ctx, event.refund, event.order) : undefined));
  }

  /** The order as attribution reads it, loaded anew with its lines and customer. */
  private async orderMessage(ctx: RequestContext, given: Order): Promise<OrderMessage> {
    const order = (await this.orders.findOne(ctx, given.id, ['lines', 'lines.productVariant', 'customer'])) ?? given;
    return {
      code: order.code,
      email: order.customer?.emailAddress ?? null,
      placedAt: (order.orderPlacedAt ?? order.updatedAt ?? new Date()).toISOString(),
      currency: order.currencyCode,
      lines: order.lines.map((line) => ({
        lineId: String(line.id),
        productId: String(line.productVariant.productId),
        variantId: String(line.productVariant.id),
        quantity: line.quantity,
        amount: line.proratedLinePriceWithTax,
      })),
    };
  }

  /**
   * A settled refund: its lines with what they gave back. A refund of an amount alone (no lines)
   * is laid on the order's lines in order, each up to what it cost.
   */
  private async refundMessage(ctx: RequestContext, given: Refund, givenOrder: Order): Promise<RestockMessage> {
    const refund = (await this.connection.getRepository(ctx, Refund).findOne({ where: { id: given.id }, relations: ['lines'] })) ?? given;
    const order = (await this.orders.findOne(ctx, givenOrder.id, ['lines'])) ?? givenOrder;
    const lineById = new Map(order.lines.map((line) => [String(line.id), line]));
    let lines = (refund.lines ?? []).map((refunded) => {
      const line = lineById.get(String(refunded.orderLineId));
      const unit = line ? line.proratedUnitPriceWithTax : 0;
      return { lineId: String(refunded.orderLineId), quantity: refunded.quantity, amount: Math.round(unit * refunded.quantity) };
    });
    if (lines.length === 0) {
      let left = refund.total - (refund.shipping ?? 0);
      lines = order.lines.flatMap((line) => {
        const amount = Math.min(left, line.proratedLinePriceWithTax);
        left -= amount;
        return amount > 0 ? [{ lineId: String(line.id), quantity: 0, amount }] : [];
      });
    }
    return { type: 'order.refunded', code: order.code, refundId: String(refund.id), refundedAt: (refund.updatedAt ?? new Date()).toISOString(), currency: order.currencyCode, lines };
  }
}

function variantsChanged(ids: ReadonlyArray<string | number | undefined>): RestockMessage | undefined {
  const variantIds = [...new Set(ids.filter((id) => id !== undefined).map(String))];
  return variantIds.length > 0 ? { type: 'variants.changed', variantIds } : undefined;
}
