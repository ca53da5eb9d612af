import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import { Awareness } from 'y-protocols/awareness'
import { knownNodeTypes, nodeTypeDef, fieldRule } from '../../shared/node-types.js'
import { renderMarkdown } from '../../web/components/markdown-render.js'
import { REQUIRED_FIELDS, mayWriteField, writeRuleOf } from '../../web/components/field-rules.js'
import { fieldLabel, typeLabel } from '../../web/components/labels.js'
import { isIsoDate, kindOf, parseAs } from '../../web/components/field-kinds.js'
import { publishSelection, remoteSelectionsIn, selectionRuns } from '../../web/components/remote-carets.js'
import { errorLocation, matchingLines, splitHits } from '../../web/components/run-log-text.js'
import { scriptLocation } from '../../sync-server/engines/activities/script-location.js'

/** Tags markdown-it writes for CommonMark (no raw HTML passes with `html: false`). */
const SAFE_TAGS = new Set(['p', 'em', 'strong', 'code', 'pre', 'a', 'img', 'ul', 'ol', 'li', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'hr', 'br', 's', 'table', 'thead', 'tbody', 'tr', 'th', 'td'])

/** Every tag and every URL-bearing attribute of rendered HTML is one we allow. */
function assertSafe(out: string): void {
  for (const m of out.matchAll(/<\/?([a-zA-Z][a-zA-Z0-9]*)([^>]*)>/g)) {
    const [, tag, attrs] = m
    expect(SAFE_TAGS.has(tag!.toLowerCase()), `tag <${tag}> in ${out}`).toBe(true)
    // No event handler attribute, no style.
    expect(attrs, out).not.toMatch(/\s(on[a-z]+|style)\s*=/i)
    for (const u of attrs!.matchAll(/\s(?:href|src)="([^"]*)"/g)) {
      // What a browser would follow: entities decoded, control characters and spaces dropped.
      const decoded = u[1]!.replace(/&#x([0-9a-f]+);/gi, (_m, h: string) => String.fromCodePoint(parseInt(h, 16))).replace(/&#(\d+);/g, (_m, d: string) => String.fromCodePoint(Number(d))).replace(/&amp;/g, '&')
      // eslint-disable-next-line no-control-regex
      const url = decoded.replace(/[\u0000-\u0020]/g, '')
      expect(/^[a-z][a-z0-9+.-]*:/i.test(url) ? /^(https?|mailto):/i.test(url) : true, `url ${u[1]} in ${out}`).toBe(true)
    }
  }
}

