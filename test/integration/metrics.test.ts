import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  errorCode,
  expectStatus,
  grantRole,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
  type TestServer,
  type TestUser,
} from '../helpers/index.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

/** Metrics (issue 20, item 5): GET /metrics behind METRICS_TOKEN, scraped from real servers. */
const TOKEN = 'metrics-token-for-tests-0123456789'

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/**
 * A strict reader of the Prometheus text exposition format (0.0.4): every line is `# HELP name
 * text`, `# TYPE name type`, or `name{label="value",...} value [timestamp]`; a sample's family
 * has its TYPE declared before it, once. Throws on any other line.
 */
function parseExposition(text: string): Sample[] {
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
  const VALUE = '(?:[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?|[+-]?Inf|[Nn][Aa][Nn])'
  const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`
  const sample = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*,?)?\\})? (${VALUE})(?: -?\\d+)?$`)
  const help = new RegExp(`^# HELP (${NAME}) .*$`)
  const type = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)
  const types = new Map<string, string>()
  const out: Sample[] = []
  expect(text.endsWith('\n')).toBe(true)
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '' || help.test(line)) continue
    const t = type.exec(line)
    if (t) {
      if (types.has(t[1]!)) throw new Error(`TYPE declared twice: ${line}`)
      types.set(t[1]!, t[2]!)
      continue
    }
    const m = sample.exec(line)
    if (!m) throw new Error(`not Prometheus exposition: ${JSON.stringify(line)}`)
    const name = m[1]!
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count|total|created)$/, '')
    if (!types.has(family) && !types.has(name)) throw new Error(`sample before its TYPE: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!
    out.push({ name, labels, value: Number(m[3]!.replace(/Inf$/, 'Infinity')) })
  }
  return out
}

async function scrape(url: string, token = TOKEN): Promise<Sample[]> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
  return parseExposition(await res.text())
}

/** The value of one sample (0 when absent: a labelled counter appears with its first increment). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const s = samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
  return s?.value ?? 0
}

describe('Metrics (issue 20)', () => {
  let ts: TestServer
  let off: TestServer
  let other: TestServer
  let admin: TestUser
  let editor: TestUser
  let viewer: TestUser
  let space = ''

  beforeAll(async () => {
    ts = await startTestServer({ config: { metricsToken: TOKEN } })
    off = await startTestServer()
    other = await startTestServer({ config: { metricsToken: TOKEN } })
    admin = await signup(ts.url)
    editor = await signup(ts.url)
    viewer = await signup(ts.url)
    space = await createSpace(ts.url, admin.token)
    await grantRole(ts.url, admin.token, space, editor.userId, 'Editor')
    await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')
  })
  afterAll(async () => {
    await ts?.cleanup()
    await off?.cleanup()
    await other?.cleanup()
  })

  it('[OPS1] without METRICS_TOKEN, /metrics does not exist: 404 not_found, whatever token is sent', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }] as Array<Record<string, string>>) {
      const res = await fetch(`${off.url}/metrics`, { headers })
      expect(res.status).toBe(404)
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found')
    }
  })

  it('[OPS2] a missing, wrong, URL-borne or user session token is 401 unauthorized (never 500); the right one is 200', async () => {
    const user = await signup(ts.url)
    const attempts: Array<[string, Record<string, string>]> = [
      ['/metrics', {}],
      ['/metrics', { authorization: 'Bearer wrong' }],
      ['/metrics', { authorization: `Bearer ${TOKEN}x` }],
      ['/metrics', { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }],
      [`/metrics?token=${TOKEN}`, {}],
      ['/metrics', { authorization: `Bearer ${user.token}` }],
    ]
    for (const [path, headers] of attempts) {
      const res = await fetch(`${ts.url}${path}`, { headers })
      expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401)
      const body = (await res.json()) as { error: { code: string; message: string } }
      expect(body.error.code).toBe('unauthorized')
      expect(body.error.message).toMatch(/METRICS_TOKEN/)
    }
    expect((await fetch(`${ts.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200)
  })

  it('[OPS9] the text parses as Prometheus exposition, with HELP and TYPE for every Weft family', async () => {
    const res = await fetch(`${ts.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    const text = await res.text()
    expect(parseExposition(text).length).toBeGreaterThan(20)
    for (const family of ['weft_connections', 'weft_rooms', 'weft_loaded_docs', 'weft_updates_total', 'weft_acks_total', 'weft_refusals_total', 'weft_commit_duration_seconds', 'weft_engine_lag_versions', 'weft_engine_lease_held', 'weft_contextual_dead_letters']) {
      expect(text).toMatch(new RegExp(`^# HELP ${family} \\S`, 'm'))
      expect(text).toMatch(new RegExp(`^# TYPE ${family} (counter|gauge|histogram)$`, 'm'))
    }
    // The reader is strict: a malformed line is not taken for a sample.
    expect(() => parseExposition('# TYPE a gauge\na{b="c} 1\n')).toThrow(/not Prometheus/)
    expect(() => parseExposition('a 1\n')).toThrow(/before its TYPE/)
  })

  it('[OPS3] [OPS4] connections, rooms, loaded docs, updates, acks, commit latency and refusals by code move with real clients', async () => {
    const path = await createDocument(ts.url, admin.token, `${space}/edited`, { title: 'a' })
    const before = await scrape(ts.url)
    // An editor on a stock y-websocket provider (/sync) edits twice.
    const a = stockProvider(ts.url, path, editor.token)
    await a.synced()
    a.content.set('title', 'b')
    a.content.set('body', 'c')
    await waitFor(async () => (expectStatus(await api(ts.url, admin.token).getNode(path), 200).body.content as { body?: string }).body === 'c')
    // A viewer on /mux tries to edit: refused by name.
    const v = await MuxClient.connect(ts.url, viewer.token)
    expect(await v.join(path)).toMatchObject({ ok: true })
    const refused = await v.patch(path, { title: 'nope' })
    expect(refused).toMatchObject({ ok: false })
    const code = (refused as { code: string }).code
    // An editor's oversized /mux update: refused by name before the node store sees it.
    const e = await MuxClient.connect(ts.url, editor.token)
    expect(await e.join(path)).toMatchObject({ ok: true })
    expect(await e.patch(path, { big: 'x'.repeat(ts.server.config.maxPayloadBytes + 10) })).toMatchObject({ ok: false, code: 'payload_too_large' })
    await e.close()
    // A bad HTTP request: refused by name too.
    const bad = await api(ts.url, editor.token).patchNode(`${space}/missing-node`, { x: 1 })
    const httpCode = errorCode(bad)!
    expect(httpCode).toBe('not_found')

    let after: Sample[] = []
    await waitFor(async () => {
      after = await scrape(ts.url)
      return value(after, 'weft_acks_total', { transport: 'sync' }) >= value(before, 'weft_acks_total', { transport: 'sync' }) + 1
    })
    expect(value(after, 'weft_connections')).toBeGreaterThanOrEqual(value(before, 'weft_connections') + 2)
    expect(value(after, 'weft_rooms')).toBeGreaterThanOrEqual(1)
    expect(value(after, 'weft_loaded_docs')).toBeGreaterThanOrEqual(1)
    expect(value(after, 'weft_updates_total', { transport: 'sync' })).toBeGreaterThanOrEqual(value(before, 'weft_updates_total', { transport: 'sync' }) + 1)
    // The viewer's join sends its (empty) sync step 2 as well: at least the refused edit arrived.
    expect(value(after, 'weft_updates_total', { transport: 'mux' })).toBeGreaterThanOrEqual(value(before, 'weft_updates_total', { transport: 'mux' }) + 1)
    expect(value(after, 'weft_refusals_total', { code, transport: 'mux' })).toBe(value(before, 'weft_refusals_total', { code, transport: 'mux' }) + 1)
    expect(value(after, 'weft_refusals_total', { code: 'payload_too_large', transport: 'mux' })).toBe(value(before, 'weft_refusals_total', { code: 'payload_too_large', transport: 'mux' }) + 1)
    expect(value(after, 'weft_refusals_total', { code: httpCode, transport: 'http' })).toBeGreaterThanOrEqual(value(before, 'weft_refusals_total', { code: httpCode, transport: 'http' }) + 1)
    // Every durable commit is observed: the histogram's count moved, its +Inf bucket equals its count.
    const count = value(after, 'weft_commit_duration_seconds_count')
    expect(count).toBeGreaterThan(value(before, 'weft_commit_duration_seconds_count'))
    expect(value(after, 'weft_commit_duration_seconds_bucket', { le: '+Inf' })).toBe(count)
    expect(value(after, 'weft_commit_duration_seconds_sum')).toBeGreaterThan(0)

    // The clients leave: the gauges read on scrape come back down.
    a.destroy()
    await v.close()
    await waitFor(async () => value(await scrape(ts.url), 'weft_connections') === value(before, 'weft_connections'))
  })

  it('[OPS5] engine lag is measured against the change log (0 once the feed has it) and a lone instance holds the engines', async () => {
    await createDocument(ts.url, admin.token, `${space}/lag`, {})
    await waitFor(async () => value(await scrape(ts.url), 'weft_engine_lag_versions') === 0)
    const samples = await scrape(ts.url)
    expect(value(samples, 'weft_engine_lease_held')).toBe(1)
    // [SCALE17] Each partition by name: a lone instance runs all of them.
    for (const partition of ['subscriptions', 'activities', 'threads']) expect(value(samples, 'weft_engine_partition_held', { partition })).toBe(1)
    expect(samples.filter((x) => x.name === 'weft_engine_partition_held')).toHaveLength(3)
  })

  it('[OPS6] contextual consumers: a dead letter, a live lease and the lag show, every consumer together', async () => {
    const sub = `${space}/sub`
    const prefix = `${space}/inbox`
    expectStatus(await putSubscription(ts.url, admin.token, sub, definition(prefix, { Limits: { LeaseSeconds: 30, MaxInFlight: 2, MaxAttempts: 1 } })), 201)
    await createDocument(ts.url, admin.token, prefix, {})
    const c = ctx(ts.url, admin.token)
    expectStatus(await c.next(sub), 200)
    await createDocument(ts.url, admin.token, `${prefix}/d`, {})
    const before = await scrape(ts.url)
    expect(value(before, 'weft_contextual_consumers')).toBe(1)
    const got = await pull(ts.url, admin.token, sub)
    const leased = await scrape(ts.url)
    expect(value(leased, 'weft_contextual_leased_events')).toBe(value(before, 'weft_contextual_leased_events') + 1)
    expect(expectStatus(await c.nack(got.consumerId, got.item, 0, 'gave up'), 200).body.state).toBe('dead')
    const dead = await scrape(ts.url)
    expect(value(dead, 'weft_contextual_dead_letters')).toBe(value(before, 'weft_contextual_dead_letters') + 1)
    expect(value(dead, 'weft_contextual_leased_events')).toBe(value(before, 'weft_contextual_leased_events'))
    expect(value(dead, 'weft_contextual_max_lag_versions')).toBeGreaterThanOrEqual(0)
    expectStatus(await c.redrive(got.consumerId), 200)
    expect(value(await scrape(ts.url), 'weft_contextual_dead_letters')).toBe(value(before, 'weft_contextual_dead_letters'))
  })

  it('[OPS7] process metrics are there, event-loop delay among them', async () => {
    const s = await scrape(ts.url)
    expect(value(s, 'process_resident_memory_bytes')).toBeGreaterThan(0)
    expect(s.some((x) => x.name === 'nodejs_eventloop_lag_p99_seconds')).toBe(true)
    expect(s.some((x) => x.name === 'nodejs_heap_size_used_bytes')).toBe(true)
  })

  it('[OPS8] each server counts in its own registry: edits on one never show on another in the same process', async () => {
    const path = await createDocument(ts.url, admin.token, `${space}/own`, {})
    const theirsBefore = await scrape(other.url)
    const a = stockProvider(ts.url, path, editor.token)
    await a.synced()
    a.content.set('k', 1)
    await waitFor(async () => (expectStatus(await api(ts.url, admin.token).getNode(path), 200).body.content as { k?: number }).k === 1)
    a.destroy()
    const theirs = await scrape(other.url)
    expect(value(theirs, 'weft_updates_total', { transport: 'sync' })).toBe(value(theirsBefore, 'weft_updates_total', { transport: 'sync' }))
    expect(value(theirs, 'weft_updates_total', { transport: 'sync' })).toBe(0)
    expect(value(await scrape(ts.url), 'weft_updates_total', { transport: 'sync' })).toBeGreaterThan(0)
  })
})
