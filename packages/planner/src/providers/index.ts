import type OpenAI from 'openai';
import type Anthropic from '@anthropic-ai/sdk';
import { AgentMeshError, ErrorCode, type ProviderKind } from '@agentmesh/protocol';
import { AnthropicProvider, createAnthropicClient } from './anthropic.js';
import { OpenAiProvider, createOpenAiClient } from './openai.js';
import { ScriptedProvider, type ScriptedTurnInput } from './scripted.js';
import type { ModelProvider } from './types.js';
import { OpenAiResponsesProvider } from './openai-responses.js';
import { NativeOrTextProtocol, TextToolProtocol } from './text-protocol.js';
import { RetryingProvider, type ProviderRetryOptions } from './retrying.js';
import { isPreset, PROVIDER_PRESETS, type PresetName } from './presets.js';
import { resolveModelName, tuningOf, type ModelEntry, type ModelsConfig } from './models.js';
import type { ModelTuning } from './tuning.js';
import { LruCache } from '../util.js';

export * from './types.js';
export { OpenAiProvider, createOpenAiClient, type OpenAiProviderOptions } from './openai.js';
export {
  AnthropicProvider,
  createAnthropicClient,
  NATIVE_SEARCH_TOOLS,
  type AnthropicProviderOptions,
} from './anthropic.js';
export { ScriptedProvider, ScriptFileSchema, readScriptFile, type ScriptedTurnInput } from './scripted.js';
export { OpenAiResponsesProvider, type OpenAiResponsesProviderOptions } from './openai-responses.js';
export {
  TextToolProtocol,
  NativeOrTextProtocol,
  parseToolBlocks,
  renderToolPrompt,
  toTextTranscript,
  MALFORMED_CALL_NAME,
} from './text-protocol.js';
export { RetryingProvider, type ProviderRetryOptions } from './retrying.js';
export { providerError, retryAfterMs, contentFilteredError } from './errors.js';
export { PROVIDER_PRESETS, isPreset, type ProviderPreset, type PresetName } from './presets.js';
export {
  ModelEntrySchema,
  ModelsConfigSchema,
  parseModelsConfig,
  resolveModelName,
  splitModelSpec,
  type ModelEntry,
  type ModelsConfig,
} from './models.js';
export type { ModelTuning, ReasoningEffort } from './tuning.js';

/**
 * How the planner reaches models. Everything is optional: keys and base URLs fall back to OPENAI_API_KEY,
 * OPENAI_BASE_URL, ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.
 */
export interface ProviderSettings {
  /** The provider of runs that do not name one. */
  provider?: ProviderKind;
  /** The model of runs that do not name one (for the default provider). */
  model?: string;
  openaiApiKey?: string;
  openaiBaseUrl?: string;
  anthropicApiKey?: string;
  anthropicBaseUrl?: string;
  /** Base URL of an OpenAI-compatible server (Ollama, vLLM, OpenRouter); a run's `base_url` wins. */
  baseUrl?: string;
  /** API key for the OpenAI-compatible server (default: the OpenAI key, or none). */
  compatibleApiKey?: string;
  /** A script file for the scripted provider (runs may also carry `script`). */
  script?: string;
  /** Stream responses (default true). */
  stream?: boolean;
  /** SDK retries on 429/5xx/connection errors (default 2). */
  maxRetries?: number;
  /** Output token cap of each response. */
  maxOutputTokens?: number;
  /** Where environment fallbacks are read (default `process.env`). */
  env?: Record<string, string | undefined>;
  /** `models:` aliases, tiers and per-model overrides (see docs/models.md). */
  models?: ModelsConfig;
  /** Tuning of every model (a model's `models:` entry wins). */
  tuning?: ModelTuning;
  /** Backoff of retried provider failures (attempts come from `maxRetries`). */
  retry?: Omit<ProviderRetryOptions, 'attempts'>;
  /**
   * Base URLs a run's `base_url` may name besides the configured ones (`baseUrl`, the OpenAI and Anthropic base
   * URLs, the presets'); any other is refused with `permission_denied`. Default: none.
   */
  allowedBaseUrls?: readonly string[];
  /** SDK clients kept for reuse, one per base URL and key; the least recently used goes first (default 16). */
  maxClients?: number;
}

/** SDK clients a planner keeps when `maxClients` is not set. */
export const DEFAULT_MAX_PROVIDER_CLIENTS = 16;

