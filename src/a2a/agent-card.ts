import { AgentCard, type AgentExtension, type AgentSkill, type SecurityRequirement } from '@a2a-js/sdk';
import { API_VERSION } from '../discovery/operations.ts';
import { usdDecimal } from '../core/operations.ts';
import { INPUT_KEY, SKILL_KEY, inputJsonSchema, type Skill } from './skills.ts';

/** The x402 payments extension for A2A (google-agentic-commerce/a2a-x402, v0.2): its URI, as the spec fixes it. */
export const X402_EXTENSION_URI = 'https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2';
/** The security scheme's name, the same as in the OpenAPI document. */
export const SECURITY_SCHEME = 'agentToken';
/** The protocol versions served at the JSON-RPC endpoint (1.0, and 0.3 for the clients that predate it). */
export const PROTOCOL_VERSIONS = ['1.0', '0.3'] as const;
const BINDING = 'JSONRPC';

/** An HTTP operation as the OpenAPI document describes it. */
export interface OperationDescription {
  method: string;
  path: string;
  /** The scope its `security` names; absent for public operations. */
  scope?: string;
  tags: string[];
}

export interface AgentCardOptions {
  serviceName: string;
  baseUrl: string;
  endpoint: string;
  skills: Skill[];
  /** The app's operations by `operationId`, read from its OpenAPI document. */
  operations: Map<string, OperationDescription>;
  /** Where the skill-input extension is explained (its URI). */
  skillInputUri: string;
  /** Whether subscribeAlert's task can be pushed its news (docs/a2a.md#push-notifications). */
  pushNotifications?: boolean;
}

/**
 * The agent card, generated from the skills (the MCP tools' definitions) and the OpenAPI
 * document's operations: each skill is named by its operation, tagged with its tags, requires
 * the scope its `security` names and carries its input's JSON Schema (in the skill-input
 * extension, the card having no field for one). A skill whose scope differs from its
 * operation's stops the start: HTTP, MCP and A2A must ask the same of a token.
 */
export function agentCard(o: AgentCardOptions): AgentCard {
  const protectedResource = `${o.baseUrl}/.well-known/oauth-protected-resource`;
  const authorizationServer = `${o.baseUrl}/.well-known/oauth-authorization-server`;
  const payable = o.skills.filter((skill) => skill.payableWithX402);
  const skills = o.skills.map((skill) => {
    const operation = o.operations.get(skill.id);
    if (!operation) throw new Error(`The A2A skill ${skill.id} names no operation of the OpenAPI document.`);
    if (operation.scope !== skill.scope) {
      throw new Error(`The A2A skill ${skill.id} would need ${skill.scope ?? 'no scope'}, its operation ${operation.scope ?? 'none'}: the tool and the route disagree.`);
    }
    return { skill, operation };
  });
  return {
    name: o.serviceName,
    description:
      'Back-in-stock alerts for e-commerce stores: subscribe a shopper to a restock e-mail, read or cancel the subscription, read a store’s stock and alert queue, check out a plan. ' +
      `Each skill is an operation of the HTTP API (${o.baseUrl}/openapi.json) and answers what it answers. A message names the skill in one data part: ` +
      `{"${SKILL_KEY}": "<skill id>", "${INPUT_KEY}": {...}}.`,
    supportedInterfaces: PROTOCOL_VERSIONS.map((protocolVersion) => ({ url: o.endpoint, protocolBinding: BINDING, tenant: '', protocolVersion })),
    provider: { organization: o.serviceName, url: `${o.baseUrl}/` },
    version: API_VERSION,
    documentationUrl: `${o.baseUrl}/docs`,
    capabilities: {
      streaming: false,
      pushNotifications: o.pushNotifications ?? false,
      extendedAgentCard: false,
      extensions: [skillInputExtension(o, skills), ...(payable.length > 0 ? [x402Extension(payable)] : [])],
    },
    securitySchemes: {
      [SECURITY_SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            scheme: 'Bearer',
            bearerFormat: 'JWT',
            description:
              `An access token from POST ${o.baseUrl}/api/agent/register, the claim, or POST ${o.baseUrl}/oauth/token: the same tokens and scopes as the HTTP API and MCP. ` +
              `Protected resource metadata (RFC 9728): ${protectedResource}; authorization server metadata (RFC 8414): ${authorizationServer}.`,
          },
        },
      },
    },
    securityRequirements: [],
    defaultInputModes: ['application/json'],
    defaultOutputModes: ['application/json'],
    skills: skills.map(({ skill, operation }) => cardSkill(skill, operation)),
    signatures: [],
  };
}

