import { LitElement, css, html } from 'lit'
import { humanError } from './error-text.js'
import { HttpApi, HttpError } from '../api/index.js'
import type { Session } from '../sync/index.js'

/** Sign up and sign in. Fires `signed-in` with the Session. */
export class WeftAuthPage extends LitElement {
  static override properties = { mode: { state: true }, error: { state: true }, busy: { state: true }, ui: { state: true } }
  /** The component library is loaded (its buttons submit the form only once defined). */
  declare ui: boolean
  declare mode: 'login' | 'signup'
  declare error: string
  declare busy: boolean
  static override styles = css`
    :host { display: block; max-width: 24em; margin: 4em auto; padding: 0 1em; font-family: system-ui, sans-serif; }
    form { display: grid; gap: 0.6em; }
    label { display: grid; gap: 0.2em; }
    input { font: inherit; padding: 0.45em 0.6em; border: 1px solid var(--wa-color-neutral-70, #aab); border-radius: var(--wa-border-radius-m, 6px); }
    .error { color: #b00; }
  `

  constructor() {
    super()
    this.mode = 'login'
    this.error = ''
    this.busy = false
    this.ui = false
  }

  override connectedCallback() {
    super.connectedCallback()
    // Signed out, nothing else competes for the first paint: load the library now.
    void import('./ui.js').then(() => (this.ui = true))
  }

  /**
   * [WEB119] Enter in a field submits the form. A form with several fields is submitted by Enter
   * only through a native submit button, and the page's only one is a wa-button (a custom
   * element the browser does not count), so Enter did nothing. requestSubmit runs the browser's
   * own checks (a missing field is pointed at, as with a click). Not while an input method is
   * composing (Enter there picks the text), nor while a sign-in is under way.
   */
  private onKeydown(ev: KeyboardEvent) {
    if (ev.key !== 'Enter' || ev.isComposing || ev.shiftKey || ev.ctrlKey || ev.altKey || ev.metaKey) return
    if (!(ev.target instanceof HTMLInputElement)) return
    ev.preventDefault()
    if (!this.busy) ev.target.form?.requestSubmit()
  }

  private async submit(ev: SubmitEvent) {
    ev.preventDefault()
    if (this.busy) return
    const form = new FormData(ev.target as HTMLFormElement)
    const email = String(form.get('email') ?? '')
    const password = String(form.get('password') ?? '')
    const name = String(form.get('name') ?? '')
    const api = new HttpApi(location.origin, () => null)
    this.busy = true
    this.error = ''
    try {
      const res = this.mode === 'signup' ? await api.signup(email, password, name) : await api.login(email, password)
      let displayName = name || email
      try {
        displayName = (await new HttpApi(location.origin, () => res.token).me()).name || displayName
      } catch {
        // the name is cosmetic
      }
      const session: Session = { userId: res.userId, token: res.token, name: displayName }
      this.dispatchEvent(new CustomEvent<Session>('signed-in', { detail: session, bubbles: true, composed: true }))
    } catch (e) {
      this.error =
        e instanceof HttpError && e.code === 'invalid_request'
          ? 'Check the form: your name, a valid email address and a password of at least 8 characters are needed.'
          : e instanceof HttpError
            ? humanError(e)
            : 'The server cannot be reached. Check your connection and try again.'
    } finally {
      this.busy = false
    }
  }

  override render() {
    const signup = this.mode === 'signup'
    return html`
      <h1>Weft</h1>
      <h2>${signup ? 'Create an account' : 'Sign in'}</h2>
      <form @submit=${this.submit} @keydown=${this.onKeydown} @input=${() => (this.error = '')} aria-label=${signup ? 'Sign up' : 'Sign in'}>
        ${signup ? html`<label>Name <input name="name" autocomplete="name" required /></label>` : ''}
        <label>Email <input name="email" type="email" autocomplete="email" required /></label>
        <label>Password <input name="password" type="password" autocomplete=${signup ? 'new-password' : 'current-password'} required minlength="8" /></label>
        <wa-button type="submit" variant="brand" ?loading=${this.busy} ?disabled=${!this.ui}>${signup ? 'Sign up' : 'Sign in'}</wa-button>
        ${this.error ? html`<p class="error" role="alert">${this.error}</p>` : ''}
      </form>
      <p>
        ${signup ? 'Have an account?' : 'New here?'}
        <wa-button size="s" appearance="outlined" @click=${() => (this.mode = signup ? 'login' : 'signup')}>${signup ? 'Sign in' : 'Create an account'}</wa-button>
      </p>
    `
  }
}
customElements.define('weft-auth-page', WeftAuthPage)
