export * from './propagation.js';
export * from './spans.js';
export * from './metrics.js';
export * from './metrics-server.js';
export * from './tracing-state.js';
export * from './run-tracer.js';
export * from './tool-execution.js';
