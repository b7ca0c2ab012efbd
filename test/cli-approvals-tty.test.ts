/**
 * Issue 15, the one-"y"-approves-two-calls bug, on a real pseudo-terminal (util-linux `script`): an embedded
 * `agentmesh run` whose one turn makes two writes asks twice, and one "y" answers only the first prompt.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, cleanEnv } from './helpers/cli.js';

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
