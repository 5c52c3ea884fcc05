import { z } from 'zod';
import type { Scope } from '../core/scopes.ts';
import type { Caller } from '../core/http/caller.ts';
import type { FieldError } from '../core/problems.ts';
import { toolNameOf, type BoundPaidTerms, type Operation } from '../core/operations.ts';

/** A skill: what a message names, and the operation it runs with the caller. */
export interface Skill {
  /** The operation's `operationId`, which is also what a message names. */
  id: string;
  /** The MCP tool it shares its declaration with. */
  tool: string;
  title: string;
  description: string;
  /** The scope its operation declares. */
  scope?: Scope;
  /** Its terms of payment, when callers without a token may pay for it. */
  paid?: BoundPaidTerms;
  /** Payable per call over A2A: x402 is the protocol A2A has an extension for, and it must pay this operation. */
  payableWithX402: boolean;
  input: z.ZodType;
  /** What the HTTP operation answers: the result is read through it, as the HTTP serializer does. */
  output: z.ZodType;
  example: Record<string, unknown>;
  run(input: unknown, caller: Caller, paidWith?: 'x402' | 'mpp'): Promise<unknown>;
}

/**
 * The declared operations offered as A2A skills (`skill` in their declaration), each the MCP tool
 * of the same operation; what the A2A layer adds is only the declaration's example on the card.
 */
export function restockSkills(operations: Operation[]): Skill[] {
  return operations
    .filter((operation) => operation.declaration.skill)
    .map((operation) => {
      const { declaration, paid } = operation;
      if (!declaration.tool) throw new Error(`The A2A skill ${declaration.id} offers no MCP tool to share its definition with.`);
      return {
        id: declaration.id,
        tool: toolNameOf(declaration.id),
        title: declaration.tool.title,
        description: declaration.tool.description ?? declaration.summary,
        ...(declaration.scope ? { scope: declaration.scope } : {}),
        ...(paid ? { paid } : {}),
        payableWithX402: paid?.price.x402 === true,
        input: declaration.input,
        output: declaration.output,
        example: declaration.example as Record<string, unknown>,
        run: (input, caller, paidWith) => operation.run(input, { caller, ...(paidWith ? { paidWith } : {}) }),
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