describe('[WEB22] the Markdown preview renders what people typed as text, never markup', () => {
  it('drops raw HTML, event handlers and script links', () => {
    const out = renderMarkdown(['<img src=x onerror=alert(1)>', '[a](javascript:alert(1))', '[b](JaVaScRiPt:alert(1))', '[c](jav&#x61;script:alert(1))', '[d](java\tscript:x)', '![e](data:text/html;base64,PHNjcmlwdD4=)', '[f](vbscript:msgbox)', '<script>alert(1)</script>', '<a href="javascript:x">g</a>', '[h](<javascript:alert(1)>)', '[i]: javascript:alert(1)\n\n[i]'].join('\n\n'))
    assertSafe(out)
    expect(out).not.toMatch(/<img|<script|href="javascript|href="vbscript|src="data/i)
    expect(out).toContain('&lt;img src=x onerror=alert(1)&gt;')
  })

  it('keeps ordinary Markdown: emphasis, lists, code, https and mailto links (opening beside the app)', () => {
    const out = renderMarkdown('# T\n\n**b** *i* `c`\n\n- one\n- two\n\n[site](https://example.com) <mailto:a@b.c> [rel](other/page)')
    expect(out).toContain('<h1>T</h1>')
    expect(out).toContain('<strong>b</strong>')
    expect(out).toContain('<li>two</li>')
    expect(out).toContain('href="https://example.com" target="_blank" rel="noopener noreferrer nofollow"')
    expect(out).toContain('href="mailto:a@b.c"')
    expect(out).toContain('href="other/page"')
  })

  it('holds for any mix of Markdown, HTML and hostile URLs (seeded)', () => {
    const piece = fc.constantFrom('<img src=x onerror=alert(1)>', '<svg onload=alert(1)>', '<a href="javascript:x">', 'javascript:alert(1)', 'JAVASCRIPT:', 'java\tscript:', '&#106;avascript:', 'data:text/html,', 'vbscript:', '[', ']', '(', ')', '<', '>', '!', '"', "'", '`', '*', '_', '\n', ' ', 'https://ok.example/', 'mailto:a@b.c', 'onerror=', 'style=', '&', '#', ':', '\\', 'x')
    fc.assert(fc.property(fc.array(piece, { maxLength: 40 }).map((a) => a.join('')), (src) => assertSafe(renderMarkdown(src))), { seed: 1616, numRuns: 2000 })
  })
})

describe('[WEB23] the browser\'s field rules are the server\'s', () => {
  it('every built-in type and field has the rule shared/node-types.ts enforces', () => {
    for (const type of knownNodeTypes()) {
      const def = nodeTypeDef(type)
      for (const field of [...Object.keys(def.fields), 'AnyOtherField', 'constructor']) expect(writeRuleOf(type, field), `${type}.${field}`).toBe(fieldRule(type, field))
    }
    expect(writeRuleOf('SomeNewType', 'X')).toBe('Update')
  })

  it('[WEB62] the browser\'s required fields are the schemas\' (no ✕ offered that the server refuses as invalid content)', () => {
    for (const type of knownNodeTypes()) {
      const shape = (nodeTypeDef(type).content as unknown as { shape?: Record<string, { safeParse(v: unknown): { success: boolean } }> }).shape ?? {}
      const required = Object.keys(shape).filter((k) => !shape[k]!.safeParse(undefined).success)
      expect(REQUIRED_FIELDS[type] ?? [], type).toEqual(required)
    }
  })

  it('[WEB61] types and field keys read as words, one function each', () => {
    expect(typeLabel('ContextualSubscription')).toBe('Contextual subscription')
    expect(typeLabel('ActivityLog')).toBe('Run')
    expect(typeLabel('Document')).toBe('Document')
    expect(fieldLabel('FullName')).toBe('Full name')
    expect(fieldLabel('PinnedPaths')).toBe('Pinned paths')
    expect(fieldLabel('HTMLBody')).toBe('HTML body')
    expect(fieldLabel('LeaseSeconds2')).toBe('Lease seconds 2')
    expect(fieldLabel('my notes')).toBe('my notes')
    expect(fieldLabel('Title')).toBe('Title')
    expect(fieldLabel('email')).toBe('email')
  })

  it('a system field is never writable; an admin field needs ManageAccess; the owner may steer a run', () => {
    const editor = new Set(['Read', 'Update', 'Create'] as const)
    expect(mayWriteField('User', 'Email', new Set(['Read', 'Update', 'Delete', 'ManageAccess'] as const))).toBe(false)
    expect(mayWriteField('User', 'FullName', editor)).toBe(true)
    expect(mayWriteField('Membership', 'Role', editor)).toBe(false)
    expect(mayWriteField('ActivityLog', 'RequestedStatus', new Set(['Read'] as const), true)).toBe(true)
    expect(mayWriteField('ActivityLog', 'RequestedStatus', new Set(['Read'] as const), false)).toBe(false)
    expect(mayWriteField('Document', 'Title', new Set(['Read'] as const))).toBe(false)
  })
})

describe('[WEB20] a field\'s kind comes from its value; adding one parses the typed value to that kind', () => {
  it('kindOf', () => {
    expect(kindOf(true, false)).toBe('checkbox')
    expect(kindOf(3, false)).toBe('number')
    expect(kindOf('2026-02-28', false)).toBe('date')
    expect(kindOf('2026-02-30x', false)).toBe('text')
    expect(kindOf('a\nb', true)).toBe('longtext')
    expect(kindOf({ $ref: 'A/B' }, false)).toBe('link')
    expect(kindOf(['a', 1, true], false)).toBe('list')
    expect(kindOf([{ a: 1 }], false)).toBe('object')
    expect(kindOf({ a: 1 }, false)).toBe('object')
    expect(kindOf(null, false)).toBe('object')
  })

  it('parseAs', () => {
    expect(parseAs('date', '2027-01-15')).toEqual({ ok: true, value: '2027-01-15' })
    expect(parseAs('date', '15/01/2027').ok).toBe(false)
    expect(isIsoDate('2027-13-01')).toBe(false)
    expect(parseAs('longtext', 'Short')).toEqual({ ok: true, value: 'Short\n' })
    expect(parseAs('longtext', 'Two\nlines\n')).toEqual({ ok: true, value: 'Two\nlines\n' })
    const bad = parseAs('object', '{"a": ')
    expect(bad.ok).toBe(false)
    if (!bad.ok) expect(bad.message).toMatch(/^Not valid JSON: /)
    expect(parseAs('object', '[1, 2]')).toEqual({ ok: true, value: [1, 2] })
    // [WEB93] JSON holds finite numbers only: 1e999 is Infinity, refused in words.
    expect(parseAs('number', '1e3')).toEqual({ ok: true, value: 1000 })
    expect(parseAs('number', '1e999')).toEqual({ ok: false, message: '“1e999” is not a finite number (too large to store); nothing was saved.' })
    expect(parseAs('number', 'three')).toEqual({ ok: false, message: '“three” is not a number.' })
  })
})

describe('[WEB21] carets of other people in a text field, in y-codemirror.next\'s awareness format', () => {
  function pair() {
    const a = new Y.Doc()
    const b = new Y.Doc()
    a.getMap('content').set('Title', new Y.Text('Launch plan'))
    a.getMap('content').set('Other', new Y.Text('elsewhere'))
    Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
    // Awareness lives on its own doc in the app (NodeReplica): positions resolve against the node's doc.
    const aw = { a: new Awareness(new Y.Doc()), b: new Awareness(new Y.Doc()) }
    aw.a.setLocalState({ user: { name: 'Ann', color: '#1f6fd1', colorLight: '#1f6fd133' } })
    aw.b.setLocalState({ user: { name: 'Vic', color: '#c2410c', colorLight: '#c2410c33' } })
    const relay = () => {
      // What the room relays: b learns a's state as JSON, as over the wire.
      const state = JSON.parse(JSON.stringify(aw.a.getLocalState())) as Record<string, unknown>
      aw.b.states.set(aw.a.clientID, state)
    }
    return { a, b, aw, relay }
  }

  it('a selection published on one replica is read on the other, in that text only, and follows edits', () => {
    const { a, b, aw, relay } = pair()
    const titleA = a.getMap('content').get('Title') as Y.Text
    const titleB = b.getMap('content').get('Title') as Y.Text
    publishSelection(aw.a, titleA, { anchor: 0, head: 6 })
    relay()
    expect(remoteSelectionsIn(titleB, aw.b)).toEqual([{ clientId: aw.a.clientID, name: 'Ann', color: '#1f6fd1', colorLight: '#1f6fd133', anchor: 0, head: 6 }])
    expect(remoteSelectionsIn(b.getMap('content').get('Other') as Y.Text, aw.b)).toEqual([])
    // Text typed before the selection on b moves it (relative positions).
    titleB.insert(0, 'The ')
    expect(remoteSelectionsIn(titleB, aw.b)[0]).toMatchObject({ anchor: 4, head: 10 })
    // Leaving the field clears it; a malformed peer state shows nothing and does not throw.
    publishSelection(aw.a, titleA, null)
    relay()
    expect(remoteSelectionsIn(titleB, aw.b)).toEqual([])
    aw.b.states.set(99, { cursor: { anchor: { bogus: true }, head: 3 }, user: {} })
    expect(remoteSelectionsIn(titleB, aw.b)).toEqual([])
  })

  it('selectionRuns cuts the text by the selections, merging neighbours', () => {
    const sel = (anchor: number, head: number, colorLight: string) => ({ clientId: 1, name: 'x', color: '#000', colorLight, anchor, head })
    expect(selectionRuns(10, [])).toEqual([{ from: 0, to: 10, background: '' }])
    expect(selectionRuns(10, [sel(6, 2, 'A')])).toEqual([
      { from: 0, to: 2, background: '' },
      { from: 2, to: 6, background: 'A' },
      { from: 6, to: 10, background: '' },
    ])
    expect(selectionRuns(5, [sel(3, 3, 'A'), sel(0, 99, 'B')])).toEqual([{ from: 0, to: 5, background: 'B' }])
  })
})

describe('[WEB24][WEB25] the run log\'s search and the thrown error\'s place', () => {
  const lines = ['tick 1', 'tick 2', 'Tick 10', 'done'].map((Text) => ({ Level: 'Info', Text, At: '2026-12-03T14:03:07Z' }))
  it('search', () => {
    expect(matchingLines(lines, 'tick 1')).toEqual([1, 3])
    expect(matchingLines(lines, '  ')).toEqual([1, 2, 3, 4])
    expect(splitHits('Tick 10 tick 1', 'tick 1')).toEqual([
      { text: 'Tick 1', hit: true },
      { text: '0 ', hit: false },
      { text: 'tick 1', hit: true },
    ])
  })

  it('errorLocation reads what the engine writes; scriptLocation maps the first frame of the script to its line', () => {
    expect(errorLocation("TypeError: cannot read property 'foo' of null (line 3, column 7)")).toEqual({ message: "TypeError: cannot read property 'foo' of null", line: 3, column: 7 })
    expect(errorLocation('Error: boom')).toBeNull()
    expect(scriptLocation('    at helper (bootstrap.js:9:1)\n    at __weft_run (script.js:4:7)\n    at <eval> (script.js:6:11)\n', 4)).toEqual({ line: 3, column: 7 })
    expect(scriptLocation('    at <eval> (script.js:9:1)\n', 4)).toBeNull()
    expect(scriptLocation(undefined, 4)).toBeNull()
    expect(scriptLocation('    at script.js:3:1\n', 4)).toEqual({ line: 2, column: 1 })
    expect(scriptLocation('    at myscript.js:3:1\n', 4)).toBeNull()
  })
})
