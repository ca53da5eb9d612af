import { LitElement, css, html, nothing } from 'lit'
import { html as staticHtml, unsafeStatic } from 'lit/static-html.js'
import { keyed } from 'lit/directives/keyed.js'
import { map } from 'rxjs'
import { repeat } from 'lit/directives/repeat.js'
// Runtime imports name shared/ modules directly: shared/index.js also pulls the zod node-type
// schemas, which the browser never needs and which cost cold-start parse time.
import { joinPath, type NodePath } from '../../shared/path.js'
import { jsonEqual, type JsonObject, type JsonValue } from '../../shared/json.js'
import { diffToMergePatch, type MergePatch } from '../../shared/merge-patch.js'
import { isTextField, TYPED_TEXT_FIELDS } from '../../shared/text-fields.js'
import type { Permission } from '../../shared/enums.js'
import { ObservableController } from '../controllers/index.js'
import { ancestorsOf, NamesController } from '../controllers/names-controller.js'
import { CapabilitiesController } from '../controllers/capabilities-controller.js'
import { app } from '../app-context.js'
import type { IndexRow } from '../store/index.js'
import type { AccessState, NodeView } from '../streams/index.js'
import type { PresenceUser, SyncStatus } from '../sync/index.js'
import { nextFreeName, segmentForName } from './names.js'
import { contextualHref, HOME_HREF, nodeHref } from './route.js'
import { codeOf, humanError, humanMessage, unstorableProblem, type FieldProblem } from './error-text.js'
import { toStorableJson } from '../../shared/storable-text.js'
import { newCodeContent } from './code-template.js'
import { formatValue, kindOf, parseAs, parseLike, type FieldCommit, type FieldKind } from './field-kinds.js'
import { isRequiredField, mayWriteField } from './field-rules.js'
import { fieldLabel, typeLabel } from './labels.js'
import { renderTypedField, typedFieldStyles } from './typed-field.js'
import { kindSelect, valueInput } from './add-field.js'
import { warmPicker } from './link-field.js'
import { openAction, showToast } from './toast.js'
import { createRefusal$, notCreatedLine } from './create-refused.js'
import { confirmDefinitionChange } from './definition-change.js'
import './text-field.js'
import './refused-list.js'
import './value-view.js'
import './node-actions.js'
import './moved-notice.js'
import { need, needLater, shownFirstScreen } from './lazy.js'
import { removeFieldWithUndo } from './field-undo.js'
import { recordRecent } from './recent.js'

const CHILD_LIMIT = 200
/**
 * Children rendered in the first frame, more than a screen holds: the rest of the first
 * CHILD_LIMIT follow once that frame is painted, so a cold start shows the list sooner.
 */
const FIRST_SCREEN_CHILDREN = 50
/** A text field longer than this (or with a line break) gets a multi-line editor. */
const MULTILINE_AT = 60
/** Node types offered when creating a child. */
const CREATABLE_TYPES = ['Document', 'Group', 'Code', 'Thread', 'Post', 'ContextualSubscription'] as const
/**
 * The Create menu. Static markup on purpose: a Lit expression inside <select> breaks the
 * template's part order in Chromium's current <select> parser (the form's @submit ended up bound
 * as the select's text); the options are baked into the template once ([WEB61] typeLabel's words).
 */
const typeSelect = staticHtml`<select name="nodeType">${unsafeStatic(
  CREATABLE_TYPES.map((t) => `<option value="${t}">${typeLabel(t)}</option>`).join(''),
)}</select>`

function fieldId(key: string): string {
  return `field-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`
}

/** [WEB102] The id of the refusal shown beside a field. */
function errorId(key: string): string {
  return `error-${fieldId(key)}`
}

/** What the person typed into a field that is not text, before it is committed (Enter / leaving the field). */
interface Draft {
  raw: string
  /** The field's value when typing started: a different value now means someone else changed it. */
  base: JsonValue | undefined
  /** [WEB136] The text whose definition-change question was declined: its Enter asks again. */
  declined?: string
}

interface CreateError {
  message: string
  /** The next free name, when the name was taken. */
  suggestion: string | null
  nodeType: string
}

/**
 * A node page: the fields (bound by name, never by position: keyed rendering and a draft per
 * field name), who else is here, pending and refused edits, the children, create and delete.
 * Text fields are bound to the node's Y.Text (weft-text-field); other kinds keep what the
 * person typed as a draft until it is committed, and a remote change never overwrites it.
 */
