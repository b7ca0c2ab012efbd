import { randomUUID } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  MemoryBlobStore,
  ToolSafetySchema,
  ToolSpecSchema,
  assertToolName,
  describeZodError,
  silentLogger,
  toolNamespace,
  type Identity,
  type Logger,
  type RetryPolicy,
  type ToolLoading,
  type ToolSafety,
  type ToolSpec,
} from '@agentmesh/protocol';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { TenantArtifacts, type ArtifactStore } from './artifacts.js';
import { resolvePolicy } from './policy.js';
import { checkValue, deferredJsonSchema, identityCheck, toJsonSchema } from './schema.js';

/**
 * What a handler gets besides its arguments. None of it appears in a schema: the model never sees or sets it.
 */
export interface ToolContext {
  runId: string;
  callId: string;
  identity: Identity;
  /** Aborted on timeout, on the run's cancel, or when the caller gives up. */
  signal: AbortSignal;
  /** A pino logger bound to run_id, call_id and tool. */
  logger: Logger;
  /** Heavy outputs, scoped to the caller's tenant. */
  artifacts: ArtifactStore;
  /** Reports progress to the caller (a `tool.progress` notice). */
  emit(message: string, data?: unknown): void;
  /** 1 for the first attempt of this call on this worker. */
  attempt: number;
  workerId: string;
}

/** The part of {@link ToolContext} that crosses to a piscina thread (plain data only). */
export interface CpuToolContext {
  runId: string;
  callId: string;
  identity: Identity;
  attempt: number;
  workerId: string;
}

/** A CPU-bound handler: `export` of `module` is called on a piscina thread as `(args, context: CpuToolContext)`. */
export interface CpuHandlerRef {
  /** A file URL or an absolute path of an ES module (relative paths resolve from the working directory). */
  module: string | URL;
  /** The export to call (default `default`). */
  export?: string;
}

export interface ToolDefinition<I extends z.ZodType, O extends z.ZodType> {
  /** Canonical dotted name, e.g. `math.calc`. */
  name: string;
  description: string;
  input: I;
  output?: O;
  safety?: Partial<ToolSafety>;
  /** Per-attempt deadline (default 30 s); `retry.timeout_ms` wins when both are set. */
  timeoutMs?: number;
  /** Partial policies fall through field by field to the package default. */
  retry?: Partial<RetryPolicy>;
  /** Safe to run twice: only idempotent tools are retried once a worker may have run them. Default false. */
  idempotent?: boolean;
  loading?: ToolLoading;
  /** Default: the first segment of the name. */
  namespace?: string;
  version?: string;
  tags?: string[];
  handler?: (args: z.output<I>, ctx: ToolContext) => Promise<z.input<O>> | z.input<O>;
  cpu?: CpuHandlerRef;
}

/** A defined tool: its spec (what workers register and models see) and the checks and handler behind it. */
export interface Tool<Args = unknown, Out = unknown> {
  readonly name: string;
  readonly spec: ToolSpec;
  /** The resolved execution policy. */
  readonly policy: RetryPolicy;
  /** Set for CPU-bound tools: the module (as a file URL) and export run on a piscina thread. */
  readonly cpu: { module: string; export: string } | undefined;
  /**
   * Validates arguments (compiled checks; zod only for values not already in its output form); throws
   * `invalid_arguments` naming the fields.
   */
  parseArguments(args: unknown): Args;
  /** Validates a handler result against the output schema; throws `invalid_output`. */
  checkOutput(output: unknown): Out;
  /** Runs the in-process handler once, arguments already parsed. CPU tools run through a worker's pool instead. */
  runHandler(args: Args, ctx: ToolContext): Promise<unknown>;
  /**
   * {@link runHandler} without the promise around a result the handler returned at once: that result as it is (a
   * worker then answers in the same turn), a handler's promise or thenable as a promise; throws what the handler
   * throws. Absent on tools whose handler is not in this process.
   */
  callHandler?(args: Args, ctx: ToolContext): unknown;
  /**
   * Calls the tool in this process: validate, run once, validate the output. For embedding and tests; a CPU tool runs
   * its module on the calling thread here (a {@link ToolWorker} runs it on a thread it can stop).
   */
  invoke(args: unknown, context?: Partial<ToolContext>): Promise<Out>;
}

