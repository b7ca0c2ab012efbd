export { startGateway, type Gateway, type GatewayOptions } from './server.js';
export { loadApiKeys, GatewayAuth, OPEN_TENANT, type GatewayKeySources } from './auth.js';
export { NatsRunSource, IndexRunSource, type RunSource } from './source.js';
export { ROUTES, GATEWAY_API_VERSION } from './routes.js';
export { openApiDocument } from './openapi.js';
export { STREAM_FORMATS, AG_UI_CUSTOM_EVENTS } from './formats/index.js';
export { MAX_BODY_BYTES } from './http.js';
export { KEEP_ALIVE_MS } from './sse.js';
