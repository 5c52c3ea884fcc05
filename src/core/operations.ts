import { z } from 'zod';
import type { Caller } from './http/caller.ts';
import type { FieldError } from './problems.ts';
import type { Scope } from './scopes.ts';

/**
 * An operation, declared once by the module that owns it. Everything else is generated from the
 * declaration: its HTTP route (src/core/http/operation-routes.ts), its MCP tool and A2A skill when
 * offered, its OpenAPI entry with `x-payment-info`, its row in the agent skills' price table, its
 * place in the API index, and its case in the tenancy walk (test/tenancy.test.ts).
 *
 * Terms, once:
 * - **input**: one object. Its fields named in the path (`:shop`) travel in the path; the others
 *   travel in the query for GET and DELETE, in the JSON body otherwise. An MCP tool or an A2A
 *   skill takes the whole object as its arguments.
 * - **output**: what a success answers (HTTP 200, or `status`).
 * - **tenancy**: what the operation answers store A's agent that names store B or one of its
 *   records (`refusal`), or why it names no tenant's record (`none`).
 * - **example**: an input its own schema accepts, shown on the A2A card and aimed at another
 *   store by the tenancy walk.
 * - **paid**: the price and rules of paying per request without an access token.
 */
export interface OperationDeclaration<S, I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> {
  /** The OpenAPI `operationId`; the MCP tool is named after it (`subscribeAlert` → `subscribe_alert`). */
  id: string;
  method: HttpMethod;
  /** Fastify's form: `/api/v1/stores/:shop/stock`. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** The scope an access token must hold; absent: public. */
  scope?: Scope;
  /** Takes an `Idempotency-Key` (src/core/http/idempotency.ts). */
  idempotent?: boolean;
  input: I;
  output: O;
  /** The success status when not 200; 204 answers no body (`output` is then `z.null()`). */
  status?: 201 | 204;
  /** The problem statuses it may answer, for the OpenAPI document. */
  errors: number[];
  /** Headers every success carries. */
  headers?: Record<string, string>;
  tenancy: Tenancy;
  example: z.input<I>;
  /** Offered as an MCP tool, under this title. */
  tool?: { title: string; description?: string };
  /** Offered as an A2A skill (its tool's title and description). */
  skill?: true;
  paid?: PaidTerms<S, z.output<I>, z.output<O>>;
  run(service: S, input: z.output<I>, context: OperationContext): Promise<z.input<O>>;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type Tenancy = { refusal: 403 | 404 } | { none: string };

export interface OperationContext {
  caller: Caller;
  /** How a caller without a token paid for this call. */
  paidWith?: 'x402' | 'mpp';
}

export type MppMethod = 'stripe' | 'tempo' | 'card';
export type MppIntent = 'charge' | 'session';

export interface MppOffer {
  method: MppMethod;
  intent: MppIntent;
  description: string;
}

/** What a paid operation costs and how it may be paid: what the 402s, MPP challenges, x402 requirements and `/openapi.json` read. */
export interface PriceSheet {
  operation: string;
  /** USD cents: exact arithmetic, and the base unit MPP discovery states amounts in. */
  usdCents: number;
  description: string;
  mpp: MppOffer[];
  /** Whether x402 pays for it: a transfer cannot be given back, so not for what may have to be refunded. */
  x402: boolean;
}

/** USD cents as the decimal string MPP route requests take ("0.05"). */
export function usdDecimal(cents: number): string {
  return (cents / 100).toFixed(2);
}

/** The offers of a per-request fee: a card through Stripe, or a micro-payment on Tempo. */
export const perRequestCharges: MppOffer[] = [
  { method: 'stripe', intent: 'charge', description: 'Per-alert processing fee, paid by card through Stripe' },
  { method: 'tempo', intent: 'charge', description: 'Micro-payment charge on the Tempo network' },
];

/**
 * Paying per request: the price, and what the payment pipeline needs to know of the call. The
 * pipeline knows no feature's fields: whatever it needs of the input or the result is declared
 * here, typed by the operation's own schemas.
 */
export interface PaidTerms<S, I, O> {
  price: Omit<PriceSheet, 'operation'>;
  /** The store the payment is for, so that the store's owner finds it in the ledger. */
  storeOf(input: I): string | null | undefined;
  /** True when the price covers this input; otherwise the field it does not, refused before any charge. */
  admits?(input: I): true | FieldError;
  /** What the payment bought, recorded in the ledger as the payment's result. */
  resultReference(result: O): string | null | undefined;
  /** The owning module's own refusal of the input, made before any charge. */
  beforeCharge?(service: S, input: I): Promise<void>;
}

/** An operation bound to its module's service: what the transports serve. */
export interface Operation {
  declaration: OperationDeclaration<unknown>;
  /** The path's parameter names, in order. */
  pathFields: string[];
  paid?: BoundPaidTerms;
  run(input: unknown, context: OperationContext): Promise<unknown>;
}

/** A paid operation's terms with its service bound: what the payment pipeline calls. */
export interface BoundPaidTerms {
  operation: string;
  price: PriceSheet;
  storeOf(input: unknown): string | null | undefined;
  admits(input: unknown): true | FieldError;
  resultReference(result: unknown): string | null | undefined;
  beforeCharge(input: unknown): Promise<void>;
}

/** Declares a module's operations over its service; typed one by one against their own schemas. */
export function defineOperation<S, I extends z.ZodObject, O extends z.ZodType>(declaration: OperationDeclaration<S, I, O>): OperationDeclaration<S, I, O> {
  return declaration;
}

/** The path's parameter names (`/a/:shop/b/:id` → shop, id). */
export function pathFieldsOf(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1]!);
}