export const DEFAULT_MODELS: Record<ProviderKind, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-6',
  'openai-compatible': 'llama3.2',
  scripted: 'script',
  'openai-responses': 'gpt-5-mini',
  ...Object.fromEntries(Object.entries(PROVIDER_PRESETS).map(([name, p]) => [name, p.defaultModel])),
} as Record<ProviderKind, string>;

/** What a run's provider resolved to: enough to build it, with no secret in `describe`. */
export interface ProviderChoice {
  kind: ProviderKind;
  model: string;
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  script?: readonly ScriptedTurnInput[] | string | undefined;
  /** How tools reach the model; `undefined` leaves it to the capability table (native by default). */
  toolProtocol?: 'native' | 'text' | undefined;
  /** The model's overrides from `models:` (and the settings' tuning). */
  tuning?: ModelTuning | undefined;
  /** The model's context window, when configured. */
  contextWindow?: number | undefined;
}

export const NO_PROVIDER_HELP =
  'no LLM provider is configured: set OPENAI_API_KEY (OpenAI) or ANTHROPIC_API_KEY (Anthropic), ' +
  'give a base URL for an OpenAI-compatible server (OPENAI_BASE_URL or --base-url, e.g. Ollama at http://localhost:11434/v1), ' +
  'or use the scripted provider with a script (--script FILE, or "script" in the run request)';

/** The provider-related fields of a run request. */
export interface ProviderRequest {
  provider?: ProviderKind | undefined;
  model?: string | undefined;
  base_url?: string | undefined;
  script?: readonly ScriptedTurnInput[] | undefined;
  tool_protocol?: 'native' | 'text' | undefined;
}

/**
 * Picks the provider and model of a run, or throws `invalid_config` saying how to configure one. The CLI calls it
 * up front (through {@link checkProviderConfig}); the planner calls it for every run.
 */
export function resolveProvider(request: ProviderRequest, settings: ProviderSettings = {}): ProviderChoice {
  if (request.base_url !== undefined) checkBaseUrlAllowed(request.base_url, settings);
  const named = request.model ?? settings.model;
  if (named === undefined || settings.models === undefined) return resolveEndpoint(request, settings);
  const alias = resolveModelName(named, settings.models);
  const choice = resolveEndpoint(
    {
      ...request,
      model: alias.model,
      ...(request.provider === undefined && alias.provider !== undefined ? { provider: alias.provider } : {}),
    },
    settings,
  );
  const own = resolveModelName(`${choice.kind}:${choice.model}`, settings.models).overrides;
  return withOverrides(choice, { ...own, ...alias.overrides }, request, settings);
}

/** Compares base URLs by their normalized form, without a trailing slash (`http://h:1/v1/` is `http://h:1/v1`). */
function normalizeUrl(url: string): string {
  try {
    return new URL(url).href.replace(/\/+$/, '');
  } catch {
    return url.replace(/\/+$/, '');
  }
}

/** The base URLs a run may name: the configured ones, the presets' and `allowedBaseUrls`. */
function allowedBaseUrls(settings: ProviderSettings): Set<string> {
  const env = settings.env ?? process.env;
  const urls = [
    settings.baseUrl,
    settings.openaiBaseUrl ?? env['OPENAI_BASE_URL'],
    settings.anthropicBaseUrl ?? env['ANTHROPIC_BASE_URL'],
    ...Object.values(PROVIDER_PRESETS).map((preset) => preset.baseUrl),
    ...(settings.allowedBaseUrls ?? []),
  ];
  return new Set(urls.filter((url): url is string => !!url).map(normalizeUrl));
}

/** A run may only send its model calls where the planner's configuration allows: else `permission_denied`. */
function checkBaseUrlAllowed(baseUrl: string, settings: ProviderSettings): void {
  if (allowedBaseUrls(settings).has(normalizeUrl(baseUrl))) return;
  throw new AgentMeshError(
    ErrorCode.PermissionDenied,
    `base_url "${baseUrl}" is not allowed on this planner: a run may only name a configured base URL or one ` +
      'listed in provider.allowed_base_urls',
    { retryable: false, details: { field: 'base_url', base_url: baseUrl } },
  );
}

