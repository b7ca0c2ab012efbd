#!/usr/bin/env node
// Writes deploy/k8s/nats-config.yaml (the ConfigMap nats-config) from deploy/nats/nats.conf, and
// deploy/k8s-cluster/nats-cluster-config.yaml (the ConfigMap nats-cluster-config) from deploy/nats/cluster.conf.
// kustomize's configMapGenerator cannot read ../nats/nats.conf (files outside the kustomization root are refused
// by default), so each ConfigMap carries a copy; test/deploy-files.test.ts fails when a copy differs.
import { readFileSync, writeFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);
/** Writes `target` (under deploy/): a ConfigMap `name` whose key `key` holds deploy/nats/`key`. */
function writeConfigMap(target, name, key) {
  const conf = readFileSync(new URL(`nats/${key}`, here), 'utf8');
  const body = conf
    .split('\n')
    .map((line) => (line === '' ? '' : `    ${line}`))
    .join('\n');
  const yaml = `# Generated from deploy/nats/${key} by deploy/sync-nats-config.mjs: edit the .conf, then run it.
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
data:
  ${key}: |
${body}`;
  writeFileSync(new URL(target, here), yaml);
  console.log(`wrote deploy/${target}`);
}

writeConfigMap('k8s/nats-config.yaml', 'nats-config', 'nats.conf');
writeConfigMap('k8s-cluster/nats-cluster-config.yaml', 'nats-cluster-config', 'cluster.conf');
