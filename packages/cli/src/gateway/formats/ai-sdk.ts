import type { RunEvent, RunEventOf } from '@agentmesh/protocol';
import { argumentsValue, type StreamFormat, type Translator } from './types.js';

type Chunk = Record<string, unknown> & { type: string };

/** One run's events as AI SDK UI message stream chunks: one assistant message, a step per model turn. */
class AiSdkTranslator implements Translator {
  private stepOpen = false;
  private text: string | undefined;
  private reasoning: string | undefined;

  constructor(private readonly runId: string) {}

  frames(event: RunEvent): Chunk[] {
    switch (event.type) {
      case 'run.accepted':
        return [{ type: 'start', messageId: this.runId }];
      case 'llm.request':
        return this.startStep();
      case 'llm.delta':
        return event.text === '' ? [] : this.delta(event.kind, event.iteration, event.text);
      case 'llm.response':
        return this.response(event);
      case 'tool.completed':
        return [
          event.is_error
            ? {
                type: 'tool-output-error',
                toolCallId: event.call_id,
                errorText: event.preview,
                dynamic: true,
              }
            : {
                type: 'tool-output-available',
                toolCallId: event.call_id,
                output: argumentsValue(event.preview),
                dynamic: true,
              },
        ];
      case 'tool.failed':
        return [
          {
            type: 'tool-output-error',
            toolCallId: event.call_id,
            errorText: event.error.message,
            dynamic: true,
          },
        ];
      case 'approval.requested':
      case 'approval.decided':
        return [{ type: 'data-approval', id: event.approval_id, data: event }];
      case 'run.completed':
        return [
          ...this.finishStep(),
          { type: 'finish', finishReason: event.status === 'done' ? 'stop' : 'other' },
        ];
      case 'run.failed':
        return [
          ...this.finishStep(),
          { type: 'error', errorText: event.error.message },
          { type: 'finish', finishReason: 'error' },
        ];
      default:
        return [];
    }
  }

  closing(): string[] {
    return ['[DONE]'];
  }

  private delta(kind: 'text' | 'reasoning', iteration: number, delta: string): Chunk[] {
    const out: Chunk[] = [];
    let id = this[kind];
    if (id === undefined) {
      id = this[kind] = `${kind}-${iteration}`;
      out.push({ type: `${kind}-start`, id });
    }
    out.push({ type: `${kind}-delta`, id, delta });
    return out;
  }

  private response(event: RunEventOf<'llm.response'>): Chunk[] {
    const out: Chunk[] = [];
    if (this.text === undefined && event.text !== '')
      out.push(...this.delta('text', event.iteration, event.text));
    out.push(...this.closeParts());
    for (const call of event.tool_calls)
      out.push({
        type: 'tool-input-available',
        toolCallId: call.id,
        toolName: call.name,
        input: argumentsValue(call.arguments),
        dynamic: true,
      });
    return out;
  }

  private closeParts(): Chunk[] {
    const out: Chunk[] = [];
    if (this.reasoning !== undefined) out.push({ type: 'reasoning-end', id: this.reasoning });
    if (this.text !== undefined) out.push({ type: 'text-end', id: this.text });
    this.reasoning = this.text = undefined;
    return out;
  }

  private startStep(): Chunk[] {
    const out = this.finishStep();
    this.stepOpen = true;
    return [...out, { type: 'start-step' }];
  }

  private finishStep(): Chunk[] {
    if (!this.stepOpen) return [];
    this.stepOpen = false;
    return [...this.closeParts(), { type: 'finish-step' }];
  }
}

/** The Vercel AI SDK UI message stream (protocol v1), ending with `[DONE]`. */
export const aiSdkFormat: StreamFormat = {
  name: 'ai-sdk',
  headers: { 'x-vercel-ai-ui-message-stream': 'v1' },
  stateful: true,
  create: (runId) => new AiSdkTranslator(runId),
};