export class WeftNodePage extends LitElement {
  static override properties = {
    path: {},
    fieldError: { state: true },
    createError: { state: true },
    pageError: { state: true },
    drafts: { state: true },
    addKind: { state: true },
    allChildren: { state: true },
  }
  declare path: string
  /** [WEB102] Shown beside the field it concerns (its `key`), else under the fields. */
  declare fieldError: FieldProblem | null
  declare createError: CreateError | null
  declare pageError: string
  declare drafts: ReadonlyMap<string, Draft>
  /** The kind chosen in "Add a field": the value box takes its shape (a date picker, Yes/No…). */
  declare addKind: FieldKind
  /** Whether every listed child is rendered (FIRST_SCREEN_CHILDREN until the first frame is painted). */
  declare allChildren: boolean
  private readonly node = new ObservableController<NodeView | null>(this)
  private readonly presence = new ObservableController<PresenceUser[]>(this)
  private readonly access = new ObservableController<AccessState>(this)
  /** [WEB85] Whether the device is connecting (the role comes in a moment) or cut off (said). */
  private readonly status = new ObservableController<SyncStatus>(this)
  private readonly childList = new ObservableController<IndexRow[]>(this)
  /** The names of the page's ancestors (the breadcrumb: names, never paths). */
  private readonly crumbs = new NamesController(this)
  /** The page's own name when this device knows it (said in a refusal instead of the path). */
  private readonly selfName = new NamesController(this)
  /** [WEB15] What the server lets the caller do here (system fields, deleting a profile). */
  private readonly caps = new CapabilitiesController(this)
  /** Once a field is shown multi-line it stays so (switching the element would drop the caret). */
  private readonly multiline = new Map<string, boolean>()

  static override styles = [typedFieldStyles, css`
    :host { display: block; }
    header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.6em; }
    h1 { margin: 0; font-size: 1.5em; overflow-wrap: anywhere; }
    h2 { font-size: 1.1em; margin: 0 0 0.5em; }
    .type { font-size: 0.8em; }
    .crumbs { order: -1; flex-basis: 100%; min-width: 0; color: #555; font-size: 0.9em; overflow-wrap: anywhere; }
    /* [WEB91] An ancestor's name takes one line at most, cut with an ellipsis (the link's text,
       its accessible name, stays whole): a 300-character name filled the breadcrumb.
       [WEB101] The whole name is the link's tooltip (title) and, said outright, its accessible name;
       the row is no wider than the header (min-width: 0), so the items after a long one wrap
       instead of running off the screen (at 390 px the next ancestor was cut to "Chi"). */
    .crumbs a { color: inherit; display: inline-block; max-width: min(20em, 85%); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; }
    .presence { margin: 0.5em 0; color: #235; }
    /* [WEB90] A label's column is as wide as its words up to 16em (fit-content), never wider: a
       300-character name without spaces made it max-content (3000 px), pushing every value and ✕
       out of view. Past that it wraps, anywhere if it must. */
    .fields { display: grid; grid-template-columns: fit-content(16em) minmax(0, 1fr) auto; gap: 0.5em 0.8em; align-items: start; }
    .fields label { padding-top: 0.35em; font-weight: 500; overflow-wrap: anywhere; min-width: 0; }
    .fields input[type='text'], .fields input[type='number'], .fields textarea { width: 100%; box-sizing: border-box; }
    .fields textarea { font: inherit; min-height: 3em; resize: vertical; }
    .fields textarea.json { font-family: ui-monospace, monospace; }
    .value { display: flex; flex-direction: column; gap: 0.2em; min-width: 0; }
    .changed { color: #8a5a00; font-size: 0.85em; }
    .denied, .error { color: #b00; }
    /* [WEB102] A field's refusal sits under its input, in the field's own cell. */
    .value > .error { margin: 0; font-size: 0.9em; overflow-wrap: anywhere; }
    .pending { color: #8a5a00; }
    .readonly, .reason-off { color: #555; font-style: italic; font-size: 0.9em; }
    section { margin-top: 1.4em; }
    form.inline { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: end; margin-top: 1em; padding-top: 0.8em; border-top: 1px dashed #d5d9e4; }
    form.inline label { display: flex; flex-direction: column; gap: 0.15em; font-size: 0.9em; }
    /* [WEB54] A value the caller cannot change reads as text, not as a box to type into. */
    .fields :is(input, textarea)[readonly] { background: transparent; border-color: transparent; cursor: default; }
    /* Empty (nobody else here) it takes no room, and stays a live region for who arrives. */
    .presence:empty { margin: 0; }
    .description { margin: 0.6em 0; font-size: 1.05em; }
    details.setup > summary { cursor: pointer; color: #345; margin: 0.4em 0; }
    input, select, textarea, button { font: inherit; padding: 0.35em 0.5em; border: 1px solid var(--wa-color-neutral-80, #bbc); border-radius: var(--wa-border-radius-m, 6px); background: #fff; color: inherit; }
    input:focus-visible, select:focus-visible, textarea:focus-visible, button:focus-visible { outline: var(--wa-focus-ring, 2px solid #36c); outline-offset: 1px; }
    button { cursor: pointer; background: var(--wa-color-neutral-95, #f4f6fb); }
    button:disabled { cursor: not-allowed; opacity: 0.55; }
    button.icon { padding: 0.3em 0.55em; }
    .children { padding-left: 1.2em; }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
    .children li { margin: 0.2em 0; overflow-wrap: anywhere; }
    /* [WEB91] A child's name takes two lines at most (its link's text stays whole). */
    .children li a { overflow: hidden; display: -webkit-inline-box; -webkit-box-orient: vertical; -webkit-line-clamp: 2; line-clamp: 2; vertical-align: top; }
    @media (max-width: 600px) {
      .fields { grid-template-columns: minmax(0, 1fr) auto; }
      .fields label { grid-column: 1 / -1; padding-top: 0.4em; }
      form.inline { flex-direction: column; align-items: stretch; }
      form.inline wa-button { width: 100%; }
    }
  `]

