import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { pricedOperation, usdText, type PricedOperation } from '../core/operations.ts';

/** The agent skills discovery schema the index follows (agentskills.io, well-known URI, 0.2.0). */
const AGENT_SKILLS_SCHEMA = 'https://schemas.agentskills.io/discovery/0.2.0/schema.json';
export const SKILLS_PATH = '/.well-known/agent-skills';

export interface Skill {
  name: string;
  description: string;
  url: string;
  /** The SKILL.md exactly as served; the digest is of these bytes. */
  body: Buffer;
  digest: string;
}

const SKILLS_DIR = new URL('./skills/', import.meta.url);
const NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/**
 * The skills under `src/discovery/skills/<name>/SKILL.md`, with this service's address
 * (`{{BASE_URL}}`) and the declared prices (`{{PRICE:<operationId>}}`, and `{{PRICE_TABLE}}` for
 * every paid operation) written in, read once at start. A skill whose front matter does not match
 * its folder or the format, or that names a price no operation declares, stops the start: a broken
 * skill must not be published.
 */
export function loadSkills(baseUrl: string, prices: PricedOperation[]): Skill[] {
  const names = readdirSync(SKILLS_DIR, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  return names.map((folder) => {
    const text = withPrices(readFileSync(new URL(`${folder}/SKILL.md`, SKILLS_DIR), 'utf8'), prices, folder).replaceAll('{{BASE_URL}}', baseUrl);
    const { name, description } = frontMatter(text, folder);
    const body = Buffer.from(text);
    return {
      name,
      description,
      url: `${baseUrl}${SKILLS_PATH}/${name}/SKILL.md`,
      body,
      digest: `sha256:${createHash('sha256').update(body).digest('hex')}`,
    };
  });
}

/** `/.well-known/agent-skills/index.json`. */
export function skillsIndex(skills: Skill[]) {
  return {
    $schema: AGENT_SKILLS_SCHEMA,
    skills: skills.map((skill) => ({ name: skill.name, type: 'skill-md' as const, description: skill.description, url: skill.url, digest: skill.digest })),
  };
}

/** `name` and `description` of a SKILL.md's YAML front matter (plain one-line values only). */
function frontMatter(text: string, folder: string): { name: string; description: string } {
  const block = /^---\n([\s\S]*?)\n---\n/.exec(text);
  if (!block) throw new Error(`skills/${folder}/SKILL.md has no front matter`);
  const fields = new Map<string, string>();
  for (const line of block[1]!.split('\n')) {
    const at = line.indexOf(':');
    if (at > 0) fields.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
  }
  const name = fields.get('name') ?? '';
  const description = fields.get('description') ?? '';
  if (name !== folder || name.length > 64 || !NAME.test(name)) throw new Error(`skills/${folder}/SKILL.md: name must be ${folder} (lowercase letters, digits, hyphens)`);
  if (description.length < 1 || description.length > 1024) throw new Error(`skills/${folder}/SKILL.md: description must be 1 to 1024 characters`);
  return { name, description };
}

/** The declared prices written into a skill: one operation's, or the table of all of them. */
function withPrices(text: string, prices: PricedOperation[], folder: string): string {
  const table = [
    '| Operation | Request | Price |',
    '| --- | --- | --- |',
    ...prices.map((sheet) => `| ${sheet.operation} | \`${sheet.method} {{BASE_URL}}${sheet.path}\` | ${usdText(sheet.usdCents)} |`),
  ].join('\n');
  return text.replaceAll('{{PRICE_TABLE}}', table).replace(/\{\{PRICE:([A-Za-z]+)\}\}/g, (_, operation: string) => usdText(pricedOperation(prices, operation, `The agent skill ${folder}`).usdCents));
}
