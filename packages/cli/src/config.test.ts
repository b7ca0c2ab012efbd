import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { plannerOptions } from './planner-options.js';

function file(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentmesh-config-'));
  const path = join(dir, 'agentmesh.yaml');
  writeFileSync(path, text);
  return path;
}

describe('configuration file', () => {
  it('loads the contract example', () => {
    const config = loadConfig(
      file(`
tools:
  deferred: ["git.*", "fs.search_files"]
  always: ["fs.read_file"]
  search: { strategy: bm25, limit: 10, budget_tokens: 4000, include_stub_listing: false }
workspace: { root: ".", protected: [".agentmesh"], allow_argv_prefixes: [["git", "status"], ["ls"]] }
limits: { max_iterations: 12, max_tool_calls: 64, max_output_bytes: 65536 }
`),
    );
    expect(config.tools?.deferred).toEqual(['git.*', 'fs.search_files']);
    expect(config.workspace?.allow_argv_prefixes).toEqual([['git', 'status'], ['ls']]);
    expect(config.limits?.max_iterations).toBe(12);
  });

  it.each([
    ['an unknown top-level key', 'toolz: {}\n', /Unrecognized key.*toolz/],
    ['an unknown nested key', 'tools:\n  search: { strat: bm25 }\n', /tools\.search.*strat/],
    ['a wrong type', 'limits: { max_iterations: "twelve" }\n', /limits\.max_iterations/],
    ['a bad enum value', 'tools:\n  search: { strategy: fuzzy }\n', /tools\.search\.strategy/],
    ['invalid YAML', 'tools: [\n', /not valid YAML/],
  ])('names the key for %s', (_what, text, pattern) => {
    expect(() => loadConfig(file(text))).toThrow(pattern);
  });

  it('reads approvals: and hands it to the planner defaults', () => {
    const config = loadConfig(
      file('approvals: { require: ["fs.write_file", "shell.*"], auto_approve: [], timeout_ms: 60000 }\n'),
    );
    expect(plannerOptions(config).defaults?.approvals).toEqual({
      require: ['fs.write_file', 'shell.*'],
      auto_approve: [],
      timeout_ms: 60_000,
    });
    expect(() => loadConfig(file('approvals: { timeout_ms: -1 }\n'))).toThrow(/approvals\.timeout_ms/);
  });

  it('reads guardrails: (the issue example) and hands it to the planner defaults', () => {
    const config = loadConfig(
      file(`
guardrails:
  input:  [{ name: no-injection, pattern: "ignore (all )?previous instructions", flags: i, action: block }]
  output: [{ name: no-secrets, pattern: "SECRET_[0-9]+", action: redact }]
  tools:  [{ name: no-force-push, tool: "git.*", args_pattern: "--force", action: block }]
`),
    );
    const rules = plannerOptions(config).defaults?.guardrails;
    expect(rules?.input?.[0]).toMatchObject({ name: 'no-injection', flags: 'i', action: 'block' });
    expect(rules?.output?.[0]).toMatchObject({ name: 'no-secrets', action: 'redact' });
    expect(rules?.tools?.[0]).toMatchObject({ tool: 'git.*', args_pattern: '--force' });
  });

  it.each([
    [
      'an unsafe regex',
      'guardrails: { output: [{ name: a, pattern: "(a+)+$", action: redact }] }',
      /guardrails\.output\.0\.pattern.*nested quantifiers/,
    ],
    [
      'an unknown action',
      'guardrails: { output: [{ name: a, pattern: "x", action: warn }] }',
      /guardrails\.output\.0\.action/,
    ],
    ['an unknown stage', 'guardrails: { reasoning: [] }', /guardrails.*reasoning/],
  ])('refuses a guardrail with %s, naming the key', (_what, text, pattern) => {
    expect(() => loadConfig(file(`${text}\n`))).toThrow(pattern);
  });

  it('reads triggers: and hands the trigger limits to the planner', () => {
    const config = loadConfig(
      file('triggers: { max_pending_per_daemon: 50, max_trigger_bytes: 4096, store_max_bytes: 1048576 }\n'),
    );
    expect(plannerOptions(config).triggers).toEqual({
      maxPendingPerDaemon: 50,
      maxTriggerBytes: 4096,
      storeMaxBytes: 1_048_576,
    });
    expect(() => loadConfig(file('triggers: { max_pending_per_daemon: 0 }\n'))).toThrow(
      /triggers\.max_pending_per_daemon/,
    );
  });

  it('hands limits (ceilings), the daemon lifetime, the system prompt policy and allowed base URLs to the planner', () => {
    const config = loadConfig(
      file(`
limits: { max_iterations: 30, max_cost_usd: 2, daemon_timeout_ms: 3600000 }
provider: { system: "be careful", system_prompt_override: refuse, allowed_base_urls: ["http://vllm:8000/v1"] }
`),
    );
    const options = plannerOptions(config);
    expect(options.defaults).toMatchObject({
      limits: { max_iterations: 30, max_cost_usd: 2 },
      daemon_timeout_ms: 3_600_000,
      system: 'be careful',
      system_prompt_override: 'refuse',
    });
    expect(options.defaults?.limits).not.toHaveProperty('daemon_timeout_ms');
    expect(options.defaults?.limits).not.toHaveProperty('timeout_ms');
    expect(options.providers?.allowedBaseUrls).toEqual(['http://vllm:8000/v1']);
    expect(() => loadConfig(file('provider: { system_prompt_override: ignore }\n'))).toThrow(
      /provider\.system_prompt_override/,
    );
    expect(() => loadConfig(file('provider: { allowed_base_urls: ["not a url"] }\n'))).toThrow(
      /provider\.allowed_base_urls/,
    );
  });

  it('says which file it cannot read', () => {
    expect(() => loadConfig('/nonexistent/agentmesh.yaml')).toThrow(
      /cannot read configuration file \/nonexistent/,
    );
  });
});
