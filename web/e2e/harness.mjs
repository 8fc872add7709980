// Minimal test harness for the end-to-end checks: named steps, failures collected, a summary.
// (The checks run in order against one live server, so a full test runner is not needed.)
import { spawn } from 'node:child_process';
import { once } from 'node:events';

/** Every failure of every suite of this process, repeated at the end of the run (failureReport)
 *  so that a log's last lines name them. */
const allFailures = [];

/** The failures of every suite, one line each, or '' when none failed. */
export function failureReport() {
  if (allFailures.length === 0) return '';
  const lines = allFailures.map(
    ({ suite, name, error }) =>
      `  ✗ ${suite} › ${name}: ${String(error?.message ?? error)
        .split('\n')[0]
        .slice(0, 300)}`,
  );
  return `e2e: ${allFailures.length} failed:\n${lines.join('\n')}`;
}

export class Suite {
  constructor(name) {
    this.name = name;
    this.passed = 0;
    this.failures = [];
  }

  async test(name, fn) {
    const t0 = Date.now();
    try {
      await fn();
      this.passed++;
      console.log(`  ✓ ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      this.failures.push({ name, error: e });
      allFailures.push({ suite: this.name, name, error: e });
      console.log(
        `  ✗ ${name}\n      ${String(e && e.stack ? e.stack : e)
          .split('\n')
          .slice(0, 6)
          .join('\n      ')}`,
      );
    }
  }

  summary() {
    console.log(`${this.name}: ${this.passed} passed, ${this.failures.length} failed`);
    return this.failures.length === 0;
  }
}

/**
 * Starts `headscope serve --port 0` (and `args`) and resolves with its base URL once it prints
 * "headscope explorer: http://HOST:PORT/". The server's stderr is kept for the report.
 */
export async function startServer({ bin, model, webDir, timeoutMs = 180000, log, args = [] }) {
  const child = spawn(bin, ['serve', '--model', model, '--port', '0', '--web-dir', webDir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr.on('data', (d) => log?.write(d));
  let buffered = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within ${timeoutMs / 1000} s`)), timeoutMs);
    child.stdout.on('data', (d) => {
      buffered += d.toString();
      const m = /headscope explorer: (http:\/\/[^\s]+)/.exec(buffered);
      if (m) {
        clearTimeout(timer);
        resolve(m[1].replace(/\/$/, ''));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with code ${code} before it was ready (see ${log?.path ?? 'its stderr'})`));
    });
  });
  return {
    url,
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await Promise.race([once(child, 'exit'), new Promise((r) => setTimeout(r, 3000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/** Decodes the binary tensor format (docs/api.md) independently of the web app's decoder. */
export function decodeTensor(buf) {
  const b = Buffer.from(buf);
  if (b.toString('latin1', 0, 4) !== 'HST1') throw new Error('bad magic');
  const dtype = b.readUInt32LE(4);
  const rank = b.readUInt32LE(8);
  const shape = [];
  for (let i = 0; i < rank; i++) shape.push(b.readUInt32LE(12 + 4 * i));
  const off = 12 + 4 * rank;
  const n = shape.reduce((a, c) => a * c, 1);
  const data = new Float64Array(n);
  for (let i = 0; i < n; i++) data[i] = dtype === 1 ? b.readFloatLE(off + 4 * i) : b.readUInt8(off + i) / 255;
  if (b.length !== off + n * (dtype === 1 ? 4 : 1)) throw new Error(`length ${b.length} does not match shape ${shape}`);
  return { shape, data, dtype };
}

/** {shape, dtype, data: base64} → Float64Array values. */
export function decodeB64(j) {
  const b = Buffer.from(j.data, 'base64');
  const out = new Float64Array(b.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = b.readFloatLE(4 * i);
  return out;
}
