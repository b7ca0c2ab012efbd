#!/usr/bin/env node
// Bundles the built CLI (dist/main.js and what it imports) into dist/bundle/ with esbuild, so a fresh `agentmesh`
// process reads a few files instead of some 500 modules: the cold start of every CLI command and actor. Run by
// `npm run build` after `tsc -b`. bin/agentmesh.js runs the bundle only while it is as new as the build it was made
// from (stamp.json) and falls back to dist/main.js otherwise, so a `tsc -b` alone never runs stale code.
//
// Bundled: the agentmesh packages and the libraries every command loads at start (zod, ajv, NATS, pino, the
// OpenTelemetry API). Left to node_modules: everything a command loads later, when configured (provider, MCP and
// A2A SDKs, OpenTelemetry SDK and exporters, express, prom-client, yaml, piscina and its thread files). A file's
// `import.meta.url` keeps pointing at its own place in dist/, so the files found next to it still are.
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const CLI_DIR = fileURLToPath(new URL('..', import.meta.url));
const PACKAGES_DIR = dirname(CLI_DIR);
const OUT_DIR = join(CLI_DIR, 'dist', 'bundle');
/** Third-party packages bundled in: what a command loads before it does anything. */
const BUNDLED = new Set(['zod', 'ajv', 'pino', 'safe-stable-stringify', '@opentelemetry/api']);
const BUNDLED_SCOPES = ['@nats-io/', '@agentmesh/'];
/** The projects whose tsc build info stamps the bundle: a newer build makes it stale. */
const PROJECTS = ['protocol', 'catalog', 'tool-worker', 'planner', 'cli'];

function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const isOwnDist = (file) => file.startsWith(PACKAGES_DIR + sep) && file.includes(`${sep}dist${sep}`);

/** Leaves to node_modules the packages our own code imports that are not in the bundled set. */
const externals = {
  name: 'agentmesh-externals',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:') || !isOwnDist(args.importer)) return undefined;
      const name = packageName(args.path);
      if (BUNDLED.has(name) || BUNDLED_SCOPES.some((scope) => name.startsWith(scope))) return undefined;
      return { path: args.path, external: true };
    });
  },
};

/** Rewrites `import.meta.url` in our dist files to the URL of the file itself, seen from the bundle. */
const ownUrls = {
  name: 'agentmesh-own-urls',
  setup(build) {
    build.onLoad({ filter: /\.js$/ }, (args) => {
      if (!isOwnDist(args.path)) return undefined;
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.url'))
        return { contents: text, loader: 'js', resolveDir: dirname(args.path) };
      const fromBundle = relative(OUT_DIR, args.path).split(sep).join('/');
      const own = `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`;
      return {
        contents: text.replaceAll('import.meta.url', own),
        loader: 'js',
        resolveDir: dirname(args.path),
      };
    });
  },
};

rmSync(OUT_DIR, { recursive: true, force: true });
const started = performance.now();
const result = await esbuild.build({
  entryPoints: [join(CLI_DIR, 'dist', 'main.js')],
  outdir: OUT_DIR,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  conditions: ['node', 'import', 'default'],
  chunkNames: 'chunk-[hash]',
  sourcemap: 'linked',
  sourcesContent: false,
  metafile: true,
  logLevel: 'warning',
  // CommonJS inside the bundle (ajv, pino) may call require() for Node's own modules
  banner: {
    js: "import { createRequire as __agentmeshRequire } from 'node:module';\nconst require = __agentmeshRequire(import.meta.url);",
  },
  plugins: [externals, ownUrls],
});
const builds = {};
for (const project of PROJECTS) {
  const info = join(PACKAGES_DIR, project, 'dist', '.tsbuildinfo');
  builds[relative(OUT_DIR, info).split(sep).join('/')] = statSync(info).mtimeMs;
}
mkdirSync(OUT_DIR, { recursive: true });
writeFileSync(join(OUT_DIR, 'stamp.json'), `${JSON.stringify({ builds }, null, 2)}\n`);
const inputs = Object.keys(result.metafile.inputs).length;
const outputs = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js')).length;
console.log(
  `bundled the CLI: ${inputs} modules into ${outputs} files in ${Math.round(performance.now() - started)} ms`,
);
