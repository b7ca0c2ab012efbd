import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkModeFlags, intFlag, stringFlag, usageError } from '../args.js';
import type { CommandContext } from '../context.js';
import { parseDataset, type Dataset } from '../eval/cases.js';
import { embeddedExecutor, natsExecutor, type Executor } from '../eval/executors.js';
import { renderHtml } from '../eval/html.js';
import { createProgress } from '../eval/progress.js';
import {
  buildReport,
  caseLine,
  humanReport,
  lineErrorLine,
  printable,
  type EvalReport,
} from '../eval/report.js';
import { DEFAULT_VARIANT, parseVariants, runEval, type CaseResult, type Variant } from '../eval/runner.js';
import { evalSpec } from '../specs/eval.js';

/** Runs at a time when --concurrency is not given. */
export const DEFAULT_EVAL_CONCURRENCY = 4;
const MAX_EVAL_CONCURRENCY = 256;

interface EvalOptions {
  file: string;
  concurrency: number;
  min: number;
  variants: Variant[];
  json: boolean;
  out: string | undefined;
}

function readOptions(ctx: CommandContext): EvalOptions {
  const { args } = ctx;
  if (args.positionals.length !== 1)
    throw usageError(evalSpec, 'eval needs exactly one dataset: agentmesh eval FILE.jsonl');
  const concurrency = intFlag(args, 'concurrency') ?? DEFAULT_EVAL_CONCURRENCY;
  if (concurrency < 1 || concurrency > MAX_EVAL_CONCURRENCY)
    throw usageError(evalSpec, `--concurrency must be 1 to ${MAX_EVAL_CONCURRENCY}, got ${concurrency}`);
  const minText = stringFlag(args, 'min');
  const min = minText === undefined ? 1 : Number(minText);
  if (!Number.isFinite(min) || min < 0 || min > 1)
    throw usageError(evalSpec, `--min must be a pass rate from 0 to 1, got "${minText}"`);
  const variantsText = stringFlag(args, 'variants');
  return {
    file: args.positionals[0]!,
    concurrency,
    min,
    variants: variantsText === undefined ? [DEFAULT_VARIANT] : parseVariants(variantsText),
    json: args.values['json'] === true,
    out: stringFlag(args, 'out'),
  };
}

function loadDataset(file: string): Dataset {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw usageError(evalSpec, `cannot read the dataset ${file}: ${(error as Error).message}`);
  }
  const dataset = parseDataset(text);
  if (dataset.cases.length + dataset.errors.length === 0)
    throw usageError(evalSpec, `the dataset ${file} holds no cases (one JSON object per line)`);
  return dataset;
}

function writeReport(dir: string, report: EvalReport): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(dir, 'report.html'), renderHtml(report));
}

/**
 * `agentmesh eval FILE.jsonl`: every case under every variant as an ordinary run (embedded, or on the fleet with
 * --nats), judged by its `expect`; exit 0 when the pass rate reaches --min, 1 below it.
 */
export async function evalCommand(ctx: CommandContext): Promise<number> {
  const mode = ctx.natsUrl === undefined ? 'embedded' : 'nats';
  checkModeFlags(evalSpec, ctx.args, mode);
  const options = readOptions(ctx);
  const dataset = loadDataset(options.file);
  const startedAt = new Date();
  const { stdout, stderr } = ctx.io;
  for (const e of dataset.errors)
    if (options.json) stdout.write(`${JSON.stringify(lineErrorLine(e))}\n`);
    else stderr.write(`agentmesh eval: ${options.file} line ${e.line}: ${printable(e.message)}\n`);
  const results = await runCases(ctx, dataset, options);
  const planned = dataset.cases.length * options.variants.length;
  const interrupted = results.length < planned;
  if (interrupted)
    stderr.write(
      `agentmesh eval: interrupted: ${results.length} of ${planned} runs finished; the rest did not run\n`,
    );
  const report = buildReport(options.file, startedAt, options.variants, results, dataset.errors);
  if (options.json) stdout.write(`${JSON.stringify(report.summary)}\n`);
  else stdout.write(humanReport(results, report.summary, dataset.errors));
  if (options.out !== undefined) writeReport(options.out, report);
  return !interrupted && report.summary.pass_rate >= options.min ? 0 : 1;
}

async function runCases(ctx: CommandContext, dataset: Dataset, options: EvalOptions): Promise<CaseResult[]> {
  if (dataset.cases.length === 0) return [];
  const executor: Executor =
    ctx.natsUrl === undefined ? await embeddedExecutor(ctx, options.variants) : await natsExecutor(ctx);
  const progress = createProgress(ctx.io.stderr, dataset.cases.length * options.variants.length);
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  try {
    return await runEval(dataset.cases, options.variants, {
      execute: executor.execute,
      concurrency: options.concurrency,
      signal: controller.signal,
      onResult: (result) => {
        progress.tick(result.pass);
        if (options.json) ctx.io.stdout.write(`${JSON.stringify(caseLine(result))}\n`);
      },
    });
  } finally {
    progress.done();
    process.off('SIGINT', onSignal);
    await executor.stop();
  }
}
