import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { errorKind, SAFE_LOG_OPTIONS, safeErrorSerializer } from '../../../src/ops/logger.js';
import { UpstreamError } from '../../../src/upstream/errors.js';

const SECRET = 'hunter2-very-secret';

function capture(): { logger: pino.Logger; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return { logger: pino({ level: 'debug', ...SAFE_LOG_OPTIONS }, stream), text: () => chunks.join('') };
}

// What ioredis attaches to a failed AUTH: the command with its arguments.
function redisAuthError(): Error {
  return Object.assign(new Error('WRONGPASS invalid username-password pair or user is disabled.'), {
    name: 'ReplyError',
    command: { name: 'auth', args: ['bridge', SECRET] },
  });
}

describe('safe error serializer', () => {
  it('drops command arguments and credential-shaped values, keeps name, message and stack', () => {
    const cause = Object.assign(new Error(`connect to redis://bridge:${SECRET}@10.0.0.1:6379 failed`), {
      headers: { authorization: `Bearer ${SECRET}`, accept: 'json' },
      options: { password: SECRET, sasl: { password: SECRET }, host: 'h' },
    });
    const err = Object.assign(redisAuthError(), { cause, url: `https://u:${SECRET}@x.example/` });
    const out = JSON.stringify(safeErrorSerializer(err));
    expect(out).not.toContain(SECRET);
    expect(out).toContain('WRONGPASS');
    expect(out).toContain('"name":"ReplyError"');
    expect(out).toContain('at redisAuthError');
    expect(out).toContain('"name":"auth"');
    expect(out).toContain('redis://[redacted]@10.0.0.1');
  });

  it('applies to every way an error reaches the log', () => {
    const { logger, text } = capture();
    logger.error({ err: redisAuthError() }, 'pass failed');
    logger.warn({ error: redisAuthError() }, 'kafkajs style');
    logger.info({ context: { nested: redisAuthError(), who: 'someone@example.com' } }, 'nested');
    expect(text()).not.toContain(SECRET);
    expect(text()).not.toContain('someone@example.com');
    for (const line of text().trim().split('\n')) expect(line).toContain('WRONGPASS');
  });
});

describe('errorKind', () => {
  it('names the class and a bounded code, never the text', () => {
    expect(errorKind(redisAuthError())).toBe('ReplyError:WRONGPASS');
    expect(errorKind(new UpstreamError('auth', `refused ${SECRET}`))).toBe('upstream:auth');
    expect(errorKind(Object.assign(new Error(SECRET), { code: 'ECONNREFUSED' }))).toBe('Error:ECONNREFUSED');
    expect(errorKind(new Error(`connect to redis://u:${SECRET}@h failed`))).toBe('Error');
    expect(errorKind('x')).toBe('string');
  });
});

describe('fields that repeat a binding', () => {
  it('are written once: dropped when equal, kept under `logged` when they differ', () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    const root = pino({ ...SAFE_LOG_OPTIONS, base: { service: 'reviews-bridge', account: 'acme' } }, stream);
    const fields = { tokenName: 'ops', action: 'pause', account: 'acme' };
    root.info(fields, 'admin action');
    root.child({ component: 'opentelemetry' }).info({ service: 'bridge-eu', component: 'opentelemetry' }, 'x');
    root.info({ other: 1 }, 'plain');
    const [admin, child, plain] = chunks;
    // Raw text: JSON.parse would hide a repeated key.
    expect(admin!.match(/"account"/g)).toHaveLength(1);
    expect(JSON.parse(admin!)).toMatchObject({ account: 'acme', tokenName: 'ops', action: 'pause' });
    expect(fields).toEqual({ tokenName: 'ops', action: 'pause', account: 'acme' });
    expect(child!.match(/"service"/g)).toHaveLength(2);
    expect(child!.match(/"component"/g)).toHaveLength(1);
    expect(JSON.parse(child!)).toMatchObject({ service: 'reviews-bridge', logged: { service: 'bridge-eu' } });
    expect(JSON.parse(plain!)).toMatchObject({ other: 1, account: 'acme' });
  });
});
