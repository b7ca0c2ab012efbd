import type { RunEvent, RunEventOf } from '@agentmesh/protocol';
import { argumentsText, type StreamFormat, type Translator } from './types.js';

/**
 * Names of the `CUSTOM` events the `ag-ui` format sends for what AG-UI has no event of its own for. `value` is
 * the run event's own fields (without `type`, `run_id`, `seq`, `ts`).
 */
export const AG_UI_CUSTOM_EVENTS = {
  'approval.requested': 'agentmesh.approval.requested',
  'approval.decided': 'agentmesh.approval.decided',
  'agent.started': 'agentmesh.agent.started',
  'agent.completed': 'agentmesh.agent.completed',
  'run.input': 'agentmesh.run.input',
  'run.paused': 'agentmesh.run.paused',
  'run.resumed': 'agentmesh.run.resumed',
  'guardrail.tripped': 'agentmesh.guardrail.tripped',
} as const satisfies Partial<Record<RunEvent['type'], string>>;

type AgUiEvent = Record<string, unknown> & { type: string };

function customValue(event: RunEvent): Record<string, unknown> {
  const { type: _type, run_id: _run, seq: _seq, ts: _ts, ...rest } = event;
  return rest;
}

/** One run's events as AG-UI events: a step per model turn, the text of each turn as one assistant message. */
class AgUiTranslator implements Translator {
  private thread: string;
  private openMessage: string | undefined;
  private step: string | undefined;

  constructor(private readonly runId: string) {
    this.thread = runId;
  }

  frames(event: RunEvent): AgUiEvent[] {
    const timestamp = Date.parse(event.ts) || undefined;
    return this.translate(event).map((e) => (timestamp === undefined ? e : { ...e, timestamp }));
  }

  closing(): string[] {
    return [];
  }

  private translate(event: RunEvent): AgUiEvent[] {
    switch (event.type) {
      case 'run.accepted':
        this.thread = event.identity?.session ?? this.runId;
        return [{ type: 'RUN_STARTED', threadId: this.thread, runId: this.runId }];
      case 'llm.request':
        return [...this.closeStep(), ...this.openStep(`turn-${event.iteration}`)];
      case 'llm.delta':
        return event.kind === 'text' && event.text !== '' ? this.text(event.iteration, event.text) : [];
      case 'llm.response':
        return this.response(event);
      case 'tool.completed':
      case 'tool.failed':
        return [
          {
            type: 'TOOL_CALL_RESULT',
            messageId: `${this.runId}:result:${event.call_id}`,
            toolCallId: event.call_id,
            content: event.type === 'tool.failed' ? `error: ${event.error.message}` : event.preview,
            role: 'tool',
          },
        ];
      case 'run.completed':
        return [
          ...this.closeMessage(),
          ...this.closeStep(),
          {
            type: 'RUN_FINISHED',
            threadId: this.thread,
            runId: this.runId,
            result: {
              status: event.status,
              text: event.text,
              ...(event.output === undefined ? {} : { output: event.output }),
            },
          },
        ];
      case 'run.failed':
        return [{ type: 'RUN_ERROR', message: event.error.message, code: event.error.code }];
      default:
        return this.custom(event);
    }
  }

  private custom(event: RunEvent): AgUiEvent[] {
    const name = (AG_UI_CUSTOM_EVENTS as Partial<Record<string, string>>)[event.type];
    return name === undefined ? [] : [{ type: 'CUSTOM', name, value: customValue(event) }];
  }

  private text(iteration: number, delta: string): AgUiEvent[] {
    const out: AgUiEvent[] = [];
    if (this.openMessage === undefined) {
      this.openMessage = `${this.runId}:message:${iteration}`;
      out.push({ type: 'TEXT_MESSAGE_START', messageId: this.openMessage, role: 'assistant' });
    }
    out.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: this.openMessage, delta });
    return out;
  }

  private response(event: RunEventOf<'llm.response'>): AgUiEvent[] {
    const messageId = this.openMessage ?? `${this.runId}:message:${event.iteration}`;
    const out =
      this.openMessage === undefined && event.text !== '' ? this.text(event.iteration, event.text) : [];
    out.push(...this.closeMessage());
    for (const call of event.tool_calls)
      out.push(
        { type: 'TOOL_CALL_START', toolCallId: call.id, toolCallName: call.name, parentMessageId: messageId },
        { type: 'TOOL_CALL_ARGS', toolCallId: call.id, delta: argumentsText(call.arguments) },
        { type: 'TOOL_CALL_END', toolCallId: call.id },
      );
    return out;
  }

  private closeMessage(): AgUiEvent[] {
    if (this.openMessage === undefined) return [];
    const messageId = this.openMessage;
    this.openMessage = undefined;
    return [{ type: 'TEXT_MESSAGE_END', messageId }];
  }

  private openStep(name: string): AgUiEvent[] {
    this.step = name;
    return [{ type: 'STEP_STARTED', stepName: name }];
  }

  private closeStep(): AgUiEvent[] {
    if (this.step === undefined) return [];
    const stepName = this.step;
    this.step = undefined;
    return [...this.closeMessage(), { type: 'STEP_FINISHED', stepName }];
  }
}

/** The AG-UI protocol: RUN_STARTED, STEP_*, TEXT_MESSAGE_*, TOOL_CALL_*, RUN_FINISHED / RUN_ERROR, CUSTOM. */
export const agUiFormat: StreamFormat = {
  name: 'ag-ui',
  headers: {},
  stateful: true,
  create: (runId) => new AgUiTranslator(runId),
};
