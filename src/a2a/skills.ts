import { z } from 'zod';
import type { Scope } from '../agents/scopes.ts';
import type { Caller } from '../core/http/caller.ts';
import type { FieldError } from '../core/problems.ts';
import type { Domain } from '../domain.ts';
import { restockTools } from '../mcp/tools.ts';
import { priceSheets, type PaidOperation } from '../payments/offers.ts';

/**
 * The operations offered as A2A skills. Each is the MCP tool of the same operation (its input and
 * output schemas, the scope its HTTP twin needs, the service call), named by the HTTP operation's
 * `operationId`; what the A2A layer adds is only an example input for the card.
 */
const OFFERED = {
  subscribeAlert: { productId: 'gid://shopify/Product/123', variantId: 'gid://shopify/ProductVariant/456', email: 'shopper@example.com', shop: 'my-store.myshopify.com' },
  getSubscription: { subscriptionId: 'sub_0123456789abcdefghijklmnop' },
  cancelSubscription: { subscriptionId: 'sub_0123456789abcdefghijklmnop' },
  getStockStatus: { shop: 'my-store.myshopify.com' },
  getAlertQueue: { shop: 'my-store.myshopify.com' },
  checkoutPlan: { plan: 'starter', shop: 'my-store.myshopify.com' },
} satisfies Record<string, Record<string, unknown>>;

export type SkillId = keyof typeof OFFERED;

/** A skill: what a message names, and the service call it runs with the caller. */
export interface Skill {
  /** The HTTP operation's `operationId`, which is also what a message names. */
  id: SkillId;
  /** The MCP tool it shares its definition with. */
  tool: string;
  title: string;
  description: string;
  /** The scope its HTTP twin needs. */
  scope?: Scope;
  /** The paid operation it is, when callers without a token may pay for it. */
  paid?: PaidOperation;
  /** Payable per call over A2A: x402 is the protocol A2A has an extension for, and it must pay this operation. */
  payableWithX402: boolean;
  input: z.ZodType;
  /** What the HTTP operation answers: the result is read through it, as the HTTP serializer does. */
  output: z.ZodType;
  example: Record<string, unknown>;
  run(input: unknown, caller: Caller, paidWith?: 'x402' | 'mpp'): Promise<unknown>;
}

/** The shape every tool has (`restockTools` types each with its own schemas). */
interface ToolShape {
  name: string;
  title: string;
  description: string;
  scope?: Scope;
  paid?: PaidOperation;
  input: z.ZodType;
  output: z.ZodType;
  run(input: never, caller: Caller, paidWith?: 'x402' | 'mpp'): Promise<unknown>;
}

/** `subscribeAlert` → `subscribe_alert`: how the MCP tools are named after the operations. */
export const toolNameOf = (operationId: string) => operationId.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/**
 * The skills, built from the MCP tools. A skill whose tool is missing, or whose example its own
 * schema refuses, stops the start: the card must not promise what the endpoint would refuse.
 */
export function restockSkills(domain: Domain, serviceName: string): Skill[] {
  const tools = new Map((restockTools(domain, serviceName) as unknown as ToolShape[]).map((tool) => [tool.name, tool]));
  return (Object.entries(OFFERED) as Array<[SkillId, Record<string, unknown>]>).map(([id, example]) => {
    const tool = tools.get(toolNameOf(id));
    if (!tool) throw new Error(`The A2A skill ${id} has no MCP tool ${toolNameOf(id)} to share its definition with.`);
    const checked = tool.input.safeParse(example);
    if (!checked.success) throw new Error(`The A2A skill ${id}'s example is refused by its own schema: ${checked.error.message}`);
    return {
      id,
      tool: tool.name,
      title: tool.title,
      description: tool.description,
      ...(tool.scope ? { scope: tool.scope } : {}),
      ...(tool.paid ? { paid: tool.paid } : {}),
      payableWithX402: tool.paid !== undefined && priceSheets[tool.paid].x402,
      input: tool.input,
      output: tool.output,
      example,
      run: (input, caller, paidWith) => tool.run(input as never, caller, paidWith),
    };
  });
}

/** The JSON Schema of a skill's input, converted as the MCP server converts its tools' schemas (`tools/list` gives the same). */
export function inputJsonSchema(skill: Skill): Record<string, unknown> {
  return { type: 'object', ...(z.toJSONSchema(skill.input, { io: 'input', target: 'draft-2020-12' }) as Record<string, unknown>) };
}

/** The key of the data part's skill, and of its input. */
export const SKILL_KEY = 'skill';
export const INPUT_KEY = 'input';

/** What a message asks for: a skill and its input, validated; or why it cannot be read. */
export type SkillCall = { ok: true; skill: Skill; input: unknown } | { ok: false; message: string; errors?: FieldError[] };

/**
 * Reads the skill call out of a message's data parts (each given as its JSON value): exactly one
 * data part, an object `{"skill": "<id>", "input": {...}}`, whose input the skill's schema takes.
 * Text parts may come along (a note for people); they are not read.
 */
export function readSkillCall(skills: Map<string, Skill>, dataParts: unknown[]): SkillCall {
  const shape = `one data part {"${SKILL_KEY}": "<skill id>", "${INPUT_KEY}": {...}}`;
  if (dataParts.length !== 1) {
    return { ok: false, message: `The message must carry ${shape}; it has ${dataParts.length} data parts. Skills: ${[...skills.keys()].join(', ')}.` };
  }
  const data = dataParts[0];
  if (!isRecord(data) || typeof data[SKILL_KEY] !== 'string') {
    return { ok: false, message: `The data part must be ${shape}: "${SKILL_KEY}" is missing or not a string.` };
  }
  const skill = skills.get(data[SKILL_KEY]);
  if (!skill) {
    return { ok: false, message: `No skill ${JSON.stringify(data[SKILL_KEY]).slice(0, 80)}; the skills are ${[...skills.keys()].join(', ')}.` };
  }
  const input = data[INPUT_KEY] ?? {};
  if (!isRecord(input)) return { ok: false, message: `"${INPUT_KEY}" of ${skill.id} must be an object.`, errors: [{ pointer: `/${INPUT_KEY}`, message: 'must be an object' }] };
  const parsed = skill.input.safeParse(input);
  if (!parsed.success) {
    const errors = parsed.error.issues.map((issue) => ({ pointer: `/${[INPUT_KEY, ...issue.path.map(String)].join('/')}`, message: issue.message }));
    return { ok: false, message: `The input of ${skill.id} is not valid: ${errors.map((e) => `${e.pointer}: ${e.message}`).join('; ')}`, errors };
  }
  return { ok: true, skill, input: parsed.data };
}

/** The skill a message names, before any validation (for the access check, which comes first). */
export function namedSkill(skills: Map<string, Skill>, dataParts: unknown[]): Skill | undefined {
  const [data] = dataParts;
  return dataParts.length === 1 && isRecord(data) && typeof data[SKILL_KEY] === 'string' ? skills.get(data[SKILL_KEY]) : undefined;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
