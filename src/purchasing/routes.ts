import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { csvStream, type CsvColumn } from '../core/csv.ts';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { purchasingCsvParams } from './schemas.ts';
import type { PurchasingRow, PurchasingService } from './service.ts';

const COLUMNS: CsvColumn<PurchasingRow>[] = [
  { header: 'product_id', value: (row) => row.productId },
  { header: 'variant_id', value: (row) => row.variantId },
  { header: 'product_title', value: (row) => row.productTitle },
  { header: 'variant_title', value: (row) => row.variantTitle },
  { header: 'waiting', value: (row) => row.waiting },
  { header: 'total_wait_seconds', value: (row) => row.totalWaitSeconds },
  { header: 'mean_wait_seconds', value: (row) => row.meanWaitSeconds },
  { header: 'price_minor', value: (row) => row.price?.minor ?? null },
  { header: 'currency', value: (row) => row.price?.currency ?? null },
  { header: 'potential_revenue_minor', value: (row) => row.potentialRevenue?.minor ?? null },
];

/** The purchasing view as CSV: a stream, so outside the operation registry, like the other exports. */
export function purchasingRoutes(service: PurchasingService) {
  return async function (app: FastifyInstance) {
    app.withTypeProvider<ZodTypeProvider>().get('/api/v1/stores/:shop/purchasing.csv', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'exportPurchasingCsv',
        summary: 'Download the purchasing view as CSV (streamed), in its rank',
        tags: ['purchasing'],
        params: purchasingCsvParams,
        response: { 200: z.string().describe('text/csv; RFC 4180, UTF-8, a header line first'), ...problemResponses(400, 404, 503) },
      },
      handler: async (request, reply) => {
        const { shop } = request.params;
        // Tenancy is decided here, before the first byte: another store's agent gets a 404, not an empty file.
        const csv = csvStream(COLUMNS, service.rows(request.caller!, shop));
        return reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${shop.toLowerCase()}-purchasing.csv"`)
          .header('cache-control', 'no-store')
          // A stream is piped as it is; the 200 schema above only documents it.
          .send(csv as unknown as string);
      },
    });
  };
}
