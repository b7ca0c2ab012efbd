import { BoundaryRule, denied, quote } from './errors.js';

/**
 * The options one program may take through `shell.run_command`. Long options match exactly: GNU tools accept
 * unambiguous abbreviations (`--fil` for `--file`), so a shortened name is refused rather than guessed.
 */
export interface OptionSpec {
  /** One-letter options without a value; they may be combined (`-la`). */
  readonly shortFlags?: string;
  /** One-letter options with a value, glued (`-n5`) or in the next argument (`-n 5`). */
  readonly shortValued?: string;
  readonly longFlags?: readonly string[];
  /** Long options with a value: `--name=value` or `--name value`. */
  readonly longValued?: readonly string[];
  /** Long options whose value is optional and must be glued with "=" (`--color`, `--color=never`). */
  readonly longOptional?: readonly string[];
  /** Counts written as options (`head -5`, `grep -2`). */
  readonly numeric?: boolean;
  /** Every argument is plain text to the program (`echo`, `true`). */
  readonly anything?: boolean;
}

const GREP_SPEC: OptionSpec = {
  shortFlags: 'EFGPivwxyclLoqsbHhnTZzaIrU',
  shortValued: 'efmABCdD',
  longFlags: [
    'extended-regexp',
    'fixed-strings',
    'basic-regexp',
    'perl-regexp',
    'ignore-case',
    'no-ignore-case',
    'invert-match',
    'word-regexp',
    'line-regexp',
    'count',
    'files-without-match',
    'files-with-matches',
    'only-matching',
    'quiet',
    'silent',
    'no-messages',
    'byte-offset',
    'with-filename',
    'no-filename',
    'line-number',
    'initial-tab',
    'null',
    'null-data',
    'text',
    'recursive',
    'line-buffered',
    'binary',
    'no-group-separator',
  ],
  longValued: [
    'regexp',
    'file',
    'max-count',
    'after-context',
    'before-context',
    'context',
    'label',
    'group-separator',
    'binary-files',
    'devices',
    'directories',
    'exclude',
    'exclude-from',
    'exclude-dir',
    'include',
  ],
  longOptional: ['color', 'colour'],
  numeric: true,
};

/** ripgrep without `--pre`, `--pre-glob`, `--search-zip`, `--hostname-bin`, `--replace`, `-u`, `--hidden`, `--no-ignore*`. */
const RG_SPEC: OptionSpec = {
  shortFlags: 'iIsSvwxFclnNHoqUab0pP',
  shortValued: 'efgtTmABCMjdE',
  longFlags: [
    'ignore-case',
    'case-sensitive',
    'smart-case',
    'invert-match',
    'word-regexp',
    'line-regexp',
    'fixed-strings',
    'count',
    'count-matches',
    'files',
    'files-with-matches',
    'files-without-match',
    'line-number',
    'no-line-number',
    'with-filename',
    'no-filename',
    'only-matching',
    'quiet',
    'multiline',
    'multiline-dotall',
    'text',
    'byte-offset',
    'null',
    'null-data',
    'pretty',
    'pcre2',
    'column',
    'no-column',
    'heading',
    'no-heading',
    'vimgrep',
    'json',
    'stats',
    'trim',
    'crlf',
    'passthru',
    'sort-files',
    'no-messages',
    'no-config',
    'glob-case-insensitive',
    'type-list',
    'max-columns-preview',
    'one-file-system',
    'include-zero',
  ],
  longValued: [
    'regexp',
    'file',
    'glob',
    'iglob',
    'type',
    'type-not',
    'type-add',
    'max-count',
    'after-context',
    'before-context',
    'context',
    'max-columns',
    'threads',
    'max-depth',
    'max-filesize',
    'sort',
    'sortr',
    'color',
    'colors',
    'encoding',
    'engine',
    'context-separator',
    'field-match-separator',
    'field-context-separator',
    'path-separator',
  ],
};

const LS_SPEC: OptionSpec = {
  shortFlags: 'aAbBcCdfFgGhiklmnNopqQrRsStuUvxXZ1',
  shortValued: 'ITw',
  longFlags: [
    'all',
    'almost-all',
    'author',
    'escape',
    'directory',
    'file-type',
    'full-time',
    'group-directories-first',
    'no-group',
    'human-readable',
    'si',
    'inode',
    'kibibytes',
    'literal',
    'numeric-uid-gid',
    'hide-control-chars',
    'show-control-chars',
    'quote-name',
    'reverse',
    'recursive',
    'size',
    'context',
    'zero',
  ],
  longValued: [
    'block-size',
    'format',
    'indicator-style',
    'ignore',
    'hide',
    'quoting-style',
    'sort',
    'time',
    'time-style',
    'tabsize',
    'width',
  ],
  longOptional: ['classify', 'color', 'hyperlink'],
};

/**
 * Option allow-lists of the programs in the default allow-list (and `find`, often configured). They apply whenever
 * one of these programs runs, whatever prefix allowed it: configuration only tightens.
 */
