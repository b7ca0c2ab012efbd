import { ACTOR_FLAGS, TENANT_FLAG, type CommandSpec } from '../args.js';

const EMBEDDED_ONLY = (otherwise: string) => ({ mode: 'embedded' as const, otherwise });

export const runSpec: CommandSpec = {
  name: 'run',
  usage: 'agentmesh run [flags] "TASK"   (TASK "-" reads the task from stdin)',
  summary:
    'Runs one agent task. Without --nats it runs embedded: catalog, planner and workers in this process. With --nats it submits the run to the fleet and follows its events.',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    tenant: { ...TENANT_FLAG['tenant']!, only: { mode: 'nats', otherwise: 'a run on NATS (--nats)' } },
    provider: {
      type: 'string',
      value: 'NAME',
      description:
        'openai | openai-responses | anthropic | openai-compatible | scripted, or a preset: openrouter | ollama | vllm | lmstudio | groq | together | deepseek | huggingface',
    },
    model: {
      type: 'string',
      value: 'MODEL',
      description: 'model name, or an alias from models: in the configuration',
    },
    'tool-protocol': {
      type: 'string',
      value: 'native|text',
      description: 'native | text (tools in the prompt, for models without tool calling)',
    },
    'base-url': {
      type: 'string',
      value: 'URL',
      description: 'base URL of an OpenAI-compatible server (Ollama, vLLM, OpenRouter)',
    },
    tools: {
      type: 'string',
      value: 'LIST',
      description: 'allow-list: packs (builtin, workspace), tool names, namespaces or globs, comma-separated',
    },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'workspace folder: enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
      only: EMBEDDED_ONLY('the workers of the fleet: agentmesh worker --workspace DIR'),
    },
    'max-iterations': { type: 'string', value: 'N', description: 'model turns at most (default 12)' },
    'tool-search': { type: 'string', value: 'STRATEGY', description: 'off | bm25 | regex | hybrid' },
    script: {
      type: 'string',
      value: 'FILE',
      description: 'scripted provider: a JSON file of model turns (no API key needed)',
    },
    'output-schema': {
      type: 'string',
      value: 'FILE',
      description: 'a JSON Schema file the final answer must match (run.completed.output holds the value)',
    },
    deferred: {
      type: 'string',
      value: 'GLOBS',
      description: 'names or globs made deferred for this run, comma-separated',
    },
    system: { type: 'string', value: 'TEXT', description: 'system prompt' },
    daemon: {
      type: 'boolean',
      description:
        'run as a daemon: idle after each answer and wake on triggers (agentmesh runs trigger) until cancelled',
    },
    skill: {
      type: 'string',
      value: 'NAMES',
      description:
        'activate these skills from the first turn (comma-separated); "none" turns skill matching off',
    },
    id: { type: 'string', value: 'ID', description: 'run id (default: generated)' },
    json: { type: 'boolean', description: 'events as JSON lines on stdout, run.completed last' },
    session: {
      type: 'string',
      value: 'ID',
      description:
        'continue this conversation (the model sees the earlier runs of the session; one run at a time); embedded runs keep sessions in the data dir (--data-dir)',
    },
    'data-dir': {
      type: 'string',
      value: 'DIR',
      description:
        'where embedded runs keep sessions (DIR/sessions/; default .agentmesh in the workspace or the current folder); when given, also run records and transcripts (DIR/runs/) for agentmesh runs fork',
      env: 'AGENTMESH_DATA_DIR',
      only: EMBEDDED_ONLY('embedded runs; over NATS sessions live in JetStream'),
    },
    yes: {
      type: 'boolean',
      short: 'y',
      description:
        'approve every call that needs approval (tools that write or run commands, approvals: in the configuration) instead of asking',
    },
  },
};
