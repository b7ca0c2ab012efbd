import { z } from 'zod';
import { ErrorReplySchema } from './schemas.js';
import type { Route } from './route.js';

type Json = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    target: 'draft-2020-12',
  }) as Json;
  return rest;
}

function operation(route: Route): Json {
  const parameters = [
    ...[...route.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    })),
    ...Object.entries(route.query ?? {}).map(([name, description]) => ({
      name,
      in: 'query',
      required: false,
      description,
      schema: { type: 'string' },
    })),
  ];
  const responses: Json = {};
  for (const [status, response] of Object.entries(route.responses)) {
    const type = response.sse ? 'text/event-stream' : 'application/json';
    const schema = response.schema ?? (Number(status) >= 400 ? ErrorReplySchema : undefined);
    responses[status] = {
      description: response.description,
      ...(schema === undefined ? {} : { content: { [type]: { schema: jsonSchema(schema, 'output') } } }),
    };
  }
  return {
    summary: route.summary,
    ...(route.auth ? { security: [{ bearer: [] }] } : { security: [] }),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body === undefined
      ? {}
      : {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: jsonSchema(route.body, 'input') } },
          },
        }),
    responses,
  };
}

/** The gateway's OpenAPI 3.1 document, made from the route table and its zod schemas (no hand-written copy). */
export function openApiDocument(routes: readonly Route[], version: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) (paths[route.path] ??= {})[route.method.toLowerCase()] = operation(route);
  return {
    openapi: '3.1.0',
    info: { title: 'agentmesh gateway', version },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    paths,
  };
}
