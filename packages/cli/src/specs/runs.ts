import { CONNECTION_FLAGS, TENANT_FLAG, type CommandSpec, type FlagSpec } from '../args.js';

/** The flags `runs trigger` adds to `runs`. */
export const TRIGGER_FLAGS: Record<string, FlagSpec> = {
  kind: { type: 'string', value: 'KIND', description: 'trigger: the trigger kind (required)' },
  data: { type: 'string', value: 'JSON', description: 'trigger: a JSON object merged into the trigger' },
};

/** The flags `runs fork` adds to `runs`. */
export const FORK_FLAGS: Record<string, FlagSpec> = {
  at: {
    type: 'string',
    value: 'SEQ',
    description: 'fork: the seq of the event the fork starts after (required)',
  },
  model: {
    type: 'string',
    value: 'MODEL',
    description: "fork: the model that takes over (default the original's)",
  },
  provider: {
    type: 'string',
    value: 'NAME',
    description: "fork: the provider that takes over (drops the original's model and script)",
  },
  script: {
    type: 'string',
    value: 'FILE',
    description: 'fork: scripted turns for the fork (makes it scripted)',
  },
  id: { type: 'string', value: 'ID', description: 'fork: the new run id (default fork-XXXXXXXX)' },
  'data-dir': {
    type: 'string',
    value: 'DIR',
    description: 'fork without --nats: the data dir the original embedded run kept its transcript in',
    env: 'AGENTMESH_DATA_DIR',
  },
};

/** The verbs of `agentmesh runs` that talk to a run waiting for a human. */
export const HITL_VERBS = ['pending', 'approve', 'deny', 'input', 'pause', 'resume'] as const;

export type HitlVerb = (typeof HITL_VERBS)[number];

export const runsSpec: CommandSpec = {
  name: 'runs',
  usage:
    'agentmesh runs list [--state running|finished] [--limit N] | agentmesh runs show ID | agentmesh runs cancel ID [--reason TEXT] | ' +
    'agentmesh runs pending | agentmesh runs approve RUN_ID APPROVAL_ID | agentmesh runs deny RUN_ID APPROVAL_ID [--reason TEXT] | ' +
    'agentmesh runs input RUN_ID TEXT | agentmesh runs pause RUN_ID | agentmesh runs resume RUN_ID | ' +
    'agentmesh runs trigger ID --kind K [--data JSON] | agentmesh runs watch ID | ' +
    "agentmesh runs fork RUN_ID --at SEQ [--model M] [--provider P] [--script FILE] [--id NEW_ID] [--json]   (--tenant NAME: through that tenant's API)",
  summary:
    'Lists the runs of the fleet on NATS (from their run records), shows one run (record, events and transcript, also after it finished), cancels one, ' +
    'lists the approvals waiting across the fleet, approves or denies one, adds a user message to a run, pauses and resumes it between turns, follows its events (watch), ' +
    'or forks a finished run after one of its events with another model (over NATS, or embedded from the data dir). ' +
    "With --tenant NAME every verb goes through that tenant's API and sees only its runs.",
  flags: {
    ...CONNECTION_FLAGS,
    ...TENANT_FLAG,
    state: { type: 'string', value: 'STATE', description: 'list: only running or finished runs' },
    limit: { type: 'string', value: 'N', description: 'list: newest N runs (default 50)' },
    reason: {
      type: 'string',
      value: 'TEXT',
      description: 'cancel, deny: the reason recorded (a denial reason is what the model is told)',
    },
    by: { type: 'string', value: 'NAME', description: 'approve, deny: who decided (default cli:$USER)' },
    'request-id': {
      type: 'string',
      value: 'ID',
      description:
        'approve, deny, input, pause, resume, trigger, cancel: the request id (default: a new one); a repeat with the same id is answered duplicate',
    },
    'timeout-ms': {
      type: 'string',
      value: 'MS',
      description:
        'approve, deny, input, pause, resume, trigger: the deadline; the request is sent again on no answer until then (default 10000)',
    },
    json: { type: 'boolean', description: 'print JSON' },
    ...TRIGGER_FLAGS,
    ...FORK_FLAGS,
  },
  verbs: ['list', 'show', 'cancel', 'trigger', ...HITL_VERBS, 'fork', 'watch'],
};
