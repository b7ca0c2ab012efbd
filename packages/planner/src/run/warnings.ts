import { matchesToolPattern } from '@agentmesh/protocol';
import { warning } from './events.js';

type Warning = ReturnType<typeof warning>;

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const kept = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = kept;
    }
  }
  return row[b.length]!;
}

/** Up to three known names (or namespaces) closest to `entry`. */
export function closestNames(entry: string, known: readonly string[]): string[] {
  const candidates = new Set<string>();
  for (const name of known) {
    candidates.add(name);
    const dot = name.indexOf('.');
    if (dot > 0) candidates.add(name.slice(0, dot));
  }
  const needle = entry.toLowerCase();
  return [...candidates]
    .map((name) => ({ name, d: distance(needle, name) }))
    .sort((a, b) => a.d - b.d || a.name.localeCompare(b.name))
    .slice(0, 3)
    .map((c) => c.name);
}

/**
 * What a person should hear at run start: no tool registered at all, or an allow-list entry that matches no
 * registered tool (with the closest known names). Workers may still join, so these warn rather than refuse.
 */
export function startWarnings(
  registered: readonly string[],
  allow: readonly string[] | undefined,
): Warning[] {
  if (registered.length === 0) return [warning('no_tools', 'no tools are registered: start a worker')];
  const warnings: Warning[] = [];
  for (const entry of allow ?? []) {
    if (registered.some((name) => matchesToolPattern(name, entry))) continue;
    const near = closestNames(entry, registered);
    warnings.push(
      warning(
        'unknown_tool_scope',
        `tools entry "${entry}" matches no registered tool${near.length > 0 ? `; closest known: ${near.join(', ')}` : ''}`,
      ),
    );
  }
  return warnings;
}