function withOverrides(
  choice: ProviderChoice,
  overrides: ModelEntry,
  request: ProviderRequest,
  settings: ProviderSettings,
): ProviderChoice {
  const tuning = { ...settings.tuning, ...tuningOf(overrides) };
  const toolProtocol = request.tool_protocol ?? overrides.tool_protocol;
  return {
    ...choice,
    ...(Object.keys(tuning).length > 0 ? { tuning } : {}),
    ...(toolProtocol === undefined ? {} : { toolProtocol }),
    ...(overrides.context_window === undefined ? {} : { contextWindow: overrides.context_window }),
  };
}

function resolveEndpoint(request: ProviderRequest, settings: ProviderSettings): ProviderChoice {
  const choice = resolveKindAndKey(request, settings);
  const tuning = settings.tuning;
  return {
    ...choice,
    ...(tuning && Object.keys(tuning).length > 0 ? { tuning } : {}),
    ...(request.tool_protocol === undefined ? {} : { toolProtocol: request.tool_protocol }),
  };
}

function resolveKindAndKey(request: ProviderRequest, settings: ProviderSettings): ProviderChoice {
  const env = settings.env ?? process.env;
  // read from the environment only when the run needs them (a scripted run needs none)
  const openaiKey = () => settings.openaiApiKey ?? env['OPENAI_API_KEY'] ?? undefined;
  const openaiBase = () => settings.openaiBaseUrl ?? env['OPENAI_BASE_URL'] ?? undefined;
  const anthropicKey = () => settings.anthropicApiKey ?? env['ANTHROPIC_API_KEY'] ?? undefined;
  const compatibleBase = request.base_url ?? settings.baseUrl;
  const script = request.script ?? settings.script;
  const kind: ProviderKind | undefined =
    request.provider ??
    (request.script !== undefined ? 'scripted' : undefined) ??
    (request.base_url !== undefined ? 'openai-compatible' : undefined) ??
    settings.provider ??
    (settings.script !== undefined ? 'scripted' : undefined) ??
    (settings.baseUrl !== undefined ? 'openai-compatible' : undefined) ??
    (openaiKey() ? 'openai' : anthropicKey() ? 'anthropic' : openaiBase() ? 'openai-compatible' : undefined);
  if (kind === undefined)
    throw new AgentMeshError(ErrorCode.InvalidConfig, NO_PROVIDER_HELP, { retryable: false });
  const model =
    request.model ??
    (settings.provider === undefined || settings.provider === kind ? settings.model : undefined) ??
    DEFAULT_MODELS[kind];
  const missing = (what: string) =>
    new AgentMeshError(ErrorCode.InvalidConfig, `provider "${kind}" needs ${what}. ${NO_PROVIDER_HELP}`, {
      retryable: false,
      details: { provider: kind },
    });
  if (isPreset(kind)) return presetChoice(kind, model, request, settings, missing);
  switch (kind) {
    case 'openai':
    case 'openai-responses': {
      const [apiKey, baseUrl] = [openaiKey(), openaiBase()];
      if (!apiKey && !baseUrl) throw missing('OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)');
      return { kind, model, apiKey: apiKey || undefined, baseUrl: baseUrl || undefined };
    }
    case 'anthropic': {
      const apiKey = anthropicKey();
      if (!apiKey) throw missing('ANTHROPIC_API_KEY');
      const baseUrl = settings.anthropicBaseUrl ?? env['ANTHROPIC_BASE_URL'] ?? undefined;
      return { kind, model, apiKey, baseUrl: baseUrl || undefined };
    }
    case 'openai-compatible': {
      const openaiBaseUrl = openaiBase();
      const baseUrl = compatibleBase ?? openaiBaseUrl;
      if (!baseUrl) throw missing('a base URL (--base-url, the run\'s "base_url", or OPENAI_BASE_URL)');
      // a base URL chosen by the run (not by whoever configured this planner) never receives the planner's keys
      const configuredBase =
        request.base_url === undefined ||
        request.base_url === settings.baseUrl ||
        request.base_url === openaiBaseUrl;
      const apiKey = configuredBase ? (settings.compatibleApiKey ?? (openaiKey() || undefined)) : undefined;
      return { kind, model, apiKey, baseUrl };
    }
    case 'scripted':
      if (script === undefined) throw missing('a script (--script FILE, or "script" in the run request)');
      return { kind, model, script };
    default:
      throw missing('a known provider name');
  }
}

