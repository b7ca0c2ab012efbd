import { randomUUID } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import express, { type RequestHandler } from 'express';
import { Role, TaskState, type AgentCard, type Message, type Part, type Task } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';
import {
  AgentMeshError,
  ErrorCode,
  publishJson,
  subjects,
  type Backend,
  type Logger,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { followRun, submitRun } from '@agentmesh/planner';
import { bearerToken, tokenMatches } from '../http-access.js';
import { BoundedTaskStore } from './a2a-task-store.js';

export interface A2aServeOptions {
  bus: Backend;
  prefix: string;
  logger: Logger;
  /** The public base URL the agent card names (default `http://<host>:<port>`). */
  publicUrl: string;
  /** Fields every run starts from (provider, model, tools, limits...); the message's text becomes `task`. */
  baseRequest?: Omit<RunRequestInput, 'task' | 'id'>;
  name?: string;
  description?: string;
}

/** The HTTP face: where it listens, the bearer token `/a2a` asks for, and how many tasks it keeps. */
export interface A2aHttpOptions extends A2aServeOptions {
  port: number;
  host?: string;
  /** Every JSON-RPC request must send `Authorization: Bearer <token>` (the agent card stays public). */
  token: string;
  /** Tasks kept for tasks/get (default 1000); past it the oldest finished task is dropped first. */
  maxTasks?: number;
}

const FINAL_STATE: Record<string, TaskState> = {
  done: TaskState.TASK_STATE_COMPLETED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

function textPart(text: string): Part {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function agentMessage(text: string, taskId: string, contextId: string): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function messageText(message: Message): string {
  return message.parts
    .map((p) =>
      p.content?.$case === 'text'
        ? p.content.value
        : p.content?.$case === 'data'
          ? JSON.stringify(p.content.value)
          : '',
    )
    .filter((t) => t !== '')
    .join('\n');
}

/** What a run event says to an A2A client while the task works, if anything. */
function progressText(event: RunEvent): string | undefined {
  const e = event as RunEvent & Record<string, unknown>;
  if (event.type === 'tool.started') return `calling ${String(e['name'])}`;
  if (event.type === 'tool.completed') return `${String(e['name'])} done`;
  if (event.type === 'tool.failed') return `${String(e['name'])} failed`;
  if (event.type === 'tool.search') return `searching tools: ${String(e['query'])}`;
  return undefined;
}

/**
 * The A2A agent executor backed by agentmesh runs: a message becomes a RunRequest (task id = run id), run events
 * become task status updates, the run's final text is the task's artifact, and a task cancel cancels the run.
 */
function statusUpdate(taskId: string, contextId: string, state: TaskState, message?: string) {
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: {
      state,
      message: message === undefined ? undefined : agentMessage(message, taskId, contextId),
      timestamp: new Date().toISOString(),
    },
    metadata: undefined,
  });
}

function answerArtifact(taskId: string, contextId: string, text: string, status: unknown) {
  return AgentEvent.artifactUpdate({
    taskId,
    contextId,
    artifact: {
      artifactId: `${taskId}-answer`,
      name: 'answer',
      description: 'the final text of the run',
      parts: [textPart(text)],
      metadata: { status },
      extensions: [],
    },
    append: false,
    lastChunk: true,
    metadata: undefined,
  });
}

/** The task's final state and text from the run's last event. */
function finalOutcome(final: RunEvent & Record<string, unknown>): { state: TaskState; text: string } {
  if (final.type === 'run.completed') {
    return {
      state: FINAL_STATE[String(final['status'])] ?? TaskState.TASK_STATE_FAILED,
      text: String(final['text'] ?? ''),
    };
  }
  const error = final['error'] as { message?: string } | undefined;
  return { state: TaskState.TASK_STATE_FAILED, text: String(error?.message ?? 'the run failed') };
}

export class RunExecutor implements AgentExecutor {
  constructor(private readonly options: A2aServeOptions) {}

  async execute(context: RequestContext, events: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = context;
    const { bus, prefix } = this.options;
    const text = messageText(context.userMessage);
    const status = (state: TaskState, message?: string) =>
      events.publish(statusUpdate(taskId, contextId, state, message));
    const task: Task = {
      id: taskId,
      contextId,
      status: {
        state: TaskState.TASK_STATE_SUBMITTED,
        message: undefined,
        timestamp: new Date().toISOString(),
      },
      artifacts: [],
      history: [context.userMessage],
      metadata: { run_id: taskId },
    };
    events.publish(AgentEvent.task(task));
    if (text.trim() === '') {
      status(TaskState.TASK_STATE_REJECTED, 'the message has no text to run as a task');
      events.finished();
      return;
    }
    const following = followRun(bus, taskId, {
      prefix,
      onEvent: (event) => {
        if (event.type === 'run.started') status(TaskState.TASK_STATE_WORKING);
        const progress = progressText(event);
        if (progress !== undefined) status(TaskState.TASK_STATE_WORKING, progress);
      },
    });
    try {
      await submitRun(bus, { ...this.options.baseRequest, id: taskId, task: text }, { prefix });
      const final = (await following) as RunEvent & Record<string, unknown>;
      const outcome = finalOutcome(final);
      if (final.type === 'run.completed' && outcome.text !== '')
        events.publish(answerArtifact(taskId, contextId, outcome.text, final['status']));
      status(outcome.state, outcome.text);
    } catch (error) {
      this.options.logger.error({ run_id: taskId, err: (error as Error).message }, 'A2A run failed');
      status(TaskState.TASK_STATE_FAILED, AgentMeshError.from(error).message);
    }
    events.finished();
  }

  cancelTask(taskId: string): Promise<void> {
    publishJson(this.options.bus, subjects(this.options.prefix).runCancel(taskId), {
      reason: 'cancelled by the A2A client',
    });
    return Promise.resolve();
  }
}

/** The agent card served at `/.well-known/agent-card.json`. */
export function agentCard(options: A2aServeOptions): AgentCard {
  return {
    name: options.name ?? 'agentmesh',
    description:
      options.description ??
      'An agentmesh fleet: each message runs as an agent task with the catalog tools; progress arrives as task status updates.',
    supportedInterfaces: [
      { url: `${options.publicUrl}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${options.publicUrl}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
    ],
    provider: undefined,
    version: '0.1.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            description: 'the token a2a serve printed at start, or its --token',
            scheme: 'Bearer',
            bearerFormat: '',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'run',
        name: 'run a task',
        description: 'Runs the message as an agent task against the tools of the catalog.',
        tags: ['agent', 'tools'],
        examples: ['What is the sha256 of "hello"?'],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/** Refuses a request without `Authorization: Bearer <token>` (401, a JSON-RPC error naming what is missing). */
function requireBearer(token: string): RequestHandler {
  return (req, res, next) => {
    const presented = bearerToken(req.headers.authorization);
    if (tokenMatches(presented, token)) return next();
    res
      .status(401)
      .set('www-authenticate', 'Bearer')
      .json({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32001,
          message:
            presented === undefined
              ? 'this A2A agent needs "Authorization: Bearer <token>" (the token a2a serve printed, --token or AGENTMESH_A2A_TOKEN)'
              : "the bearer token is not this A2A agent's",
        },
      });
  };
}

/**
 * Serves the agent card and the A2A JSON-RPC endpoint (`/a2a`): A2A 1.0 (SendMessage, ...) and, through the SDK's
 * compatibility layer, 0.3 (message/send, message/stream, tasks/get, tasks/cancel). Resolves once listening.
 */
export async function serveA2a(options: A2aHttpOptions): Promise<HttpServer> {
  const handler = new DefaultRequestHandler(
    agentCard(options),
    new BoundedTaskStore(options.maxTasks),
    new RunExecutor(options),
  );
  const app = express();
  const legacyCompat = { enabled: true };
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  app.use(
    '/a2a',
    requireBearer(options.token),
    jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }),
  );
  return new Promise((resolve, reject) => {
    const http = app.listen(options.port, options.host ?? '127.0.0.1', () => resolve(http));
    http.once('error', (error) =>
      reject(
        new AgentMeshError(
          ErrorCode.InvalidConfig,
          `cannot listen on port ${options.port}: ${error.message}`,
        ),
      ),
    );
  });
}
