import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** Where the configuration comes from: the flag, then AGENTMESH_CONFIG, then ./agentmesh.yaml when present. */
export function configPath(flag: string | undefined, cwd: string = process.cwd()): string | undefined {
  if (flag) return resolve(cwd, flag);
  const fromEnv = process.env['AGENTMESH_CONFIG'];
  if (fromEnv) return resolve(cwd, fromEnv);
  const local = resolve(cwd, 'agentmesh.yaml');
  return existsSync(local) ? local : undefined;
}
