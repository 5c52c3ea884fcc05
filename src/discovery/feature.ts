import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import type { Feature } from '../core/feature.ts';
import { bindOperations, type PricedOperation } from '../core/operations.ts';
import { loadSkills } from './agent-skills.ts';
import { registerOpenApi, type PaymentInfo } from './openapi.ts';
import { frontDoorRoutes } from './front-door-routes.ts';
import { discoveryOperations } from './operations.ts';
import { collectOperations, discoveryRoutes, type IndexedOperation } from './routes.ts';

/**
 * What agents and crawlers read to find their way: the API index, problem pages, the front door,
 * the API catalog and agent skills. The operations are collected as every other feature's routes
 * register, so the index cannot list one that does not exist or miss one that does.
 */
export interface DiscoveryDeps {
  config: Config;
  payments: { paymentInfo: PaymentInfo; testNetworkNotice: string | undefined };
  /** Every declared paid operation's price, for the front door, the docs and the skills. */
  prices: PricedOperation[];
}

export function buildDiscovery({ config, payments, prices }: DiscoveryDeps): Feature<undefined> {
  const operations: IndexedOperation[] = [];
  const operationIndex = fp(async (app) => collectOperations(app, operations), { name: 'operation-index', fastify: '5.x' });
  const openApi = fp(async (app) => registerOpenApi(app, config.baseUrl, new Set(prices.map((sheet) => sheet.operation)), (operation) => payments.paymentInfo(operation)), { name: 'openapi', fastify: '5.x' });
  const site = { serviceName: config.serviceName, baseUrl: config.baseUrl, operations, prices, testNetworkNotice: payments.testNetworkNotice };
  return {
    service: undefined,
    plugins: [openApi, operationIndex],
    operations: bindOperations(discoveryOperations, site),
    routes: [discoveryRoutes(), frontDoorRoutes({ ...site, skills: loadSkills(config.baseUrl, prices) })],
  };
}
