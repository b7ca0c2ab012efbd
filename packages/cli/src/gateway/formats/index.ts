import { ErrorCode } from '@agentmesh/protocol';
import { HttpError } from '../http.js';
import { agentmeshFormat } from './agentmesh.js';
import { agUiFormat } from './ag-ui.js';
import { aiSdkFormat } from './ai-sdk.js';
import type { StreamFormat } from './types.js';

export type { StreamFormat, Translator } from './types.js';
export { AG_UI_CUSTOM_EVENTS, agUiFormat } from './ag-ui.js';
export { aiSdkFormat } from './ai-sdk.js';

export const STREAM_FORMATS: Readonly<Record<string, StreamFormat>> = {
  agentmesh: agentmeshFormat,
  'ag-ui': agUiFormat,
  'ai-sdk': aiSdkFormat,
};

/**
 * The stream format a request asks for: `?format=NAME`, else a `format=NAME` parameter of `Accept`
 * (`text/event-stream; format=ag-ui`), else `agentmesh`. An unknown name is 400 naming the known ones.
 */
export function chooseFormat(query: string | null, accept: string | undefined): StreamFormat {
  const fromAccept = /(?:^|[;,\s])format=([\w-]+)/i.exec(accept ?? '')?.[1];
  const name = query ?? fromAccept ?? 'agentmesh';
  const format = STREAM_FORMATS[name.toLowerCase()];
  if (format === undefined)
    throw new HttpError(
      400,
      `unknown stream format "${name}": use one of ${Object.keys(STREAM_FORMATS).join(', ')}`,
      ErrorCode.InvalidRequest,
    );
  return format;
}
