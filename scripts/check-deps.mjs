#!/usr/bin/env node
// The dependency rule (docs/architecture.md, "Dependency rule"): no import cycle in packages/*/src, counting
// type-only imports, and the planner's layers only import downwards. `npm run lint` runs this; it exits 1 and names
// every cycle and every offending import when the rule is broken.
//
//   node scripts/check-deps.mjs [--root DIR]
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The planner's layers, lowest first. A file imports files of its own layer or lower ones, except that a feature
 * (durable/, hitl/, agents/, skills/, daemon/, tenancy/) never imports another feature. Every planner source file belongs to a
 * layer, so a new file has to be placed before lint passes.
 */
export const PLANNER_LAYERS = [
  { name: 'model', paths: ['model/'] },
  {
    name: 'pure',
    paths: [
      'providers/',
      'prices.ts',
      'exposure.ts',
      'output-schema.ts',
      'compaction.ts',
      'tokens.ts',
      'util.ts',
      'loop-detector.ts',
      'capabilities.ts',
      'system-prompt.ts',
      'meta-tool-specs.ts',
      'approval-policy.ts',
      'guardrail-rules.ts',
      'guardrail-judge.ts',
      'stream-redactor.ts',
    ],
  },
  { name: 'engine', paths: ['run/'] },
  { name: 'infra', paths: ['infra/'] },
  {
    name: 'feature',
    paths: ['durable/', 'hitl/', 'agents/', 'skills/', 'daemon/', 'budgets/', 'forks/', 'tenancy/', 'fair/'],
    isolated: true,
  },
  { name: 'wiring', paths: ['planner.ts', 'intake.ts', 'run-features.ts', 'index.ts'] },
];

const PACKAGES_GLOB_ROOT = 'packages';

/** Every non-test .ts file under packages/NAME/src, as paths relative to root with forward slashes. */
export function sourceFiles(root) {
  const out = [];
  const pkgs = join(root, PACKAGES_GLOB_ROOT);
  if (!existsSync(pkgs)) return out;
  for (const pkg of readdirSync(pkgs)) {
    const src = join(pkgs, pkg, 'src');
    if (existsSync(src)) walk(src, out);
  }
  return out.map((f) => relative(root, f).split(sep).join('/')).sort();
}

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) walk(full, out);
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
}

/** Relative specifiers a file imports: value, type-only, re-exports, side-effect and `import()` types. */
export function importSpecifiers(text) {
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((s) => s.startsWith('.'));
}

function resolveSpecifier(fromFile, spec, known) {
  const base = join(dirname(fromFile), spec).split(sep).join('/');
  const stem = base.replace(/\.(js|ts|mjs)$/, '');
  for (const candidate of [`${stem}.ts`, `${stem}/index.ts`]) if (known.has(candidate)) return candidate;
  return undefined;
}

/** The import graph: file -> set of files it imports (within packages/* /src). `read(file)` returns its text. */
export function buildGraph(files, read) {
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const deps = new Set();
    for (const spec of importSpecifiers(read(file))) {
      const target = resolveSpecifier(file, spec, known);
      if (target && target !== file) deps.add(target);
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Strongly connected components with more than one file: each one is an import cycle. Tarjan, iterative. */
export function findCycles(graph) {
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const cycles = [];
  let next = 0;
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work = [{ node: start, deps: [...graph.get(start)], i: 0 }];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      if (frame.i < frame.deps.length) {
        const dep = frame.deps[frame.i++];
        if (!index.has(dep)) {
          index.set(dep, next);
          low.set(dep, next++);
          stack.push(dep);
          onStack.add(dep);
          work.push({ node: dep, deps: [...(graph.get(dep) ?? [])], i: 0 });
        } else if (onStack.has(dep)) low.set(frame.node, Math.min(low.get(frame.node), index.get(dep)));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent), low.get(frame.node)));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1) cycles.push(component.sort());
      }
    }
  }
  return cycles;
}

/** One concrete loop through a cycle's files, for the message: a -> b -> ... -> a. */
export function cyclePath(graph, component) {
  const members = new Set(component);
  const start = component[0];
  const previous = new Map([[start, undefined]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    for (const dep of graph.get(node)) {
      if (dep === start) return unwind(previous, node, start);
      if (members.has(dep) && !previous.has(dep)) {
        previous.set(dep, node);
        queue.push(dep);
      }
    }
  }
  return component;
}

function unwind(previous, last, start) {
  const path = [];
  for (let at = last; at !== undefined; at = previous.get(at)) path.unshift(at);
  path.push(start);
  return path;
}

function layerOf(plannerPath, layers) {
  for (const [rank, layer] of layers.entries()) {
    for (const p of layer.paths) {
      if (p.endsWith('/') ? plannerPath.startsWith(p) : plannerPath === p) {
        return { rank, name: layer.name, isolated: Boolean(layer.isolated), dir: p };
      }
    }
  }
  return undefined;
}

/** Imports in packages/planner/src that break the layer rule, and planner files that belong to no layer. */
export function layerViolations(graph, layers = PLANNER_LAYERS, prefix = 'packages/planner/src/') {
  const problems = [];
  for (const [file, deps] of graph) {
    if (!file.startsWith(prefix)) continue;
    const from = layerOf(file.slice(prefix.length), layers);
    if (!from) {
      problems.push(
        `${file}: belongs to no planner layer (add it to PLANNER_LAYERS in scripts/check-deps.mjs)`,
      );
      continue;
    }
    for (const dep of deps) {
      if (!dep.startsWith(prefix)) continue;
      const to = layerOf(dep.slice(prefix.length), layers);
      if (!to) continue;
      if (to.rank > from.rank) {
        problems.push(
          `${file} (${from.name}) imports ${dep} (${to.name}): a lower layer imports a higher one`,
        );
      } else if (from.isolated && to.isolated && from.dir !== to.dir) {
        problems.push(`${file} imports ${dep}: features (${from.dir}, ${to.dir}) never import each other`);
      }
    }
  }
  return problems;
}

/** Checks the tree under root; returns the lines to print (empty when the rule holds). */
export function checkDependencies(root) {
  const files = sourceFiles(root);
  const graph = buildGraph(files, (f) => readFileSync(join(root, f), 'utf8'));
  const lines = [];
  for (const component of findCycles(graph)) {
    lines.push(`import cycle of ${component.length} files: ${cyclePath(graph, component).join(' -> ')}`);
    for (const file of component) lines.push(`  in cycle: ${file}`);
  }
  for (const problem of layerViolations(graph)) lines.push(`layer rule: ${problem}`);
  return lines;
}

function main(argv) {
  const at = argv.indexOf('--root');
  const root = at >= 0 ? resolve(argv[at + 1]) : resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const problems = checkDependencies(root);
  if (problems.length === 0) {
    console.log('check-deps: no import cycles; planner layers hold');
    return 0;
  }
  for (const line of problems) console.error(line);
  return 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