  constructor() {
    super()
    this.path = ''
    this.fieldError = null
    this.createError = null
    this.pageError = ''
    this.drafts = new Map()
    this.addKind = 'text'
    this.allChildren = false
  }

  override willUpdate(changed: Map<string, unknown>) {
    const path = this.path
    if (!path) return
    if (changed.has('path')) {
      // Errors and drafts belong to the page they were made on.
      this.fieldError = null
      this.createError = null
      this.pageError = ''
      this.drafts = new Map()
      this.multiline.clear()
      this.caps.reset()
      this.allChildren = false
    }
    const { streams } = app()
    this.node.watch(path, () => streams.node$(path))
    this.presence.watch(path, () => streams.presence$(path))
    this.access.watch(path, () => streams.access$(path))
    this.status.watch('status', () => streams.status$)
    this.childList.watch(path, () => streams.query$({ parent: path, listedOnly: true, limit: CHILD_LIMIT }))
    this.crumbs.watch(ancestorsOf(path))
    this.selfName.watch([path], true)
    // Asked once the server has the node (a node made offline, or a path that is not there,
    // would answer 404: an error in the console) and while online; again when the role changes.
    const perms = this.access.value?.permissions
    const view = this.node.value
    if (view && view.path === path && !view.localOnly && navigator.onLine !== false) this.caps.watch(path, perms ? [...perms].sort().join(',') : '')
    if (changed.has('path')) recordRecent(path)
  }

  /**
   * [WEB85] What the person may do here as far as this device knows: the room's mask, else the
   * last one learned here or on the nearest ancestor (access$); nothing while none is known (an
   * unknown role was taken for every right: a Viewer offline was offered Rename, Create, Delete).
   * [WEB86] A denied room allows nothing (access$ gives it no permissions).
   */
  private can(p: Permission): boolean {
    return this.access.value?.permissions?.has(p) ?? false
  }

  /**
   * [WEB85] The role is unknown but the room is about to tell it (online, connected or connecting):
   * nothing is said for that moment (a first visit flashed "not known yet"); offline or with the
   * server unreachable it is said.
   */
  private get roleComing(): boolean {
    const kind = this.status.value?.kind
    return this.roleUnknown && kind !== 'offline' && kind !== 'unreachable' && kind !== 'final'
  }

  /** [WEB86] Offline after access was removed: what this device remembers is no access at all. */
  private get accessLost(): boolean {
    const a = this.access.value
    return a?.known === 'remembered' && !a.permissions?.has('Read')
  }

  /** [WEB85] The room has not told the role and this device remembers none for here or above. */
  private get roleUnknown(): boolean {
    return this.access.value?.known === 'unknown'
  }

  private async patchField(key: string, value: JsonValue | null, patch: MergePatch = { [key]: value }): Promise<boolean> {
    this.fieldError = null
    try {
      await app().client.patch(this.path, patch)
      return true
    } catch (e) {
      // [STO10] A draft holding a NUL or half an emoji stays; one click saves it with them replaced.
      const storable = value === null ? value : toStorableJson(value)
      this.fieldError = jsonEqual(storable, value)
        ? { key, message: `${fieldLabel(key)}: ${humanError(e)}` }
        : unstorableProblem(key, () => void this.patchField(key, storable).then((ok) => ok && this.setDraft(key, null)))
      return false
    }
  }

  /**
   * [WEB102] The refusal of a field's value, shown beside that field (`key`: its id is the one the
   * field's input is described by), or, for a problem of no field shown here (the "Add a field"
   * form's), under the fields (no `key`). It was always under the whole list, however far from
   * the field it named.
   */
  private renderFieldError(view: NodeView, key?: string) {
    const problem = this.fieldError
    if (!problem || (key === undefined ? this.shownField(view, problem.key) : problem.key !== key)) return nothing
    const { message, fix, fixLabel } = problem
    return html`<p class="error" role="alert" data-error="fields" data-error-field=${key ?? nothing} id=${key === undefined ? nothing : errorId(key)}>${message} ${fix ? html`<button type="button" @click=${fix}>${fixLabel}</button>` : nothing}</p>`
  }

  /** [WEB102] Whether `key` is a field of the grid (where its refusal is shown). */
  private shownField(view: NodeView, key: string | undefined): boolean {
    return key !== undefined && view.fields.includes(key) && !EXTENSION_FIELDS[view.nodeType]?.includes(key)
  }

  /** [WEB102] The id of the refusal shown beside `key`, when there is one (its input is described by it). */
  private describedBy(key: string): string {
    return this.fieldError?.key === key ? errorId(key) : ''
  }

  private setDraft(key: string, draft: Draft | null) {
    const next = new Map(this.drafts)
    if (draft) next.set(key, draft)
    else next.delete(key)
    this.drafts = next
  }

  private onDraftInput(key: string, ev: Event) {
    const input = ev.target as HTMLInputElement | HTMLTextAreaElement
    const existing = this.drafts.get(key)
    this.setDraft(key, { raw: input.value, base: existing ? existing.base : this.node.value?.content[key], declined: existing?.declined })
  }

