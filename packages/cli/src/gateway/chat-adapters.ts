import { ErrorCode } from '@agentmesh/protocol';
import type { z } from 'zod';
import { HttpError } from './http.js';
import type { AgUiRunInputSchema, AiSdkChatBodySchema } from './schemas.js';

/**
 * The run request of an AG-UI RunAgentInput (`POST /v1/ag-ui`): the last user message is the task, `threadId` the
 * session, `runId` the run id, `forwardedProps` more RunRequest fields.
 */
export function agUiRunBody(input: z.infer<typeof AgUiRunInputSchema>): Record<string, unknown> {
  const task = lastUserText(input.messages);
  if (task === undefined) throw noText('AG-UI RunAgentInput');
  const { identity, ...extra } = input.forwardedProps ?? {};
  return { ...extra, id: input.runId, task, identity: withSession(identity, input.threadId) };
}

/**
 * The run request of an AI SDK chat request (`POST /v1/chat`): the last user message's text is the task, the chat
 * id the session, `agentmesh` more RunRequest fields.
 */
export function aiSdkRunBody(body: z.infer<typeof AiSdkChatBodySchema>): Record<string, unknown> {
  const task = lastUserText(body.messages.map((m) => ({ role: m.role, content: m.parts })));
  if (task === undefined) throw noText('AI SDK chat request');
  const { identity, ...extra } = body.agentmesh ?? {};
  return { ...extra, task, identity: withSession(identity, body.id) };
}

function noText(what: string): HttpError {
  return new HttpError(400, `invalid ${what}: no user message with text`, ErrorCode.InvalidRequest);
}

/** The text of the last user message (a string, or the text parts of a content list). */
function lastUserText(messages: { role: string; content: unknown }[]): string | undefined {
  const last = messages.findLast((m) => m.role === 'user');
  const content = last?.content;
  const text =
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? content
            .flatMap((part: unknown) =>
              typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text'
                ? [String((part as { text?: unknown }).text ?? '')]
                : [],
            )
            .join('\n')
        : '';
  return text.trim() === '' ? undefined : text;
}

/** `identity` with `session` set (an identity that is not an object is left for the request check to refuse). */
function withSession(identity: unknown, session: string): unknown {
  if (
    identity !== undefined &&
    (typeof identity !== 'object' || identity === null || Array.isArray(identity))
  )
    return identity;
  return { ...(identity as Record<string, unknown> | undefined), session };
}
