import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { claimRefusal, foreignClaim, stateClaim, type ClaimSeen, type OwnClaim } from '../../../src/core/claims.js';

// Who else publishes into an account's topics, judged from the heartbeats of the last intervals (issue 46, item 4):
// a twin (same deployment, another Redis), another deployment of the same account, another account on the same
// state keys; never this installation itself, nor installations on other topics.

const mine: OwnClaim = {
  account: 'acme',
  deployment: 'd1',
  state: stateClaim('review.state', undefined),
  knownRedis: (id) => id === 'r1' || id === 'r0',
};
const seen = (over: Partial<ClaimSeen>): ClaimSeen => ({
  account: 'acme',
  deployment: 'd1',
  redis: 'r1',
  state: mine.state,
  at: 1_000,
  ...over,
});

describe('foreignClaim', () => {
  it('finds nothing in this installation’s own heartbeats, a Redis it used before included', () => {
    expect(foreignClaim([seen({}), seen({ redis: 'r0', at: 900 })], mine)).toBeNull();
    expect(foreignClaim([], mine)).toBeNull();
  });

  it('names a twin: the same deployment and account with a Redis this process never used', () => {
    const twin = seen({ redis: 'r9', at: 1_100 });
    expect(foreignClaim([seen({}), twin], mine)).toEqual({ kind: 'twin', seen: twin });
    // Whatever its state topic: the transactional id and the changelog are shared by the deployment id alone.
    const elsewhere = seen({ redis: 'r9', state: stateClaim('other.state', undefined) });
    expect(foreignClaim([elsewhere], mine)?.kind).toBe('twin');
  });

  it('names another deployment of the account, and another account on the same state keys', () => {
    expect(foreignClaim([seen({ deployment: 'd2', redis: 'r9' })], mine)?.kind).toBe('deployment');
    expect(foreignClaim([seen({ account: 'globex', deployment: 'd2', redis: 'r9' })], mine)?.kind).toBe('account');
  });

  it('leaves other topics and other key prefixes alone', () => {
    const other = [
      seen({ account: 'globex', deployment: 'd2', redis: 'r9', state: stateClaim('globex.state', undefined) }),
      seen({ account: 'globex', deployment: 'd1', redis: 'r1', state: stateClaim('review.state', 'globex:') }),
      seen({ deployment: 'd2', redis: 'r9', state: stateClaim('review.state', 'acme:') }),
    ];
    expect(foreignClaim(other, mine)).toBeNull();
  });

  it('finds a foreign heartbeat among any number of own ones and unrelated ones', () => {
    const own = fc.record({ redis: fc.constantFrom('r0', 'r1'), at: fc.nat() }).map((o) => seen(o));
    const unrelated = fc
      .record({ account: fc.string(), deployment: fc.string(), at: fc.nat() })
      .filter((u) => u.account !== 'acme')
      .map((u) => seen({ ...u, state: stateClaim('another.state', undefined) }));
    const foreign = fc.oneof(
      fc.constant(seen({ redis: 'r7' })),
      fc.constant(seen({ deployment: 'd3' })),
      fc.constant(seen({ account: 'initech', deployment: 'd3' })),
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(own, unrelated)), foreign, fc.nat(), (rest, f, at) => {
        expect(foreignClaim(rest, mine)).toBeNull();
        const claim = foreignClaim([...rest, { ...f, at }], mine);
        expect(claim?.seen).toEqual({ ...f, at });
      }),
    );
  });

  it('says in one line what was found and the settings that tell installations apart', () => {
    const twin = claimRefusal({ kind: 'twin', seen: seen({ redis: 'r9' }) }, mine, 'review.heartbeat');
    expect(twin.setting).toBe('BRIDGE_DEPLOYMENT_ID');
    expect(twin.message.split('\n')).toHaveLength(1);
    expect(twin.message).toContain('instance r9');
    expect(twin.message).toContain('1970-01-01T00:00:01.000Z');
    const other = claimRefusal({ kind: 'deployment', seen: seen({ deployment: 'd2' }) }, mine, 'review.heartbeat');
    expect(other.setting).toBe('KAFKA_TOPIC_STATE');
    expect(other.message).toContain('BRIDGE_DEPLOYMENT_ID=d2');
  });
});