/** A price as the docs, skills and pages write it: "USD 0.05". */
export function usdText(cents: number): string {
  return `USD ${usdDecimal(cents)}`;
}

/** The sheet of an operation a page or skill names by id; one that declares no price is a mistake in that page, refused at start. */
export function pricedOperation(prices: PricedOperation[], operation: string, where: string): PricedOperation {
  const sheet = prices.find((candidate) => candidate.operation === operation);
  if (!sheet) throw new Error(`${where} names the price of ${operation}, which declares none.`);
  return sheet;
}

/** A paid operation's price sheet, with the request that pays it (for the price tables of the docs and skills). */
export interface PricedOperation extends PriceSheet {
  method: HttpMethod;
  path: string;
}

/** The price sheet of a declared paid operation. */
export function priceSheetOf(declaration: OperationDeclaration<never>): PricedOperation | undefined {
  return declaration.paid && { operation: declaration.id, method: declaration.method, path: declaration.path, ...declaration.paid.price };
}

/** Binds a module's declarations to its service, checking each one's shape as it is wired. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each declaration has its own schemas; binding needs only their common shape
export function bindOperations<S>(declarations: ReadonlyArray<OperationDeclaration<S, any, any>>, service: S): Operation[] {
  return declarations.map((declared) => {
    const declaration = declared as unknown as OperationDeclaration<S>;
    const pathFields = pathFieldsOf(declaration.path);
    const missing = pathFields.filter((field) => !(field in declaration.input.shape));
    if (missing.length > 0) throw new Error(`${declaration.id}: the path names ${missing.join(', ')}, which its input does not have.`);
    const terms = declaration.paid;
    return {
      declaration: declaration as unknown as OperationDeclaration<unknown>,
      pathFields,
      ...(terms
        ? {
            paid: {
              operation: declaration.id,
              price: priceSheetOf(declaration as never)!,
              storeOf: (input: unknown) => terms.storeOf(input as never),
              admits: (input: unknown) => terms.admits?.(input as never) ?? true,
              resultReference: (result: unknown) => terms.resultReference(result as never),
              beforeCharge: async (input: unknown) => terms.beforeCharge?.(service, input as never),
            },
          }
        : {}),
      run: (input: unknown, context: OperationContext) => declaration.run(service, input as never, context) as Promise<unknown>,
    };
  });
}

/** `subscribeAlert` → `subscribe_alert`: how MCP tools are named after operations. */
export const toolNameOf = (operationId: string) => operationId.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** Whether the input's fields not in the path travel in a JSON body (GET and DELETE carry them in the query). */
export function carriesBody(method: HttpMethod): boolean {
  return method !== 'GET' && method !== 'DELETE';
}

/** The input's parts as HTTP carries them: path parameters, then query or body. */
export interface HttpParts {
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodObject;
  /**
   * Set when the parts, validated one by one, miss the input's own refinements (a rule across
   * fields): the whole input is then checked once more, as one object.
   */
  refined?: true;
}

export function httpParts(declaration: OperationDeclaration<unknown>, pathFields: string[]): HttpParts {
  const { input, method } = declaration;
  const others = Object.keys(input.shape).filter((field) => !pathFields.includes(field));
  const rest = pathFields.length === 0 ? input : others.length > 0 ? partOf(input, others) : undefined;
  return {
    ...(pathFields.length > 0 ? { params: partOf(input, pathFields) } : {}),
    ...(rest ? (carriesBody(method) ? { body: rest } : { query: rest }) : {}),
    ...(pathFields.length > 0 && hasRefinements(input) ? { refined: true as const } : {}),
  };
}

/** Some of the input's fields, as strict as the input (zod refuses to `pick` from a refined object). */
function partOf(input: z.ZodObject, fields: string[]): z.ZodObject {
  const part = z.object(Object.fromEntries(fields.map((field) => [field, input.shape[field]!])));
  return input._zod.def.catchall?._zod.def.type === 'never' ? part.strict() : part;
}

function hasRefinements(input: z.ZodObject): boolean {
  return (input._zod.def.checks?.length ?? 0) > 0;
}
