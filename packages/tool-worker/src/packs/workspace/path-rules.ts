import { BoundaryRule, denied, invalid, malformed, quote } from './errors.js';
import { DEFAULT_PROTECTED, DEFAULT_PROTECTED_WRITES, type ResolvedWorkspaceConfig } from './options.js';

/** Whether a path is about to be read (or listed, searched, used as a cwd) or written. */
export type PathAccess = 'read' | 'write';

export const MAX_PATH_BYTES = 4096;
export const MAX_SEGMENT_BYTES = 255;

const CONTROL = /[\u0001-\u001f\u007f]/;
const INVISIBLE = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;
const LOOKALIKE_SEPARATORS =
  /[\u2024\u2025\u2026\u3002\ufe52\uff0e\uff61\u2215\u2044\u2571\u29f8\u29f5\u29f9\ufe68\uff0f\uff3c\u0338]/;
const URL_LIKE = /^[a-z][a-z0-9+.-]*:(\/\/|\/)/i;
const ENCODED = /%(2e|2f|5c|00|25|c0|c1|e0%80)/i;
const SEPARATOR_OR_DOT = /[./\\]/g;

function countSeparatorsAndDots(value: string): number {
  return value.match(SEPARATOR_OR_DOT)?.length ?? 0;
}

/** One check of a path's text: the rule it enforces, whether breaking it is malformed input or a denied reach, and why. */
interface PathTextRule {
  readonly rule: BoundaryRule;
  readonly refusal: typeof malformed | typeof denied;
  readonly breaks: (input: string) => boolean;
  readonly message: (argument: string, input: string) => string;
}

const because =
  (reason: string) =>
  (argument: string, input: string): string =>
    `${argument} ${quote(input)} ${reason}`;

/** In the order they are checked: the first rule a path breaks names the error. */
const PATH_TEXT_RULES: readonly PathTextRule[] = [
  {
    rule: BoundaryRule.NulByte,
    refusal: malformed,
    breaks: (input) => input.includes('\u0000'),
    message: because('contains a NUL byte, which no file name may hold'),
  },
  {
    rule: BoundaryRule.PathTooLong,
    refusal: malformed,
    breaks: (input) => Buffer.byteLength(input) > MAX_PATH_BYTES,
    message: (argument) => `${argument} is longer than ${MAX_PATH_BYTES} bytes`,
  },
  {
    rule: BoundaryRule.ControlCharacter,
    refusal: malformed,
    breaks: (input) => CONTROL.test(input),
    message: because('contains a control character'),
  },
  {
    rule: BoundaryRule.LookalikeCharacter,
    refusal: malformed,
    breaks: (input) => INVISIBLE.test(input),
    message: because('contains an invisible or direction-changing Unicode character; type the path plainly'),
  },
  {
    rule: BoundaryRule.LookalikeCharacter,
    refusal: malformed,
    breaks: (input) =>
      LOOKALIKE_SEPARATORS.test(input) ||
      countSeparatorsAndDots(input.normalize('NFKC')) !== countSeparatorsAndDots(input),
    message: because('contains a Unicode look-alike of "." or "/"; use plain ASCII dots and slashes'),
  },
  {
    rule: BoundaryRule.AbsolutePath,
    refusal: denied,
    breaks: (input) => input.startsWith('/') || /^[A-Za-z]:([/\\]|$)/.test(input),
    message: because('is absolute; tools only accept paths relative to the workspace root'),
  },
  {
    rule: BoundaryRule.UrlPath,
    refusal: malformed,
    breaks: (input) => URL_LIKE.test(input),
    message: because('is a URL; give a path relative to the workspace root'),
  },
  {
    rule: BoundaryRule.EncodedPath,
    refusal: malformed,
    breaks: (input) => ENCODED.test(input),
    message: because(
      'holds a percent-encoded dot, slash or percent; paths are taken literally, not URL-decoded',
    ),
  },
  {
    rule: BoundaryRule.Backslash,
    refusal: malformed,
    breaks: (input) => input.includes('\\'),
    message: because('contains "\\"; separate folders with "/"'),
  },
  {
    rule: BoundaryRule.HomePath,
    refusal: denied,
    breaks: (input) => input === '~' || input.startsWith('~/'),
    message: because('refers to a home folder; tools only see the workspace'),
  },
];

