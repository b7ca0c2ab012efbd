import type { CatalogRegister, CatalogRegisterReply } from '@agentmesh/protocol';
import { SameName, downgradeRejection } from './downgrade.js';
import { conflictRejection, registerRejection } from './rejections.js';
import { SpecTexts, type ToolRegistry, type WorkerRecord } from './registry.js';
import { inNamespaces, outsideRoleRejection } from './role-policy.js';

/** The specs of a registration the catalog takes, the ones it refuses, and the canonical JSON of those it hashed. */
export interface Screened {
  accepted: WorkerRecord['tools'];
  rejected: CatalogRegisterReply['rejected'];
  texts: SpecTexts;
}

/**
 * Sorts a registration's specs into taken and refused: a name and version twice, a tool outside the role's
 * namespaces (`namespaces` undefined: any), a safety downgrade, and a spec that differs from the one other live
 * workers serve under the same name and version are refused, each with its reason.
 */
export function screenRegistration(
  request: CatalogRegister,
  role: string | undefined,
  namespaces: readonly string[] | undefined,
  registry: ToolRegistry,
): Screened {
  const workerId = request.worker_id;
  const out: Screened = { accepted: [], rejected: [], texts: new SpecTexts() };
  const sameName = new SameName(request.tools, registry.worker(workerId));
  for (const spec of request.tools) {
    if (sameName.repeats(spec)) {
      out.rejected.push(
        registerRejection(
          spec,
          workerId,
          `tool "${spec.name}" version "${spec.version}" appears twice in the registration of worker "${workerId}"`,
        ),
      );
      continue;
    }
    if (!inNamespaces(spec.name, namespaces)) {
      out.rejected.push(outsideRoleRejection(spec, workerId, role ?? '', namespaces ?? []));
      continue;
    }
    const downgrade = downgradeRejection(spec, workerId, registry, sameName);
    if (downgrade !== undefined) {
      out.rejected.push(downgrade);
      keepOwnClaim(out, registry, workerId, spec.name, spec.version);
      continue;
    }
    const hash = out.texts.add(spec);
    const conflict = registry.conflicts(spec.name, spec.version, hash, workerId);
    if (conflict !== undefined) {
      out.rejected.push(conflictRejection(spec, hash, workerId, conflict.workers, conflict.hash));
      continue;
    }
    const since = registry.claimedSince(workerId, spec.name, spec.version, hash);
    out.accepted.push(since === undefined ? { hash, spec } : { hash, spec, since });
  }
  return out;
}

/**
 * A worker refused a downgrade of the same version keeps its current claim on it (flags included): dropping the
 * claim would let its next registration lift the flag with nothing left to compare against.
 */
function keepOwnClaim(
  out: Screened,
  registry: ToolRegistry,
  workerId: string,
  name: string,
  version: string,
) {
  const current = registry
    .worker(workerId)
    ?.tools.find((t) => t.spec.name === name && t.spec.version === version);
  if (current === undefined) return;
  const since = registry.claimedSince(workerId, name, version, current.hash);
  out.accepted.push(since === undefined ? { hash: current.hash, spec: current.spec } : { ...current, since });
}