  /**
   * [WEB136] Enter on the text whose definition-change question was declined asks again: the box
   * fires no change event until its value changes, so that Enter did nothing.
   */
  private onDraftKeydown(key: string, ev: KeyboardEvent) {
    const input = ev.target as HTMLInputElement
    if (ev.key === 'Enter' && !ev.isComposing && this.drafts.get(key)?.declined === input.value) void this.commitDraft(key, ev)
  }

  private async commitDraft(key: string, ev: Event) {
    const input = ev.target as HTMLInputElement | HTMLTextAreaElement
    const previous = this.node.value?.content[key]
    const parsed = parseLike(previous, input.value)
    if (!parsed.ok) {
      this.fieldError = { key, message: `${fieldLabel(key)}: ${parsed.message}` }
      return // the draft stays: nothing typed is lost
    }
    // [WEB96] The draft this commit saves, read before anything is awaited: what is typed while
    // it is asked about or saved is a new draft (its own Enter saves it), and must not be cleared.
    const committed = this.drafts.get(key)
    // [WEB134] A change of a subscription's definition (its Operation) asks first, as its JSON
    // editor does ([WEB122]); declined, the draft stays.
    if (!jsonEqual(parsed.value, previous ?? null)) {
      const twin = this.askingDefinition !== null // a question is open already: this commit is its twin
      if (!(await this.askDefinitionChange(key))) {
        // [WEB136] Declined: its Enter asks again.
        if (!twin) this.setDraft(key, { ...(this.drafts.get(key) ?? { raw: input.value, base: previous }), declined: input.value })
        return
      }
    }
    // [WEB96] Cleared only if nothing was typed since the commit began: clearing a newer draft put
    // the saved value back over the typing.
    if ((await this.patchField(key, parsed.value)) && this.drafts.get(key) === committed) this.setDraft(key, null)
  }

  /** [WEB134] A definition warning open (one question at a time: Enter and leaving the box both commit). */
  private askingDefinition: Promise<boolean> | null = null

  private askDefinitionChange(key: string): Promise<boolean> {
    if (this.askingDefinition) return this.askingDefinition.then(() => false)
    const asking = confirmDefinitionChange(this.path, key).finally(() => (this.askingDefinition = null))
    this.askingDefinition = asking
    return asking
  }

  /**
   * [WEB135] Removing a field of a subscription's definition (its ✕) asks first, as changing it
   * does ([WEB122]); declined, nothing is removed.
   */
  private async removeField(key: string, value: JsonValue) {
    if (!(await this.askDefinitionChange(key))) return
    await removeFieldWithUndo(key, value, (k, v) => this.patchField(k, v))
  }

  /**
   * A field's editor says a problem (or, with no message, that the one of its field is over: the
   * person typed again). [WEB102] Typing in one field no longer hides another field's refusal.
   */
  private readonly onFieldProblem = (e: CustomEvent<FieldProblem>) => {
    const p = e.detail
    if (p.message) this.fieldError = p
    else if (!this.fieldError?.key || this.fieldError.key === p.key) this.fieldError = null
  }

  /** A typed field's editor asks for a write (typed-field.ts): one merge patch, like every edit here. */
  private onFieldCommit(ev: CustomEvent<FieldCommit>) {
    ev.stopPropagation()
    const { key, value } = ev.detail
    const current = this.node.value?.content[key]
    // An object merges in a merge patch: a key the person deleted is written as null, so the
    // field ends as typed, not as the old object with the new keys added.
    const patch = value !== null && current !== undefined ? diffToMergePatch({ [key]: current }, { [key]: value }) : { [key]: value }
    if (Object.keys(patch).length) void this.patchField(key, value, patch)
  }

  private async onAddField(ev: SubmitEvent) {
    ev.preventDefault()
    const form = ev.target as HTMLFormElement
    const data = new FormData(form)
    const key = String(data.get('key') ?? '').trim()
    const kind = String(data.get('kind') ?? 'text') as FieldKind
    if (!key) return
    if (this.node.value && Object.prototype.hasOwnProperty.call(this.node.value.content, key)) {
      this.fieldError = { message: `A field named “${key}” exists already; edit it above.` }
      return
    }
    const parsed = await this.parseNew(kind, String(data.get('value') ?? ''))
    if (!parsed.ok) {
      this.fieldError = { message: `${key}: ${parsed.message}` }
      return
    }
    // Cleared as the field appears (not after the store confirms it: by then the person may
    // already be typing the next field); what was typed comes back if the edit is refused.
    const typed = { key: String(data.get('key') ?? ''), value: String(data.get('value') ?? '') }
    form.reset()
    this.addKind = 'text'
    if (!(await this.patchField(key, parsed.value))) {
      ;(form.elements.namedItem('key') as HTMLInputElement).value = typed.key
      ;(form.elements.namedItem('value') as HTMLInputElement).value = typed.value
    }
  }

  /** A link may be given by a node's name as well as its path: the name is looked up in this device's index. */
  private async parseNew(kind: FieldKind, raw: string) {
    if (kind === 'link' && raw.trim()) {
      const { store } = app().client
      const byPath = await store.getIndexRow(raw.trim())
      if (!byPath) {
        await warmPicker(this.path)
        const byName = await store.db.nodes.filter((r) => r.name === raw.trim() && !/(^|\/)_/.test(r.path)).first()
        if (byName) return parseAs('link', byName.path)
      }
    }
    return parseAs(kind, raw)
  }

