#!/usr/bin/env node
// Rewrites the help blocks of docs/cli.md from `agentmesh COMMAND --help` (run after adding or changing a command;
// test/cli-docs.test.ts fails while they differ). A command without a section gets one appended. Also writes the
// JSON Schema of the configuration file (docs/reference/agentmesh.config.schema.json; config-schema.test.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import { COMMANDS } from '../dist/cli.js';
import { usageOf } from '../dist/args.js';

const path = new URL('../../../docs/cli.md', import.meta.url);
let text = readFileSync(path, 'utf8');
for (const { spec } of COMMANDS) {
  const block = `<!-- help:${spec.name} -->\n\`\`\`text\n${usageOf(spec)}\n\`\`\`\n<!-- /help:${spec.name} -->`;
  const re = new RegExp(`<!-- help:${spec.name} -->[\\s\\S]*?<!-- /help:${spec.name} -->`);
  text = re.test(text)
    ? text.replace(re, () => block)
    : `${text.trimEnd()}\n\n## agentmesh ${spec.name}\n\n${block}\n`;
}
writeFileSync(path, text);
console.log(`docs/cli.md: ${COMMANDS.length} commands`);

const { configJsonSchema, CONFIG_SCHEMA_PATH } = await import('../dist/config-schema.js');
writeFileSync(
  new URL(`../../../${CONFIG_SCHEMA_PATH}`, import.meta.url),
  `${JSON.stringify(configJsonSchema(), null, 2)}\n`,
);
console.log(`${CONFIG_SCHEMA_PATH}: written`);
