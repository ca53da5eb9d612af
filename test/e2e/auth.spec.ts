import { expect, test } from '@playwright/test'
import { startE2eServer, syncStatus, type E2eServer } from './fixtures.js'

let server: E2eServer

test.beforeAll(async () => {
  server = await startE2eServer()
})

test.afterAll(async () => {
  await server?.dispose()
})

test('sign up, sign out and sign in again from the app', async ({ browser }) => {
  const context = await browser.newContext({ baseURL: server.url })
  const page = await context.newPage()
  await page.goto('/')
  await page.getByRole('button', { name: 'Create an account' }).click()
  const signup = page.getByRole('form', { name: 'Sign up' })
  const email = `dana${Date.now()}@example.com`
  await signup.getByLabel('Name').fill('Dana')
  await signup.getByLabel('Email').fill(email)
  await signup.getByLabel('Password').fill('a long password')
  await signup.getByRole('button', { name: 'Sign up' }).click()

  // [WEB14] The landing page is the home; the profile (the User node) is its own page, where
  // the Email is shown read-only.
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  await expect(page.locator('weft-home-page h1')).toHaveText('Welcome, Dana')
  await page.locator('weft-home-page').getByRole('link', { name: 'Your profile' }).click()
  await expect(page.locator('weft-node-page h1')).toHaveText('Dana')
  await expect(page.locator('weft-node-page').getByLabel('Email', { exact: true })).toHaveValue(email)

  await page.getByRole('button', { name: 'Sign out' }).click()
  const signin = page.getByRole('form', { name: 'Sign in' })
  await signin.getByLabel('Email').fill(email)
  await signin.getByLabel('Password').fill('wrong password')
  await signin.getByRole('button', { name: 'Sign in' }).click()
  await expect(signin.getByRole('alert')).toBeVisible()
  // The refusal goes as soon as the person changes the form (it stayed, naming an old attempt).
  await signin.getByLabel('Password').fill('a long password')
  await expect(signin.getByRole('alert')).toHaveCount(0)
  await signin.getByRole('button', { name: 'Sign in' }).click()
  await expect(page.locator('weft-node-page h1')).toHaveText('Dana')
  await context.close()
})
