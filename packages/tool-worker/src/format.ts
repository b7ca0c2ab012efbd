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
    `{"call_id":${jsonString(outcome.call_id)},"tool":${namesJson(outcome.tool)},` +
    `"worker_id":${namesJson(outcome.worker_id)},"is_error":false,` +
    `"output":${typeof outcome.output === 'string' ? preview : outputText},"preview":${preview},` +
    `"elapsed_ms":${jsonNumber(outcome.elapsed_ms)},"attempts":${jsonNumber(outcome.attempts)}}`
  );
}

/** Characters a JSON string takes as they are (no escape): the ids and names of a call mostly have no others. */
const PLAIN = /^[\w.:@/+-]*$/;

function jsonString(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}

/** The JSON of a tool's name and of a worker's id, each escaped once: a worker serves few tools. */
const namesJsonCache = new Map<string, string>();

function namesJson(name: string): string {
  let json = namesJsonCache.get(name);
  if (json === undefined) {
    if (namesJsonCache.size >= 4096) namesJsonCache.clear();
    namesJsonCache.set(name, (json = JSON.stringify(name)));
  }
  return json;
}

function jsonNumber(value: number): string {
  return Number.isFinite(value) ? `${value}` : 'null';
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
