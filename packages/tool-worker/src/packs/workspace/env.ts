import { dirname, isAbsolute, sep } from 'node:path';

/** Variables a command may inherit from the worker when present (secret-looking names are removed anyway). */
export const INHERITED_ENV: readonly string[] = [
  'PATH',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'LC_MESSAGES',
  'LC_COLLATE',
  'LC_NUMERIC',
  'TERM',
  'TZ',
  'USER',
  'LOGNAME',
];

/** Never passed, even when configured: POSIXLY_CORRECT would turn the exclusions added after grep's pattern into file names. */
const NEVER_PASSED: ReadonlySet<string> = new Set(['POSIXLY_CORRECT']);

/** Names that look like they hold a secret: never passed to a command, even when configured. */
export const SECRET_ENV_NAME =
  /(KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT|BEARER|API|DSN|CONNECTION_STRING|DATABASE_URL|NATS_URL|WEBHOOK)/i;

/** Fixed values: no pager, no prompts, no user or system git config, a home folder that does not exist; git never looks above the workspace. */
const FIXED_ENV: Readonly<Record<string, string>> = {
  HOME: '/nonexistent',
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_OPTIONAL_LOCKS: '0',
  NO_COLOR: '1',
  CI: '1',
};

const FALLBACK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Builds the environment of a command from scratch: a short list of inherited names plus `extraNames`, minus every
 * secret-looking name, plus fixed values. PATH keeps only absolute folders outside the workspace, so a program
 * written into the workspace cannot shadow an allowed one.
 */
export function scrubbedEnvironment(
  workspaceRoot: string,
  extraNames: readonly string[] = [],
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...INHERITED_ENV, ...extraNames]) {
    const value = source[name];
    if (value === undefined || SECRET_ENV_NAME.test(name) || NEVER_PASSED.has(name)) continue;
    env[name] = value;
  }
  env['PATH'] = safePath(env['PATH'] ?? FALLBACK_PATH, workspaceRoot);
  Object.assign(env, FIXED_ENV);
  env['GIT_CEILING_DIRECTORIES'] = dirname(workspaceRoot);
  return env;
}

function safePath(path: string, workspaceRoot: string): string {
  const kept = path
    .split(':')
    .filter(
      (dir) => dir !== '' && isAbsolute(dir) && dir !== workspaceRoot && !dir.startsWith(workspaceRoot + sep),
    );
  return kept.length > 0 ? kept.join(':') : FALLBACK_PATH;
}
