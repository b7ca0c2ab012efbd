import { AgentMeshError, ErrorCode, isAbortError } from '@agentmesh/protocol';

/** Maps an SDK failure to an AgentMeshError: aborts become `cancelled`, HTTP failures `provider_error`. */
export function providerError(provider: string, error: unknown, signal?: AbortSignal): AgentMeshError {
  if (error instanceof AgentMeshError) return error;
  const e = error as { status?: number; name?: string; message?: string };
  if (signal?.aborted || isAbortError(error) || e.name === 'APIUserAbortError')
    return new AgentMeshError(ErrorCode.Cancelled, `${provider} request was aborted`, { cause: error });
  const status = typeof e.status === 'number' ? e.status : undefined;
  const retryable =
    status === undefined || status === 408 || status === 409 || status === 429 || status >= 500;
  return new AgentMeshError(
    ErrorCode.ProviderError,
    `${provider} request failed${status === undefined ? '' : ` with HTTP ${status}`}: ${e.message ?? String(error)}`,
    { retryable, cause: error, details: { provider, ...(status === undefined ? {} : { status }) } },
  );
}

/** JSON Schema keys some providers reject at the top level of a tool's parameters. */
export function providerSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = schema;
  if (rest['type'] === undefined) rest['type'] = 'object';
  return rest;
}
