import { startSimulator } from '../src/simulator/index.js';
import { createUpstreamClient, fileOrEnvCredentials, UPSTREAM_DEFAULTS } from '../src/upstream/index.js';
import { writeResult } from './lib.js';

// Benchmark (not a test): how close a long full pass gets to the upstream's physical ceiling (10 requests/s x 100
// reviews = 1000 reviews/s) with the client at its default rate, and how often it trips the upstream's limiter.
// Scenarios vary the time the consumer spends per page (the bridge diffs, publishes and commits each page) and
// whether the next page is prefetched meanwhile.
//
//   npx tsx bench/upstream-rate.ts            (BENCH_REVIEWS=30000 by default)

const REVIEWS = Number(process.env.BENCH_REVIEWS ?? 30_000);
const CEILING_REVIEWS_PER_S = 1000;

interface Scenario {
  name: string;
  consumerMsPerPage: number;
  prefetch: boolean;
  /** Client rate and bucket capacity; undefined = the defaults. */
  rps?: number;
  burst?: number;
  /** Capacity of the upstream's bucket (the simulator's default is one second's worth, 10). */
  upstreamBurst?: number;
}

// The first scenario is the headline (defaults throughout); the others show what bounds the rate.
const SCENARIOS: Scenario[] = [
  { name: 'defaults, idle consumer', consumerMsPerPage: 0, prefetch: true },
  { name: 'defaults, 100 ms/page consumer', consumerMsPerPage: 100, prefetch: true },
  { name: 'no prefetch, 100 ms/page consumer', consumerMsPerPage: 100, prefetch: false },
  { name: 'burst 1, 60 ms/page consumer', consumerMsPerPage: 60, prefetch: true, burst: 1 },
  { name: 'defaults, strict upstream (burst 2)', consumerMsPerPage: 60, prefetch: true, upstreamBurst: 2 },
  { name: '9.6/s burst 1.3, 60 ms/page consumer', consumerMsPerPage: 60, prefetch: true, rps: 9.6, burst: 1.3 },
  {
    name: '9.6/s burst 1.3, strict upstream',
    consumerMsPerPage: 60,
    prefetch: true,
    rps: 9.6,
    burst: 1.3,
    upstreamBurst: 2,
  },
];

interface Result {
  scenario: string;
  clientRps: number;
  clientBurst: number;
  upstreamBurst: number;
  reviews: number;
  pages: number;
  seconds: number;
  pagesPerSecond: number;
  reviewsPerSecond: number;
  fractionOfCeiling: number;
  requests: number;
  throttled: number;
  throttledPercent: number;
  retries: number;
  limiterWaitSeconds: number;
  limiterRateAtEnd: number;
}

async function run(scenario: Scenario): Promise<Result> {
  const sim = await startSimulator({
    reviewCount: REVIEWS,
    rateLimit: {
      rps: 10,
      status: 503,
      ...(scenario.upstreamBurst === undefined ? {} : { burst: scenario.upstreamBurst }),
    },
  });
  let limiterWait = 0;
  let retries = 0;
  const client = createUpstreamClient(
    {
      baseUrl: sim.url,
      credentials: fileOrEnvCredentials({ clientId: { value: 'demo-client' }, clientSecret: { value: 'demo-secret' } }),
      prefetch: scenario.prefetch,
      ...(scenario.rps === undefined ? {} : { rateLimitRps: scenario.rps }),
      ...(scenario.burst === undefined ? {} : { rateLimitBurst: scenario.burst }),
    },
    {
      onLimiterWait: (_kind, seconds) => {
        limiterWait += seconds;
      },
      onRetry: () => {
        retries += 1;
      },
    },
  );
  try {
    // The token is fetched before the clock starts: a pass in production reuses a cached token.
    await client.checkCredentials();
    sim.control.resetStats();
    let pages = 0;
    let reviews = 0;
    const started = performance.now();
    for await (const page of client.pages({ kind: 'sweep' })) {
      pages += 1;
      reviews += page.reviews.length + page.rejects.length;
      if (scenario.consumerMsPerPage > 0) await new Promise((r) => setTimeout(r, scenario.consumerMsPerPage));
    }
    const seconds = (performance.now() - started) / 1000;
    const stats = sim.control.stats();
    const reviewsPerSecond = reviews / seconds;
    return {
      scenario: scenario.name,
      clientRps: scenario.rps ?? UPSTREAM_DEFAULTS.rateLimitRps,
      clientBurst: scenario.burst ?? UPSTREAM_DEFAULTS.rateLimitBurst,
      upstreamBurst: scenario.upstreamBurst ?? 10,
      reviews,
      pages,
      seconds: round(seconds, 2),
      pagesPerSecond: round(pages / seconds, 3),
      reviewsPerSecond: round(reviewsPerSecond, 1),
      fractionOfCeiling: round(reviewsPerSecond / CEILING_REVIEWS_PER_S, 4),
      requests: stats.requests,
      throttled: stats.throttled,
      throttledPercent: round((100 * stats.throttled) / Math.max(1, stats.requests), 2),
      retries,
      limiterWaitSeconds: round(limiterWait, 2),
      limiterRateAtEnd: round(client.limiterState().currentRps, 3),
    };
  } finally {
    await client.close();
    await sim.close();
  }
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

async function main(): Promise<void> {
  const results: Result[] = [];
  for (const scenario of SCENARIOS) {
    const result = await run(scenario);
    results.push(result);
    console.log(
      `${result.scenario.padEnd(38)} ${result.pagesPerSecond.toFixed(2)} pages/s  ${result.reviewsPerSecond.toFixed(0)} reviews/s ` +
        `(${(100 * result.fractionOfCeiling).toFixed(1)}% of 1000/s)  throttled ${result.throttled}/${result.requests} ` +
        `(${result.throttledPercent}%)  limiter wait ${result.limiterWaitSeconds}s over ${result.seconds}s`,
    );
  }
  const out = writeResult('upstream-rate', {
    upstream: { rps: 10, burst: 10, throttleStatus: 503, ceilingReviewsPerSecond: CEILING_REVIEWS_PER_S },
    reviews: REVIEWS,
    client: { rateLimitRps: UPSTREAM_DEFAULTS.rateLimitRps, burst: UPSTREAM_DEFAULTS.rateLimitBurst, pageSize: 100 },
    results,
  });
  console.log(`wrote ${out}`);
}

await main();