function cpuModuleUrl(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)) return module;
  return pathToFileURL(isAbsolute(module) ? module : resolve(module)).href;
}

/**
 * Defines a tool once, with zod input and output schemas; the JSON Schema the model sees (draft 2020-12) is derived
 * from them and compiled once. Fails with `invalid_tool_name` on a bad name and `invalid_config` on schemas that
 * JSON Schema cannot express, a missing handler or a bad policy.
 */
export function defineTool<I extends z.ZodType, O extends z.ZodType = z.ZodUnknown>(
  definition: ToolDefinition<I, O>,
): Tool<z.output<I>, z.output<O>> {
  const { name } = definition;
  const what = `tool "${name}"`;
  const { spec, policy, checkInput } = describeTool(definition, what);
  const cpu =
    definition.cpu === undefined
      ? undefined
      : { module: cpuModuleUrl(definition.cpu.module), export: definition.cpu.export ?? 'default' };
  const inputPasses = identityCheck(definition.input);
  const argumentsWhat = `arguments for ${name}`;
  const parseArguments = (args: unknown): z.output<I> =>
    checkValue(
      args,
      checkInput,
      definition.input as z.ZodType<z.output<I>>,
      ErrorCode.InvalidArguments,
      argumentsWhat,
      inputPasses,
    );
  const checkOutput = outputChecker<z.output<O>>(definition.output, what);
  const runHandler = handlerRunner<z.output<I>>(definition.handler, cpu, what);
  const handler = definition.handler;
  return {
    name,
    spec,
    policy,
    cpu,
    parseArguments,
    checkOutput,
    runHandler,
    ...(handler === undefined ? {} : { callHandler: handlerCaller(handler) }),
    async invoke(args: unknown, context: Partial<ToolContext> = {}): Promise<z.output<O>> {
      const parsed = parseArguments(args);
      const ctx = localContext(name, context);
      return checkOutput(await runHandler(parsed, ctx));
    },
  };
}

/** Checks a definition and derives its spec, retry policy and compiled input check. */
function describeTool<I extends z.ZodType, O extends z.ZodType>(
  definition: ToolDefinition<I, O>,
  what: string,
): { spec: ToolSpec; policy: RetryPolicy; checkInput: () => ValidateFunction } {
  const { name } = definition;
  assertToolName(name);
  if (typeof definition.description !== 'string' || definition.description.trim() === '')
    throw new AgentMeshError(ErrorCode.InvalidConfig, `${what} needs a non-empty description`);
  if ((definition.handler === undefined) === (definition.cpu === undefined))
    throw new AgentMeshError(ErrorCode.InvalidConfig, `${what} needs exactly one of handler or cpu`);
  const inputSchema = toJsonSchema(definition.input, 'input', `the input schema of ${what}`);
  if (inputSchema['type'] !== 'object')
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `the input schema of ${what} must be an object (z.object)`,
    );
  const outputSchema =
    definition.output === undefined
      ? undefined
      : toJsonSchema(definition.output, 'output', `the output schema of ${what}`);
  const checkInput = deferredJsonSchema(inputSchema, `the input schema of ${what}`);
  const policy = resolvePolicy(definition.retry, definition.timeoutMs);
  const safety = ToolSafetySchema.safeParse(definition.safety ?? {});
  if (!safety.success)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} has invalid safety: ${describeZodError(safety.error)}`,
    );
  const specResult = ToolSpecSchema.safeParse({
    name,
    version: definition.version ?? '1',
    description: definition.description,
    namespace: definition.namespace ?? toolNamespace(name),
    input_schema: inputSchema,
    ...(outputSchema === undefined ? {} : { output_schema: outputSchema }),
    safety: safety.data,
    timeout_ms: policy.timeout_ms,
    retry: policy,
    idempotent: definition.idempotent ?? false,
    loading: definition.loading ?? 'always',
    cpu_bound: definition.cpu !== undefined,
    tags: definition.tags ?? [],
  });
  if (!specResult.success)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} has an invalid spec: ${describeZodError(specResult.error)}`,
    );
  return { spec: specResult.data, policy, checkInput };
}

