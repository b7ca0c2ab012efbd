import type { z } from 'zod';
import type { RequestContext } from './context.js';
import type { GatewayHandlers } from './handlers.js';

export interface RouteResponse {
  description: string;
  schema?: z.ZodType;
  /** A Server-Sent Events stream whose frames are `schema`. */
  sse?: boolean;
}

/** One route: the OpenAPI document and the router are both made from this table, so they cannot disagree. */
export interface Route {
  method: 'GET' | 'POST';
  /** An OpenAPI path template, e.g. `/v1/runs/{id}`. */
  path: string;
  summary: string;
  /** Needs an API key (when keys are configured). */
  auth: boolean;
  query?: Record<string, string>;
  body?: z.ZodType;
  responses: Record<number, RouteResponse>;
  handle: (handlers: GatewayHandlers, ctx: RequestContext) => Promise<void>;
}
