import { matchesAnyToolPattern } from './names.js';
import type { ToolLoading } from './schemas.js';

/**
 * One layer of exposure overrides: names, namespace prefixes or globs (`crypto.*`, `fs.read_file`) made deferred or
 * always-loaded. Within one layer `always` wins over `deferred`.
 */
export interface ExposureLayer {
  deferred?: readonly string[] | undefined;
  always?: readonly string[] | undefined;
}

/**
 * The loading mode a tool has for one run. Starts from the spec's own default, then applies each layer in order
 * (typically the configuration file, then the run's `--deferred` / `always`); a later layer that names the tool
 * overrides an earlier one, and within a layer `always` wins over `deferred`.
 */
export function resolveToolLoading(
  name: string,
  specLoading: ToolLoading,
  ...layers: readonly (ExposureLayer | undefined)[]
): ToolLoading {
  let loading = specLoading;
  for (const layer of layers) {
    if (layer === undefined) continue;
    if (layer.always !== undefined && matchesAnyToolPattern(name, layer.always)) loading = 'always';
    else if (layer.deferred !== undefined && matchesAnyToolPattern(name, layer.deferred))
      loading = 'deferred';
  }
  return loading;
}

/**
 * Whether a run's allow-list lets a tool through: absent means every tool, an empty list means none, otherwise
 * exact names, namespace prefixes (`fs`) or globs.
 */
export function isToolAllowed(name: string, allow: readonly string[] | undefined): boolean {
  return allow === undefined || matchesAnyToolPattern(name, allow);
}
