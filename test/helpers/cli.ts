import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '..', '..');
/** The `agentmesh` command as users run it: the bundle `npm run build` makes, or the built modules when it is stale. */
export const CLI = join(REPO_ROOT, 'packages', 'cli', 'bin', 'agentmesh.js');

/** The environment of a child process with no provider keys and quiet logs, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn' };
  for (const k of [
    'OPENAI_API_KEY',
    'ANTHROPIC_API_KEY',
    'OPENAI_BASE_URL',
    'ANTHROPIC_BASE_URL',
    'NATS_URL',
    'AGENTMESH_CONFIG',
  ])
    delete env[k];
  return { ...env, ...extra };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `agentmesh` CLI to completion. */
export function runAgentmesh(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env ?? cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`agentmesh ${args.join(' ')} did not finish in time\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ActorProcess {
  child: ChildProcess;
  logs(): string;
  /** SIGTERM, and wait for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts a long-running `agentmesh <actor>` process; resolves once its log says it is ready. */
export function startActor(
  args: string[],
  env: NodeJS.ProcessEnv,
  readyPattern = /ready/,
): Promise<ActorProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO_ROOT,
      env: { ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let logs = '';
    const onData = (d: Buffer) => {
      logs += d.toString();
      if (readyPattern.test(logs)) {
        clearTimeout(timer);
        resolve(handle);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = setTimeout(
      () => reject(new Error(`agentmesh ${args.join(' ')} not ready:\n${logs}`)),
      20_000,
    );
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!readyPattern.test(logs))
        reject(new Error(`agentmesh ${args.join(' ')} exited with ${code}:\n${logs}`));
    });
    const handle: ActorProcess = {
      child,
      logs: () => logs,
      stop: (signal = 'SIGTERM') =>
        new Promise((res) => {
          if (child.exitCode !== null || child.signalCode !== null) return res(child.exitCode);
          child.once('exit', (code) => res(code));
          child.kill(signal);
        }),
    };
  });
}

/**
 * Runs `node scripts/soak.mjs ARGS --json --out test/.results/NAME.json` and returns its JSON report (the last line
 * it prints) with its exit code; fails naming the exit code and the end of stderr when it printed no report.
 */
export async function runSoak<T>(name: string, args: string[]): Promise<{ code: number | null; report: T }> {
  mkdirSync(join(REPO_ROOT, 'test', '.results'), { recursive: true });
  const out = join(REPO_ROOT, 'test', '.results', `${name}.json`);
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const child = spawn(process.execPath, ['scripts/soak.mjs', ...args, '--json', '--out', out], {
        cwd: REPO_ROOT,
        env: cleanEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let so = '';
      let se = '';
      child.stdout.on('data', (d: Buffer) => (so += d.toString()));
      child.stderr.on('data', (d: Buffer) => (se = (se + d.toString()).slice(-4000)));
      child.on('exit', (c) => resolve({ code: c, stdout: so, stderr: se }));
    },
  );
  const line = stdout.trim().split('\n').at(-1) ?? '';
  if (!line.startsWith('{')) throw new Error(`${name} printed no report (exit ${code}):\n${stderr}`);
  return { code, report: JSON.parse(line) as T };
}
