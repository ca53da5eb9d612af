import type { ReactiveController, ReactiveControllerHost } from 'lit'
import * as Y from 'yjs'
import type { Subscription } from 'rxjs'
import { simpleDiffString } from 'lib0/diff'
import { Annotation, Compartment, EditorState, Prec, type Extension } from '@codemirror/state'
import { EditorView, keymap } from '@codemirror/view'
import { yCollab, ySyncAnnotation, ySyncFacet, yUndoManagerKeymap } from 'y-codemirror.next'
import { app } from '../app-context.js'
import type { NodeReplica, TextEditorBinding } from '../sync/index.js'
import { humanError } from './error-text.js'

/** Which field of which node the editor shows, and whether the person may change it [WEB8]. */
export interface YTextEditorTarget {
  path: string
  key: string
  readonly: boolean
}

/** A change the controller made itself (content of a new Y.Text or plain string): not the person's edit. */
const fromReplica = Annotation.define<true>()

/**
 * Binds a CodeMirror view to a node's text field (docs/decisions/0008-text-fields.md): while the
 * field is a Y.Text, y-codemirror.next's yCollab (ySync, remote carets of the room's awareness,
 * an undo manager of one's own edits) sits in a compartment, and its transaction origins are
 * registered with the replica (`bindTextEditor`), so every keystroke and every undo is stored
 * and sent like a local patch. When the doc is swapped (refusal rebuild, reload from another
 * tab) or the plain string becomes a Y.Text, the compartment is rebuilt on the new Y.Text, the
 * editor's content diffed to it first. A node stored before text fields were Y.Text holds a
 * plain string until its 'to-text' migration (the first replica that may write converts it):
 * meanwhile each edit is a merge patch (the first one makes it a Y.Text, and the editor
 * follows).
 *
 * Keystrokes that would leave the field over the server's change limit are refused before they
 * reach the doc, with the reason in `error` [WEB6].
 */
export class YTextEditorController implements ReactiveController {
  /** What to show under the editor (a refused keystroke, a failed save); '' when all is well. */
  error = ''
  private view: EditorView | null = null
  private readonly collab = new Compartment()
  private replica: NodeReplica | null = null
  /** The path `replica` was acquired for (released on disconnect or a path change). */
  private held: string | null = null
  private ready = false
  private sub: Subscription | null = null
  /** The Y.Text the compartment holds now; 'plain' while the field is a plain string. */
  private bound: { text: Y.Text; readonly: boolean; binding: TextEditorBinding; undo: Y.UndoManager | null } | 'plain' | null = null
  /** Plain-string patches not applied yet: the editor then shows more than the doc, and must not be reset to it. */
  private plainWrites = 0

  /** What the editor is bound to now (shown as data-binding, for tests and debugging). */
  get binding(): 'text' | 'plain' | 'none' {
    const bound = this.bound
    return bound === 'plain' ? 'plain' : bound ? 'text' : 'none'
  }

  constructor(
    private readonly host: ReactiveControllerHost,
    private readonly target: () => YTextEditorTarget,
  ) {
    host.addController(this)
  }

  /** Goes into the editor's extensions once: the binding's compartment and the size check. */
  get extension(): Extension {
    return [this.collab.of([]), EditorState.changeFilter.of((tr) => this.admits(tr.newDoc, !!(tr.annotation(ySyncAnnotation) || tr.annotation(fromReplica))))]
  }

  /** The editor view exists (it needs the host's DOM): bind it. */
  attach(view: EditorView | null): void {
    if (this.view === view) return
    this.unbindText()
    this.view = view
    this.follow()
  }

  hostConnected(): void {
    this.acquire()
  }

  hostDisconnected(): void {
    this.release()
  }

  /** The host's path or role may have changed. */
  hostUpdated(): void {
    const { path } = this.target()
    if (path !== this.held) {
      this.release()
      this.acquire()
    } else this.follow()
  }

  private acquire(): void {
    const { path } = this.target()
    if (!path || this.replica) return
    const replica = app().client.acquire(path)
    this.replica = replica
    this.held = path
    replica.warmPolicy()
    this.sub = replica.changed$.subscribe(() => this.follow())
    void replica.ready.then(() => {
      if (this.replica !== replica) return
      this.ready = true
      this.follow()
    })
  }

  private release(): void {
    this.unbindText()
    this.sub?.unsubscribe()
    this.sub = null
    if (this.held) app().client.release(this.held)
    this.held = null
    this.replica = null
    this.ready = false
  }

