import { existsSync } from 'node:fs'
import { defineConfig } from '@playwright/test'

/**
 * Debian's Chromium: its headless shell where installed (what Playwright's own headless runs: the
 * same Blink and V8 without the desktop browser around them), else the browser itself, else
 * Playwright's download. WEFT_E2E_CHROMIUM names another.
 */
const systemChromium = [process.env.WEFT_E2E_CHROMIUM, '/usr/lib/chromium/chromium-headless-shell', '/usr/bin/chromium'].find((p) => p && existsSync(p))

export default defineConfig({
  testDir: 'test/e2e',
  globalSetup: './test/e2e/global-setup.ts',
  // Two workers: since traces stopped recording screencasts and DOM snapshots the suite waits more
  // than it computes (the Playwright process used 0.6 of a core), and on two cores two workers ran
  // the 100 tests in 5.4 min against 7.1 min for one (stop 37; before that change, 697 s against
  // 655 s). Each spec file starts its own server on port 0 with its own data directory, so more
  // workers are safe where there are more cores: --workers=N.
  workers: 2,
  retries: 0,
  fullyParallel: false,
  timeout: 60_000,
  expect: { timeout: 10_000 },
  reporter: [['list']],
  use: {
    browserName: 'chromium',
    actionTimeout: 10_000,
    // A failed test keeps its trace (every action and call, with its source line, the network,
    // the console) and a screenshot of each of its pages at the failure. Not recorded for every
    // test only to be thrown away when it passes: the screencast (a JPEG per frame of every page)
    // and the DOM snapshots before and after each action, together a quarter of the suite's CPU
    // (the suite is CPU-bound on two cores). To record them locally: --trace=on.
    trace: { mode: 'retain-on-failure', screenshots: false, snapshots: false },
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: systemChromium,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    },
  },
})
