// Whether the CLI's bundle (dist/bundle/, made by `npm run build`) is as new as the build it was made from: shared by
// the `agentmesh` entry, which runs the bundle only then, and by the cold-start bench, which says what it measured.
import { existsSync, readFileSync, statSync } from 'node:fs';

export const BUNDLE_DIR = new URL('../dist/bundle/', import.meta.url);

/** True when the bundle exists and no project was built again since it was made (a missing build info is fine). */
export function bundleIsCurrent() {
  if (process.env.AGENTMESH_NO_BUNDLE === '1') return false;
  try {
    const { builds } = JSON.parse(readFileSync(new URL('stamp.json', BUNDLE_DIR), 'utf8'));
    for (const [path, mtimeMs] of Object.entries(builds)) {
      const info = statSync(new URL(path, BUNDLE_DIR), { throwIfNoEntry: false });
      if (info !== undefined && info.mtimeMs !== mtimeMs) return false;
    }
    return existsSync(new URL('main.js', BUNDLE_DIR));
  } catch {
    return false;
  }
}