  private async create(name: string, nodeType: string, form: HTMLFormElement | null) {
    this.createError = null
    const path = joinPath(this.path as NodePath, segmentForName(name))
    // [WEB19] Cleared as it is submitted, not once the server has answered: by then the person
    // may be typing the next name (the new child is listed as soon as the change feed tells of
    // it, which can be before this create's own answer lands), and a reset then wiped it. What was
    // typed comes back if the create is refused and nothing was typed since.
    const fields = form && createFields(form)
    const typed = fields && { name: fields.name.value, nodeType: fields.nodeType.value }
    form?.reset()
    const putBack = () => {
      if (!fields || !typed || fields.name.value !== '') return
      fields.name.value = typed.name
      fields.nodeType.value = typed.nodeType
    }
    try {
      // [WEB19] A Code node starts from the commented template of the script API.
      await app().client.createNode(path, nodeType, name, initialContent(nodeType, this.path))
      // [WEB37] A new thread opens, ready for its first message.
      if (nodeType === 'Thread') location.hash = nodeHref(path)
      // [WEB54] Anything else stays listed here (to make several in a row), with a way to open it.
      // [WEB104] Made offline and then refused by the server, it is said so, and its Open goes.
      else showToast(`Created “${name}”.`, openAction(nodeHref(path)), { follow: createRefusal$(path).pipe(map((r) => r && { message: notCreatedLine(r), error: true })) })
    } catch (e) {
      putBack()
      if (codeOf(e) === 'already_exists') {
        const client = app().client
        const suggestion = await nextFreeName(name, (seg) => client.isPathTaken(joinPath(this.path as NodePath, seg)))
        // Names, not paths: the node whose place this name would take is named by its own name.
        const existing = await client.store.getIndexRow(path)
        const taken = !existing || existing.name === name ? `A node named “${name}”` : `“${name}” would take the place of “${existing.name}”, which`
        this.createError = { message: `${taken} already exists here. Nothing was changed.`, suggestion, nodeType }
        return
      }
      this.createError = { message: humanError(e), suggestion: null, nodeType }
    }
  }

  private onCreateChild(ev: SubmitEvent) {
    ev.preventDefault()
    const form = ev.target as HTMLFormElement
    const data = new FormData(form)
    const name = String(data.get('name') ?? '').trim()
    if (!name) return
    void this.create(name, String(data.get('nodeType') ?? 'Document'), form)
  }

  private isMultiline(key: string, value: string, nodeType: string): boolean {
    let m = this.multiline.get(key)
    if (m === undefined) {
      const declared = Object.prototype.hasOwnProperty.call(TYPED_TEXT_FIELDS, nodeType)
      m = value.length > MULTILINE_AT || value.includes('\n') || declared
      this.multiline.set(key, m)
    }
    return m
  }

  private renderField(view: NodeView, key: string) {
    const value = view.content[key]!
    const id = fieldId(key)
    const draft = this.drafts.get(key)
    let input
    let note: unknown = nothing
    // [WEB8] A role that cannot write the field sees its value, not an input it could type into;
    // [WEB15] nor does anyone see an input for a field only the system writes (a profile's Email):
    // the server's answer (capabilities), and offline the type's field rules ([WEB23]).
    // [WEB85][WEB86] Nor while the role is unknown, nor once access is removed (the server's
    // earlier answer no longer holds).
    const access = this.access.value
    const perms = access?.permissions ?? null
    const readonly = !!access?.denied || this.roleUnknown || !this.caps.mayWrite(key, this.can('Update')) || !mayWriteField(view.nodeType, key, perms)
    const isText = typeof value === 'string' && isTextField(view.nodeType, key)
    const kind = kindOf(value, isText && this.isMultiline(key, value as string, view.nodeType))
    // Long text is Markdown only where strings are text (a typed node's plain strings are values).
    const describedBy = this.describedBy(key)
    const described = describedBy || nothing
    const invalid = describedBy ? 'true' : nothing
    const typed = kind === 'longtext' && !isText ? null : renderTypedField({ path: view.path, key, value, kind, id, readonly, describedBy })
    if (typed) input = typed
    else if (isText) {
      input = html`<weft-text-field .path=${view.path} .key=${key} .fieldId=${id} .describedBy=${describedBy} .initial=${value}
        ?multiline=${this.isMultiline(key, value, view.nodeType)} ?readonly=${readonly}></weft-text-field>`
    } else if (readonly && typeof value === 'object' && value !== null) {
      // [WEB16] A list reads as chips, a link as the linked node's name, never as raw JSON.
      input = html`<weft-value-view id=${id} .value=${value}></weft-value-view>`
    } else {
      const shown = draft ? draft.raw : formatValue(value)
      const onInput = (e: Event) => this.onDraftInput(key, e)
      const onChange = (e: Event) => void this.commitDraft(key, e)
      const onKeydown = (e: KeyboardEvent) => this.onDraftKeydown(key, e)
      // [WEB93] Text with a number keypad, not type="number": that input reads as empty what it
      // cannot hold ("1e999"), so the draft was emptied and the refusal said nothing of it.
      if (typeof value === 'number') input = html`<input id=${id} name=${key} type="text" inputmode="decimal" aria-describedby=${described} aria-invalid=${invalid} .value=${shown} ?readonly=${readonly} @input=${onInput} @change=${onChange} @keydown=${onKeydown} />`
      else if (typeof value === 'string') input = html`<input id=${id} name=${key} type="text" aria-describedby=${described} aria-invalid=${invalid} .value=${shown} ?readonly=${readonly} @input=${onInput} @change=${onChange} @keydown=${onKeydown} />`
      else input = html`<textarea id=${id} name=${key} class="json" aria-describedby=${described} aria-invalid=${invalid} .value=${shown} ?readonly=${readonly} @input=${onInput} @change=${onChange}></textarea>`
      if (draft && !jsonEqual(draft.base as JsonValue, value)) {
        note = html`<span class="changed" data-changed-remotely=${key}>Changed by someone else to ${formatValue(value)}; your version is kept until you save it.
          <wa-button size="s" appearance="outlined" @click=${() => this.setDraft(key, null)}>Use theirs</wa-button></span>`
      }
    }
    // [WEB15] A field the caller cannot write has no ✕: nothing offered that the server refuses;
    // [WEB62] nor has a field the type requires (removing it would be refused as invalid content).
    const label = fieldLabel(key)
    return html`<label for=${id} id=${`label-${id}`}>${label}</label>
      <div class="value" data-field=${key} data-kind=${kind}>${input}${note}${this.renderFieldError(view, key)}</div>
      ${readonly || isRequiredField(view.nodeType, key)
        ? html`<span></span>`
        : html`<wa-button size="s" appearance="plain" class="icon" title=${`Remove field ${label}`}
            @click=${() => void this.removeField(key, value)}><span aria-hidden="true">✕</span><span class="visually-hidden">Remove field ${label}</span></wa-button>`}`
  }

