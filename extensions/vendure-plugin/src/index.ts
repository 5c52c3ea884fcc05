export { RestockPlugin } from './restock.plugin';
export type { RestockPluginOptions } from './options';
export type { RestockMessage, OrderMessage, OrderLineMessage, RefundLineMessage } from './messages';
export { disconnectFromRestock } from './disconnect';
