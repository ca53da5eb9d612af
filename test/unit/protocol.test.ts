import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as encoding from 'lib0/encoding'
import { decodeMuxFrame, encodeMuxFrame, isWeftError, MuxType, type MuxFrame } from '../../shared/index.js'

const path = fc.oneof(fc.constant(''), fc.string({ maxLength: 40 }), fc.constant('Admin/_Access/ü😀'))
const uint = fc.oneof(fc.nat({ max: 300 }), fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER))
const bytes = fc.uint8Array({ maxLength: 64 })
const text = fc.string({ maxLength: 40, unit: 'grapheme' })

const frameArb: fc.Arbitrary<MuxFrame> = fc.oneof(
  fc.record({ type: fc.constant(MuxType.Join), path }),
  fc.record({ type: fc.constant(MuxType.Leave), path }),
  fc.record({ type: fc.constant(MuxType.Sync), path, message: bytes }),
  fc.record({ type: fc.constant(MuxType.Denied), path, closeCode: uint, code: text, message: text }),
  fc.record({ type: fc.constant(MuxType.Update), path, seq: uint, update: bytes }),
  fc.record({ type: fc.constant(MuxType.Ack), path, seq: uint, version: uint }),
  fc.record({ type: fc.constant(MuxType.Refused), path, seq: uint, code: text, message: text }),
  fc.record({ type: fc.constant(MuxType.Error), path, code: text, message: text }),
  fc.record({ type: fc.constant(MuxType.Joined), path, permissions: uint }),
  fc.record({ type: fc.constant(MuxType.Changed), path, version: uint }),
)

function expectProtocolError(data: Uint8Array): void {
  try {
    decodeMuxFrame(data)
  } catch (e) {
    expect(isWeftError(e) && e.code).toBe('protocol_error')
    return
  }
  expect.fail(`expected [${[...data].join(',')}] to be rejected`)
}

/** Compares decoded byte fields by content (decoding may return views or copies). */
function normalise(frame: MuxFrame): unknown {
  return JSON.parse(JSON.stringify(frame, (_k, v: unknown) => (v instanceof Uint8Array ? [...v] : v)))
}

describe('mux frames', () => {
  it('every MuxType is covered by the round-trip arbitrary', () => {
    const seen = new Set<number>()
    fc.assert(fc.property(frameArb, (f) => void seen.add(f.type)), { numRuns: 500 })
    expect([...seen].sort((a, b) => a - b)).toEqual(Object.values(MuxType).sort((a, b) => a - b))
  })

  it('decode(encode(frame)) is the frame, for every MuxType (property)', () => {
    fc.assert(
      fc.property(frameArb, (frame) => {
        const decoded = decodeMuxFrame(encodeMuxFrame(frame))
        expect(normalise(decoded)).toEqual(normalise(frame))
        expect(Object.keys(decoded).sort()).toEqual(Object.keys(frame).sort())
      }),
      { numRuns: 1000 },
    )
  })

  it('MuxType numbers are part of the wire protocol', () => {
    expect(MuxType).toEqual({ Join: 0, Leave: 1, Sync: 2, Denied: 3, Update: 4, Ack: 5, Refused: 6, Error: 7, Joined: 8, Changed: 9 })
  })

  it('trailing bytes are rejected (property)', () => {
    fc.assert(
      fc.property(frameArb, fc.uint8Array({ minLength: 1, maxLength: 8 }), (frame, extra) => {
        const encoded = encodeMuxFrame(frame)
        const data = new Uint8Array(encoded.length + extra.length)
        data.set(encoded)
        data.set(extra, encoded.length)
        expectProtocolError(data)
      }),
    )
  })

  it('truncated frames are rejected (property)', () => {
    fc.assert(
      fc.property(frameArb, fc.nat(), (frame, cut) => {
        const encoded = encodeMuxFrame(frame)
        fc.pre(encoded.length > 0)
        expectProtocolError(encoded.subarray(0, cut % encoded.length))
      }),
    )
  })

  it('[IN2] garbage: empty input, unknown types, bad lengths', () => {
    expectProtocolError(new Uint8Array([]))
    expectProtocolError(new Uint8Array([9, 0]))
    expectProtocolError(new Uint8Array([0x7f, 0]))
    expectProtocolError(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))
    expectProtocolError(new Uint8Array([MuxType.Join, 5, 97])) // path claims 5 bytes, has 1
    expectProtocolError(new Uint8Array([MuxType.Sync, 0, 10, 1, 2])) // message claims 10 bytes
    const e = encoding.createEncoder()
    encoding.writeVarUint(e, MuxType.Ack)
    encoding.writeVarString(e, 'a')
    encoding.writeVarUint(e, 1) // seq, then no version
    expectProtocolError(encoding.toUint8Array(e))
  })

  it('[IN2] random bytes either decode or throw protocol_error, never anything else (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (data) => {
        try {
          decodeMuxFrame(data)
        } catch (err) {
          expect(isWeftError(err) && err.code).toBe('protocol_error')
        }
      }),
      { numRuns: 2000 },
    )
  })
})
