import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { problemResponses } from '../core/http/openapi-responses.ts';
import { exportParams } from './schemas.ts';
import type { ConversionService } from './service.ts';

/**
 * User agents of link scanners and previewers that fetch every link of a mail before (or
 * without) a person: security gateways, mail apps' previews, chat unfurlers, scripts. Their
 * requests still land (a scanner that got a 404 might flag the mail) but are not clicks.
 */
const SCANNER_AGENTS =
  /bot\b|crawler|spider|preview|scanner|safelinks|barracuda|proofpoint|mimecast|symantec|messagelabs|fireeye|forcepoint|trendmicro|sophos|cisco|ironport|zscaler|microsoft office|ms-office|googleimageproxy|yahoomailproxy|facebookexternalhit|slackbot|whatsapp|telegrambot|discordbot|urlscan|curl\/|wget\/|python-|go-http-client|okhttp|java\/|libwww|node-fetch|axios|undici/i;

/**
 * Whether a request for an alert's link is a shopper following it. Not counted: HEAD (scanners
 * probe links with it), prefetches a browser or mail app announces (`Purpose`/`Sec-Purpose:
 * prefetch`, `X-Moz: prefetch`), no user agent at all, and the scanners above.
 */
export function isShopperVisit(request: Pick<FastifyRequest, 'method' | 'headers'>): boolean {
  if (request.method !== 'GET') return false;
  const purpose = `${request.headers['purpose'] ?? ''} ${request.headers['sec-purpose'] ?? ''} ${request.headers['x-moz'] ?? ''}`;
  if (/prefetch|prerender|preview/i.test(purpose)) return false;
  const agent = request.headers['user-agent'];
  return typeof agent === 'string' && agent.trim() !== '' && !SCANNER_AGENTS.test(agent);
}

const clickParams = z.object({ domain: z.string().max(255), token: z.string().max(400) });

/** The alert link redirect, the orders API, the performance figures and the CSV exports. */
export function conversionRoutes(service: ConversionService) {
  return async function (app: FastifyInstance) {
    const api = app.withTypeProvider<ZodTypeProvider>();

    api.get('/r/:domain/:token', {
      schema: { hide: true, params: clickParams },
      handler: async (request, reply) => {
        const location = await service.followClick(request.params.domain, request.params.token, { counts: isShopperVisit(request) });
        return reply
          .code(302)
          .header('location', location)
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .header('x-robots-tag', 'noindex')
          .send();
      },
    });

    api.get('/api/v1/stores/:shop/exports/:kind', {
      config: { scope: 'api:read' },
      schema: {
        operationId: 'exportCsv',
        summary: "Download the store's subscribers, alerts or attributed orders as CSV (streamed)",
        tags: ['conversions'],
        params: exportParams,
        response: { 200: z.string().describe('text/csv; RFC 4180, UTF-8, a header line first'), ...problemResponses(400, 404, 503) },
      },
      handler: async (request, reply) => {
        const { shop, kind } = request.params;
        const csv = service.exportCsv(request.caller!, shop, kind);
        return reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${shop.toLowerCase()}-${kind}.csv"`)
          .header('cache-control', 'no-store')
          // A stream is piped as it is; the 200 schema above only documents it.
          .send(csv as unknown as string);
      },
    });
  };
}
