import {
  SpanAttr,
  endSpan,
  extractTraceContext,
  startCatalogSearchSpan,
  tracingActive,
  type BusHeaders,
  type CatalogSearchReply,
} from '@agentmesh/protocol';

/**
 * Runs one catalog search inside a server `catalog.search` span, child of the trace context in the request's
 * headers, with the query, strategy and result count. With no tracer provider registered it only runs `search`.
 */
export function traceCatalogSearch(
  headers: BusHeaders | undefined,
  request: { query: string; strategy: string },
  search: () => CatalogSearchReply,
): CatalogSearchReply {
  if (!tracingActive()) return search();
  const span = startCatalogSearchSpan({
    query: request.query,
    strategy: request.strategy,
    side: 'server',
    parent: extractTraceContext(headers),
  });
  try {
    const reply = search();
    span.setAttribute(SpanAttr.SearchResults, reply.results.length);
    endSpan(span);
    return reply;
  } catch (error) {
    endSpan(span, error);
    throw error;
  }
}
