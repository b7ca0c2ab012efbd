import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  ProviderKindSchema,
  type ProviderKind,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import type { EvalCase } from './cases.js';
import type { CaseOutcome } from './checks.js';

/** A provider and model every case runs under; `default` keeps each case's own. */
export interface Variant {
  label: string;
  provider?: ProviderKind;
  model?: string;
}

export const DEFAULT_VARIANT: Variant = { label: 'default' };

/** One case under one variant, judged. */
export interface CaseResult {
  case: EvalCase;
  variant: string;
  pass: boolean;
  reasons: string[];
  outcome: CaseOutcome;
}

/** Starts one run and resolves with its final event, handing every event to `onEvent`. */
export type ExecuteRun = (
  request: RunRequestInput,
  onEvent: (event: RunEvent) => void,
  signal: AbortSignal,
) => Promise<RunEvent>;

/**
 * Parses `--variants provider:model,...`: the provider before the first colon (one of the provider kinds), the
 * model after it (it may hold colons itself, as `ollama:llama3:8b` does). Throws `invalid_request` naming the entry.
 */
export function parseVariants(spec: string): Variant[] {
  const entries = spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (entries.length === 0) throw badVariant(spec, 'no variant given');
  const variants = entries.map((entry) => {
    const colon = entry.indexOf(':');
    const provider = colon === -1 ? entry : entry.slice(0, colon);
    const model = colon === -1 ? '' : entry.slice(colon + 1);
    const kind = ProviderKindSchema.safeParse(provider);
    if (!kind.success)
      throw badVariant(
        entry,
        `unknown provider "${provider}" (one of ${ProviderKindSchema.options.join(', ')})`,
      );
    return { label: entry, provider: kind.data, ...(model === '' ? {} : { model }) };
  });
  const labels = variants.map((v) => v.label);
  const repeated = labels.find((l, i) => labels.indexOf(l) !== i);
  if (repeated !== undefined) throw badVariant(repeated, 'given twice');
  return variants;
}

function badVariant(entry: string, reason: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, `--variants "${entry}": ${reason}`, {
    details: { usage: true, field: 'variants' },
  });
}

/**
 * The request of a case under a variant: a fresh run id, and the variant's provider and model in place of the
 * case's (a case's inline `script` only applies to the scripted provider, so another provider drops it).
 */
export function requestFor(evalCase: EvalCase, variant: Variant): RunRequestInput {
  const request: RunRequestInput = { ...evalCase.request, id: `eval-${randomUUID().slice(0, 12)}` };
  if (variant.provider !== undefined) {
    request.provider = variant.provider;
    if (variant.provider !== 'scripted') delete request.script;
  }
  if (variant.model !== undefined) request.model = variant.model;
  return request;
}

/** Gathers what the checks read from a run's events. */
export function outcomeRecorder(runId: string) {
  const tools: string[] = [];
  let turns = 0;
  let plannerId: string | undefined;
  const started = Date.now();
  return {
    onEvent(event: RunEvent): void {
      if (event.type === 'llm.response') {
        turns = Math.max(turns, event.iteration);
        tools.push(...event.tool_calls.map((c) => c.name));
      } else if (event.type === 'run.started') plannerId = event.planner_id;
    },
    finish(final: RunEvent | undefined, error?: unknown): CaseOutcome {
      const base = {
        run_id: runId,
        tools_called: tools,
        duration_ms: Date.now() - started,
        ...(plannerId === undefined ? {} : { planner_id: plannerId }),
      };
      if (final?.type === 'run.completed')
        return {
          ...base,
          status: final.status,
          text: final.text,
          turns: final.iterations,
          tool_calls: final.tool_calls,
          usage: final.usage,
          ...(final.output === undefined ? {} : { output: final.output }),
          ...costOf(final.cost_usd ?? final.usage.cost_usd),
          ...(final.reason === undefined ? {} : { error: { code: final.status, message: final.reason } }),
        };
      const failure =
        final?.type === 'run.failed' ? final.error : AgentMeshError.from(error ?? 'no final event');
      return {
        ...base,
        status: 'failed',
        text: '',
        turns,
        tool_calls: tools.length,
        usage: { input_tokens: 0, output_tokens: 0 },
        error: { code: failure.code, message: failure.message },
      };
    },
  };
}

function costOf(cost: number | undefined): { cost_usd?: number } {
  return cost === undefined ? {} : { cost_usd: cost };
}

/** Runs one case under one variant and judges it; a run that throws fails the case with the error as its reason. */
export async function runCase(
  evalCase: EvalCase,
  variant: Variant,
  execute: ExecuteRun,
  signal: AbortSignal,
): Promise<CaseResult> {
  const request = requestFor(evalCase, variant);
  const recorder = outcomeRecorder(request.id!);
  let outcome: CaseOutcome;
  try {
    outcome = recorder.finish(await execute(request, (e) => recorder.onEvent(e), signal));
  } catch (error) {
    outcome = recorder.finish(undefined, error);
  }
  const reasons = evalCase.checks.run(outcome);
  return { case: evalCase, variant: variant.label, pass: reasons.length === 0, reasons, outcome };
}

export interface EvalRunOptions {
  execute: ExecuteRun;
  concurrency: number;
  signal: AbortSignal;
  onResult?: (result: CaseResult) => void;
}

/** Every case under every variant, at most `concurrency` runs at a time; results in case then variant order. */
export async function runEval(
  cases: readonly EvalCase[],
  variants: readonly Variant[],
  options: EvalRunOptions,
): Promise<CaseResult[]> {
  const jobs = cases.flatMap((c) => variants.map((v) => ({ c, v })));
  const results: CaseResult[] = new Array<CaseResult>(jobs.length);
  let next = 0;
  const lane = async () => {
    while (next < jobs.length && !options.signal.aborted) {
      const index = next++;
      const { c, v } = jobs[index]!;
      const result = await runCase(c, v, options.execute, options.signal);
      results[index] = result;
      options.onResult?.(result);
    }
  };
  const lanes = Math.max(1, Math.min(options.concurrency, jobs.length));
  await Promise.all(Array.from({ length: lanes }, lane));
  return results.filter((r) => r !== undefined);
}
