import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

/** Why the workspace boundary refused an operation; carried in `details.rule` of the error. */
export const BoundaryRule = {
  EmptyPath: 'empty_path',
  NulByte: 'nul_byte',
  ControlCharacter: 'control_character',
  PathTooLong: 'path_too_long',
  AbsolutePath: 'absolute_path',
  ParentSegment: 'parent_segment',
  HomePath: 'home_path',
  Backslash: 'backslash',
  EncodedPath: 'encoded_path',
  UrlPath: 'url_path',
  LookalikeCharacter: 'lookalike_character',
  OutsideWorkspace: 'outside_workspace',
  ProtectedFolder: 'protected_folder',
  SensitiveName: 'sensitive_name',
  SymbolicLink: 'symbolic_link',
  HardLink: 'hard_link',
  NotRegularFile: 'not_regular_file',
  NotDirectory: 'not_directory',
  PathChanged: 'path_changed',
  ArgvNotAllowed: 'argv_not_allowed',
  ShellDisabled: 'shell_disabled',
  ShellMetacharacters: 'shell_metacharacters',
  ArgumentPath: 'argument_path',
  LinkFollowingOption: 'link_following_option',
  CommandOption: 'command_option',
  GitSubcommand: 'git_subcommand',
  GitOption: 'git_option',
  Declined: 'declined',
} as const;
export type BoundaryRule = (typeof BoundaryRule)[keyof typeof BoundaryRule];

/** A refusal by the workspace boundary: `permission_denied` with the rule that fired. */
export function denied(
  rule: BoundaryRule,
  message: string,
  details: Record<string, unknown> = {},
): AgentMeshError {
  return new AgentMeshError(ErrorCode.PermissionDenied, message, {
    retryable: false,
    details: { rule, ...details },
  });
}

/** An argument the boundary cannot even interpret (NUL bytes, encodings, absurd lengths): `invalid_arguments`. */
export function malformed(
  rule: BoundaryRule,
  message: string,
  details: Record<string, unknown> = {},
): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidArguments, message, {
    retryable: false,
    details: { rule, ...details },
  });
}

export function notFound(message: string, details: Record<string, unknown> = {}): AgentMeshError {
  return new AgentMeshError(ErrorCode.NotFound, message, { retryable: false, details });
}

export function invalid(message: string, details: Record<string, unknown> = {}): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidArguments, message, { retryable: false, details });
}

/** Shortens a user-supplied value for an error message, keeping it printable. */
export function quote(value: string, max = 120): string {
  const printable = JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
  return printable;
}
