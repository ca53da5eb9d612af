import 'fake-indexeddb/auto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { NO_PERMISSIONS, permissionsOf } from '../../shared/access-policy.js'
import { WeftDb } from '../../web/store/db.js'
import { lastKnownPermissions, rememberPermissions } from '../../web/store/known-permissions.js'

/** [WEB85] The mask a device remembers per node, and the nearest one a page falls back on. */
describe('[WEB85] remembered permissions', () => {
  let db: WeftDb
  let n = 0
  beforeEach(async () => {
    db = new WeftDb(`known-perms-${++n}`)
    await db.open()
  })
  afterEach(async () => {
    db.close()
    await db.delete()
  })

  it('falls back on the nearest ancestor with a mask, the node itself first; none above knows nothing', async () => {
    expect(await lastKnownPermissions(db, 'Lab/Doc/Part')).toBeNull()
    await rememberPermissions(db, 'Lab', permissionsOf('Viewer'))
    await rememberPermissions(db, 'Lab/Doc', permissionsOf('Editor'))
    const part = await lastKnownPermissions(db, 'Lab/Doc/Part')
    expect(part?.path).toBe('Lab/Doc')
    expect([...part!.permissions].sort()).toEqual([...permissionsOf('Editor')].sort())
    expect((await lastKnownPermissions(db, 'Lab/Other'))?.path).toBe('Lab')
    expect(await lastKnownPermissions(db, 'Labs/Doc')).toBeNull()
    // A denial is remembered as no permissions (not as "unknown").
    await rememberPermissions(db, 'Lab/Doc', NO_PERMISSIONS)
    const lost = await lastKnownPermissions(db, 'Lab/Doc/Part')
    expect(lost?.path).toBe('Lab/Doc')
    expect(lost?.permissions.size).toBe(0)
  })
})
