import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { redisUrl } from '../../helpers/services.js';

// patches/ioredis+6.0.0.patch: loading ioredis, connecting over RESP3 (its ready check reads INFO, a verbatim
// string) and reading a verbatim reply must leave V8's StringWrapperToPrimitive protector intact. Once a String
// subclass exists anywhere in the process, optimized charCodeAt runs several times slower in every module, the
// fingerprints' hashing first (docs/compatibility.md#ioredis). V8 reports the invalidation itself when asked.

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PROTECTOR = 'StringWrapperToPrimitive';

async function traced(prelude: string): Promise<string> {
  const script = `${prelude}
import { Redis } from 'ioredis';
const redis = new Redis(${JSON.stringify(redisUrl())});
await redis.ping();
const info = await redis.info('server');
console.log('info:' + typeof info + ':' + info.includes('redis_version'));
await redis.quit();`;
  const { stdout } = await run(
    process.execPath,
    ['--trace-protector-invalidation', '--input-type=module', '-e', script],
    { cwd: ROOT, timeout: 30_000 },
  );
  return stdout;
}

describe('ioredis and the string protector', () => {
  it('a connected client, its ready check and a verbatim INFO reply leave the protector intact', async () => {
    const out = await traced('');
    expect(out).toContain('info:string:true');
    expect(out).not.toContain(PROTECTOR);
  });

  it('V8 reports the invalidation when a String subclass is made (the check above can fail)', async () => {
    const out = await traced('class Wrapped extends String {}\nvoid Wrapped;');
    expect(out).toContain('info:string:true');
    expect(out).toContain(PROTECTOR);
  });
});