  private renderExtension(view: NodeView) {
    // Each of these elements loads when first shown (lazy.ts): none is on a cold start's path.
    switch (view.nodeType) {
      case 'Space':
        need('weft-members-panel')
        needLater('weft-activity-strip')
        // A space hosts the runs routed to it (its partition root): they show under its members.
        return html`<section><weft-members-panel path=${view.path}></weft-members-panel></section>
          <section><weft-activity-strip path=${view.path}></weft-activity-strip></section>`
      case 'Group':
        // [WEB88] Inviting to a group is its Admins' (ManageAccess): it was offered to every reader.
        if (!this.can('ManageAccess')) return nothing
        need('weft-group-invite-dialog')
        return html`<section><weft-group-invite-dialog path=${view.path}></weft-group-invite-dialog></section>`
      // Activities (issue 11): web/components/code-page.ts, activity-*.ts.
      case 'Code':
        need('weft-code-page')
        return html`<section><weft-code-page path=${view.path} ?readonly=${!this.can('Update')}></weft-code-page></section>`
      case 'User': {
        needLater('weft-activity-strip')
        const mine = view.path === app().session.userId
        return html`<section><weft-activity-strip path=${view.path} heading=${mine ? 'My activity' : 'Activities'} ?mine=${mine}></weft-activity-strip></section>`
      }
      default:
        needLater('weft-activity-strip')
        return html`<section><weft-activity-strip path=${view.path}></weft-activity-strip></section>`
    }
  }

  private renderCreateError() {
    const err = this.createError
    if (!err) return nothing
    return html`<p class="error" role="alert" data-error="create">${err.message}
      ${err.suggestion
        ? html`<wa-button size="s" variant="brand" @click=${() => this.create(err.suggestion!, err.nodeType, this.renderRoot.querySelector('form[aria-label="New child node"]'))}>Create “${err.suggestion}” instead</wa-button>`
        : nothing}</p>`
  }

  /** User-timing marks (read by the benchmarks): the first render of a node's fields and children. */
  private marked = new Set<string>()
  override updated() {
    const view = this.node.value
    if (!view) return
    const mark = (name: string) => {
      if (this.marked.has(name)) return
      this.marked.add(name)
      performance.mark(name)
    }
    // The tab says the node's name (never its path).
    const title = `${view.name} · Weft`
    if (document.title !== title) document.title = title
    mark(`weft:node-rendered:${view.path}`)
    const kids = this.childList.value
    if ((kids?.length ?? 0) > 0) mark(`weft:list-rendered:${view.path}`)
    if (kids === undefined) return
    shownFirstScreen()
    if (!this.allChildren && kids.length > FIRST_SCREEN_CHILDREN) {
      // After the paint of this frame (a timer queued from the next frame's callback).
      const path = this.path
      requestAnimationFrame(() => setTimeout(() => {
        if (this.path === path) this.allChildren = true
      }))
    }
  }

