import { app } from '../app-context.js'
import { codeOf, humanError } from './error-text.js'
import { nextFreeName, segmentForName } from './names.js'
import { nodeHref } from './route.js'

/** Why a space was not made, in words, and a free name to try instead (taken names only). */
interface SpaceRefusal {
  error: string
  suggestion: string | null
}

/**
 * Makes a space named `name` and opens it: what the navigation's "New space" and the home's
 * first-space form both do. A taken name is answered with the next free one.
 */
async function createSpace(name: string): Promise<SpaceRefusal | null> {
  const path = segmentForName(name)
  try {
    await app().client.createNode(path, 'Space', name)
    location.hash = nodeHref(path)
    return null
  } catch (e) {
    if (codeOf(e) !== 'already_exists') return { error: humanError(e), suggestion: null }
    const client = app().client
    const free = await nextFreeName(name, (seg) => client.isPathTaken(seg))
    return { error: `A space named like “${name}” exists already.${free ? ` Try “${free}”.` : ''}`, suggestion: free }
  }
}

/**
 * A "new space" form's submit: the space named in its `space` input is made and opened (the
 * form reset), or the reason in words is returned, with a free name put in the input to try.
 */
export async function submitSpaceForm(ev: SubmitEvent): Promise<string> {
  ev.preventDefault()
  const form = ev.target as HTMLFormElement
  const name = String(new FormData(form).get('space') ?? '').trim()
  if (!name) return ''
  const refused = await createSpace(name)
  if (!refused) {
    form.reset()
    return ''
  }
  if (refused.suggestion) (form.elements.namedItem('space') as HTMLInputElement).value = refused.suggestion
  return refused.error
}
