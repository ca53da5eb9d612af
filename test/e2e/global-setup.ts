import { execFileSync } from 'node:child_process'

/** Builds the web app once; every test file's server serves this dist/. */
export default function globalSetup(): void {
  if (process.env.WEFT_E2E_SKIP_BUILD === '1') return
  execFileSync('npx', ['vite', 'build', '--logLevel', 'warn'], { stdio: 'inherit' })
}
