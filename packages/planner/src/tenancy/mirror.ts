import {
  DEFAULT_TENANT,
  TENANT_NAME_PATTERN,
  encodeJson,
  tenantSubjects,
  type Bus,
} from '@agentmesh/protocol';
import type { EventPublisher } from '../run/ports.js';

/**
 * The events of a run of tenant `tenant` also go, as core NATS messages, to `<prefix>.tenant.<tenant>.runs.<id>.events`,
 * where that tenant's NATS user may follow them (it has no JetStream access). Runs of the `default` tenant, and of a
 * tenant named by a trusted submitter with a name no tenant user can have, are not mirrored: a single-team fleet
 * publishes nothing more. The subject is built from the run's own tenant, so a run's events never reach another.
 */
export function mirrorTenantEvents(
  bus: Bus,
  prefix: string,
  runId: string,
  tenant: string | undefined,
  inner: EventPublisher,
): EventPublisher {
  if (tenant === undefined || tenant === DEFAULT_TENANT || !TENANT_NAME_PATTERN.test(tenant)) return inner;
  const subject = tenantSubjects(prefix, tenant).runEvents(runId);
  return {
    ...inner,
    publish: (event) => {
      inner.publish(event);
      if (bus.hasSubscribers?.(subject) === false) return;
      try {
        bus.publish(subject, encodeJson(event));
      } catch {
        // the mirror is a convenience: the stored events (history) stay complete
      }
    },
  };
}