function presetChoice(
  kind: PresetName,
  model: string,
  request: ProviderRequest,
  settings: ProviderSettings,
  missing: (what: string) => AgentMeshError,
): ProviderChoice {
  const env = settings.env ?? process.env;
  const preset = PROVIDER_PRESETS[kind];
  const baseUrl = request.base_url ?? settings.baseUrl ?? preset.baseUrl;
  const key = preset.keyVariable === undefined ? undefined : env[preset.keyVariable] || undefined;
  if (
    preset.keyRequired &&
    preset.keyVariable !== undefined &&
    key === undefined &&
    baseUrl === preset.baseUrl
  )
    throw missing(preset.keyVariable);
  // a base URL chosen by the run never receives the planner's key
  const configuredBase = request.base_url === undefined || request.base_url === settings.baseUrl;
  return { kind, model, apiKey: configuredBase ? (settings.compatibleApiKey ?? key) : undefined, baseUrl };
}

/** Throws `invalid_config` (with instructions) when a run like `request` could not reach a model. */
export function checkProviderConfig(
  settings: ProviderSettings = {},
  request: ProviderRequest = {},
): ProviderChoice {
  return resolveProvider(request, settings);
}

/** Reuses SDK clients (and their connection pools) across runs of one planner. */
export class ProviderClients {
  private readonly openai: LruCache<string, OpenAI>;
  private readonly anthropic: LruCache<string, Anthropic>;
  constructor(private readonly settings: ProviderSettings = {}) {
    const capacity = settings.maxClients ?? DEFAULT_MAX_PROVIDER_CLIENTS;
    this.openai = new LruCache(capacity);
    this.anthropic = new LruCache(capacity);
  }

  /** SDK clients kept for reuse now (OpenAI-style and Anthropic). */
  get size(): number {
    return this.openai.size + this.anthropic.size;
  }

  /**
   * The provider of a run: the wire format, wrapped in retries (honoring retry-after) and, for `toolProtocol`
   * `text` (given here or in the choice), in the text tool protocol.
   */
  create(
    choice: ProviderChoice,
    options: { toolProtocol?: 'native' | 'text' | undefined } = {},
  ): ModelProvider {
    const wire = this.wire(choice);
    const attempts = (this.settings.maxRetries ?? 2) + 1;
    const retried =
      choice.kind === 'scripted' || attempts <= 1
        ? wire
        : new RetryingProvider(wire, { ...this.settings.retry, attempts });
    const protocol = options.toolProtocol ?? choice.toolProtocol;
    if (protocol === 'text') return new TextToolProtocol(retried);
    if (protocol === undefined && (choice.kind === 'ollama' || choice.kind === 'huggingface'))
      return new NativeOrTextProtocol(retried);
    return retried;
  }

  private wire(choice: ProviderChoice): ModelProvider {
    const common = {
      model: choice.model,
      ...(this.settings.stream === undefined ? {} : { stream: this.settings.stream }),
      ...(this.settings.maxOutputTokens === undefined
        ? {}
        : { maxOutputTokens: this.settings.maxOutputTokens }),
      ...choice.tuning,
    };
    // retries happen in RetryingProvider, with the one retry helper; the SDKs do not retry on their own
    const endpoint = { apiKey: choice.apiKey, baseUrl: choice.baseUrl, maxRetries: 0 };
    const key = `${choice.baseUrl ?? ''}\u0000${choice.apiKey ?? ''}`;
    const openai = () => this.openai.getOrCreate(key, () => createOpenAiClient(endpoint));
    if (isPreset(choice.kind)) {
      const preset = PROVIDER_PRESETS[choice.kind];
      return new OpenAiProvider({
        parallelCalls: preset.parallelCalls,
        streamUsage: preset.streamUsage,
        ...common,
        kind: choice.kind,
        client: openai(),
      });
    }
    switch (choice.kind) {
      case 'openai':
      case 'openai-compatible':
        return new OpenAiProvider({ ...common, kind: choice.kind, client: openai() });
      case 'openai-responses':
        return new OpenAiResponsesProvider({ ...common, client: openai() });
      case 'anthropic': {
        const client = this.anthropic.getOrCreate(key, () => createAnthropicClient(endpoint));
        return new AnthropicProvider({ ...common, client });
      }
      default:
        return new ScriptedProvider(choice.script ?? [], { model: choice.model });
    }
  }
}

/** Builds a provider for a run request (or for explicit settings): the one-call form of the above. */
export function createProvider(request: ProviderRequest, settings: ProviderSettings = {}): ModelProvider {
  return new ProviderClients(settings).create(resolveProvider(request, settings));
}
