// Runs on a piscina thread: loads a tool's CPU module (cached by the ES module loader) and calls its export.
// Failures come back as plain data so that their code, retryability and details survive the thread boundary.
export default async function runCpuTool({ module, exportName, args, context }) {
  try {
    const mod = await import(module);
    const fn = mod[exportName];
    if (typeof fn !== 'function') throw new Error(`${module} does not export a function "${exportName}"`);
    return { ok: true, value: await fn(args, context) };
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    return {
      ok: false,
      error: {
        name: e.name,
        message: e.message,
        code: typeof e.code === 'string' ? e.code : undefined,
        retryable: typeof e.retryable === 'boolean' ? e.retryable : undefined,
        status: typeof e.status === 'number' ? e.status : undefined,
        details: e.details !== null && typeof e.details === 'object' ? e.details : undefined,
      },
    };
  }
}
