#!/usr/bin/env node
// Writes deploy/k8s/nats-config.yaml (the ConfigMap nats-config) from deploy/nats/nats.conf.
// kustomize's configMapGenerator cannot read ../nats/nats.conf (files outside the kustomization root are refused
// by default), so the ConfigMap carries a copy; test/deploy-files.test.ts fails when the two differ.
import { readFileSync, writeFileSync } from 'node:fs';

const here = new URL('.', import.meta.url);
const conf = readFileSync(new URL('nats/nats.conf', here), 'utf8');
const body = conf
  .split('\n')
  .map((line) => (line === '' ? '' : `    ${line}`))
  .join('\n');
const yaml = `# Generated from deploy/nats/nats.conf by deploy/sync-nats-config.mjs: edit the .conf, then run it.
apiVersion: v1
kind: ConfigMap
metadata:
  name: nats-config
data:
  nats.conf: |
${body}`;
writeFileSync(new URL('k8s/nats-config.yaml', here), yaml);
console.log('wrote deploy/k8s/nats-config.yaml');
