// Writes the README's table of settings from the catalogue in src/config.ts (SETTINGS): run it after
// adding or changing a setting. test/settings.test.ts fails while the table says otherwise.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SETTINGS, type Setting } from '../src/config.ts';

export const README = new URL('../README.md', import.meta.url);
export const REBUILD_COMMAND = 'node --import tsx bin/build-settings-table.ts';

const TABLE_START = `<!-- Generated from SETTINGS in src/config.ts by \`${REBUILD_COMMAND}\`; edit there, not here. -->`;
const TABLE_END = '<!-- End of the generated settings table. -->';

/** The README's text with the table between its markers made from the catalogue. */
function withSettingsTable(readme: string): string {
  const { start, end } = tableBounds(readme);
  return `${readme.slice(0, start)}\n${settingsTable()}\n${readme.slice(end)}`;
}

/** The table the README holds now, between its markers. */
export function settingsTableIn(readme: string): string {
  const { start, end } = tableBounds(readme);
  return readme.slice(start, end).trim();
}

export function settingsTable(): string {
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...SETTINGS.map(tableRow)].join('\n');
}

function tableBounds(readme: string): { start: number; end: number } {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README.md has no settings table between the lines\n${TABLE_START}\n${TABLE_END}`);
  return { start: start + TABLE_START.length, end };
}

function tableRow({ name, default: value, description }: Setting): string {
  return `| \`${name}\` | ${value === 'none' ? '—' : `\`${cellText(value)}\``} | ${linkedDocs(cellText(description))} |`;
}

/** A page of docs/ that a description names becomes a link (the README sits beside docs/). */
function linkedDocs(text: string): string {
  return text.replace(/(?<![`\w/])docs\/[\w-]+\.md\b/g, (page) => `[${page}](${page})`);
}

/** A pipe would end the cell, even inside a code span. */
function cellText(text: string): string {
  return text.replaceAll('|', '\\|');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(README, withSettingsTable(readFileSync(README, 'utf8')));
  console.log(`Wrote the settings table of ${fileURLToPath(README)} (${SETTINGS.length} settings)`);
}
