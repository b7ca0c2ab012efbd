import type { ArtifactRef, ToolOutcome } from '@agentmesh/protocol';
import { utf8Boundary } from './artifacts.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The text form of a tool output: strings as they are, anything else as compact JSON. */
export function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  return JSON.stringify(output ?? null);
}

/**
 * The JSON text of a success outcome as the executor makes it (these members in this order, its output present and
 * its preview the output's text), with `outputText` (the preview) standing in for the output's JSON instead of
 * serializing the output a second time: a string output is its preview, escaped once for both members. Equal to
 * `JSON.stringify(outcome)`.
 */
export function successOutcomeJson(outcome: ToolOutcome, outputText: string): string {
  const preview = JSON.stringify(outputText);
  return (
    `{"call_id":${JSON.stringify(outcome.call_id)},"tool":${JSON.stringify(outcome.tool)},` +
    `"worker_id":${JSON.stringify(outcome.worker_id)},"is_error":false,` +
    `"output":${typeof outcome.output === 'string' ? preview : outputText},"preview":${preview},` +
    `"elapsed_ms":${JSON.stringify(outcome.elapsed_ms)},"attempts":${JSON.stringify(outcome.attempts)}}`
  );
}

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** The first `maxBytes` of a text, cut on a character boundary. */
export function headBytes(text: string, maxBytes: number): string {
  const bytes = encoder.encode(text);
  if (bytes.length <= maxBytes) return text;
  return decoder.decode(bytes.subarray(0, utf8Boundary(bytes, maxBytes)));
}

/**
 * Caps what reaches a model at `maxBytes`, the notice included; the notice says how much was cut and, when the full
 * text is an artifact, how to read it.
 */
export function capForModel(text: string, maxBytes: number, artifact?: ArtifactRef): string {
  const size = byteLength(text);
  if (size <= maxBytes && artifact === undefined) return text;
  const notice = (shown: number) =>
    artifact === undefined
      ? `\n[output truncated: ${shown} of ${size} bytes shown]`
      : `\n[output truncated: ${shown} of ${size} bytes shown; the full output is artifact ${artifact.ref} ` +
        `(${artifact.mime}, ${artifact.size} bytes): call artifact_fetch with {"ref":"${artifact.ref}","offset":${shown}} to read on]`;
  const room = Math.max(0, maxBytes - byteLength(notice(size)));
  const head = headBytes(text, room);
  return head + notice(byteLength(head));
}
