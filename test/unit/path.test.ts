import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import {
  isDescendantOrSelf,
  isInTrash,
  isReservedSegment,
  isWeftError,
  joinPath,
  lastSegment,
  MAX_PATH_LENGTH,
  MAX_SEGMENTS,
  parentPath,
  parseNodePath,
  parseUserId,
  pathSegments,
  selfAndAncestors,
  slug,
  topLevel,
  tryParseNodePath,
  type NodePath,
} from '../../shared/index.js'

function expectInvalidPath(raw: unknown): void {
  try {
    parseNodePath(raw)
  } catch (e) {
    expect(isWeftError(e) && e.code).toBe('invalid_path')
    return
  }
  expect.fail(`expected ${JSON.stringify(raw)} to be rejected`)
}

const p = (s: string): NodePath => parseNodePath(s)
const segmentChar = fc.constantFrom(...'abcXYZ019_.@-'.split(''))
const segment = fc
  .string({ unit: segmentChar, minLength: 1, maxLength: 8 })
  .filter((s) => s !== '.' && s !== '..')

describe('parseNodePath', () => {
  it.each([
    'a',
    'Admin',
    'Admin/EventSubscription/abc-123',
    'space/_Access/user_Access',
    'carol@example.com',
    'a.b-c_d@e',
    '...',
    '.hidden',
    'A/b/C/d',
  ])('accepts %j', (raw) => {
    expect(parseNodePath(raw)).toBe(raw)
  })

  it('tolerates a leading and a trailing slash (URLs)', () => {
    expect(parseNodePath('/a/b')).toBe('a/b')
    expect(parseNodePath('a/b/')).toBe('a/b')
    expect(parseNodePath('/a/')).toBe('a')
  })

  it.each([
    ['empty', ''],
    ['only a slash', '/'],
    ['empty segment', 'a//b'],
    ['dot-dot', '..'],
    ['dot-dot inside', 'a/../b'],
    ['dot', 'a/./b'],
    ['space', 'a b'],
    ['leading space', ' a'],
    ['tab', 'a\tb'],
    ['newline', 'a\n'],
    ['backslash', 'a\\b'],
    ['percent', 'a%2Fb'],
    ['query', 'a?b'],
    ['unicode letter', 'zoë'],
    ['cjk', '日本'],
    ['emoji', 'a😀'],
    ['fullwidth slash', 'a／b'],
    ['NUL', 'a\u0000b'],
  ])('rejects %s', (_name, raw) => {
    expectInvalidPath(raw)
  })

  it.each([null, undefined, 42, {}, ['a'], new String('a')])('rejects a non-string %j', (raw) => {
    expectInvalidPath(raw)
  })

  it(`limits length (${MAX_PATH_LENGTH}) and depth (${MAX_SEGMENTS})`, () => {
    expect(parseNodePath('a'.repeat(MAX_PATH_LENGTH))).toHaveLength(MAX_PATH_LENGTH)
    expectInvalidPath('a'.repeat(MAX_PATH_LENGTH + 1))
    const deepest = Array.from({ length: MAX_SEGMENTS }, () => 'a').join('/')
    expect(parseNodePath(deepest)).toBe(deepest)
    expectInvalidPath(deepest + '/a')
  })

  it('round-trips every valid path and is idempotent (property)', () => {
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: MAX_SEGMENTS }), (segments) => {
        const raw = segments.join('/')
        const path = parseNodePath(raw)
        expect(path).toBe(raw)
        expect(parseNodePath(path)).toBe(path)
        expect(parseNodePath('/' + raw + '/')).toBe(path)
        expect(pathSegments(path)).toEqual(segments)
      }),
    )
  })

  it('accepts nothing outside [A-Za-z0-9_.@-] (property)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 20 }), (raw) => {
        const parsed = tryParseNodePath(raw)
        if (parsed !== null) expect(parsed).toMatch(/^[A-Za-z0-9_.@-]+(\/[A-Za-z0-9_.@-]+)*$/)
      }),
    )
  })

  it('agrees with the plain definition on strings of slashes, dots and letters (property)', () => {
    // The definition, spelled out slowly: trim the slashes at both ends, then every segment is
    // non-empty, not . or .., made of [A-Za-z0-9_.@-]; limits on length and depth.
    const reference = (raw: string): string | null => {
      const trimmed = raw.replace(/^\/+/, '').replace(/\/+$/, '')
      const segments = trimmed.split('/')
      const ok = trimmed.length > 0 && trimmed.length <= MAX_PATH_LENGTH && segments.length <= MAX_SEGMENTS
        && segments.every((s) => /^[A-Za-z0-9_.@-]+$/.test(s) && s !== '.' && s !== '..')
      return ok ? trimmed : null
    }
    const char = fc.constantFrom('a', 'b', '.', '/', '@', ' ')
    fc.assert(
      fc.property(fc.string({ unit: char, minLength: 0, maxLength: 40 }), (raw) => {
        expect(tryParseNodePath(raw)).toBe(reference(raw))
      }),
      { numRuns: 2000 },
    )
    expect(tryParseNodePath(Array.from({ length: MAX_SEGMENTS + 1 }, () => 'a').join('/'))).toBeNull()
  })

  it('tryParseNodePath returns null instead of throwing', () => {
    expect(tryParseNodePath('a b')).toBeNull()
    expect(tryParseNodePath('a/b')).toBe('a/b')
  })
})

