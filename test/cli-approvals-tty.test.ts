/**
 * Issue 15, the one-"y"-approves-two-calls bug, on a real pseudo-terminal (util-linux `script`): an embedded
 * `agentmesh run` whose one turn makes two writes asks twice, and one "y" answers only the first prompt.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, cleanEnv, runAgentmesh } from './helpers/cli.js';

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describe('agentmesh run on a TTY', () => {
  it('two writes in one turn: two prompts, "y" then "n" writes exactly one file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-tty-'));
    const scriptFile = join(dir, 'turns.json');
    writeFileSync(
      scriptFile,
      JSON.stringify([
        {
          tool_calls: [
            { name: 'fs.write_file', arguments: { path: 'one.txt', content: '1', mode: 'create' } },
            { name: 'fs.write_file', arguments: { path: 'two.txt', content: '2', mode: 'create' } },
          ],
        },
        { text: 'done' },
      ]),
    );
    const command = [
      process.execPath,
      CLI,
      'run',
      '--script',
      scriptFile,
      '--workspace',
      dir,
      'write two files',
    ]
      .map(quote)
      .join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: cleanEnv({ NO_COLOR: '1' }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    let answered = 0;
    child.stdout.on('data', (d: Buffer) => {
      output += d.toString();
      const prompts = output.split('Allow? [y/N]').length - 1;
      while (answered < prompts) {
        child.stdin.write(answered === 0 ? 'y\r' : 'n\r');
        answered++;
      }
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`agentmesh run on a TTY did not finish\n${output}`));
      }, 60_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    expect(output.split('Allow? [y/N]').length - 1, output).toBe(2);
    expect([existsSync(join(dir, 'one.txt')), existsSync(join(dir, 'two.txt'))].filter(Boolean)).toHaveLength(
      1,
    );
    expect(output).toMatch(/user declined/);
    expect(code, output).toBe(0);
  });
});

describe('agentmesh run with approvals: in the configuration, embedded', () => {
  const setup = () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-approvals-'));
    writeFileSync(join(dir, 'agentmesh.yaml'), 'approvals: { require: ["math.*"] }\n');
    writeFileSync(
      join(dir, 'turns.json'),
      JSON.stringify([
        { tool_calls: [{ name: 'math.calc', arguments: { lhs: 2, rhs: 3, op: 'add' } }] },
        { text: 'done' },
      ]),
    );
    return dir;
  };
  const run = (dir: string, extra: string[]) =>
    runAgentmesh(
      [
        'run',
        '--config',
        join(dir, 'agentmesh.yaml'),
        '--script',
        join(dir, 'turns.json'),
        '--json',
        ...extra,
        'add',
      ],
      { env: cleanEnv() },
    );

  it('without a terminal and without --yes the call is denied with a reason naming --yes; with --yes it runs', async () => {
    const dir = setup();
    const denied = await run(dir, []);
    const events = denied.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
    expect(events.find((e) => e.type === 'approval.requested')).toMatchObject({ name: 'math.calc' });
    expect(events.find((e) => e.type === 'approval.decided')).toMatchObject({ decision: 'deny' });
    expect(JSON.stringify(events.find((e) => e.type === 'tool.failed'))).toMatch(
      /--yes.*agentmesh runs approve/,
    );
    const approved = await run(dir, ['--yes']);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/"type":"approval.decided"[^\n]*"decision":"approve"/);
    expect(approved.stdout).toMatch(/"type":"tool.completed"[^\n]*"name":"math.calc"/);
  });
});