export const PROGRAM_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  grep: GREP_SPEC,
  egrep: GREP_SPEC,
  fgrep: GREP_SPEC,
  rg: RG_SPEC,
  ls: LS_SPEC,
  cat: {
    shortFlags: 'AbeEnstTuv',
    longFlags: [
      'show-all',
      'number-nonblank',
      'show-ends',
      'number',
      'squeeze-blank',
      'show-tabs',
      'show-nonprinting',
    ],
  },
  head: {
    shortFlags: 'qvz',
    shortValued: 'cn',
    longFlags: ['quiet', 'silent', 'verbose', 'zero-terminated'],
    longValued: ['bytes', 'lines'],
    numeric: true,
  },
  tail: {
    shortFlags: 'fFqvz',
    shortValued: 'cns',
    longFlags: ['quiet', 'silent', 'verbose', 'zero-terminated', 'retry'],
    longValued: ['bytes', 'lines', 'max-unchanged-stats', 'pid', 'sleep-interval'],
    longOptional: ['follow'],
    numeric: true,
  },
  wc: {
    shortFlags: 'clmwL',
    longFlags: ['bytes', 'chars', 'lines', 'words', 'max-line-length'],
    longValued: ['total'],
  },
  stat: {
    shortFlags: 'ft',
    shortValued: 'c',
    longFlags: ['file-system', 'terse'],
    longValued: ['format', 'printf', 'cached'],
  },
  file: {
    shortFlags: 'bikNnEhr0',
    longFlags: [
      'brief',
      'mime',
      'mime-type',
      'mime-encoding',
      'keep-going',
      'no-pad',
      'no-buffer',
      'no-dereference',
      'raw',
      'print0',
      'extension',
      'apple',
    ],
  },
  pwd: { shortFlags: 'LP', longFlags: ['logical', 'physical'] },
  echo: { anything: true },
  true: { anything: true },
};

/** `find` actions that run programs, delete or write files: refused (its other primaries only select and print). */
export const FIND_FORBIDDEN: ReadonlySet<string> = new Set([
  '-exec',
  '-execdir',
  '-ok',
  '-okdir',
  '-delete',
  '-fprint',
  '-fprint0',
  '-fprintf',
  '-fls',
  '-files0-from',
]);

function refuse(program: string, arg: string, why: string): never {
  throw denied(BoundaryRule.CommandOption, `${program} option ${quote(arg)} ${why}`, {
    program,
    argument: arg,
  });
}

const NOT_ALLOWED =
  'is not allowed in shell.run_command (options that write files, run programs or widen what is read are refused; long options must be spelled out in full)';

/** Checks a value given in the next argument: one that looks like an option could hide one from this check. */
function checkSeparateValue(program: string, option: string, value: string | undefined): void {
  if (value === undefined) refuse(program, option, 'needs a value');
  if (value.startsWith('-') && !/^-\d+$/.test(value)) {
    refuse(program, option, `has the value ${quote(value)}, which starts with "-"; glue it: ${option}=VALUE`);
  }
}

/** Checks a long option; returns how many arguments it took (1, or 2 with a separate value). */
function checkLong(program: string, spec: OptionSpec, args: readonly string[], i: number): number {
  const arg = args[i] as string;
  const eq = arg.indexOf('=');
  const name = arg.slice(2, eq === -1 ? undefined : eq);
  if (spec.longFlags?.includes(name) && eq === -1) return 1;
  if (spec.longOptional?.includes(name)) return 1;
  if (spec.longValued?.includes(name)) {
    if (eq !== -1) return 1;
    checkSeparateValue(program, arg, args[i + 1]);
    return 2;
  }
  return refuse(program, arg, NOT_ALLOWED);
}

/** Checks a cluster of one-letter options (`-inA2`); returns how many arguments it took. */
function checkShort(program: string, spec: OptionSpec, args: readonly string[], i: number): number {
  const arg = args[i] as string;
  if (spec.numeric === true && /^-\d+$/.test(arg)) return 1;
  for (let k = 1; k < arg.length; k++) {
    const letter = arg[k] as string;
    if (spec.shortFlags?.includes(letter)) continue;
    if (!spec.shortValued?.includes(letter)) {
      return refuse(program, arg, `${NOT_ALLOWED}: "-${letter}" is not among the allowed options`);
    }
    if (k > 1 && k < arg.length - 1) {
      refuse(
        program,
        arg,
        `glues a value to "-${letter}" inside a group of options; give -${letter} on its own`,
      );
    }
    if (k < arg.length - 1) return 1;
    checkSeparateValue(program, `-${letter}`, args[i + 1]);
    return 2;
  }
  return 1;
}

/**
 * Checks every option of a program with an option allow-list. Returns the index of the "--" that ends the options,
 * or `args.length` when there is none: options added by the workspace go there.
 */
export function checkProgramOptions(program: string, spec: OptionSpec, args: readonly string[]): number {
  if (spec.anything === true) return args.length;
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    if (arg === '--') return i;
    if (arg.startsWith('--')) i += checkLong(program, spec, args, i);
    else if (arg.startsWith('-') && arg !== '-') i += checkShort(program, spec, args, i);
    else i += 1;
  }
  return args.length;
}

/** Refuses `find` actions that run programs or write files. */
export function checkFindArgs(args: readonly string[]): void {
  for (const arg of args) {
    if (FIND_FORBIDDEN.has(arg))
      refuse('find', arg, 'runs a program or writes or deletes files, which is refused');
  }
}
