import { expect, test } from '@playwright/test'
import { startE2eServer, syncStatus, type E2eServer } from './fixtures.js'

/** [WEB119] Enter in the sign-up and sign-in forms submits them, as a click on the button does. */
let server: E2eServer

test.beforeAll(async () => {
  server = await startE2eServer()
})

test.afterAll(async () => {
  await server?.dispose()
})

test('[WEB119] sign up and sign in with Enter; a wrong password with Enter shows the refusal', async ({ browser }) => {
  const context = await browser.newContext({ baseURL: server.url, viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  await page.goto('/')
  await page.getByRole('button', { name: 'Create an account' }).click()
  const signup = page.getByRole('form', { name: 'Sign up' })
  // The button is ready (the component library is loaded) before typing, as a person sees it.
  await expect(signup.getByRole('button', { name: 'Sign up' })).toBeEnabled()
  const email = `erin${Date.now()}@example.com`
  await signup.getByLabel('Name').fill('Erin')
  await signup.getByLabel('Email').fill(email)
  // Enter in a field that is not the last one: the form is still incomplete, nothing is sent.
  await signup.getByLabel('Email').press('Enter')
  await expect(signup).toBeVisible()
  await signup.getByLabel('Password').fill('a long password')
  await page.screenshot({ path: 'test-results/auth-enter-signup-1280.png' })
  await signup.getByLabel('Password').press('Enter')
  await expect(syncStatus(page)).toHaveAttribute('data-status', 'saved')
  await expect(page.locator('weft-home-page h1')).toHaveText('Welcome, Erin')

  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.setViewportSize({ width: 390, height: 800 })
  const signin = page.getByRole('form', { name: 'Sign in' })
  await expect(signin.getByRole('button', { name: 'Sign in' })).toBeEnabled()
  await signin.getByLabel('Email').fill(email)
  await signin.getByLabel('Password').fill('wrong password')
  await signin.getByLabel('Password').press('Enter')
  await expect(signin.getByRole('alert')).toHaveText('The email or password is not right.')
  await page.screenshot({ path: 'test-results/auth-enter-wrong-390.png' })
  await signin.getByLabel('Password').fill('a long password')
  // Enter in the email field submits too (both fields are filled).
  await signin.getByLabel('Email').press('Enter')
  await expect(page.locator('weft-home-page h1')).toHaveText('Welcome, Erin')
  await context.close()
})