describe('path helpers', () => {
  it('parent, last segment, top level', () => {
    expect(parentPath(p('a/b/c'))).toBe('a/b')
    expect(parentPath(p('a'))).toBeNull()
    expect(lastSegment(p('a/b/c'))).toBe('c')
    expect(lastSegment(p('a'))).toBe('a')
    expect(topLevel(p('a/b/c'))).toBe('a')
    expect(topLevel(p('a'))).toBe('a')
  })

  it('ancestors: self first, then closest first', () => {
    expect(selfAndAncestors(p('a/b/c'))).toEqual(['a/b/c', 'a/b', 'a'])
    expect(selfAndAncestors(p('a'))).toEqual(['a'])
  })

  it('descendants: by segment, not by prefix', () => {
    expect(isDescendantOrSelf(p('a/b'), p('a'))).toBe(true)
    expect(isDescendantOrSelf(p('a'), p('a'))).toBe(true)
    expect(isDescendantOrSelf(p('ab'), p('a'))).toBe(false)
    expect(isDescendantOrSelf(p('a'), p('a/b'))).toBe(false)
  })

  it('joinPath validates what it joins', () => {
    expect(joinPath(p('a'), 'b', 'c')).toBe('a/b/c')
    expect(() => joinPath(p('a'), '..')).toThrow()
    expect(() => joinPath(p('a'), 'b c')).toThrow()
  })

  it('reserved segments start with _', () => {
    expect(isReservedSegment('_Access')).toBe(true)
    expect(isReservedSegment('Access_')).toBe(false)
  })

  it('a user id is one valid segment', () => {
    expect(parseUserId('carol')).toBe('carol')
    expect(() => parseUserId('a/b')).toThrow()
    expect(() => parseUserId('a b')).toThrow()
  })
})

describe('slug (invite contract: trim, lower-case, every non letter/digit char becomes _)', () => {
  it.each([
    [' Carol@Example.com ', 'carol_example_com'],
    ['Bob', 'bob'],
    ['a.b-c_d', 'a_b_c_d'],
    ['  ', ''],
    ['A  B', 'a__b'],
    ['x+tag@mail.io', 'x_tag_mail_io'],
    ['Zoë Ünal', 'zoë_ünal'],
    ['ABC123', 'abc123'],
  ])('slug(%j) = %j', (input, expected) => {
    expect(slug(input)).toBe(expected)
  })

  it('output has only lower-case letters, digits and _, and is idempotent (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (s) => {
        const out = slug(s)
        expect(out).toMatch(/^[\p{L}\p{N}_]*$/u)
        expect(slug(out)).toBe(out)
      }),
    )
  })

  it('an ASCII input slugs to a valid path segment (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 30 }).filter((s) => s.trim().length > 0), (s) => {
        expect(tryParseNodePath(slug(s))).not.toBeNull()
      }),
    )
  })
})

describe('isInTrash', () => {
  it('[MOVE5] is true for {top}/_Trash and below only', () => {
    expect(isInTrash('space/_Trash')).toBe(true)
    expect(isInTrash('space/_Trash/ab12/doc')).toBe(true)
    expect(isInTrash('space/_TrashX/doc')).toBe(false)
    expect(isInTrash('space/doc/_Trash/x')).toBe(false)
    expect(isInTrash('_Trash/x')).toBe(false)
    expect(isInTrash('space')).toBe(false)
  })
})
