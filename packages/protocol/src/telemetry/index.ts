export * from './propagation.js';
export * from './spans.js';
export * from './metrics.js';
export * from './metrics-server.js';
