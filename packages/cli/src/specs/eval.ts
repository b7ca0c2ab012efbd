import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const evalSpec: CommandSpec = {
  name: 'eval',
  usage:
    'agentmesh eval FILE.jsonl [--nats URL] [--concurrency N] [--min RATE] [--variants SPEC,...] [--json] [--out DIR]',
  summary:
    'Runs a dataset of cases (JSON lines: a RunRequest plus "id" and "expect") as ordinary runs, embedded or on the fleet with --nats, and checks each against its expectations. ' +
    'Exits 0 when the pass rate reaches --min, 1 below it, 2 for usage errors.',
  flags: {
    ...CONNECTION_FLAGS,
    concurrency: { type: 'string', value: 'N', description: 'runs at a time (default 4)' },
    min: {
      type: 'string',
      value: 'RATE',
      description: 'the pass rate (0 to 1) at or above which the eval exits 0 (default 1.0)',
    },
    variants: {
      type: 'string',
      value: 'SPEC,...',
      description:
        'run every case under each provider:model (e.g. openai:gpt-4.1-mini,anthropic:claude-sonnet-4-6) and compare them side by side',
    },
    json: {
      type: 'boolean',
      description: 'one JSON line per case, then a summary line, on stdout',
    },
    out: {
      type: 'string',
      value: 'DIR',
      description: 'also write the report to DIR/report.json and DIR/report.html (self-contained)',
    },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'workspace folder: enables the workspace tool pack of the embedded workers',
      env: 'AGENTMESH_WORKSPACE',
      only: { mode: 'embedded', otherwise: 'the workers of the fleet: agentmesh worker --workspace DIR' },
    },
  },
};
