import { describe, expect, it } from 'vitest';
import { accountArg, checkArgs, chooseAccount, closest, unknownCommand } from '../../../src/cli/commands.js';
import type { BridgeConfig } from '../../../src/config/config.js';
import { UsageError } from '../../../src/core/errors.js';

// The command line's own logic, without Redis or Kafka: which account a command acts on. The JSON `status` prints
// is built by src/core/account-status.ts (shared with the admin API) and tested in test/unit/core/account-status.test.ts.

const config = (account: string) => ({ account }) as BridgeConfig;

describe('accountArg', () => {
  it('takes --account <id> out of the arguments wherever it stands', () => {
    expect(accountArg(['--wait'])).toEqual({ account: null, args: ['--wait'] });
    expect(accountArg(['--account', 'acme', '--wait'])).toEqual({ account: 'acme', args: ['--wait'] });
    expect(accountArg(['--ids', '1,2', '--account', 'b'])).toEqual({ account: 'b', args: ['--ids', '1,2'] });
  });

  it('refuses --account without an id', () => {
    expect(() => accountArg(['--account'])).toThrow(UsageError);
    expect(() => accountArg(['--account', '--wait'])).toThrow('--account needs an account id');
  });
});

describe('chooseAccount', () => {
  const one = { accounts: [config('solo')], file: null };
  const two = { accounts: [config('a'), config('b')], file: 'accounts.yaml' };

  it('takes the only account without --account, or the one named', () => {
    expect(chooseAccount(one, null).account).toBe('solo');
    expect(chooseAccount(two, 'b').account).toBe('b');
  });

  it('asks for --account when there are several, and names the file of an unknown one', () => {
    expect(() => chooseAccount(two, null)).toThrow('2 accounts in accounts.yaml: name one with --account <id>');
    expect(() => chooseAccount(two, 'c')).toThrow('no account "c" in accounts.yaml');
    expect(() => chooseAccount(one, 'c')).toThrow('no account "c" in the environment');
  });
});

describe('checkArgs', () => {
  it('refuses an argument the command does not take, with the flag it most likely meant', () => {
    expect(() => checkArgs('status', ['--bogus'])).toThrow(
      new UsageError('unknown argument "--bogus" (status takes only --account <id>)'),
    );
    expect(() => checkArgs('sweep', ['--wiat'])).toThrow(
      new UsageError('unknown argument "--wiat" (did you mean --wait?)'),
    );
    expect(() => checkArgs('sweep', ['--now'])).toThrow('(sweep takes only --wait, --account <id>)');
    expect(() => checkArgs('pause', ['--acount'])).toThrow('(did you mean --account?)');
    expect(() => checkArgs('run', ['--wait'])).toThrow(
      '(run takes no arguments: its settings come from the environment)',
    );
    expect(() => checkArgs('sweep', ['--wait'])).not.toThrow();
    expect(() => checkArgs('status', [])).not.toThrow();
  });

  it('leaves resync to its own parser', () => {
    expect(() => checkArgs('resync', ['--ids', '1'])).not.toThrow();
  });
});

describe('unknown commands', () => {
  it('say what was wrong before the usage, and guess a typo', () => {
    const text = unknownCommand('stauts');
    expect(text.split('\n')[0]).toBe('reviews-bridge: unknown command "stauts" (did you mean status?)');
    expect(text).toContain('usage: reviews-bridge <command>');
    expect(unknownCommand('frobnicate').split('\n')[0]).toBe('reviews-bridge: unknown command "frobnicate"');
    expect(closest('resmue', ['resume', 'restore'])).toBe('resume');
    expect(closest('x', ['run'])).toBeNull();
  });
});