  override render() {
    const view = this.node.value
    const access = this.access.value
    const others = this.presence.value ?? []
    // Moved, or gone (deleted: a copy this device still holds is not shown as if it were there).
    const gone = access?.denied && (access.denied.code === 'moved' || access.denied.code === 'not_found') ? access.denied : null
    if (gone) return html`<weft-moved-notice .path=${this.path} .code=${gone.code} .message=${gone.message}></weft-moved-notice>`
    if (access?.denied && !view) {
      // [WEB26] Someone else's run (on a shared operation, say) is a run the reader cannot see, in words.
      // [WEB63] Never the path (a profile's is an account id): the name if this device knows it,
      // and a way on.
      const known = this.selfName.value[0]?.name
      const what = this.path.includes('/_Activity/') ? 'You cannot see this run' : `You cannot open ${known ? `“${known}”` : 'this page'}`
      return html`<p class="denied" role="alert" data-denied=${access.denied.code}>${what}: ${humanMessage(access.denied.code, access.denied.message)}</p>
        <p><a href=${HOME_HREF}>Go to your home page</a></p>`
    }
    if (!view) return html`<p aria-busy="true">Loading ${this.path}… (not stored on this device yet)</p>`
    const kids = this.childList.value ?? []
    const canUpdate = this.can('Update')
    const canCreate = this.can('Create')
    const canDelete = this.caps.value && !access?.denied ? this.caps.value.canDelete : this.can('Delete')
    // [WEB15] The role would allow it but the node type never lets a person delete (a profile):
    // not offered at all.
    const neverDeletable = !canDelete && this.can('Delete')
    return html`
      <header>
        <weft-node-title .view=${view} ?canRename=${canUpdate}></weft-node-title>
        <wa-badge class="type" variant="brand" appearance="filled" pill>${typeLabel(view.nodeType)}</wa-badge>
        ${view.nodeType === 'ContextualSubscription' ? html`<a class="status-link" href=${contextualHref(view.path)}>Consumers and dead letters</a>` : nothing}
        ${this.crumbs.value.length
          ? html`<nav class="crumbs" aria-label="Breadcrumb">${this.crumbs.value.map((c) => html`<a href=${nodeHref(c.path)} title=${c.name} aria-label=${c.name}>${c.name}</a><span aria-hidden="true"> › </span>`)}</nav>`
          : nothing}
        ${view.pending > 0
          ? html`<span class="pending" data-pending=${view.pending}>${view.pending} change${view.pending === 1 ? '' : 's'} saved on this device, not yet synced</span>`
          : nothing}
        ${view.localOnly ? html`<span class="pending">created on this device, not yet on the server</span>` : nothing}
      </header>
      <p class="presence" aria-live="polite" data-presence=${others.map((u) => u.name).join(',')}>${others.length ? html`Also here: ${others.map((u) => u.name).join(', ')}` : nothing}</p>
      ${access?.denied
        ? html`<p class="denied" role="alert" data-denied=${access.denied.code}>Access removed: ${humanMessage(access.denied.code, access.denied.message)} This device's copy is shown read-only.</p>`
        : nothing}
      ${!canUpdate && !access?.denied && !this.roleComing && view.nodeType !== 'ActivityLog' && view.nodeType !== 'Thread'
        ? html`<p class="readonly" data-readonly=${this.roleUnknown ? 'role-unknown' : this.accessLost ? 'access-lost' : 'role'}>${this.roleUnknown ? ROLE_UNKNOWN_LINE : this.accessLost ? ACCESS_LOST_LINE : readOnlyLine(canCreate)}</p>`
        : nothing}
      <weft-refused-list .path=${view.path}></weft-refused-list>
      ${this.pageError ? html`<p class="error" role="alert">${this.pageError}</p>` : nothing}
      ${view.nodeType === 'ActivityLog' ? this.renderRun(view) : view.nodeType === 'Thread' ? this.renderThread(view) : keyed(view.path, this.renderEditable(view, kids, canUpdate, canCreate))}
      ${(view.nodeType === 'ActivityLog' && !canDelete) || neverDeletable || (!canDelete && !canUpdate)
        ? nothing
        : html`<section><weft-node-actions .view=${view} ?canDelete=${canDelete} ?canManage=${this.can('ManageAccess')}></weft-node-actions></section>`}
    `
  }

  /**
   * A run's page: every field of an ActivityLog is the engine's or steers the run, so none is an
   * input here (DESIGN.md "Field rules"); the panel shows them as text and offers the controls
   * the caller may use. A run has no children a person creates.
   */
  private renderRun(view: NodeView) {
    need('weft-activity-panel')
    return html`<section aria-label="Run"><weft-activity-panel path=${view.path} full></weft-activity-panel></section>`
  }

  /**
   * [WEB30] A thread's page: its round state is the engine's and its cells are messages, so the
   * thread page shows them as a conversation (no field grid, no children list).
   */
  private renderThread(view: NodeView) {
    need('weft-thread-page')
    return html`<section aria-label="Thread"><weft-thread-page .path=${view.path}></weft-thread-page></section>`
  }

  /**
   * [WEB46] Keyed by the node (the caller): the same element shows every node page, and without a
   * key Lit would keep the "Add a field" and "New child node" inputs, with what was typed into
   * them on one node, for the next.
   */
  private renderEditable(view: NodeView, kids: IndexRow[], canUpdate: boolean, canCreate: boolean) {
    // [WEB30] Only what a person browses: the query counts them before its limit.
    const shown = kids
    const fields = html`<form class="fields" aria-label=${`Fields of ${view.name}`} @submit=${(e: Event) => e.preventDefault()}>
          ${repeat(view.fields.filter((k) => !EXTENSION_FIELDS[view.nodeType]?.includes(k)), (k) => k, (k) => this.renderField(view, k))}
        </form>`
    // [WEB54] Someone who may run a script but not change it (a Viewer, anyone on a built-in
    // operation) meets what it does and its Run first; how it is set up is one click away.
    const runFirst = view.nodeType === 'Code' && !canUpdate
    const description = typeof view.content.Description === 'string' ? view.content.Description : ''
    return html`
      ${runFirst && description ? html`<p class="description">${description}</p>` : nothing}
      ${runFirst ? this.renderExtension(view) : nothing}
      <section aria-label="Content" @field-error=${this.onFieldProblem} @field-commit=${this.onFieldCommit}>
        ${runFirst ? html`<details class="setup"><summary>How it is set up</summary>${fields}</details>` : fields}
        ${this.renderFieldError(view)}
        ${canUpdate
          ? html`<form class="inline" aria-label="Add a field" @submit=${this.onAddField}>
              <label>Field <input name="key" required /></label>
              <label @change=${(e: Event) => (this.addKind = (e.target as HTMLSelectElement).value as FieldKind)}>Kind ${kindSelect}</label>
              <label>Value ${valueInput(this.addKind)}</label>
              <wa-button type="submit" size="s" variant="neutral" appearance="outlined">Add field</wa-button>
            </form>`
          : nothing}
      </section>
      ${runFirst ? nothing : this.renderExtension(view)}
      ${kids.length === 0 && !canCreate ? nothing : this.renderChildren(view, shown, kids, canCreate)}
    `
  }

  /** [WEB54] Not shown to a reader who has none to read and may create none. */
  private renderChildren(view: NodeView, shown: IndexRow[], kids: IndexRow[], canCreate: boolean) {
    return html`
      <section aria-label="Children">
        <h2>Children</h2>
        ${shown.length ? nothing : html`<p class="reason-off">No children yet.</p>`}
        <ul class="children">
          ${repeat(this.allChildren ? shown : shown.slice(0, FIRST_SCREEN_CHILDREN), (k) => k.path, (k) => html`<li><a href=${nodeHref(k.path)}>${k.name}</a> <small>${typeLabel(k.nodeType)}</small>${k.pending ? html` <span class="pending" title="Saved on this device, not yet synced">•</span>` : nothing}</li>`)}
        </ul>
        ${kids.length >= CHILD_LIMIT ? html`<p>Showing the first ${CHILD_LIMIT}.</p>` : nothing}
        ${canCreate
          ? html`<form class="inline" aria-label="New child node" @submit=${this.onCreateChild} @input=${() => (this.createError = null)}>
              <label>Name <input name="name" required /></label>
              <label>Type ${typeSelect}</label>
              <wa-button type="submit" size="s" variant="brand">Create</wa-button>
            </form>`
          : nothing}
        ${this.renderCreateError()}
      </section>
    `
  }
}
/** The inputs of a "New child node" form. */
function createFields(form: HTMLFormElement): { name: HTMLInputElement; nodeType: HTMLSelectElement } | null {
  const name = form.elements.namedItem('name')
  const nodeType = form.elements.namedItem('nodeType')
  return name instanceof HTMLInputElement && nodeType instanceof HTMLSelectElement ? { name, nodeType } : null
}

/**
 * [WEB54] What a reader without Update is told, once, instead of disabled forms: controls the
 * role cannot use are not shown at all.
 */
function readOnlyLine(canCreate: boolean): string {
  return canCreate ? 'Your role can add nodes here but not change this one.' : 'View only: your role can read this node but not change it.'
}

/**
 * [WEB85] Said instead of "View only" while the role is not known (offline on a page this device
 * has no role for, here or above): nothing is offered that the server may well refuse.
 */
const ROLE_UNKNOWN_LINE = 'Your role here is not known yet: editing opens once connected.'

/** [WEB86] Said when this device last heard that the person's access here was removed (offline since). */
const ACCESS_LOST_LINE = 'You had no access here when last connected: this device\'s copy is shown read-only.'

/** What a node made here starts with: a Code node its template [WEB19], a thread the built-in agent [WEB37]. */
function initialContent(nodeType: string, parent: string): JsonObject {
  if (nodeType === 'Code') return newCodeContent() as JsonObject
  if (nodeType === 'Thread') return { Agent: { Kind: 'builtin' } }
  // [CTX38] A working definition to edit: documents made under this node, one reaction that notes on them.
  if (nodeType === 'ContextualSubscription') {
    return {
      Operation: 'triage',
      Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: parent },
      Reactions: { note: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
      Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 10 },
    }
  }
  return {}
}

/** Fields a node type's extension shows or edits itself (the Code page's editor owns Source): not repeated in the field grid. */
const EXTENSION_FIELDS: Readonly<Record<string, readonly string[]>> = {
  // LastActivityPath is the engine's pointer; the page shows that run as "Latest run".
  Code: ['Source', 'LastActivityPath'],
  // [WEB62] A profile's FullName is the person's one name: the heading shows it and its Rename
  // writes it (the server renames the node and its FullName together).
  User: ['FullName'],
  // [WEB62] The engine's identity of the compiled definition (a sha-256): nothing a person reads or edits.
  ContextualSubscription: ['Hash'],
  // The result panel shows the log, the progress bar, the output and the error.
  ActivityLog: ['Messages', 'Progress', 'ReturnValue', 'Error'],
}

customElements.define('weft-node-page', WeftNodePage)
