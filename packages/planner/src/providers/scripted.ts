import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  AgentMeshError,
  ErrorCode,
  ScriptedTurnSchema,
  deltasMakeText,
  fastValidator,
  validate,
  type ScriptedTurn,
} from '@agentmesh/protocol';
import type { ChatToolCall, ModelProvider, ModelRequest, ModelTurn } from './types.js';
import { abortableDelay } from '../util.js';

export type ScriptedTurnInput = z.input<typeof ScriptedTurnSchema>;

/** A script file: `{ "turns": [...] }` or a bare array of turns. */
export const ScriptFileSchema = z.union([
  z.object({ turns: z.array(ScriptedTurnSchema).min(1) }).strict(),
  z.array(ScriptedTurnSchema).min(1),
]);

/**
 * A turn as zod parses it: one that is complete already (every call's arguments given) and passes the compiled check
 * is taken as it is, with no copy; every run of a request with a script builds a provider from it.
 */
const checkTurn = fastValidator(ScriptedTurnSchema, deltasMakeText);

/** Reads and validates a script file; problems are `invalid_config` errors naming the file and the field. */
export function readScriptFile(path: string): ScriptedTurn[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `cannot read script file ${path}: ${(error as Error).message}`,
    );
  }
  const parsed = validate(ScriptFileSchema, raw, `script file ${path}`, ErrorCode.InvalidConfig);
  return Array.isArray(parsed) ? parsed : parsed.turns;
}

/**
 * Replays model turns from a script: for demos, tests and benchmarks, with no API key. Tool calls may name tools
 * canonically (`math.calc`) or by provider alias (`math__calc`); string arguments are sent as raw JSON text, so a
 * script can exercise malformed arguments. The turn played is the run's turn index (else the number of assistant
 * messages so far, a session's earlier turns included), which makes the provider stateless (one instance serves any number of runs, and a resumed run picks up where it was).
 */
export class ScriptedProvider implements ModelProvider {
  readonly kind = 'scripted' as const;
  readonly model: string;
  private readonly turns: readonly ScriptedTurn[];

  constructor(turns: readonly ScriptedTurnInput[] | string, options: { model?: string } = {}) {
    this.turns =
      typeof turns === 'string'
        ? readScriptFile(turns)
        : turns.map((t, i) => checkTurn(t, `scripted turn ${i + 1}`, ErrorCode.InvalidConfig));
    this.model = options.model ?? 'script';
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    const index = request.turn ?? request.messages.filter((m) => m.role === 'assistant').length;
    const turn = this.turns[index];
    if (turn === undefined)
      throw new AgentMeshError(
        ErrorCode.ProviderError,
        `the script has ${this.turns.length} turn(s) and the model was asked for turn ${index + 1}`,
        { retryable: false, details: { turns: this.turns.length } },
      );
    if (turn.delay_ms !== undefined && turn.delay_ms > 0) await abortableDelay(turn.delay_ms, request.signal);
    else if (request.signal.aborted)
      throw new AgentMeshError(ErrorCode.Cancelled, 'scripted turn was aborted');
    const calls: ChatToolCall[] = (turn.tool_calls ?? []).map((c, i) => ({
      id: c.id ?? `call_${index + 1}_${i + 1}`,
      name: c.name,
      arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
    }));
    const text = turn.text ?? turn.deltas?.join('') ?? '';
    for (const delta of turn.deltas ?? []) {
      if (request.signal.aborted) throw new AgentMeshError(ErrorCode.Cancelled, 'scripted turn was aborted');
      request.onDelta?.({ kind: 'text', text: delta });
    }
    const usage = turn.usage ?? {
      input_tokens: Math.ceil(
        (request.system.length + request.messages.reduce((n, m) => n + m.content.length, 0)) / 4,
      ),
      output_tokens: Math.ceil(
        (text.length + calls.reduce((n, c) => n + c.name.length + c.arguments.length, 0)) / 4,
      ),
    };
    return { text, tool_calls: calls, usage, stop_reason: calls.length > 0 ? 'tool_calls' : 'stop' };
  }
}
