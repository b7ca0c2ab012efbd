import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { REPO_ROOT } from './helpers/cli.js';

interface Pod {
  metadata: { annotations?: Record<string, string> };
  spec: {
    containers: {
      env?: { name: string; value?: string }[];
      ports?: { name: string; containerPort: number }[];
    }[];
  };
}

const read = (file: string) => readFileSync(join(REPO_ROOT, 'deploy', 'k8s', file), 'utf8');

describe('deploy/k8s observability', () => {
  test.each(['planner', 'worker', 'catalog'])(
    '%s: Prometheus scrape annotations point at the port its metrics server listens on',
    (name) => {
      const deployment = parse(read(`${name}.yaml`).split('\n---\n')[0]!) as { spec: { template: Pod } };
      const pod = deployment.spec.template;
      const annotations = pod.metadata.annotations ?? {};
      expect(annotations['prometheus.io/scrape']).toBe('true');
      expect(annotations['prometheus.io/path']).toBe('/metrics');
      const container = pod.spec.containers[0]!;
      const env = container.env?.find((e) => e.name === 'AGENTMESH_METRICS_PORT');
      expect(env?.value).toBe(annotations['prometheus.io/port']);
      expect(container.ports?.find((p) => p.name === 'metrics')?.containerPort).toBe(Number(env?.value));
    },
  );

  test('the optional KEDA ScaledObject scales workers on an agentmesh metric and validates against the CRD', () => {
    const doc = parse(read('optional/worker-keda-prometheus.yaml')) as {
      spec: { scaleTargetRef: { name: string }; triggers: { type: string; metadata: { query: string } }[] };
    };
    expect(() => new ScaledObject(doc as never).validate()).not.toThrow();
    expect(doc.spec.scaleTargetRef.name).toBe('worker');
    expect(doc.spec.triggers[0]!.type).toBe('prometheus');
    expect(doc.spec.triggers[0]!.metadata.query).toContain('agentmesh_tool_calls_in_flight');
  });
});
