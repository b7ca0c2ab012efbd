import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const REPO_ROOT = join(import.meta.dirname, '..', '..');
export const CLI = join(REPO_ROOT, 'packages', 'cli', 'dist', 'main.js');

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