function cardSkill(skill: Skill, operation: OperationDescription): AgentSkill {
  const needs: SecurityRequirement[] = [{ schemes: { [SECURITY_SCHEME]: { list: skill.scope ? [skill.scope] : [] } } }];
  const price = skill.paid?.price;
  return {
    id: skill.id,
    name: skill.title,
    description:
      `${skill.description} The HTTP operation ${skill.id} (${operation.method} ${operation.path}); ` +
      (skill.scope ? `needs the scope ${skill.scope}` : 'needs an access token') +
      (skill.payableWithX402 && price ? `, or, without a token, a payment of USD ${usdDecimal(price.usdCents)} with the x402 extension.` : '.'),
    tags: [...operation.tags],
    examples: [JSON.stringify({ [SKILL_KEY]: skill.id, [INPUT_KEY]: skill.example })],
    inputModes: ['application/json'],
    outputModes: ['application/json'],
    // An empty requirement: no token at all, the call paid with the x402 extension.
    securityRequirements: skill.payableWithX402 ? [...needs, { schemes: {} }] : needs,
  };
}

/** A data-only extension: what the card has no field for, each skill's input schema, scope and HTTP twin. */
function skillInputExtension(o: AgentCardOptions, skills: Array<{ skill: Skill; operation: OperationDescription }>): AgentExtension {
  return {
    uri: o.skillInputUri,
    description:
      `A message names one skill in one data part, {"${SKILL_KEY}": "<skill id>", "${INPUT_KEY}": {...}}; params.skills gives each skill's input as JSON Schema ` +
      'and the scope a token needs. The completed task carries, in an artifact, exactly what the HTTP operation answers.',
    required: false,
    params: {
      skills: Object.fromEntries(
        skills.map(({ skill, operation }) => [
          skill.id,
          {
            operation: { operationId: skill.id, method: operation.method, path: operation.path },
            ...(skill.scope ? { scope: skill.scope } : {}),
            input: inputJsonSchema(skill),
            ...(skill.payableWithX402 ? { payPerCall: 'x402' } : {}),
          },
        ]),
      ),
    },
  };
}

function x402Extension(payable: Skill[]): AgentExtension {
  const prices = payable.map((skill) => `${skill.id} (USD ${usdDecimal(skill.paid!.price.usdCents)})`).join(', ');
  return {
    uri: X402_EXTENSION_URI,
    description:
      `Without an access token, ${prices} can be paid per call with x402 (standalone flow): the task asks for payment (input-required, x402.payment.required), ` +
      'the client answers on the same task with x402.payment.payload, and the completed task carries x402.payment.receipts. Activate it with the A2A-Extensions header.',
    required: false,
    params: { skills: payable.map((skill) => skill.id) },
  };
}

/** The card as A2A 1.0 serves it (protobuf JSON). */
export function cardJson(card: AgentCard): Record<string, unknown> {
  return AgentCard.toJSON(card) as Record<string, unknown>;
}

/**
 * The card as an A2A 0.3 client reads it (`url`, `preferredTransport`, `protocolVersion`,
 * OpenAPI-style security schemes), with the 1.0 interfaces alongside, as the SDK's own card
 * handler serves a client that names no version.
 */
export function legacyCardJson(card: AgentCard): Record<string, unknown> {
  const json = cardJson(card) as { supportedInterfaces: unknown[]; capabilities: { extensions: unknown[] } };
  const legacy = card.supportedInterfaces.find((face) => face.protocolVersion === '0.3')!;
  const requirement = (requirements: SecurityRequirement[]) =>
    requirements.map((requirement) => Object.fromEntries(Object.entries(requirement.schemes).map(([name, scopes]) => [name, [...scopes.list]])));
  return {
    protocolVersion: legacy.protocolVersion,
    name: card.name,
    description: card.description,
    version: card.version,
    url: legacy.url,
    preferredTransport: legacy.protocolBinding,
    provider: card.provider,
    documentationUrl: card.documentationUrl,
    capabilities: { streaming: false, pushNotifications: false, extensions: json.capabilities.extensions },
    securitySchemes: Object.fromEntries(
      Object.entries(card.securitySchemes).map(([name, { scheme }]) => {
        if (scheme?.$case !== 'httpAuthSecurityScheme') throw new Error(`The 0.3 card has no form for the scheme ${name}.`);
        return [name, { type: 'http', scheme: scheme.value.scheme.toLowerCase(), bearerFormat: scheme.value.bearerFormat, description: scheme.value.description }];
      }),
    ),
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map((skill) => ({
      id: skill.id,
      name: skill.name,
      description: skill.description,
      tags: skill.tags,
      examples: skill.examples,
      inputModes: skill.inputModes,
      outputModes: skill.outputModes,
      security: requirement(skill.securityRequirements),
    })),
    supportedInterfaces: json.supportedInterfaces,
  };
}
