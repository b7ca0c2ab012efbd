import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI, REPO_ROOT, cleanEnv, runAgentmesh } from './helpers/cli.js';

function withStdin(
  args: string[],
  input: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env: cleanEnv() });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('agentmesh run --tools (embedded) accepts what agentmesh worker --tools accepts', () => {
  it.each([['nosuch.tool'], ['Math.Calc'], ['math.calc,nosuch']])(
    'refuses %s with exit 2 naming it',
    async (tools) => {
      const r = await runAgentmesh(['run', '--tools', tools, '--script', 'examples/add.json', 'add 2 and 3']);
      expect(r.code).toBe(2);
      const entry = tools.split(',').at(-1)!;
      expect(r.stderr).toContain(`"${entry}" matches no tool`);
      if (entry === 'Math.Calc') expect(r.stderr).toMatch(/did you mean math\.calc/);
    },
  );

  it.each([['builtin'], ['math'], ['math.calc'], ['math.*']])(
    'runs with --tools %s and offers the tool',
    async (tools) => {
      const r = await runAgentmesh(['run', '--tools', tools, '--script', 'examples/add.json', 'add 2 and 3']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/✓ math\.calc/);
    },
  );

  it('a worker refuses an entry that matches nothing even next to one that matches', async () => {
    const r = await runAgentmesh(['worker', '--nats', 'nats://127.0.0.1:1', '--tools', 'math.calc,nosuch']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('"nosuch" matches no tool');
  });
});

describe('usage errors and help', () => {
  it('an unknown flag prints the usage line and a did-you-mean, not parseArgs text', async () => {
    const r = await runAgentmesh(['run', '--tols', 'math', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown flag --tols \(did you mean --tools\?\)/);
    expect(r.stderr).toMatch(/usage: agentmesh run/);
    expect(r.stderr).not.toMatch(/To specify a positional argument/);
  });

  it('help COMMAND and COMMAND --help print the same flag list', async () => {
    const a = await runAgentmesh(['help', 'run']);
    const b = await runAgentmesh(['run', '--help']);
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    expect(a.stdout).toMatch(/--workspace DIR .*embedded only/);
  });

  it('a bad LOG_LEVEL exits 2 naming LOG_LEVEL and the accepted values', async () => {
    const r = await runAgentmesh(['tools', 'list'], { env: { ...cleanEnv(), LOG_LEVEL: 'loud' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "loud"/,
    );
  });

  it('tools with an unknown subcommand lists the subcommands', async () => {
    const r = await runAgentmesh(['tools', 'frob']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown subcommand "frob": tools takes list or search/);
  });

  it('an unknown command suggests the near one', async () => {
    const r = await runAgentmesh(['stauts']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/did you mean status/);
  });
});

describe('first-hour niceties', () => {
  it('run - reads the task from stdin', async () => {
    const r = await withStdin(['run', '--script', 'examples/add.json', '--json', '-'], 'add 2 and 3\n');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.split('\n')[0]!)).toMatchObject({ type: 'run.accepted', task: 'add 2 and 3' });
  });

  it('human mode prints human lines only, also with LOG_LEVEL=info; "1 tool call"', async () => {
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', 'add 2 and 3'], {
      env: { ...cleanEnv(), LOG_LEVEL: 'info' },
    });
    expect(r.code, r.stderr).toBe(0);
    for (const line of `${r.stdout}${r.stderr}`.split('\n')) expect(line.startsWith('{'), line).toBe(false);
    expect(r.stdout).toMatch(/1 tool call,/);
  });

  it('LOG_FORMAT=json keeps JSON logs for machines', async () => {
    const r = await runAgentmesh(['run', '--script', 'examples/add.json', 'add 2 and 3'], {
      env: { ...cleanEnv(), LOG_LEVEL: 'info', LOG_FORMAT: 'json' },
    });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('completion bash completes commands and flags', async () => {
    const script = (await runAgentmesh(['completion', 'bash'])).stdout;
    const complete = (words: string) =>
      spawnSync(
        'bash',
        [
          '-c',
          `${script}\nCOMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]}-1)); _agentmesh; echo "\${COMPREPLY[@]}"`,
        ],
        { encoding: 'utf8' },
      ).stdout.trim();
    expect(complete('agentmesh ru').split(' ').sort()).toEqual(['run', 'runs']);
    expect(complete('agentmesh run --tool').split(' ').sort()).toEqual([
      '--tool-protocol',
      '--tool-search',
      '--tools',
    ]);
    expect(complete('agentmesh runs s')).toBe('show');
    const zsh = await runAgentmesh(['completion', 'zsh']);
    expect(zsh.stdout).toMatch(/bashcompinit/);
    expect((await runAgentmesh(['completion', 'fish'])).code).toBe(2);
  });
});
