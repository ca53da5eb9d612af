import { defineConfig } from 'vitest/config'

const shared = {
  // Bounds for a hang, not figures: a test that passes takes what it takes. 30 s was not enough
  // for a server to start (beforeAll) or an engine test to finish with two CPU hogs beside the
  // suite on a shared 2-core machine (load 30-40: a 10 s test took 200 s); every such failure
  // was this timeout. A hung test now costs 5 minutes, not a false failure.
  testTimeout: 300_000,
  hookTimeout: 300_000,
}

export default defineConfig({
  test: {
    // Integration tests start real servers and child processes; two cores do not like a crowd.
    maxWorkers: 2,
    projects: [
      {
        test: {
          ...shared,
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/sim/**/*.test.ts', 'shared/**/*.test.ts', 'sync-server/**/*.test.ts', 'web/**/*.test.ts'],
        },
      },
      {
        test: {
          ...shared,
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // Each file starts its own servers on port 0 in its own directory, and no file mocks a
          // module or stubs a global, so a worker keeps the server's modules loaded from one file
          // to the next: importing them again for each of the 120 files was a tenth of the suite.
          isolate: false,
        },
      },
    ],
  },
})