/**
 * Checks a model-supplied path before it touches the file system and splits it into segments (an empty list is
 * the workspace root). Rejects NUL and control characters, absurd lengths, URL and percent-encoded forms,
 * Unicode look-alikes of `.` and `/`, backslashes, `~`, absolute paths and every `..` segment.
 */
export function parseWorkspacePath(input: unknown, argument = 'path'): string[] {
  if (typeof input !== 'string') throw invalid(`${argument} must be a string relative to the workspace root`);
  if (input.length === 0) {
    throw malformed(BoundaryRule.EmptyPath, `${argument} is empty; use "." for the workspace root`, {
      path: input,
    });
  }
  const details = { path: input.length > 200 ? `${input.slice(0, 200)}…` : input };
  for (const { rule, refusal, breaks, message } of PATH_TEXT_RULES) {
    if (breaks(input)) throw refusal(rule, message(argument, input), details);
  }
  const segments = input.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) {
    throw denied(
      BoundaryRule.ParentSegment,
      `${argument} ${quote(input)} contains "..", which is not allowed; give the path from the workspace root`,
      details,
    );
  }
  if (segments.some((segment) => Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)) {
    throw malformed(
      BoundaryRule.PathTooLong,
      `${argument} has a name longer than ${MAX_SEGMENT_BYTES} bytes`,
      details,
    );
  }
  return segments;
}

function startsWithFolder(segments: readonly string[], folder: readonly string[]): boolean {
  if (segments.length < folder.length) return false;
  return folder.every((part, i) => segments[i]?.toLowerCase() === part);
}

const DEFAULT_PROTECTED_NAMES = new Set(DEFAULT_PROTECTED.map((n) => n.toLowerCase()));
const DEFAULT_PROTECTED_WRITE_NAMES = new Set(DEFAULT_PROTECTED_WRITES.map((n) => n.toLowerCase()));

/** Names the rule that forbids `access` to the workspace-relative `segments`, or undefined when allowed. */
export function accessProblem(
  config: ResolvedWorkspaceConfig,
  segments: readonly string[],
  access: PathAccess,
): { rule: BoundaryRule; folder?: string; name?: string; writesOnly?: boolean } | undefined {
  for (const folder of config.protectedAll) {
    if (startsWithFolder(segments, folder))
      return { rule: BoundaryRule.ProtectedFolder, folder: folder.join('/') };
  }
  const lower = segments.map((s) => s.toLowerCase());
  const anyDepth = lower.find((s) => DEFAULT_PROTECTED_NAMES.has(s));
  if (anyDepth !== undefined) return { rule: BoundaryRule.ProtectedFolder, folder: anyDepth };
  if (access === 'write') {
    for (const folder of config.protectedWrites) {
      if (startsWithFolder(segments, folder)) {
        return { rule: BoundaryRule.ProtectedFolder, folder: folder.join('/'), writesOnly: true };
      }
    }
    const writeAnyDepth = lower.find((s) => DEFAULT_PROTECTED_WRITE_NAMES.has(s));
    if (writeAnyDepth !== undefined)
      return { rule: BoundaryRule.ProtectedFolder, folder: writeAnyDepth, writesOnly: true };
  }
  for (const segment of segments) {
    if (config.denylist.some((glob) => glob.matches(segment)))
      return { rule: BoundaryRule.SensitiveName, name: segment };
  }
  return undefined;
}

/** Throws `permission_denied` when `segments` fall in a protected folder or carry a sensitive name. */
export function assertAccess(
  config: ResolvedWorkspaceConfig,
  segments: readonly string[],
  access: PathAccess,
  shown: string,
): void {
  const problem = accessProblem(config, segments, access);
  if (problem === undefined) return;
  if (problem.rule === BoundaryRule.ProtectedFolder) {
    throw denied(
      problem.rule,
      `${quote(shown)} is inside the protected folder "${problem.folder}/", which tools may not ${problem.writesOnly ? 'write' : 'read or write'}`,
      { path: shown, folder: problem.folder },
    );
  }
  throw denied(
    problem.rule,
    `${quote(shown)} has the sensitive name "${problem.name}" (keys, tokens and credentials are never readable or writable by tools)`,
    { path: shown, name: problem.name },
  );
}
