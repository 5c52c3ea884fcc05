import { z } from 'zod';
import { problemTypes } from '../problems.ts';

export const problemSchema = z
  .looseObject({
    type: z.string().describe('URI of the problem type; open it for an explanation'),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().optional(),
    requestId: z.string().optional().describe('Quote this when asking for help'),
    errors: z
      .array(z.object({ pointer: z.string(), message: z.string() }))
      .optional()
      .describe('For validation failures: each invalid field as a JSON pointer into the request'),
  })
  .describe('RFC 9457 problem details');

const statusTitles = new Map<number, string>();
for (const type of Object.values(problemTypes)) {
  if (!statusTitles.has(type.status)) statusTitles.set(type.status, type.title);
}

/** Response entries for the OpenAPI document: each listed status answers with problem+json. */
export function problemResponses(...statuses: number[]) {
  const out: Record<number, typeof problemSchema> = {};
  for (const status of statuses) out[status] = problemSchema.describe(statusTitles.get(status) ?? 'Problem details');
  return out;
}
