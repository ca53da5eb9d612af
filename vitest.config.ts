import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts', 'test/sim/**/*.test.ts', 'test/integration/**/*.test.ts', 'shared/**/*.test.ts', 'sync-server/**/*.test.ts', 'web/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration tests start real servers and child processes; two cores do not like a crowd.
    maxWorkers: 2,
  },
})