/** The output check: the output schema's identity check first, its zod parse when that cannot tell. */
function outputChecker<Out>(outputZod: z.ZodType | undefined, what: string): (output: unknown) => Out {
  if (outputZod === undefined) return (output) => output as Out;
  const passes = identityCheck(outputZod);
  return (output) => {
    if (passes?.(output) === true) return output as Out;
    const parsed = outputZod.safeParse(output);
    if (parsed.success) return parsed.data as Out;
    throw new AgentMeshError(
      ErrorCode.InvalidOutput,
      `${what} returned output that breaks its output schema: ${describeZodError(parsed.error)}`,
      { retryable: false },
    );
  };
}

/** Runs the handler, or the CPU module on the calling thread when the tool has none. */
function handlerRunner<Args>(
  handler: ((args: Args, ctx: ToolContext) => unknown) | undefined,
  cpu: { module: string; export: string } | undefined,
  what: string,
): (args: Args, ctx: ToolContext) => Promise<unknown> {
  const runInline = async (args: Args, ctx: ToolContext): Promise<unknown> => {
    if (cpu === undefined) throw new AgentMeshError(ErrorCode.Internal, `${what} has no handler`);
    const mod = (await import(cpu.module)) as Record<string, unknown>;
    const fn = mod[cpu.export];
    if (typeof fn !== 'function')
      throw new AgentMeshError(
        ErrorCode.InvalidConfig,
        `${cpu.module} does not export a function "${cpu.export}"`,
      );
    const cpuContext: CpuToolContext = {
      runId: ctx.runId,
      callId: ctx.callId,
      identity: ctx.identity,
      attempt: ctx.attempt,
      workerId: ctx.workerId,
    };
    return (fn as (a: unknown, c: CpuToolContext) => unknown)(args, cpuContext);
  };
  if (handler === undefined) return runInline;
  const call = handlerCaller(handler);
  // Not async: a handler's own promise is handed on as it is, without the extra turns of adopting it.
  return (args, ctx) => {
    try {
      const result = call(args, ctx);
      return result instanceof Promise ? result : Promise.resolve(result);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  };
}

function handlerCaller<Args>(
  handler: (args: Args, ctx: ToolContext) => unknown,
): (args: Args, ctx: ToolContext) => unknown {
  return (args, ctx) => {
    const result = handler(args, ctx);
    if (result instanceof Promise || !isThenable(result)) return result;
    return Promise.resolve(result);
  };
}

function isThenable(value: unknown): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function localContext(tool: string, given: Partial<ToolContext>): ToolContext {
  const identity = given.identity ?? { tenant: 'default' };
  const runId = given.runId ?? 'local';
  const callId = given.callId ?? randomUUID();
  let artifacts = given.artifacts;
  let logger = given.logger;
  let signal = given.signal;
  return {
    runId,
    callId,
    identity,
    /** A signal of this call's own (made on first use): one shared signal would collect every call's listeners. */
    get signal() {
      signal ??= new AbortController().signal;
      return signal;
    },
    get logger() {
      logger ??= silentLogger();
      return logger;
    },
    get artifacts() {
      artifacts ??= new TenantArtifacts(new MemoryBlobStore(), {
        tenant: identity.tenant,
        runId,
        callId,
        tool,
      });
      return artifacts;
    },
    emit: given.emit ?? (() => undefined),
    attempt: given.attempt ?? 1,
    workerId: given.workerId ?? 'local',
  };
}