  /** Puts the editor on what the field is now: its current Y.Text, or its plain string. */
  private follow(): void {
    const { view, replica } = this
    if (!view || !replica || !this.ready) return
    const { key, readonly } = this.target()
    const text = replica.textOf(key)
    const bound = this.bound
    if (text && bound && bound !== 'plain' && bound.text === text && bound.readonly === readonly) return
    if (!text) {
      if (bound !== 'plain') {
        this.unbindText()
        view.dispatch({ effects: this.collab.reconfigure(this.plainEditing(replica)) })
        this.bound = 'plain'
        this.host.requestUpdate()
      }
      const value = replica.content[key]
      if (typeof value === 'string' && this.plainWrites === 0) this.show(value)
      return
    }
    this.unbindText()
    // Two steps: a ViewPlugin present before and after one reconfigure keeps its instance, and
    // ySync's instance would keep writing into the old Y.Text. Emptying the compartment
    // destroys them; the content is made the new text's in the same step (no ySync to echo it).
    view.dispatch({ changes: diff(view.state.doc.toString(), text.toString()), effects: this.collab.reconfigure([]), annotations: fromReplica.of(true) })
    // Only one's own edits are undone: the undo manager tracks the sync plugin's origin
    // (yUndoManager adds it) and its own (redo), nothing else. A role that cannot write gets
    // none (an undo would write).
    const undo = readonly ? null : new Y.UndoManager(text, { trackedOrigins: new Set() })
    view.dispatch({
      effects: this.collab.reconfigure([yCollab(text, replica.awareness, { undoManager: undo ?? false }), undo ? Prec.high(keymap.of(yUndoManagerKeymap)) : []]),
    })
    // The plugins write with the facet's YSyncConfig; undo and redo with the undo manager.
    const origin = view.state.facet(ySyncFacet)
    const binding = replica.bindTextEditor(key, text, undo ? [origin, undo] : [origin], (e) => this.setError(`Not saved: ${humanError(e)}`))
    this.bound = { text, readonly, binding, undo }
    this.host.requestUpdate()
  }

  private unbindText(): void {
    const bound = this.bound
    this.bound = null
    if (!bound) return
    if (bound !== 'plain') {
      bound.binding.dispose()
      bound.undo?.destroy()
    }
    if (this.view) this.view.dispatch({ effects: this.collab.reconfigure([]) })
    // The caret shown to others belonged to that text.
    const awareness = this.replica?.awareness
    if (awareness?.getLocalState()?.cursor) awareness.setLocalStateField('cursor', null)
  }

  /** Before the field is a Y.Text: each edit is a merge patch of the whole value, read when it applies. */
  private plainEditing(replica: NodeReplica): Extension {
    return EditorView.updateListener.of((u) => {
      if (!u.docChanged || u.transactions.every((tr) => tr.annotation(fromReplica))) return
      const { key } = this.target()
      const view = u.view
      this.plainWrites++
      replica
        .patch(() => (this.replica === replica && this.view === view ? { [key]: view.state.doc.toString() } : {}))
        .then(() => this.setError(''))
        .catch((e: unknown) => this.setError(`Not saved: ${humanError(e)}`))
        .finally(() => {
          this.plainWrites--
          this.follow()
        })
    })
  }

  /** The editor shows `value` (the selection moves with the diff). */
  private show(value: string): void {
    const view = this.view
    if (!view) return
    const changes = diff(view.state.doc.toString(), value)
    if (changes.from !== changes.to || changes.insert) view.dispatch({ changes, annotations: fromReplica.of(true) })
  }

  /** The change filter: a person's edit that would make the field too large for the server is refused. */
  private admits(next: { readonly length: number; toString(): string }, notByThePerson: boolean): boolean {
    if (notByThePerson || !this.replica) return true
    const refusal = this.replica.textRefusal(this.target().key, next)
    if (refusal) {
      this.setError(humanError(refusal))
      return false
    }
    if (this.error) this.setError('')
    return true
  }

  private setError(message: string): void {
    if (this.error === message) return
    this.error = message
    this.host.requestUpdate()
  }
}

/** The one replacement that turns `from` into `to` (common prefix and suffix kept, surrogate-safe). */
function diff(from: string, to: string): { from: number; to: number; insert: string } {
  const d = simpleDiffString(from, to)
  return { from: d.index, to: d.index + d.remove, insert: d.insert }
}
