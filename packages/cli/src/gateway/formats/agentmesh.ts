import type { StreamFormat } from './types.js';

/** The default format: every run event as it is, one per frame. */
export const agentmeshFormat: StreamFormat = {
  name: 'agentmesh',
  headers: {},
  stateful: false,
  create: () => ({ frames: (event) => [event], closing: () => [] }),
};
